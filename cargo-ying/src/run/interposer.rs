//! The allocation interposer for `--measure all`: the `ying-preload` shared library, built by cargo ying itself
//! (once per target directory, then reused) and loaded into each test process with `LD_PRELOAD`.
//!
//! It is built from a small crate cargo ying writes under `<target-dir>/ying/interposer/`, a `cdylib` over
//! `ying-preload`: from this source tree when cargo ying runs from one (its lock file copied, so the versions are
//! those ying is tested with), else from the registry at cargo ying's own version. Once built, the files it was
//! built from are recorded beside it ([`Inputs`]); while none of them changed no cargo runs, and when one did,
//! cargo's check runs while the tests are built and listed, not after.

use crate::error::{Error, InterposerError, Result};
use crate::run::build::cargo;
use crate::run::process;
use crate::signals;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};

/// Whether this platform has the interposer: Linux with glibc (`LD_PRELOAD`, and glibc's allocator under its own
/// names to forward to).
pub(crate) const SUPPORTED: bool = cfg!(all(target_os = "linux", target_env = "gnu"));

/// The environment variable that loads a shared library into a process before its own.
pub(crate) const PRELOAD_ENV: &str = "LD_PRELOAD";

/// ying-preload in the source tree cargo ying was built from.
const SOURCE_TREE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../ying-preload");
/// ying's lock file in that tree.
const SOURCE_LOCK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock");

/// The library's file name.
const LIBRARY: &str = "libying_interposer.so";

/// The interposer's build, started by [`start`] beside the tests' build; [`Build::finish`] waits for it and gives
/// the library's path.
pub(crate) struct Build {
    library: PathBuf,
    /// The crate's directory, where [`Inputs`] are recorded.
    dir: PathBuf,
    /// When the build was started: files changed since are not recorded as its inputs.
    started: SystemTime,
    cargo: Cargo,
}

/// How the interposer's `cargo build` runs.
enum Cargo {
    /// Not at all: no file the library was built from changed since ([`Inputs::unchanged`]).
    Fresh,
    /// Started at once, its output kept: the library was built before from the same crate, and cargo only checks
    /// that it is up to date, in the time the tests' own build takes.
    Checking(Child),
    /// Run by [`Build::finish`], after the tests' build, its output shown as it goes (a build error of the tests
    /// comes first): the first build, or one that a changed crate makes.
    Building(Command),
}

