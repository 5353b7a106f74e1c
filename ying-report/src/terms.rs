//! The words both formats of a run use, the summary and the baseline: which tests a run measured ([`Measured`]),
//! where retained memory was allocated ([`Sites`]), how a test ended ([`TestOutcome`]) and the gate's verdict on it
//! ([`GateVerdict`]). They stand on nothing else of the contract.

/// Which tests a run measured, and so which tests a baseline has entries for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Measured {
    /// The leak tests (`#[ying::leak_test]`).
    #[default]
    LeakTests,
    /// Every test (`--measure all`): the others measured from outside.
    All,
}

impl Measured {
    /// Its key, as the baseline writes it: `leak-tests`, `all`.
    pub fn key(self) -> &'static str {
        match self {
            Self::LeakTests => "leak-tests",
            Self::All => "all",
        }
    }
}

/// Where a test's retained memory was allocated: each site's key
/// ([`BaselineEntry::sites`](crate::BaselineEntry::sites)) with its bytes.
pub type Sites = Vec<(String, u64)>;

/// Sorts sites the largest first, then by key.
pub(crate) fn sort_sites(sites: &mut Sites) {
    sites.sort_by(|(a, a_bytes), (b, b_bytes)| b_bytes.cmp(a_bytes).then_with(|| a.cmp(b)));
}

/// Sites written as a JSON object, key to bytes, the largest first.
pub(crate) mod sites {
    use super::Sites;
    use std::collections::BTreeMap;

    pub(crate) fn serialize<S: serde::Serializer>(sites: &Sites, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(sites.iter().map(|(key, bytes)| (key, bytes)))
    }

    pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Sites, D::Error> {
        let map: BTreeMap<String, u64> = serde::Deserialize::deserialize(deserializer)?;
        let mut sites: Sites = map.into_iter().collect();
        super::sort_sites(&mut sites);
        Ok(sites)
    }
}

/// How a test ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TestOutcome {
    /// The test passed.
    Passed,
    /// The test failed (a failed assertion, a budget, an error returned).
    Failed,
    /// Killed by a signal (abort, segmentation fault, stack overflow, the OOM killer).
    Crashed,
    /// Ran past the timeout and was killed.
    TimedOut,
    /// Marked `#[ignore]` and not asked for.
    Ignored,
    /// Not started: an earlier test failed and fail-fast stopped the run.
    NotRun,
}

impl TestOutcome {
    /// Whether the outcome fails the run.
    pub fn is_failure(self) -> bool {
        matches!(self, Self::Failed | Self::Crashed | Self::TimedOut)
    }

    /// Its name: `passed`, `failed`, `crashed`, `timed-out`, `ignored`, `not-run`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::Crashed => "crashed",
            Self::TimedOut => "timed-out",
            Self::Ignored => "ignored",
            Self::NotRun => "not-run",
        }
    }
}

/// The gate's verdict on one leak test's figures against the baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GateVerdict {
    /// A gated figure grew past the tolerance, in the run and in every rerun that measured the test: the run fails.
    Regressed,
    /// A gated figure grew past the tolerance in some runs of the test and not in others: reported, and the run
    /// does not fail.
    Unstable,
    /// No gated figure moved past the tolerance.
    Unchanged,
    /// Retained memory shrank past the tolerance (or lost bytes past theirs), and no gated figure grew past it.
    Improved,
    /// The baseline does not have this test, or has it measured another way (its figures are totals where the
    /// test now has a steady state, or the reverse).
    New,
}

impl GateVerdict {
    /// Whether saving a baseline keeps the test's recorded entry rather than this run's figures: they did not move
    /// past the tolerance (or did only in some runs), so an unchanged run rewrites the baseline byte for byte.
    pub fn keeps_baseline_entry(self) -> bool {
        matches!(self, Self::Unchanged | Self::Unstable)
    }

    /// Its name: `regressed`, `unstable`, `unchanged`, `improved`, `new`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Regressed => "regressed",
            Self::Unstable => "unstable",
            Self::Unchanged => "unchanged",
            Self::Improved => "improved",
            Self::New => "new",
        }
    }
}
