//! The files of the contract as JSON: read with their schema version checked and errors placed, written whole or
//! not at all.

use serde::de::DeserializeOwned;
use std::fmt;
use std::io::Write as _;
use std::path::Path;

/// Why a file of the contract could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadError {
    /// The file could not be read.
    Io(std::io::Error),
    /// It is not JSON, or not JSON of the expected shape (the error names the line and column).
    Json(serde_json::Error),
    /// It is not a regular file (a directory, a named pipe, a device): it is not read, so nothing waits on it.
    NotAFile {
        /// What it is: `a directory`, `a named pipe (FIFO)`.
        what: &'static str,
    },
    /// It has no `schema_version`: it is not a file of this kind.
    NotOfKind {
        /// What it should have been: `report`, `summary`, `baseline`.
        kind: &'static str,
    },
    /// Its `schema_version` is another than the one this reader reads.
    Version {
        /// What kind of file.
        kind: &'static str,
        /// The version as written.
        found: String,
        /// The version read here.
        expected: u32,
        /// Where the version is written (1-based line and column).
        line: usize,
        /// See `line`.
        column: usize,
        /// What to do about it.
        hint: &'static str,
    },
    /// It is larger than any file of ying's ([`TEXT_LIMIT`]): not read further.
    TooBig {
        /// The bound, in bytes.
        limit: u64,
    },
    /// It is not UTF-8 text.
    NotUtf8 {
        /// Where its first byte that is not (1-based line and column, in characters).
        line: usize,
        /// See `line`.
        column: usize,
    },
    /// Its `schema_version` is not a whole number (`"1"`, `1.0`): written by hand, or not by ying.
    VersionType {
        /// What kind of file.
        kind: &'static str,
        /// What is written, described: `the string "1"`, `the number 1.0`.
        found: String,
        /// The version read here.
        expected: u32,
        /// Where the version is written (1-based line and column).
        line: usize,
        /// See `line`.
        column: usize,
    },
    /// A whole number too large for any count a file holds (`"retained_bytes": 99999999999999999999`).
    TooLarge {
        /// Where it is: the keys down to it, `tests.pkg::leaks box.retained_bytes`.
        key: String,
        /// The number, as read.
        found: String,
        /// Where the typed reading stopped on it (1-based line and column).
        line: usize,
        /// See `line`.
        column: usize,
    },
    /// A number out of the range its field can hold (`"duration": 1e300`), or a path of a file a run wrote that is
    /// not where that run writes it (`"report": "/etc/hostname"`): written by hand, or not by ying.
    OutOfRange {
        /// Where it is: the field, with the test it is of.
        key: String,
        /// What is written.
        found: String,
        /// What it may be.
        expected: String,
    },
    /// A report of another test than the one asked for.
    OtherTest {
        /// The test asked for.
        expected: String,
        /// The test the report is of.
        found: String,
    },
    /// A report without the token of the run that reads it: not written by the leak test's runner in this run.
    OtherRun,
    /// A test written twice in a file that holds each once (a merge that kept both sides' lines): reading it, the
    /// last would win, and which is right is the user's call.
    Duplicate {
        /// The test, as written.
        test: String,
        /// The lines it is written at (1-based), as far as they can be found.
        lines: Vec<usize>,
    },
    /// A test whose figures contradict each other: more bytes lost than retained, though the lost are among the
    /// retained.
    LostOverRetained {
        /// The test, as written.
        test: String,
        /// The line it is written at (1-based), when it can be found.
        line: Option<usize>,
        /// The lost bytes written.
        lost: u64,
        /// The retained bytes written.
        retained: u64,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(error) => error.fmt(f),
            Self::Json(error) => error.fmt(f),
            Self::NotAFile { what } => write!(f, "it is {what}, not a regular file"),
            Self::TooBig { limit } => write!(f, "it is larger than {limit} bytes, more than any file it could be"),
            Self::NotUtf8 { line, column } => {
                write!(f, "it is not UTF-8 text: the byte at line {line} column {column} is not")
            }
            Self::NotOfKind { kind } => write!(f, "it has no schema_version: it is not a ying {kind}"),
            Self::Version { kind, found, expected, line, column, hint } => write!(
                f,
                "schema_version {found} at line {line} column {column} is not {expected}, the version of the {kind} \
                 this ying reads: {hint}"
            ),
            Self::VersionType { kind, found, expected, line, column } => write!(
                f,
                "schema_version at line {line} column {column} is {found}; expected the number {expected}, the \
                 version of the {kind} this ying reads"
            ),
            Self::TooLarge { key, found, line, column } => write!(
                f,
                "`{key}` at line {line} column {column} is {found}, larger than the largest whole number it can hold \
                 ({})",
                u64::MAX
            ),
            Self::OutOfRange { key, found, expected } => write!(f, "`{key}` is {found}, not {expected}"),
            Self::OtherTest { expected, found } => write!(f, "it is the report of `{found}`, not of `{expected}`"),
            Self::OtherRun => {
                write!(f, "it does not carry this run's token: the leak test's runner did not write it in this run")
            }
            Self::Duplicate { test, lines } => {
                write!(f, "`{test}` is written twice")?;
                if let [first, second, ..] = lines[..] {
                    write!(f, ", at lines {first} and {second}")?;
                }
                write!(f, " (a merge that kept both sides' lines?): keep the one that is right")
            }
            Self::LostOverRetained { test, line, lost, retained } => {
                write!(f, "`{test}`")?;
                if let Some(line) = line {
                    write!(f, " at line {line}")?;
                }
                write!(
                    f,
                    " has {lost} bytes lost, more than its {retained} retained, among which the lost are counted: \
                     correct or remove the line (`--save-baseline` then records the test anew)"
                )
            }
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io(error) => Some(error),
            Self::Json(error) => Some(error),
            _ => None,
        }
    }
}