/// Writes the interposer's crate under `out_dir` (`<target-dir>/ying`) and starts building it, unless it needs a
/// build that shows its output (see `Cargo`). `verbosity`: cargo's `--quiet` or `--verbose`; `cargo_flags`:
/// `--offline` when the run stays off the network.
pub(crate) fn start(out_dir: &Path, verbosity: Option<&str>, cargo_flags: &[&str]) -> Result<Build> {
    if !SUPPORTED {
        return Err(Error::Interposer(InterposerError::Unsupported));
    }
    let started = SystemTime::now();
    let dir = out_dir.join("interposer");
    std::fs::create_dir_all(&dir).map_err(Error::io("create", &dir))?;
    let source = Path::new(SOURCE_TREE);
    let dependency = if source.join("Cargo.toml").is_file() {
        let lock = dir.join("Cargo.lock");
        if !lock.exists() {
            // A missing lock file only means the registry decides the versions.
            let _ = std::fs::copy(SOURCE_LOCK, &lock);
        }
        format!("{{ path = {:?} }}", source.display().to_string())
    } else {
        format!("\"={}\"", env!("CARGO_PKG_VERSION"))
    };
    let mut changed = write_if_changed(&dir.join("Cargo.toml"), &manifest(&dependency))?;
    changed |= write_if_changed(
        &dir.join("lib.rs"),
        "//! ying's allocation interposer, as one shared library.\n\nextern crate ying_preload;\n",
    )?;
    let target_dir = dir.join("target");
    let library = target_dir.join("release").join(LIBRARY);
    let mut command = cargo();
    command
        .args(["build", "--release", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .args(verbosity)
        .args(cargo_flags)
        // The user's flags for their own build are not the interposer's (a `-C target-cpu`, say, is harmless, a
        // sanitizer is not).
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .stdout(Stdio::null());
    let cargo = if changed || !library.is_file() {
        Cargo::Building(command)
    } else if Inputs::unchanged(&dir) {
        Cargo::Fresh
    } else {
        let child = process::spawn(command.stderr(Stdio::piped())).map_err(spawn_failed)?;
        Cargo::Checking(child)
    };
    Ok(Build { library, dir, started, cargo })
}

impl Build {
    /// Waits for the build (or runs it) and returns the library's path. A check's output is shown when it failed,
    /// or with `--verbose` (`verbose`).
    pub(crate) fn finish(self, verbose: bool) -> Result<PathBuf> {
        let status = match self.cargo {
            Cargo::Fresh => return Ok(self.library),
            Cargo::Building(mut command) => {
                let child = process::spawn(command.stderr(Stdio::inherit())).map_err(spawn_failed)?;
                finished(child)?.0
            }
            Cargo::Checking(child) => {
                let (status, stderr) = finished(child)?;
                if verbose || !status.success() {
                    let _ = std::io::Write::write_all(&mut std::io::stderr(), &stderr);
                }
                status
            }
        };
        if !status.success() {
            return Err(Error::Interposer(InterposerError::Failed(status)));
        }
        // Without the record, the next run only checks again.
        let _ = Inputs::record(&self.dir, &self.library, self.started);
        Ok(self.library)
    }

    /// Ends the build unused (the tests' build failed, or no test is selected): a check started is waited for, so
    /// that no cargo outlives the run; a build not started is not run.
    pub(crate) fn abandon(self) {
        if let Cargo::Checking(child) = self.cargo {
            let _ = finished(child);
        }
    }
}

/// Waits for the interposer's cargo, its standard error read (when piped); stops it, its whole group, when cargo
/// ying is asked to stop.
fn finished(mut child: Child) -> Result<(std::process::ExitStatus, Vec<u8>)> {
    let stopper = process::stop_on_interrupt(&child);
    let mut stderr = Vec::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_end(&mut pipe, &mut stderr);
    }
    let status = child.wait().map_err(spawn_failed);
    drop(stopper);
    process::kill_group(&mut child);
    if let Some(signal) = signals::interrupted() {
        return Err(Error::Interrupted { during: "build the allocation interposer", signal });
    }
    Ok((status?, stderr))
}

/// The error of a `cargo build` of the interposer that could not be started or waited for.
fn spawn_failed(error: std::io::Error) -> Error {
    Error::Interposer(InterposerError::Spawn(error))
}

/// The crate's manifest, with `ying-preload` as `dependency` (a TOML value).
fn manifest(dependency: &str) -> String {
    format!(
        "# Written by cargo ying: the allocation interposer of `cargo ying test --measure all`.\n\
         [package]\nname = \"ying-interposer\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [lib]\ncrate-type = [\"cdylib\"]\npath = \"lib.rs\"\n\n\
         [dependencies]\nying-preload = {dependency}\n\n\
         # Line tables, for the names of the interposer's own frames.\n\
         [profile.release]\ndebug = \"line-tables-only\"\n\n\
         # A workspace of its own, whatever encloses the target directory.\n[workspace]\n"
    )
}

/// Writes `contents` to `path` unless it holds them already (cargo rebuilds what changed); returns whether it wrote.
fn write_if_changed(path: &Path, contents: &str) -> Result<bool> {
    if std::fs::read_to_string(path).is_ok_and(|existing| existing == contents) {
        return Ok(false);
    }
    std::fs::write(path, contents).map_err(Error::io("write", path))?;
    Ok(true)
}

/// The files the library was last built from, recorded in `<crate>/inputs` when a build or check succeeded, one
/// per line with its size and modification time: the library itself, the crate cargo ying writes (manifest, lock
/// file, source), the Rust sources cargo's dep-info lists for it (the path dependencies': the registry's never
/// change) and every manifest in a directory above one of them (a package's, its workspace's). While each is as
/// recorded, cargo's check would find the library up to date, and is not run: the library depends on no toolchain
/// of the user's, and cargo ying removes the flags of their own build from its build.
struct Inputs;

impl Inputs {
    /// The record's file name, in the crate's directory.
    const FILE: &'static str = "inputs";
    /// How long before the build a file must have last changed to be recorded as one of its inputs: a file's time
    /// comes from a coarser clock than [`SystemTime::now`], and one changed while cargo ran may or may not be in the
    /// library.
    const SETTLED: Duration = Duration::from_secs(2);

    /// Records the inputs of the build of `library` in `dir` that just succeeded, started at `started`. Records
    /// nothing (and removes an older record) when one of them changed after `started` less [`Self::SETTLED`] or
    /// cannot be read.
    fn record(dir: &Path, library: &Path, started: SystemTime) -> std::io::Result<()> {
        let record = dir.join(Self::FILE);
        let settled = started.checked_sub(Self::SETTLED).unwrap_or(SystemTime::UNIX_EPOCH);
        let lines = Self::files(dir, library).ok().and_then(|files| {
            files
                .iter()
                .map(|file| {
                    let metadata = std::fs::metadata(file).ok()?;
                    let settled = file == library || metadata.modified().ok()? < settled;
                    settled.then(|| Self::line(file, &metadata).ok()).flatten()
                })
                .collect::<Option<String>>()
        });
        match lines {
            Some(lines) => std::fs::write(record, lines),
            None => match std::fs::remove_file(&record) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
                _ => Ok(()),
            },
        }
    }

    /// Whether every input recorded in `dir` is as it was after the last build; `false` without a record.
    fn unchanged(dir: &Path) -> bool {
        let Ok(record) = std::fs::read_to_string(dir.join(Self::FILE)) else { return false };
        !record.is_empty()
            && record.lines().all(|line| {
                let Some((_, path)) = line.split_once('\t').and_then(|(_, rest)| rest.split_once('\t')) else {
                    return false;
                };
                let path = Path::new(path);
                std::fs::metadata(path)
                    .and_then(|metadata| Self::line(path, &metadata))
                    .is_ok_and(|now| now == format!("{line}\n"))
            })
    }

    /// A file's line of the record: size, modification time in nanoseconds, path, separated by tabs.
    fn line(path: &Path, metadata: &std::fs::Metadata) -> std::io::Result<String> {
        let modified = metadata.modified()?.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos();
        Ok(format!("{}\t{modified}\t{}\n", metadata.len(), path.display()))
    }

    /// The files of the record, the library first.
    fn files(dir: &Path, library: &Path) -> std::io::Result<Vec<PathBuf>> {
        let mut files = vec![library.to_owned()];
        files.extend(
            ["Cargo.toml", "Cargo.lock", "lib.rs"].map(|name| dir.join(name)).into_iter().filter(|file| file.is_file()),
        );
        // The crate's own files are listed above; the directories above it are the user's.
        let sources: Vec<PathBuf> = dep_info_files(&std::fs::read_to_string(library.with_extension("d"))?)
            .into_iter()
            .map(PathBuf::from)
            .filter(|source| !source.starts_with(dir))
            .collect();
        let mut seen = HashSet::new();
        for source in &sources {
            for directory in source.ancestors().skip(1) {
                if !seen.insert(directory.to_owned()) {
                    break;
                }
                let manifest = directory.join("Cargo.toml");
                if manifest.is_file() {
                    files.push(manifest);
                }
            }
        }
        files.extend(sources);
        Ok(files)
    }
}

