//! The fixtures built once, and a copy of one for each test.
//!
//! A seed (`target/e2e/seeds/<fixture>/`) is the fixture workspace copied to `ws/` (its path dependency on
//! `ying-runtime` pointed back at this repository), built into `target/` by the build `cargo ying test` runs (`cargo
//! ying test --no-run`, with the tests' cleaned environment). The first test of a process to ask for it makes it
//! anew: the fixture copied over it with its files' times kept and the build run again, which cargo finds fresh
//! when neither the fixture nor the runtime changed. A lock file beside it keeps that one at a time between the
//! processes of a run (threads of one `cargo test`, or nextest's process for each test), and keeps copies from
//! being made while it is remade.
//!
//! A test's copy (a temporary directory under `target/e2e/tmp/`, on the seed's file system) holds the workspace and
//! its own target directory `target/`, made from the seed's: the large artifacts that rustc and the linker only ever
//! replace (libraries, metadata, executables) hard-linked, every other file (fingerprints, dependency information,
//! build scripts' outputs: what cargo may rewrite in place) copied with its times. It has no `incremental/` and no
//! `ying/`: every test starts with no summary, no reports and no symbol cache of its own.
//!
//! The fixture's own package is built anew in each copy, and nothing else: the workspace's files are copied with
//! new times, the dependencies (the runtime among them) are the seed's. A build names its package's files from the
//! directory it was made in, and cargo ying makes a frame's path relative to the package it runs: a test binary of
//! the seed's would name `.../seeds/leak-tests/ws/tests/leaks.rs`, no file of the copy's package, and its frames
//! would not be the package's code (no leak site, absolute paths in reports, baselines and annotations). The first
//! run in a fresh copy compiles that one package, as [`a_fresh_copy_builds_its_own_package_and_nothing_else`]
//! checks.