/// A file that could not be read, for a caller that speaks of I/O errors only: the file's own error, or one of
/// [`std::io::ErrorKind::InvalidData`] that says what the file is.
impl From<ReadError> for std::io::Error {
    fn from(error: ReadError) -> Self {
        match error {
            ReadError::Io(error) => error,
            other => Self::new(std::io::ErrorKind::InvalidData, other),
        }
    }
}

impl From<std::io::Error> for ReadError {
    fn from(error: std::io::Error) -> Self {
        Self::Io(error)
    }
}

/// A kind of versioned file: its name and version, and what to do with a file of another version.
pub(crate) struct Kind {
    pub(crate) name: &'static str,
    pub(crate) version: u32,
    /// For a file written by an earlier ying.
    pub(crate) older: &'static str,
    /// For a file written by a later ying.
    pub(crate) newer: &'static str,
}

/// The 1-based line and column of byte `offset` of `text`.
pub(crate) fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before[before.rfind('\n').map_or(0, |newline| newline + 1)..].chars().count() + 1;
    (line, column)
}

/// A JSON value as a message names it: `the string "1"`, `the number 1.0`.
fn describe(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => format!("the string {text:?}"),
        serde_json::Value::Number(number) => format!("the number {number}"),
        serde_json::Value::Array(_) => "a list".to_owned(),
        serde_json::Value::Object(_) => "an object".to_owned(),
        other => other.to_string(),
    }
}

/// A file's `schema_version` alone, everything else skipped.
#[derive(serde::Deserialize)]
struct Versioned {
    schema_version: u64,
}

/// Reads `text` as a file of `kind`: JSON whose `schema_version` is `kind.version` (checked before the rest, so
/// that a file of another version is named as such rather than as malformed). A leading byte-order mark is
/// ignored.
pub(crate) fn parse<T: DeserializeOwned>(text: &str, kind: &Kind) -> Result<T, ReadError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // The version is read first with the rest skipped, not as a whole document: building a report's
    // `serde_json::Value` took twice as long as reading the report itself. Only a file that is not plainly of this
    // version is read as a document, to say what it is.
    let of_version = serde_json::from_str::<Versioned>(text)
        .is_ok_and(|versioned| versioned.schema_version == u64::from(kind.version));
    if !of_version {
        let value: serde_json::Value = serde_json::from_str(text).map_err(ReadError::Json)?;
        check_version(text, &value, kind)?;
    }
    serde_json::from_str(text).map_err(|error| {
        // Read as a document again, only now, to find the number a `u64` could not hold.
        let too_large = serde_json::from_str(text).ok().and_then(|value| too_large(&value, &mut Vec::new()));
        match too_large {
            Some((key, rounded)) => {
                let (line, column) = (error.line(), error.column());
                // The number as written, where the reading stopped on it (JSON's float would round it).
                let written = text.lines().nth(line.saturating_sub(1)).map(|text| {
                    let before: String = text.chars().take(column).collect();
                    let digits = before.chars().rev().take_while(char::is_ascii_digit).count();
                    before.chars().skip(before.chars().count() - digits).collect::<String>()
                });
                let found = written.filter(|digits| digits.len() > 19).unwrap_or(rounded);
                ReadError::TooLarge { key, found, line, column }
            }
            None => ReadError::Json(error),
        }
    })
}

