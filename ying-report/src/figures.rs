//! [`Figures`]: the exact figures of a leak test that summaries show, baselines keep and the gate compares.

use crate::report::LeakReport;

/// A leak test's exact figures, as judged: retained bytes leave out what the test excused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Figures {
    /// Retained bytes as the budget judges them (excused memory left out).
    pub retained_bytes: u64,
    /// Peak bytes held at once.
    pub peak_bytes: u64,
    /// Bytes allocated.
    pub allocated_bytes: u64,
    /// Allocations made.
    pub allocations: u64,
}

impl Figures {
    /// The figures of a report.
    pub fn of(report: &LeakReport) -> Self {
        Self {
            retained_bytes: report.judged_retained_bytes(),
            peak_bytes: report.figures.peak_bytes,
            allocated_bytes: report.figures.allocated_bytes,
            allocations: report.figures.allocations,
        }
    }

    /// One figure.
    pub fn get(&self, figure: Figure) -> u64 {
        match figure {
            Figure::Retained => self.retained_bytes,
            Figure::Peak => self.peak_bytes,
            Figure::Allocated => self.allocated_bytes,
            Figure::Allocations => self.allocations,
        }
    }
}

/// One of the [`Figures`]: what the gate can compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Figure {
    /// Bytes the test left allocated.
    Retained,
    /// Bytes the test held at once.
    Peak,
    /// Bytes the test allocated.
    Allocated,
    /// Allocations the test made.
    Allocations,
}

impl Figure {
    /// Every figure, in the order tables show them.
    pub const ALL: [Figure; 4] = [Self::Retained, Self::Peak, Self::Allocated, Self::Allocations];

    /// Its key in configuration and on the command line: `retained`, `peak`, `allocated`, `allocations`.
    pub fn key(self) -> &'static str {
        match self {
            Self::Retained => "retained",
            Self::Peak => "peak",
            Self::Allocated => "allocated",
            Self::Allocations => "allocations",
        }
    }

    /// Its name in tables and messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Retained => "retained bytes",
            Self::Peak => "peak bytes",
            Self::Allocated => "allocated bytes",
            Self::Allocations => "allocations",
        }
    }

    /// Whether it counts bytes (rather than allocations).
    pub fn is_bytes(self) -> bool {
        self != Self::Allocations
    }
}
