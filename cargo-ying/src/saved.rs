//! A finished run read back: its summary.json and the reports stored beside it, for the commands that work from
//! saved results (`accept`, `merge`, `diff`).

use crate::error::{Error, Result};
use crate::gate;
use std::collections::BTreeMap;
use std::path::Path;
use ying_report::{BaselineEntry, LeakReport, Summary, TestId};

/// Reads the summary at `path`; `hint` says what to do when there is none.
pub(crate) fn read_summary(path: &Path, hint: &'static str) -> Result<Summary> {
    Summary::read(path).map_err(|source| {
        let missing =
            matches!(&source, ying_report::ReadError::Io(error) if error.kind() == std::io::ErrorKind::NotFound);
        Error::ReadSummary { path: path.to_owned(), hint: if missing { hint } else { "" }, source }
    })
}

/// The baseline entries of `summary`'s leak tests, from the reports stored in `dir` beside it.
pub(crate) fn entries(summary: &Summary, dir: &Path) -> Result<BTreeMap<TestId, BaselineEntry>> {
    let mut entries = BTreeMap::new();
    for test in &summary.tests {
        let Some(report) = &test.report else { continue };
        let path = dir.join(report);
        let report = LeakReport::read(&path, &test.id).map_err(|source| Error::ReadReport { path, source })?;
        entries.insert(test.id.clone(), gate::entry(&report));
    }
    Ok(entries)
}
