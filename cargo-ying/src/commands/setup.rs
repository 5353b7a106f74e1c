//! `cargo ying setup nextest`: adds the profile `ying` to `.config/nextest.toml` (see `nextest::profile`), and makes
//! the allocation interposer ready, as the wrapper then finds it (`run::exec::interposer::library`).

use crate::cli::SetupNextestArgs;
use crate::error::{Error, Result};
use crate::nextest::profile::{self, Change};
use crate::run::exec::interposer;
use crate::workspace::Workspace;
use ying_report::exit_code;

/// Runs `cargo ying setup nextest`; returns the exit code.
pub(crate) fn nextest(args: &SetupNextestArgs) -> Result<u8> {
    // SIGINT and SIGTERM stop the build whole (see `run::process::stop_on_interrupt`).
    crate::signals::catch();
    let workspace = Workspace::open(args.manifest_path.as_deref(), &[])?;
    let path = workspace.root().join(".config").join("nextest.toml");
    let text = match ying_report::read_text(&path).map_err(std::io::Error::from) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(error) => return Err(Error::io("read", &path)(error)),
    };
    // The file as its author keeps it: a byte order mark and CRLF line ends stay.
    let (bom, body) = match text.strip_prefix('\u{feff}') {
        Some(body) => ("\u{feff}", body),
        None => ("", text.as_str()),
    };
    let crlf = body.contains("\r\n");
    let change = profile::apply(body).map_err(|source| Error::NextestConfig { path: path.clone(), source })?;
    if args.print {
        print!("{}", if let Change::Added(text) | Change::Updated(text) = &change { text } else { &text });
        return Ok(exit_code::OK);
    }
    // Ready before the file names it: a profile whose tests would all fail for want of it is never written.
    let library = interposer::library()?;
    let program = profile::WRAPPER_COMMAND.split(' ').next().unwrap_or_default();
    if !on_path(program) {
        let current = std::env::current_exe().ok();
        let dir = current.as_deref().and_then(std::path::Path::parent).unwrap_or(std::path::Path::new("."));
        return Err(Error::WrapperNotOnPath { dir: dir.to_owned() });
    }
    match change {
        Change::Added(text) => write_profile(&path, &format!("{bom}{text}"), crlf, ("Added", "to"))?,
        Change::Updated(text) => write_profile(&path, &format!("{bom}{text}"), crlf, ("Updated", "in"))?,
        Change::AlreadySet => {
            eprintln!("{:>12} {} has the profile `{}` already", "Fresh", path.display(), profile::PROFILE);
        }
    }
    eprintln!("{:>12} {}", "Interposer", library.display());
    eprintln!(
        "{:>12} `cargo nextest run --profile {}`, then `cargo ying gate` (`--save-baseline` the first time)",
        "Next",
        profile::PROFILE
    );
    Ok(exit_code::OK)
}

/// Writes `text` (the profile setup made, its byte order mark kept) to `path` with CRLF line ends when `crlf`, and
/// says what it did: `(verb, preposition)`, `("Added", "to")` reads "Added the profile `ying` to <path>".
fn write_profile(path: &std::path::Path, text: &str, crlf: bool, (verb, to): (&str, &str)) -> Result<()> {
    let dir = path.parent().expect("the file is in .config");
    std::fs::create_dir_all(dir).map_err(Error::io("create", dir))?;
    let text = if crlf { text.replace("\r\n", "\n").replace('\n', "\r\n") } else { text.to_owned() };
    // Replaced whole (a run of nextest never reads half of it), a link kept with its target written, its mode kept.
    ying_report::write_users_file(path, text.as_bytes()).map_err(Error::io("write", path))?;
    eprintln!("{verb:>12} the profile `{}` {to} {}", profile::PROFILE, path.display());
    Ok(())
}

/// Whether `program` is an executable file in a directory of `PATH`, as nextest (and a shell) would find it.
fn on_path(program: &str) -> bool {
    let Some(path) = std::env::var_os("PATH") else { return false };
    std::env::split_paths(&path).any(|dir| {
        let candidate = dir.join(program);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::metadata(&candidate)
                .is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
        }
        #[cfg(not(unix))]
        {
            candidate.with_extension(std::env::consts::EXE_EXTENSION).is_file()
        }
    })
}