/// The files a Makefile-style dep-info file (`target: file file ...`, spaces in a path escaped with `\`) says
/// its target depends on.
fn dep_info_files(dep_info: &str) -> Vec<String> {
    let mut files = Vec::new();
    for line in dep_info.lines() {
        let Some((_, dependencies)) = line.split_once(": ") else { continue };
        let mut file = String::new();
        let mut characters = dependencies.chars();
        while let Some(character) = characters.next() {
            match character {
                '\\' => file.extend(characters.next()),
                ' ' => files.extend((!file.is_empty()).then(|| std::mem::take(&mut file))),
                other => file.push(other),
            }
        }
        files.extend((!file.is_empty()).then_some(file));
    }
    files
}

/// Whether the executable at `path` loads shared libraries at start (it names a dynamic loader, `PT_INTERP`), and so
/// takes the interposer: a statically linked one (`-C target-feature=+crt-static`, a musl target) runs without a
/// loader, and `LD_PRELOAD` is never read. `None` when it is not an ELF file this can read.
pub(crate) fn preloads(path: &Path) -> Option<bool> {
    use object::read::elf::{FileHeader, ProgramHeader};
    let (_, bytes) = crate::run::symbols::map_executable(path)?;
    let data: &[u8] = &bytes;
    match object::FileKind::parse(data).ok()? {
        object::FileKind::Elf64 => {
            let header = object::elf::FileHeader64::<object::Endianness>::parse(data).ok()?;
            let endian = header.endian().ok()?;
            let headers = header.program_headers(endian, data).ok()?;
            Some(headers.iter().any(|header| header.p_type(endian) == object::elf::PT_INTERP))
        }
        object::FileKind::Elf32 => {
            let header = object::elf::FileHeader32::<object::Endianness>::parse(data).ok()?;
            let endian = header.endian().ok()?;
            let headers = header.program_headers(endian, data).ok()?;
            Some(headers.iter().any(|header| header.p_type(endian) == object::elf::PT_INTERP))
        }
        _ => None,
    }
}