/// The `schema_version` of `text`, when it is a JSON object with a whole number there.
pub(crate) fn version_of(text: &str) -> Option<u64> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    serde_json::from_str::<Versioned>(text).ok().map(|versioned| versioned.schema_version)
}

/// Checks that `value`, the document `text`, is of `kind`'s version.
fn check_version(text: &str, value: &serde_json::Value, kind: &Kind) -> Result<(), ReadError> {
    let found = match value.get("schema_version") {
        None => return Err(ReadError::NotOfKind { kind: kind.name }),
        Some(found) => found,
    };
    if found.as_u64() == Some(u64::from(kind.version)) {
        return Ok(());
    }
    let offset = text.find("\"schema_version\"").unwrap_or(0);
    let (line, column) = position(text, offset);
    if found.as_u64().is_none() {
        let found = describe(found);
        return Err(ReadError::VersionType { kind: kind.name, found, expected: kind.version, line, column });
    }
    let older = found.as_u64().is_some_and(|found| found < u64::from(kind.version));
    Err(ReadError::Version {
        kind: kind.name,
        found: found.to_string(),
        expected: kind.version,
        line,
        column,
        hint: if older { kind.older } else { kind.newer },
    })
}

/// The first whole number in `value` too large for a `u64` (JSON reads it as a float), with the keys down to it.
fn too_large(value: &serde_json::Value, path: &mut Vec<String>) -> Option<(String, String)> {
    match value {
        serde_json::Value::Number(number) if number.is_f64() => {
            let float = number.as_f64()?;
            // 2^64: no count a file holds reaches it.
            (float.fract() == 0.0 && float.abs() >= 18_446_744_073_709_551_616.0)
                .then(|| (path.join("."), format!("{float:.0}")))
        }
        serde_json::Value::Array(items) => items.iter().enumerate().find_map(|(index, item)| {
            path.push(index.to_string());
            let found = too_large(item, path);
            path.pop();
            found
        }),
        serde_json::Value::Object(fields) => fields.iter().find_map(|(key, item)| {
            path.push(key.clone());
            let found = too_large(item, path);
            path.pop();
            found
        }),
        _ => None,
    }
}

/// The most any file ying reads may hold: 256 MiB, beyond a baseline of a million tests.
pub const TEXT_LIMIT: u64 = 256 << 20;

/// The text of the regular file at `path` (a symbolic link is followed), at most [`TEXT_LIMIT`] bytes. Anything
/// else is refused: the file is opened without waiting (`O_NONBLOCK`: a named pipe would wait for a writer) and
/// read only when what was opened is a regular file (a device is not a file of the contract, and `/dev/zero`
/// never ends).
pub fn read_text(path: &Path) -> Result<String, ReadError> {
    let bytes = read_bounded(path, TEXT_LIMIT)?;
    String::from_utf8(bytes).map_err(|error| {
        let valid = &error.as_bytes()[..error.utf8_error().valid_up_to()];
        let (line, column) = position(std::str::from_utf8(valid).unwrap_or_default(), valid.len());
        ReadError::NotUtf8 { line, column }
    })
}

/// The bytes of the regular file at `path`, at most `limit` of them, read as [`read_text`] reads.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    use std::io::Read as _;
    if let Some(what) = file_type(&std::fs::metadata(path)?.file_type()) {
        return Err(ReadError::NotAFile { what });
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path)?;
    // What was opened, which a rename since the look above may have changed.
    if let Some(what) = file_type(&file.metadata()?.file_type()) {
        return Err(ReadError::NotAFile { what });
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooBig { limit });
    }
    Ok(bytes)
}

/// What a file of this type is, when it is not a regular file: `a directory`, `a named pipe (FIFO)`.
fn file_type(file_type: &std::fs::FileType) -> Option<&'static str> {
    if file_type.is_file() {
        return None;
    }
    if file_type.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if file_type.is_fifo() {
            return Some("a named pipe (FIFO)");
        }
        if file_type.is_socket() {
            return Some("a socket");
        }
        if file_type.is_block_device() {
            return Some("a block device");
        }
        if file_type.is_char_device() {
            return Some("a character device");
        }
    }
    Some("not a regular file")
}

