//! The committed baseline as `cargo ying` keeps it: found, read before anything runs (a corrupt one stops the run
//! and stays as it was), and updated with a run's entries, the other tests' entries kept.

use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;
use ying_report::{Baseline, BaselineEntry, TestId};

/// The baseline file and what it holds (nothing yet when it does not exist).
pub struct BaselineFile {
    /// Where it is.
    pub path: PathBuf,
    /// Its contents, when it exists.
    pub baseline: Option<Baseline>,
}

impl BaselineFile {
    /// Reads the baseline at `path`.
    pub fn open(path: PathBuf) -> Result<Self> {
        let baseline = Baseline::read(&path).map_err(|source| Error::ReadBaseline { path: path.clone(), source })?;
        Ok(Self { path, baseline })
    }

    /// Its entries (none when it does not exist).
    pub fn entries(&self) -> &BTreeMap<TestId, BaselineEntry> {
        static NONE: BTreeMap<TestId, BaselineEntry> = BTreeMap::new();
        self.baseline.as_ref().map_or(&NONE, |baseline| &baseline.tests)
    }

    /// Writes `entries` into the baseline, over its existing entries of the same tests; the others stay as they
    /// were.
    pub fn save(&self, entries: BTreeMap<TestId, BaselineEntry>) -> Result<()> {
        // A baseline read is of this version (others are refused), as is a new one.
        let mut baseline = self.baseline.clone().unwrap_or_default();
        baseline.tests.extend(entries);
        baseline.write(&self.path).map_err(|source| Error::WriteBaseline { path: self.path.clone(), source })
    }
}