/// `LD_PRELOAD` for a test process: the interposer first, then whatever the environment preloads already.
pub(crate) fn preload_value(library: &Path) -> std::ffi::OsString {
    let mut value = library.as_os_str().to_owned();
    if let Some(existing) = std::env::var_os(PRELOAD_ENV).filter(|existing| !existing.is_empty()) {
        value.push(":");
        value.push(existing);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::{Inputs, dep_info_files, manifest, preloads};
    use std::fs::File;
    use std::path::Path;
    use std::time::{Duration, SystemTime};

    #[test]
    fn a_dep_info_file_lists_its_dependencies_with_their_spaces() {
        let files = dep_info_files("/t/lib.so: /src/a.rs /src/my\\ dir/b.rs\n\n/src/a.rs:\n");
        assert_eq!(files, ["/src/a.rs", "/src/my dir/b.rs"]);
    }

    /// Writes `contents` to `path` (its directory created), last changed an hour ago.
    fn old_file(path: &Path, contents: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        File::options().write(true).open(path).unwrap().set_modified(hour_ago).unwrap();
    }

    #[test]
    fn the_library_is_fresh_until_a_file_it_was_built_from_changes() {
        let root = tempfile::tempdir().unwrap();
        let (dir, package) = (root.path().join("interposer"), root.path().join("source/ying-preload"));
        let library = dir.join("target/release/libying_interposer.so");
        let source = package.join("src/lib.rs");
        old_file(&dir.join("Cargo.toml"), "[package]");
        old_file(&dir.join("lib.rs"), "extern crate ying_preload;");
        old_file(&package.join("Cargo.toml"), "[package]");
        old_file(&root.path().join("source/Cargo.toml"), "[workspace]");
        old_file(&source, "pub fn f() {}");
        std::fs::create_dir_all(library.parent().unwrap()).unwrap();
        std::fs::write(&library, "built").unwrap();
        std::fs::write(library.with_extension("d"), format!("{}: {}\n", library.display(), source.display())).unwrap();
        assert!(!Inputs::unchanged(&dir), "no record yet");
        let record = || Inputs::record(&dir, &library, SystemTime::now()).unwrap();
        record();
        assert!(Inputs::unchanged(&dir));

        // A source, a manifest above it, the crate's own files, the library: each one changed is seen.
        for changed in
            [&source, &package.join("Cargo.toml"), &root.path().join("source/Cargo.toml"), &dir.join("lib.rs")]
        {
            old_file(changed, "changed");
            assert!(!Inputs::unchanged(&dir), "{} changed", changed.display());
            record();
            assert!(Inputs::unchanged(&dir));
        }
        std::fs::remove_file(&library).unwrap();
        assert!(!Inputs::unchanged(&dir), "the library removed");
        std::fs::write(&library, "built again").unwrap();
        record();
        assert!(Inputs::unchanged(&dir));

        // A source changed while cargo ran may not be in the library: the build is not recorded.
        std::fs::write(&source, "pub fn g() {}").unwrap();
        record();
        assert!(!dir.join(Inputs::FILE).exists());
        assert!(!Inputs::unchanged(&dir));
    }

    #[test]
    fn the_crate_is_a_shared_library_over_ying_preload_in_a_workspace_of_its_own() {
        let toml: toml::Table = manifest("{ path = \"/src/ying-preload\" }").parse().unwrap();
        assert_eq!(toml["lib"]["crate-type"].as_array().unwrap()[0].as_str(), Some("cdylib"));
        assert_eq!(toml["dependencies"]["ying-preload"]["path"].as_str(), Some("/src/ying-preload"));
        assert!(toml.contains_key("workspace"));
        let released: toml::Table = manifest("\"=0.1.0\"").parse().unwrap();
        assert_eq!(released["dependencies"]["ying-preload"].as_str(), Some("=0.1.0"));
    }

    #[test]
    fn a_dynamically_linked_executable_takes_the_interposer_and_a_file_that_is_no_executable_is_unknown() {
        // This test binary is linked as a test binary usually is: with the dynamic loader.
        assert_eq!(preloads(&std::env::current_exe().unwrap()), Some(true));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("text"), "not an executable").unwrap();
        assert_eq!(preloads(&dir.path().join("text")), None);
    }
}