/// Writes `value` as pretty JSON with a final newline to `path`, through a temporary file in the same directory
/// and a rename: a reader never sees half a file, and an interrupted write leaves the old file as it was. The file
/// keeps its permissions; a symbolic link is followed, its target replaced and the link kept. The contents reach
/// the disk before the rename (a file that is kept: a baseline, a summary).
pub fn write_atomic(path: &Path, value: &impl serde::Serialize) -> std::io::Result<()> {
    write_replacing(path, value, true)
}

/// [`write_atomic`] without waiting for the disk: for a file a reader takes right away and that is worth nothing
/// after a crash of the machine (the report a test writes for `cargo ying`, read as soon as the test ends). Readers
/// still never see half a file.
pub fn write_whole(path: &Path, value: &impl serde::Serialize) -> std::io::Result<()> {
    write_replacing(path, value, false)
}

/// Writes `value` as pretty JSON with a final newline to `path`, a file that is ying's own (a test's record or
/// report, the run's summary): as [`write_own_bytes`] does, without waiting for the disk.
pub fn write_own(path: &Path, value: &impl serde::Serialize) -> std::io::Result<()> {
    write_own_bytes(path, &to_bytes(value)?, false)
}

/// Writes `bytes` to `path`, a file that is ying's own (under `<target>/ying`, or the interposer in the user's
/// cache), never through a symbolic link. A temporary file with a name no other process can guess is created new
/// beside `path` (`O_CREAT|O_EXCL`: a link planted in its place is an error, never followed), written whole
/// (`durable`: and sent to the disk), and renamed over `path`, which replaces whatever entry `path` is, a link
/// included, never the file a link leads to. A reader never sees half a file; no permissions are carried over, and
/// `path` is not resolved, which keeps a write that a process per test makes to a few system calls.
pub fn write_own_bytes(path: &Path, bytes: &[u8], durable: bool) -> std::io::Result<()> {
    replace(path, bytes, durable, None)
}