use std::fs::{File, FileTimes, Metadata};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A fixture workspace under `fixtures/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Workspace {
    /// `fixtures/leak-tests`: leak tests of known outcome.
    Leaks,
    /// `fixtures/plain-tests`: a suite with no ying dependency.
    Plain,
}

impl Workspace {
    /// Its directory under `fixtures/`, and its seed's under `target/e2e/seeds/`.
    fn name(self) -> &'static str {
        match self {
            Workspace::Leaks => "leak-tests",
            Workspace::Plain => "plain-tests",
        }
    }
}

/// Where the end-to-end tests keep what they build: not the directory `ying-runtime`'s fixture test builds the
/// fixture in place into, as the copies here are the same package at other paths.
fn e2e_dir() -> PathBuf {
    crate::repository().join("target/e2e")
}

/// A fixture built once: `ws/`, the workspace, and `target/`, its target directory.
struct Seed {
    dir: PathBuf,
}

impl Seed {
    /// The seed of `workspace`, made anew by the first test of this process that asks for it.
    fn of(workspace: Workspace) -> &'static Seed {
        static LEAKS: OnceLock<Seed> = OnceLock::new();
        static PLAIN: OnceLock<Seed> = OnceLock::new();
        let seed = match workspace {
            Workspace::Leaks => &LEAKS,
            Workspace::Plain => &PLAIN,
        };
        seed.get_or_init(|| Seed::make(workspace))
    }

    fn workspace(&self) -> PathBuf {
        self.dir.join("ws")
    }

    fn target(&self) -> PathBuf {
        self.dir.join("target")
    }

    /// The lock file that one process holds alone while it makes the seed, and each holds shared while it copies.
    fn lock_file(&self) -> File {
        File::options().create(true).truncate(false).write(true).open(self.dir.join("lock")).unwrap()
    }

    /// Makes the seed: the fixture copied over its workspace, the lock held alone, when the workspace is not a copy
    /// of the fixture as it is now (see [`listing`]); then the build run again, the lock held shared (a no-op when
    /// neither the fixture nor the runtime changed). The seed's workspace is rewritten only when the fixture
    /// changed, and never while a test reads it (see [`shared`]).
    fn make(workspace: Workspace) -> Seed {
        let seed = Seed { dir: e2e_dir().join("seeds").join(workspace.name()) };
        std::fs::create_dir_all(&seed.dir).unwrap();
        let fixture = crate::repository().join("fixtures").join(workspace.name());
        let (stamp, made) = (seed.dir.join("fixture"), seed.dir.join("made"));
        // A copy of the fixture as it is now, left as it was made: a test that wrote into the seed's workspace and
        // failed before its guard could say so (see [`Shared`]) leaves a seed that is made anew.
        let is_copy = || {
            std::fs::read_to_string(&stamp).is_ok_and(|copied| copied == listing(&fixture))
                && std::fs::read_to_string(&made).is_ok_and(|made| made == listing(&seed.workspace()))
        };
        let lock = seed.lock_file();
        lock.lock_shared().unwrap();
        if !is_copy() {
            lock.unlock().unwrap();
            lock.lock().unwrap();
            // Another process may have made it meanwhile.
            if !is_copy() {
                let ws = seed.workspace();
                // The fixture as it is now: a file it no longer has is gone, and the times kept tell cargo which
                // changed.
                if ws.exists() {
                    std::fs::remove_dir_all(&ws).unwrap();
                }
                copy_tree(&fixture, &ws, &|_, _| Place::Copy);
                point_at_this_repository(&ws.join("Cargo.toml"));
                std::fs::write(&stamp, listing(&fixture)).unwrap();
                std::fs::write(&made, listing(&ws)).unwrap();
            }
            lock.unlock().unwrap();
            lock.lock_shared().unwrap();
        }
        let output = crate::cleaned(env!("CARGO_BIN_EXE_cargo-ying"), &seed.target())
            .args(["ying", "test", "--no-run", "--manifest-path"])
            .arg(seed.workspace().join("Cargo.toml"))
            .output()
            .unwrap();
        assert!(output.status.success(), "the seed of {workspace:?} did not build:\n{}", crate::stderr(&output));
        drop(lock);
        seed
    }
}

/// The files of the tree `dir` (its own `target` left out), a line each, sorted: its path relative to `dir`, its
/// length and its modification time. Equal listings are the same tree as cargo sees it.
fn listing(dir: &Path) -> String {
    let mut lines = Vec::new();
    walk(dir, &mut |relative, metadata| {
        if relative == Path::new("target") {
            return false;
        }
        if !metadata.is_dir() {
            let modified = metadata.modified().unwrap().duration_since(std::time::UNIX_EPOCH).unwrap();
            lines.push(format!("{}\t{}\t{}", relative.display(), metadata.len(), modified.as_nanos()));
        }
        true
    });
    lines.sort();
    lines.join("\n")
}

/// Walks the tree `root` (links not followed), showing `visit` each entry's path relative to `root` and its
/// metadata, parents before their children: a directory is walked into when `visit` says so.
fn walk(root: &Path, visit: &mut dyn FnMut(&Path, &Metadata) -> bool) {
    fn under(root: &Path, relative: &Path, visit: &mut dyn FnMut(&Path, &Metadata) -> bool) {
        for entry in std::fs::read_dir(root.join(relative)).unwrap() {
            let relative = relative.join(entry.unwrap().file_name());
            let metadata = std::fs::symlink_metadata(root.join(&relative)).unwrap();
            if visit(&relative, &metadata) && metadata.is_dir() {
                under(root, &relative, visit);
            }
        }
    }
    under(root, Path::new(""), visit);
}

/// Points the manifest's path dependency `../../ying-runtime` at this repository's, keeping the file's times: the
/// same manifest, whichever copy of it.
fn point_at_this_repository(manifest: &Path) {
    let text = std::fs::read_to_string(manifest).unwrap();
    if !text.contains("../../ying-runtime") {
        return;
    }
    let runtime = crate::repository().join("ying-runtime").display().to_string().replace('\\', "/");
    let times = times(&std::fs::metadata(manifest).unwrap());
    std::fs::write(manifest, text.replace("../../ying-runtime", &runtime)).unwrap();
    File::options().write(true).open(manifest).unwrap().set_times(times).unwrap();
}

/// The directory the copies, and the shared seeds' target directories, are made in.
pub(crate) fn copies_dir() -> PathBuf {
    e2e_dir().join("tmp")
}

/// Where git stops looking for a repository above a workspace the tests run (see [`crate::cleaned`]): the copies'
/// directory and the seeds' are no part of this repository's work tree to the commands run on them, as the system's
/// temporary directory is no part of one.
pub(crate) fn git_ceiling() -> PathBuf {
    e2e_dir()
}

/// A copy of a fixture for one test, removed when dropped: the workspace at its root, its target directory
/// `target/` made from the seed's.
pub(crate) fn copy(workspace: Workspace) -> tempfile::TempDir {
    let (seed, dir, lock) = with_own_target(workspace);
    // Its files newer than the seed's build: the package's own code is built anew in the copy (see above).
    copy_tree(&seed.workspace(), dir.path(), &|_, _| Place::CopyAnew);
    drop(lock);
    dir
}

/// The seed of `workspace`, and a temporary directory under `target/e2e/tmp/` holding a target directory made from
/// the seed's, `target/`; the seed's lock, held shared.
fn with_own_target(workspace: Workspace) -> (&'static Seed, tempfile::TempDir, File) {
    let seed = Seed::of(workspace);
    let tmp = copies_dir();
    std::fs::create_dir_all(&tmp).unwrap();
    let dir = tempfile::Builder::new().prefix(workspace.name()).tempdir_in(&tmp).unwrap();
    let lock = seed.lock_file();
    lock.lock_shared().unwrap();
    copy_tree(&seed.target(), &dir.path().join("target"), &target_place);
    (seed, dir, lock)
}

/// The seed's workspace itself, for a test that only reads it, with a target directory of the test's own: nothing is
/// built, the seed's build naming the seed's files. The tests that read it share it: its lock is held shared for the
/// test's life, so that no process makes the seed anew under it, and a test that wrote into it fails as it ends.
pub(crate) struct Shared {
    /// A temporary directory under `target/e2e/tmp/`, holding the test's target directory, `target/`.
    pub(crate) dir: tempfile::TempDir,
    /// The seed's workspace.
    pub(crate) workspace: PathBuf,
    /// Its [`listing`] when the test took it.
    listing: String,
    /// The seed's lock, held shared.
    _lock: File,
}

/// The seed of `workspace`, shared with the other tests that only read it, and a target directory made from the
/// seed's for this test alone.
pub(crate) fn shared(workspace: Workspace) -> Shared {
    let (seed, dir, lock) = with_own_target(workspace);
    Shared { dir, listing: listing(&seed.workspace()), workspace: seed.workspace(), _lock: lock }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let now = listing(&self.workspace);
            let changed: Vec<&str> = {
                let before: std::collections::BTreeSet<&str> = self.listing.lines().collect();
                let after: std::collections::BTreeSet<&str> = now.lines().collect();
                before.symmetric_difference(&after).copied().collect()
            };
            assert!(
                changed.is_empty(),
                "the test wrote into the seed's workspace, which the tests that only read it share: give it a copy \
                 of its own (`Fixture::new`, `Fixture::plain`); changed: {changed:#?}"
            );
        }
    }
}

/// How a file of the seed is put in a copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Copied, with its times.
    Copy,
    /// Copied, its times those of the copy.
    CopyAnew,
    /// Hard-linked: the same file, which nothing writes in place.
    Link,
    /// Left out, with everything under it.
    Skip,
}

/// How the file or directory at `relative` (to the target directory), of `metadata`, is put in a copy's target
/// directory.
fn target_place(relative: &Path, metadata: &Metadata) -> Place {
    let parts: Vec<&std::ffi::OsStr> = relative.iter().collect();
    match parts[..] {
        // Its own runs' outputs, and rustc's incremental state, which a copy does without.
        [top] if top == "ying" => Place::Skip,
        [_, incremental] if incremental == "incremental" => Place::Skip,
        _ if metadata.is_dir() => Place::Copy,
        _ => {
            // Build scripts' outputs are copied: what a build script writes, it may write in place.
            let in_out_dir = parts.iter().any(|part| *part == "out");
            let artifact = relative
                .extension()
                .is_some_and(|extension| ["rlib", "rmeta", "so", "a"].iter().any(|known| extension == *known));
            let executable = metadata.permissions().mode() & 0o111 != 0;
            if (artifact || executable) && !in_out_dir { Place::Link } else { Place::Copy }
        }
    }
}

/// A file's access and modification times, to give its copy.
fn times(metadata: &Metadata) -> FileTimes {
    FileTimes::new().set_accessed(metadata.accessed().unwrap()).set_modified(metadata.modified().unwrap())
}

/// Copies the tree `from` to `to`, each file or directory put as `place` says of its path relative to `from` and
/// its metadata; a workspace's own `target` is left out.
fn copy_tree(from: &Path, to: &Path, place: &dyn Fn(&Path, &Metadata) -> Place) {
    std::fs::create_dir_all(to).unwrap();
    walk(from, &mut |relative, metadata| {
        if relative == Path::new("target") {
            return false;
        }
        let (source, target) = (from.join(relative), to.join(relative));
        match place(relative, metadata) {
            Place::Skip => return false,
            _ if metadata.is_dir() => std::fs::create_dir(&target).unwrap(),
            // Not followed: a link is copied as a link.
            _ if metadata.is_symlink() => {
                std::os::unix::fs::symlink(std::fs::read_link(&source).unwrap(), &target).unwrap();
            }
            Place::Link if std::fs::hard_link(&source, &target).is_ok() => {}
            Place::CopyAnew => {
                std::fs::copy(&source, &target).unwrap();
            }
            Place::Link | Place::Copy => {
                std::fs::copy(&source, &target).unwrap();
                File::options().write(true).open(&target).unwrap().set_times(times(metadata)).unwrap();
            }
        }
        true
    });
}

/// Every file under the target directory `target` but its `incremental/` and `ying/`, by its path relative to it:
/// its length, modification time and inode.
fn artifacts(target: &Path) -> std::collections::BTreeMap<PathBuf, (u64, std::time::SystemTime, u64)> {
    let mut files = std::collections::BTreeMap::new();
    walk(target, &mut |relative, metadata| {
        if target_place(relative, metadata) == Place::Skip {
            return false;
        }
        if !metadata.is_dir() {
            files.insert(relative.to_path_buf(), (metadata.len(), metadata.modified().unwrap(), metadata.ino()));
        }
        true
    });
    files
}

/// The guard of what the seeds are for: a test's first run in a fresh copy compiles the fixture's own package,
/// whose debug information must name the copy's files, and nothing else. A change that made every test build the
/// fixture's dependencies anew would fail here rather than slow the suite down unseen.
#[test]
fn a_fresh_copy_builds_its_own_package_and_nothing_else() {
    let only_its_package = |said: &str, package: &str| {
        let compiled: Vec<&str> = said.lines().filter(|line| line.trim_start().starts_with("Compiling ")).collect();
        let own = format!("Compiling {package} v");
        assert!(
            compiled.len() == 1 && compiled[0].trim_start().starts_with(&own),
            "the copy built {package} alone: {compiled:#?}\n{said}"
        );
    };
    let leaks = crate::Fixture::new();
    let output = leaks.cargo_ying(&["-E", "test(=clean)"], &[]);
    let said = crate::stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{said}");
    only_its_package(&said, "leak-fixtures");
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let plain = crate::Fixture::plain();
        let output = plain.cargo_ying(&["--measure", "all", "-E", "test(=clean)"], &[]);
        let said = crate::stderr(&output);
        assert_eq!(output.status.code(), Some(0), "{said}");
        only_its_package(&said, "plain-fixtures");
    }
}

/// A copy shares the seed's libraries and executables by hard links: that holds because rustc and the linker
/// write a new file and rename it over the old one, never into the old one. The build of the fixture's package in a
/// copy (its library and every test binary) leaves every file of the seed as it was, and the copy's rebuilt files
/// are files of their own.
#[test]
fn building_in_a_copy_leaves_the_seed_as_it_was() {
    let fixture = crate::Fixture::new();
    let seed = Seed::of(Workspace::Leaks);
    let before = artifacts(&seed.target());
    let copied = artifacts(&fixture.target_dir());
    let linked = copied.iter().filter(|(path, (.., inode))| before.get(*path).is_some_and(|seed| seed.2 == *inode));
    assert!(linked.count() > 10, "the copy links the seed's artifacts");

    let output = fixture.subcommand("list", &[], &[]).output().unwrap();
    let said = crate::stderr(&output);
    assert!(output.status.success() && said.contains("Compiling leak-fixtures"), "{said}");

    assert_eq!(artifacts(&seed.target()), before, "the seed's files are as they were");
    let rebuilt: Vec<(PathBuf, u64)> = artifacts(&fixture.target_dir())
        .into_iter()
        .filter(|(path, (_, modified, _))| before.get(path).is_some_and(|seed| seed.1 != *modified))
        .map(|(path, (.., inode))| (path, inode))
        .collect();
    for (path, inode) in &rebuilt {
        assert_ne!(*inode, before[path].2, "{} was written into the seed's file", path.display());
    }
    let names: Vec<String> = rebuilt.iter().map(|(path, _)| path.display().to_string()).collect();
    for kind in [".rlib", ".rmeta", "deps/leaks-"] {
        assert!(names.iter().any(|name| name.contains(kind) && !name.ends_with(".d")), "{kind} rebuilt: {names:#?}");
    }
}

/// A test that only reads a fixture runs the seed's build as it is: nothing is compiled.
#[test]
fn a_shared_seed_builds_nothing() {
    let leaks = crate::Fixture::shared();
    let output = leaks.cargo_ying(&["-E", "test(=clean)"], &[]);
    let said = crate::stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{said}");
    assert!(!said.contains("Compiling "), "{said}");
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let plain = crate::Fixture::plain_shared();
        let output = plain.cargo_ying(&["--measure", "all", "-E", "test(=clean)"], &[]);
        let said = crate::stderr(&output);
        assert_eq!(output.status.code(), Some(0), "{said}");
        assert!(!said.contains("Compiling "), "{said}");
    }
}

/// What tells a shared workspace written into, and a seed's workspace from a changed fixture: a file added, or one
/// whose length or time changed, changes the listing; its own `target/` does not.
#[test]
fn a_listing_changes_with_any_file_but_the_target_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("tests")).unwrap();
    std::fs::write(dir.path().join("tests/leaks.rs"), "fn main() {}\n").unwrap();
    let first = listing(dir.path());
    std::fs::create_dir_all(dir.path().join("target/ying")).unwrap();
    std::fs::write(dir.path().join("target/ying/summary.json"), "{}").unwrap();
    assert_eq!(listing(dir.path()), first, "the target directory is no part of it");
    std::fs::write(dir.path().join("ying-baseline.json"), "{}").unwrap();
    let added = listing(dir.path());
    assert_ne!(added, first, "a file added");
    let file = File::options().write(true).open(dir.path().join("tests/leaks.rs")).unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    file.set_times(FileTimes::new().set_modified(later)).unwrap();
    assert_ne!(listing(dir.path()), added, "a file's time changed");
}
