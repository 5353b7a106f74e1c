//! The allocation interposer for `--measure all` and nextest's profile `ying`: the `ying-preload` shared library,
//! which cargo-ying's build script builds and the binary carries, written once for each version and content under
//! the user's cache directory and loaded into each test process with `LD_PRELOAD`. Nothing is built, fetched or read
//! from a source tree at run time: an installed cargo-ying stands alone.

use crate::error::{Error, InterposerError, Result};
use std::path::{Path, PathBuf};

/// Whether this platform has the interposer: Linux with glibc (`LD_PRELOAD`, and glibc's allocator under its own
/// names to forward to).
pub(crate) const SUPPORTED: bool = cfg!(all(target_os = "linux", target_env = "gnu"));

/// The environment variable that loads a shared library into a process before its own.
pub(crate) const PRELOAD_ENV: &str = "LD_PRELOAD";

/// The library's file name.
const LIBRARY: &str = "libying_interposer.so";

/// The library this cargo-ying was built with (empty where there is none).
static LIBRARY_BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libying_interposer.so"));

/// The interposer, ready to preload: the library this cargo-ying carries, under
/// `$XDG_CACHE_HOME/ying/interposer/<version>-<checksum>/` (else `~/.cache/...`), written there the first time
/// (whole: aside, then renamed) and taken as it is after, when it holds the same bytes.
pub(crate) fn library() -> Result<PathBuf> {
    if !SUPPORTED || LIBRARY_BYTES.is_empty() {
        return Err(Error::Interposer(InterposerError::Unsupported));
    }
    library_in(&cache_dir().ok_or(Error::Interposer(InterposerError::NoCacheDirectory))?)
}

/// The library under `cache` (see [`library`]).
fn library_in(cache: &Path) -> Result<PathBuf> {
    let dir = cache.join(format!("{}-{}", env!("CARGO_PKG_VERSION"), env!("YING_INTERPOSER_CHECKSUM")));
    let path = dir.join(LIBRARY);
    if holds_the_library(&path) {
        return Ok(path);
    }
    let failed = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Interposer(InterposerError::Write { path, source })
    };
    std::fs::create_dir_all(&dir).map_err(failed(&dir))?;
    // Written aside under a name no one can plant a link at, then renamed; a write cut short (a full disk) leaves
    // nothing behind.
    ying_report::write_own_bytes(&path, LIBRARY_BYTES, false).map_err(failed(&path))?;
    Ok(path)
}

/// The user's cache directory for the interposer: `$XDG_CACHE_HOME/ying/interposer`, else under `~/.cache`.
fn cache_dir() -> Option<PathBuf> {
    let absolute = |dir: std::ffi::OsString| Some(PathBuf::from(dir)).filter(|dir| dir.is_absolute());
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .and_then(absolute)
        .or_else(|| std::env::var_os("HOME").and_then(absolute).map(|home| home.join(".cache")))?;
    Some(cache.join("ying").join("interposer"))
}

/// How much of the library's start and end [`holds_the_library`] compares.
const COMPARED: usize = 64 << 10;

/// Whether `path` is a regular file (not a link) with the library's bytes: its length, and its first and last
/// [`COMPARED`] bytes. The file is only ever made by renaming a whole copy onto its name (in a directory named by
/// the library's checksum), so a file of the right length there is the library unless someone wrote over it; reading
/// all of its 13 MiB in every process that looks for it (nextest's wrapper runs once per test) cost more than the
/// test.
fn holds_the_library(path: &Path) -> bool {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let length = LIBRARY_BYTES.len();
    let whole =
        std::fs::symlink_metadata(path).is_ok_and(|metadata| metadata.is_file() && metadata.len() == length as u64);
    let compared = COMPARED.min(length);
    let (head, tail) = (&LIBRARY_BYTES[..compared], &LIBRARY_BYTES[length - compared..]);
    let same = |mut file: std::fs::File| -> std::io::Result<bool> {
        let mut bytes = vec![0; compared];
        file.read_exact(&mut bytes)?;
        if bytes != head {
            return Ok(false);
        }
        file.seek(SeekFrom::Start((length - compared) as u64))?;
        file.read_exact(&mut bytes)?;
        Ok(bytes == tail)
    };
    whole && std::fs::File::open(path).and_then(same).unwrap_or(false)
}

/// Whether the executable at `path` loads shared libraries at start (it names a dynamic loader, `PT_INTERP`), and so
/// takes the interposer: a statically linked one (`-C target-feature=+crt-static`, a musl target) runs without a
/// loader, and `LD_PRELOAD` is never read. `None` when it is not an ELF file this can read.
pub(crate) fn preloads(path: &Path) -> Option<bool> {
    use object::read::elf::{FileHeader, ProgramHeader};
    let (_, bytes) = crate::run::names::executable::map_executable(path)?;
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
    use super::{LIBRARY_BYTES, holds_the_library, library_in, preloads};

    #[test]
    fn a_dynamically_linked_executable_takes_the_interposer_and_a_file_that_is_no_executable_is_unknown() {
        // This test binary is linked as a test binary usually is: with the dynamic loader.
        assert_eq!(preloads(&std::env::current_exe().unwrap()), Some(true));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("text"), "not an executable").unwrap();
        assert_eq!(preloads(&dir.path().join("text")), None);
    }

    /// The library is the one cargo-ying carries, written to the cache once and taken from there after; a file
    /// there that is not it (cut short, replaced) is written anew.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn the_carried_library_is_written_to_the_cache_once_and_rewritten_when_it_is_not_whole() {
        let cache = tempfile::tempdir().unwrap();
        let library = || library_in(cache.path());
        let path = library().unwrap();
        assert!(path.starts_with(cache.path()), "{}", path.display());
        assert!(!LIBRARY_BYTES.is_empty() && holds_the_library(&path));
        assert!(std::fs::read(&path).unwrap().starts_with(b"\x7fELF"), "a shared library");
        let written = std::fs::metadata(&path).unwrap().modified().unwrap();
        assert_eq!(library().unwrap(), path);
        assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), written, "taken as it is");
        std::fs::write(&path, &LIBRARY_BYTES[..100]).unwrap();
        assert_eq!(library().unwrap(), path);
        assert!(holds_the_library(&path), "written anew");
        // Written over whole, at its length: another file, written anew.
        std::fs::write(&path, vec![0_u8; LIBRARY_BYTES.len()]).unwrap();
        assert!(!holds_the_library(&path));
        assert_eq!(library().unwrap(), path);
        assert!(holds_the_library(&path), "written anew");
        // A link planted where the library goes is replaced; the file it leads to is not written.
        let elsewhere = cache.path().join("elsewhere");
        std::fs::write(&elsewhere, "the user's").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        // And one planted at the name of the temporary file an earlier version wrote the library to first.
        let predictable = path.with_file_name(format!(".{}.{}", super::LIBRARY, std::process::id()));
        std::os::unix::fs::symlink(&elsewhere, &predictable).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(library().unwrap(), path);
        assert!(std::fs::symlink_metadata(&path).unwrap().is_file() && holds_the_library(&path));
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "the user's");
    }
}