/// Replaces the file at `path` (not resolved) with one holding `bytes`, through a temporary file beside it. Not
/// ending in `.json`, a reader listing a directory for files of the contract never takes it for one; its own to
/// this call, under a name no one can plant a link at (and created new, so a link there is an error): two threads
/// replacing one file each write a whole file, and the last rename wins. `durable`: on the disk before the rename;
/// `permissions`: the new file's.
fn replace(path: &Path, bytes: &[u8], durable: bool, permissions: Option<std::fs::Permissions>) -> std::io::Result<()> {
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map_or_else(|| "file".into(), |name| name.to_string_lossy().into_owned());
    let temporary = dir.join(format!(".{name}.{:016x}.tmp", unguessable()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .and_then(|mut file| file.write_all(bytes).and_then(|()| if durable { file.sync_all() } else { Ok(()) }))
        .and_then(|()| permissions.map_or(Ok(()), |permissions| std::fs::set_permissions(&temporary, permissions)))
        .and_then(|()| std::fs::rename(&temporary, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// A number no other process can predict: the standard library's hash keys are drawn from the system's random
/// source once per thread and stepped at every [`RandomState`](std::hash::RandomState), and the process id and a
/// count keep two calls apart.
fn unguessable() -> u64 {
    use std::hash::{BuildHasher as _, Hasher as _};
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut hasher = std::hash::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_u64(CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    hasher.finish()
}

/// Writes `bytes` to `path`, a file that is the user's (a configuration ying adds to), as [`write_atomic`] writes a
/// value: a link followed and kept, its target replaced with its permissions kept, on the disk before the rename.
pub fn write_users_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_bytes(path, bytes, true)
}

/// `value` as every writer here writes it: pretty JSON with a final newline.
pub(crate) fn to_bytes(value: &impl serde::Serialize) -> std::io::Result<Vec<u8>> {
    let mut json = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    json.push(b'\n');
    Ok(json)
}

/// [`write_atomic`] (`durable`) or [`write_whole`].
fn write_replacing(path: &Path, value: &impl serde::Serialize, durable: bool) -> std::io::Result<()> {
    write_bytes(path, &to_bytes(value)?, durable)
}

/// Writes `json` to `path` as [`write_atomic`] (`durable`) or [`write_whole`] write a value.
pub(crate) fn write_bytes(path: &Path, json: &[u8], durable: bool) -> std::io::Result<()> {
    let path = &resolve_symlinks(path)?;
    let permissions = std::fs::metadata(path).ok().map(|metadata| metadata.permissions());
    replace(path, json, durable, permissions)
}

/// The file `path` names: itself, or the file its symbolic links lead to. A link to nothing is an error: replacing
/// it would write a file where the link was.
pub fn resolve_symlinks(path: &Path) -> std::io::Result<std::path::PathBuf> {
    match std::fs::canonicalize(path) {
        Ok(target) => Ok(target),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => match std::fs::symlink_metadata(path) {
            Ok(metadata) if metadata.file_type().is_symlink() => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "it is a symbolic link to {}, which does not exist",
                    std::fs::read_link(path).unwrap_or_default().display()
                ),
            )),
            _ => Ok(path.to_owned()),
        },
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::{Kind, ReadError, parse, position};
    use std::path::Path;

    const KIND: Kind = Kind { name: "thing", version: 2, older: "write it again", newer: "update" };

    #[derive(Debug, serde::Deserialize)]
    #[expect(dead_code, reason = "read for its shape only")]
    struct Thing {
        schema_version: u32,
        value: u64,
    }

    #[test]
    fn a_number_too_large_names_its_key_position_and_the_limit() {
        let text = "{\"schema_version\": 2,\n \"value\": 99999999999999999999}";
        let error = parse::<Thing>(text, &KIND).unwrap_err();
        assert!(matches!(error, ReadError::TooLarge { line: 2, .. }), "{error:?}");
        assert_eq!(
            error.to_string(),
            "`value` at line 2 column 30 is 99999999999999999999, larger than the largest whole number it can hold \
             (18446744073709551615)"
        );
        // A number that fits but is not of the shape stays serde's message.
        let error = parse::<Thing>("{\"schema_version\": 2, \"value\": -1}", &KIND).unwrap_err();
        assert!(matches!(error, ReadError::Json(_)), "{error:?}");
    }

    #[test]
    fn versions_are_checked_before_the_shape() {
        assert!(parse::<Thing>("{\"schema_version\": 2, \"value\": 1}", &KIND).is_ok());
        let error = parse::<Thing>("{\n  \"value\": \"x\",\n  \"schema_version\": 1\n}", &KIND).unwrap_err();
        assert!(matches!(error, ReadError::Version { line: 3, column: 3, .. }), "{error:?}");
        assert_eq!(
            error.to_string(),
            "schema_version 1 at line 3 column 3 is not 2, the version of the thing this ying reads: write it again"
        );
        let error = parse::<Thing>("{\"schema_version\": \"2\"}", &KIND).unwrap_err().to_string();
        assert_eq!(
            error,
            "schema_version at line 1 column 2 is the string \"2\"; expected the number 2, the version of the thing \
             this ying reads"
        );
        let error = parse::<Thing>("{\"schema_version\": 2.0}", &KIND).unwrap_err().to_string();
        assert!(
            error.contains("schema_version at line 1 column 2 is the number 2.0; expected the number 2"),
            "{error}"
        );
        let error = parse::<Thing>("{\"schema_version\": null}", &KIND).unwrap_err().to_string();
        assert!(error.contains("is null; expected the number 2"), "{error}");
        assert!(parse::<Thing>("[1, 2]", &KIND).unwrap_err().to_string().contains("not a ying thing"));
    }

    #[test]
    fn errors_keep_their_position_and_a_byte_order_mark_is_ignored() {
        let error = parse::<Thing>("{\"schema_version\": 2,\n \"value\": [", &KIND).unwrap_err().to_string();
        assert!(error.contains("line 2 column"), "{error}");
        assert!(parse::<Thing>("\u{feff}{\"schema_version\": 2, \"value\": 1}", &KIND).is_ok());
        assert_eq!(position("ab\ncé\nx", 7), (3, 1));
    }

    #[test]
    fn only_regular_files_are_read_and_a_named_pipe_is_not_opened() {
        let dir = tempfile::tempdir().unwrap();
        let error = super::read_text(dir.path()).unwrap_err();
        assert_eq!(error.to_string(), "it is a directory, not a regular file");
        #[cfg(unix)]
        {
            let fifo = dir.path().join("fifo");
            assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
            // Opening it for reading would wait for a writer: this returns at once.
            let error = super::read_text(&fifo).unwrap_err();
            assert_eq!(error.to_string(), "it is a named pipe (FIFO), not a regular file");
            let error = crate::Baseline::read(Path::new("/dev/null")).unwrap_err();
            assert_eq!(error.to_string(), "it is a character device, not a regular file");
        }
        assert!(crate::Baseline::read(&dir.path().join("missing")).unwrap().is_none());
    }

    #[cfg(unix)]
    #[test]
    fn a_write_keeps_the_mode_and_replaces_a_links_target_not_the_link() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.json");
        std::fs::write(&target, "old").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink("real.json", &link).unwrap();
        super::write_atomic(&link, &1).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link is kept");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "1\n", "its target is written");
        assert_eq!(std::fs::metadata(&target).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2, "no temporary file left");

        let dangling = dir.path().join("dangling.json");
        std::os::unix::fs::symlink("nowhere.json", &dangling).unwrap();
        let error = super::write_atomic(&dangling, &1).unwrap_err().to_string();
        assert_eq!(error, "it is a symbolic link to nowhere.json, which does not exist");
        assert!(std::fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink());
    }

    #[cfg(unix)]
    #[test]
    fn a_read_never_waits_on_a_pipe_never_reads_a_device_and_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert_eq!(super::read_text(&fifo).unwrap_err().to_string(), "it is a named pipe (FIFO), not a regular file");
        assert_eq!(super::read_text(&link).unwrap_err().to_string(), "it is a character device, not a regular file");
        let big = dir.path().join("big");
        std::fs::write(&big, [b'x'; 11]).unwrap();
        assert_eq!(
            super::read_bounded(&big, 10).unwrap_err().to_string(),
            format!("it is larger than 10 bytes, more than any file it could be")
        );
        assert_eq!(super::read_bounded(&big, 11).unwrap().len(), 11);
        let latin1 = dir.path().join("latin1");
        std::fs::write(&latin1, b"{\n  \"a\": \"caf\xe9\"\n}").unwrap();
        assert_eq!(
            super::read_text(&latin1).unwrap_err().to_string(),
            "it is not UTF-8 text: the byte at line 2 column 12 is not"
        );
    }

    #[cfg(unix)]
    #[test]
    fn an_own_file_replaces_a_planted_link_and_never_writes_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere.txt");
        std::fs::write(&elsewhere, "the user's").unwrap();
        let own = dir.path().join("summary.json");
        std::os::unix::fs::symlink(&elsewhere, &own).unwrap();
        super::write_own(&own, &1).unwrap();
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "the user's", "the link's target is untouched");
        assert!(std::fs::symlink_metadata(&own).unwrap().file_type().is_file(), "the link is replaced");
        assert_eq!(std::fs::read_to_string(&own).unwrap(), "1\n");
        super::write_own_bytes(&own, b"2", true).unwrap();
        assert_eq!(std::fs::read_to_string(&own).unwrap(), "2");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2, "no temporary file left");
        // Two writes never share a temporary name, so a link planted at one cannot be waited for.
        assert_ne!(super::unguessable(), super::unguessable());
    }

    #[test]
    fn writes_are_whole_and_leave_no_temporary_file() {
        let writes: [fn(&std::path::Path, &serde_json::Value) -> std::io::Result<()>; 2] =
            [|path, value| super::write_atomic(path, value), |path, value| super::write_whole(path, value)];
        for write in writes {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("thing.json");
            std::fs::write(&path, "old").unwrap();
            write(&path, &serde_json::json!({"schema_version": 2})).unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\n  \"schema_version\": 2\n}\n");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
            let missing = dir.path().join("no-such-directory").join("thing.json");
            assert!(write(&missing, &serde_json::json!(1)).is_err());
        }
    }

    #[test]
    fn threads_replacing_one_file_at_once_each_write_it_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("thing.json");
        std::thread::scope(|scope| {
            for thread in 0..4 {
                let path = &path;
                scope.spawn(move || {
                    for round in 0..50 {
                        super::write_whole(path, &serde_json::json!({"thread": thread, "round": round})).unwrap();
                    }
                });
            }
        });
        let last: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(last["round"], 49);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file is left");
    }
}
