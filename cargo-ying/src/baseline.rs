//! The baseline: a committed, reviewable record of every leak test's memory, compared with each run.
//!
//! JSON with the tests sorted by id, each with its exact figures and its retained stacks as sorted folded lines
//! (function names only). Nothing churns between identical runs (no timestamps, addresses or absolute paths), so an
//! unchanged run rewrites it byte for byte and a review diff shows only real changes. It is only ever replaced by an
//! atomic rename.

use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// The version of the baseline format.
pub const BASELINE_SCHEMA_VERSION: u32 = 1;

/// The default baseline file, at the workspace root.
pub const DEFAULT_BASELINE: &str = "ying-baseline.json";

/// The whole baseline.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// [`BASELINE_SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// Leak tests by id (`package::binary test`).
    pub tests: BTreeMap<String, BaselineEntry>,
}

/// One leak test's recorded memory.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineEntry {
    /// Retained bytes as the budget judges them (excused memory left out).
    pub retained_bytes: u64,
    /// Peak bytes.
    pub peak_bytes: u64,
    /// Bytes allocated.
    pub allocated_bytes: u64,
    /// Allocations.
    pub allocations: u64,
    /// Where the retained memory was allocated: folded stacks (`root;...;leaf bytes`), sorted.
    pub retained_stacks: Vec<String>,
}

/// The 1-based line and column where `needle` first occurs in `text` (1:1 when it does not).
fn position_of(text: &str, needle: &str) -> (usize, usize) {
    let offset = text.find(needle).unwrap_or(0);
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = offset - before.rfind('\n').map_or(0, |newline| newline + 1) + 1;
    (line, column)
}

impl Baseline {
    /// Reads the baseline at `path`; `Ok(None)` when there is none. A file that is not a baseline of this version is
    /// an error naming the file and the line and column.
    pub fn read(path: &Path) -> Result<Option<Self>> {
        let action = || format!("read the baseline {}", path.display());
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(Error::new(action(), error)),
        };
        let version: serde_json::Value = serde_json::from_str(&text).map_err(|error| Error::new(action(), error))?;
        match version.get("schema_version").and_then(serde_json::Value::as_u64) {
            Some(version) if version == u64::from(BASELINE_SCHEMA_VERSION) => {}
            Some(version) => {
                let (line, column) = position_of(&text, "\"schema_version\"");
                return Err(Error::new(
                    action(),
                    format!(
                        "schema_version {version} at line {line} column {column} is not {BASELINE_SCHEMA_VERSION}, \
                         the version this cargo ying reads"
                    ),
                ));
            }
            None => return Err(Error::new(action(), "it has no schema_version: it is not a ying baseline")),
        }
        serde_json::from_str(&text).map(Some).map_err(|error| Error::new(action(), error))
    }

    /// Writes the baseline to `path` through a temporary file in the same directory and an atomic rename, so an
    /// interrupted write never leaves a truncated baseline.
    pub fn write(&self, path: &Path) -> Result<()> {
        let action = || format!("write the baseline {}", path.display());
        let mut json = serde_json::to_string_pretty(self).map_err(|error| Error::new(action(), error))?;
        json.push('\n');
        let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = path.file_name().map_or_else(|| "baseline".into(), |name| name.to_string_lossy().into_owned());
        let temporary = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let written = std::fs::write(&temporary, json).and_then(|()| std::fs::rename(&temporary, path));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(Error::new(action(), error));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Baseline, BaselineEntry};

    fn baseline() -> Baseline {
        let mut baseline = Baseline { schema_version: 1, ..Baseline::default() };
        baseline.tests.insert(
            "pkg::leaks box_leak".into(),
            BaselineEntry {
                retained_bytes: 1000,
                retained_stacks: vec!["a;b 1000".into()],
                ..BaselineEntry::default()
            },
        );
        baseline
    }

    #[test]
    fn round_trips_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ying-baseline.json");
        baseline().write(&path).unwrap();
        let first = std::fs::read(&path).unwrap();
        Baseline::read(&path).unwrap().unwrap().write(&path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), first);
        assert_eq!(Baseline::read(&path).unwrap(), Some(baseline()));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
    }

    #[test]
    fn an_unwritable_path_is_an_error_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no-such-directory").join("ying-baseline.json");
        let message = baseline().write(&path).unwrap_err().to_string();
        assert!(message.starts_with(&format!("failed to write the baseline {}", path.display())), "{message}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing written");
    }

    #[test]
    fn a_missing_baseline_is_none_and_a_corrupt_one_an_error_with_its_position() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ying-baseline.json");
        assert_eq!(Baseline::read(&path).unwrap(), None);
        std::fs::write(&path, "{\n  \"schema_version\": 1,\n  \"tests\": {\n    \"x\": {\n").unwrap();
        let message = Baseline::read(&path).unwrap_err().to_string();
        assert!(message.starts_with(&format!("failed to read the baseline {}", path.display())), "{message}");
        assert!(message.contains("line 5 column 0") || message.contains("at line"), "{message}");
        std::fs::write(&path, "{\n  \"tests\": {},\n  \"schema_version\": 7\n}").unwrap();
        let message = Baseline::read(&path).unwrap_err().to_string();
        assert!(message.contains("schema_version 7 at line 3 column 3 is not 1"), "{message}");
        std::fs::write(&path, "[1, 2]").unwrap();
        assert!(Baseline::read(&path).unwrap_err().to_string().contains("not a ying baseline"));
    }
}
