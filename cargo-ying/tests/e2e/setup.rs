//! `cargo ying setup nextest` on a file the user keeps: a link kept with its target written, its mode, byte order
//! mark and CRLF line ends kept, nothing written through a link planted beside it, a named pipe or a device refused
//! without waiting, and no profile written that nextest could not run (`cargo-ying` not on `PATH`).

use crate::{cleaned, stderr};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

/// A workspace of one package and nothing to build, in a temporary directory.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), "").unwrap();
    std::fs::create_dir_all(dir.path().join(".config")).unwrap();
    dir
}

/// `cargo-ying ying setup nextest` on `dir`'s workspace, `path` the `PATH` it runs with (the tests' own when
/// `None`), killed and failed after a minute: a setup that waits on a file is a failure, not a stuck suite.
fn setup(dir: &Path, path: Option<&str>) -> Output {
    let mut command = cleaned(env!("CARGO_BIN_EXE_cargo-ying"), &dir.join("target"));
    command.args(["ying", "setup", "nextest", "--manifest-path"]).arg(dir.join("Cargo.toml"));
    if let Some(path) = path {
        command.env("PATH", path);
    }
    let mut child = command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("cargo ying setup nextest did not finish within a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_linked_kept_file_keeps_its_link_mode_mark_and_line_ends_and_no_planted_link_is_followed() {
    let dir = workspace();
    let shared = dir.path().join("shared-nextest.toml");
    std::fs::write(&shared, "\u{feff}[profile.default]\r\nslow-timeout = \"1m\"\r\n").unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config = dir.path().join(".config/nextest.toml");
    std::os::unix::fs::symlink(&shared, &config).unwrap();
    // A link where the last setup wrote its temporary file, to a file of the user's.
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "the user's").unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join(".config/.nextest.toml.ying")).unwrap();

    let output = setup(dir.path(), None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(std::fs::symlink_metadata(&config).unwrap().file_type().is_symlink(), "the link is kept");
    let text = std::fs::read_to_string(&shared).unwrap();
    assert!(
        text.starts_with('\u{feff}') && text.contains("[profile.default]\r\nslow-timeout = \"1m\"\r\n"),
        "{text:?}"
    );
    assert!(text.contains("[profile.ying"), "{text:?}");
    assert_eq!(text.matches('\n').count(), text.matches("\r\n").count(), "every line ends in CRLF: {text:?}");
    assert_eq!(std::fs::metadata(&shared).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "the user's");
    let left: Vec<String> = std::fs::read_dir(dir.path().join(".config"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_pipe_or_a_device_is_refused_at_once_naming_the_file() {
    let dir = workspace();
    let config = dir.path().join(".config/nextest.toml");
    let made = std::process::Command::new("mkfifo").arg(&config).status().unwrap();
    assert!(made.success());
    let output = setup(dir.path(), None);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("it is a named pipe (FIFO), not a regular file"), "{}", stderr(&output));
    assert!(stderr(&output).contains("nextest.toml"), "{}", stderr(&output));

    std::fs::remove_file(&config).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &config).unwrap();
    let output = setup(dir.path(), None);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("it is a character device, not a regular file"), "{}", stderr(&output));
}

#[test]
fn no_profile_is_written_when_nextest_could_not_find_ying_wrap() {
    let dir = workspace();
    // cargo's and the system's programs, not the built cargo-ying's directory.
    let cargo = Path::new(&std::env::var_os("CARGO").unwrap()).parent().unwrap().to_owned();
    let path = std::env::join_paths([cargo.as_path(), Path::new("/usr/bin"), Path::new("/bin")]).unwrap();
    let output = setup(dir.path(), Some(path.to_str().unwrap()));
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("failed to find `ying-wrap` on PATH"), "{message}");
    let built = Path::new(env!("CARGO_BIN_EXE_cargo-ying")).parent().unwrap();
    assert!(message.contains(&built.display().to_string()), "{message}");
    assert!(!dir.path().join(".config/nextest.toml").exists());
}
