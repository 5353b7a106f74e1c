//! [`Figures`]: the exact figures of a leak test that summaries show, baselines keep and the gate compares.

use crate::report::{LeakReport, TaskKind};

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
    /// Retained bytes that nothing reaches any more ([`LeakReport::lost_bytes`]: lost, or in a cycle of lost
    /// blocks), excused memory left out; part of `retained_bytes`. 0 when the test's memory was not scanned.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost_bytes: u64,
    /// Retained bytes a static or a thread-local holds ([`LeakReport::held_bytes`]), excused memory left out; part
    /// of `retained_bytes`. 0 when the test's memory was not scanned.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub held_bytes: u64,
    /// Async tasks the body left leaked ([`LeakReport::tasks`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub leaked_tasks: u64,
    /// Async tasks the body left lingering.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lingering_tasks: u64,
    /// Async tasks the body left unclaimed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unclaimed_tasks: u64,
}

/// Whether a figure is 0, which the files leave out.
fn is_zero(bytes: &u64) -> bool {
    *bytes == 0
}

impl Figures {
    /// The figures of a report.
    pub fn of(report: &LeakReport) -> Self {
        Self {
            retained_bytes: report.judged_retained_bytes(),
            peak_bytes: report.figures.peak_bytes,
            allocated_bytes: report.figures.allocated_bytes,
            allocations: report.figures.allocations,
            lost_bytes: report.lost_bytes(),
            held_bytes: report.held_bytes(),
            leaked_tasks: tasks(report, TaskKind::Leaked),
            lingering_tasks: tasks(report, TaskKind::Lingering),
            unclaimed_tasks: tasks(report, TaskKind::Unclaimed),
        }
    }

    /// The steady state of a report of several measured runs (`iterations`): the smallest figures of one measured
    /// run (for retained bytes, the smallest growth of the live heap, excused memory left out, 0 at least) and the
    /// peak of the runs as a whole. A one-time event in one run (a table resized, a cache filled) cannot move it; a
    /// leak in every run always does. Lost and held bytes are those of the runs together: what nothing reaches is found once,
    /// at the end of the test, and is a leak whichever run made it. `None` for a report of one measured run.
    pub fn steady_state(report: &LeakReport) -> Option<Self> {
        if report.iterations < 2 || report.per_iteration.len() < 2 {
            return None;
        }
        let runs = &report.per_iteration;
        let smallest = |figure: fn(&crate::report::IterationFigures) -> u64| runs.iter().map(figure).min();
        Some(Self {
            retained_bytes: smallest(|run| run.growth.max(0) as u64)?,
            peak_bytes: report.figures.peak_bytes,
            allocated_bytes: smallest(|run| run.allocated_bytes)?,
            allocations: smallest(|run| run.allocations)?,
            lost_bytes: report.lost_bytes(),
            held_bytes: report.held_bytes(),
            // The tasks the last measured run's body left: one run's, as the steady state is.
            leaked_tasks: tasks(report, TaskKind::Leaked),
            lingering_tasks: tasks(report, TaskKind::Lingering),
            unclaimed_tasks: tasks(report, TaskKind::Unclaimed),
        })
    }

    /// The tasks the body left, in words, leaked first: `1 leaked, 2 lingering`; empty when it left none.
    ///
    /// ```
    /// # use ying_report::Figures;
    /// let figures = Figures { leaked_tasks: 1, unclaimed_tasks: 2, ..Figures::default() };
    /// assert_eq!(figures.tasks_in_words(), "1 leaked, 2 unclaimed");
    /// ```
    pub fn tasks_in_words(&self) -> String {
        let counts =
            [(self.leaked_tasks, "leaked"), (self.lingering_tasks, "lingering"), (self.unclaimed_tasks, "unclaimed")];
        let words: Vec<String> =
            counts.iter().filter(|(count, _)| *count > 0).map(|(count, word)| format!("{count} {word}")).collect();
        words.join(", ")
    }

    /// One figure.
    pub fn get(&self, figure: Figure) -> u64 {
        match figure {
            Figure::Retained => self.retained_bytes,
            Figure::Lost => self.lost_bytes,
            Figure::Held => self.held_bytes,
            Figure::Peak => self.peak_bytes,
            Figure::Allocated => self.allocated_bytes,
            Figure::Allocations => self.allocations,
            Figure::LeakedTasks => self.leaked_tasks,
            Figure::LingeringTasks => self.lingering_tasks,
            Figure::UnclaimedTasks => self.unclaimed_tasks,
        }
    }
}

/// How many of the tasks `report` lists are of `kind`.
fn tasks(report: &LeakReport, kind: TaskKind) -> u64 {
    report.tasks.iter().filter(|task| task.kind == kind).count() as u64
}

/// One of the [`Figures`]: what the gate can compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Figure {
    /// Bytes the test left allocated.
    Retained,
    /// Bytes the test left allocated that nothing reaches any more (lost, or in a cycle of lost blocks).
    Lost,
    /// Bytes the test left allocated that a static or a thread-local holds.
    Held,
    /// Bytes the test held at once.
    Peak,
    /// Bytes the test allocated.
    Allocated,
    /// Allocations the test made.
    Allocations,
    /// Async tasks the test's body left leaked.
    LeakedTasks,
    /// Async tasks the test's body left lingering.
    LingeringTasks,
    /// Async tasks the test's body left unclaimed.
    UnclaimedTasks,
}

impl Figure {
    /// Every figure, in the order tables show them.
    pub const ALL: [Figure; 9] = [
        Self::Retained,
        Self::Lost,
        Self::Held,
        Self::Peak,
        Self::Allocated,
        Self::Allocations,
        Self::LeakedTasks,
        Self::LingeringTasks,
        Self::UnclaimedTasks,
    ];

    /// The counts of tasks, by kind: gated always, without tolerance.
    pub const TASKS: [Figure; 3] = [Self::LeakedTasks, Self::LingeringTasks, Self::UnclaimedTasks];

    /// Its key in configuration and on the command line: `retained`, `lost`, `held`, `peak`, `allocated`,
    /// `allocations`.
    pub fn key(self) -> &'static str {
        match self {
            Self::Retained => "retained",
            Self::Lost => "lost",
            Self::Held => "held",
            Self::Peak => "peak",
            Self::Allocated => "allocated",
            Self::Allocations => "allocations",
            Self::LeakedTasks => "leaked-tasks",
            Self::LingeringTasks => "lingering-tasks",
            Self::UnclaimedTasks => "unclaimed-tasks",
        }
    }

    /// Its name in tables and messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Retained => "retained bytes",
            Self::Lost => "lost bytes",
            Self::Held => "held bytes",
            Self::Peak => "peak bytes",
            Self::Allocated => "allocated bytes",
            Self::Allocations => "allocations",
            Self::LeakedTasks => "leaked tasks",
            Self::LingeringTasks => "lingering tasks",
            Self::UnclaimedTasks => "unclaimed tasks",
        }
    }

    /// Whether it counts bytes (rather than allocations or tasks).
    pub fn is_bytes(self) -> bool {
        !matches!(self, Self::Allocations | Self::LeakedTasks | Self::LingeringTasks | Self::UnclaimedTasks)
    }

    /// Whether it counts tasks ([`Self::TASKS`]).
    pub fn is_tasks(self) -> bool {
        Self::TASKS.contains(&self)
    }
}

#[cfg(test)]
mod tests {
    use super::Figures;
    use crate::baseline::BaselineEntry;
    use crate::report::{
        Attribution, Budgets, IterationFigures, LeakReport, Reach, RetainedSite, ScopeStats, TestIdentity, Why,
    };

    /// A report of measured runs that grew the heap by `growths`, each allocating 100 B more than it grew.
    fn report(growths: &[i64]) -> LeakReport {
        let identity = TestIdentity::new("p", None, "steady", "t", "tests/steady.rs", 1);
        let mut report = LeakReport::new(identity, Attribution::Process, Budgets::default());
        report.iterations = growths.len() as u32;
        report.figures.peak_bytes = 50_000;
        report.figures.retained_bytes = growths.iter().sum::<i64>().max(0) as u64;
        report.per_iteration = growths
            .iter()
            .map(|&growth| {
                let (start, mut end) = (ScopeStats::default(), ScopeStats::default());
                end.allocated_bytes = (growth + 100) as u64;
                end.allocations = 2;
                end.freed_bytes = 100;
                IterationFigures::between(&start, &end, 0)
            })
            .collect();
        report
    }

    #[test]
    fn the_steady_state_is_what_one_run_cannot_move_and_a_leak_in_every_run_does() {
        let resized_once = Figures::steady_state(&report(&[0, 18_448, 0, 0])).unwrap();
        assert_eq!((resized_once.retained_bytes, resized_once.allocated_bytes), (0, 100));
        assert_eq!((resized_once.allocations, resized_once.peak_bytes), (2, 50_000));
        let leaking = Figures::steady_state(&report(&[4096, 22_544, 4096, 4096])).unwrap();
        assert_eq!(leaking.retained_bytes, 4096);
        assert_eq!(Figures::steady_state(&report(&[-50, 0])).unwrap().retained_bytes, 0, "a shrink is no growth");
        assert_eq!(Figures::steady_state(&report(&[1000])), None, "one measured run has no steady state");

        let entry = BaselineEntry::of(&report(&[0, 18_448, 0, 0]), Vec::new());
        assert!(entry.steady_state && entry.retained_bytes == 0);
        assert_eq!(entry.held_bytes, None, "what statics keep is judged by the steady state");
        let single = BaselineEntry::of(&report(&[1000]), Vec::new());
        assert!(!single.steady_state && single.retained_bytes == 1000);
    }

    #[test]
    fn lost_bytes_are_what_nothing_reaches_in_the_sites_not_excused_in_totals_and_steady_state_alike() {
        let why = |kind, bytes| Why { kind, root: None, bytes, blocks: 1 };
        let site = |excused, why: Vec<Why>| {
            let mut site = RetainedSite::new(why.iter().map(|why| why.bytes).sum(), 1, excused, Vec::new());
            site.why = why;
            site
        };
        let mut report = report(&[4096, 4096]);
        report.retained_sites = vec![
            site(false, vec![why(Reach::Static, 24_000), why(Reach::Lost, 512)]),
            site(false, vec![why(Reach::Cycle, 96)]),
            site(true, vec![why(Reach::Lost, 7)]),
        ];
        assert_eq!(Figures::of(&report).lost_bytes, 608);
        assert_eq!(Figures::steady_state(&report).unwrap().lost_bytes, 608);
        assert_eq!(BaselineEntry::of(&report, Vec::new()).lost_bytes, Some(608));
        assert_eq!(Figures::of(&report).get(super::Figure::Lost), 608);
    }
}
