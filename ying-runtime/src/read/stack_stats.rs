//! Per-stack estimates as the public API returns them ([`YingProfiler::top_k_stacks_by_retained`], ...): the
//! samples aggregated per stack, symbolised on demand.

use crate::base::ids::StackId;
use crate::base::raw::RawVec;
use crate::base::thread::as_profiler;
use crate::hot::allocator::YingProfiler;
use crate::hot::histogram::LifetimeHistogram;
use crate::hot::live::{self, LiveSample};
use crate::hot::stacks;
use crate::hot::stacks::Ips;
use crate::read::symbolize::symbolize;
use core::alloc::GlobalAlloc;
use ying_report::Frame;

/// Estimated allocations of one stack, from the samples.
///
/// Every figure is an estimate (each sample stands for `1/p` allocations and `S/p` bytes, `p` its inclusion
/// probability), kept fractional; round at display time.
#[derive(Clone, Debug, PartialEq)]
pub struct StackStats {
    frames: Vec<Frame>,
    retained_bytes: f64,
    retained_objects: f64,
    allocated_bytes: f64,
    allocated_objects: f64,
    lifetimes: LifetimeHistogram,
}

impl StackStats {
    /// Estimated bytes allocated from this stack that are still live.
    pub fn retained_bytes(&self) -> f64 {
        self.retained_bytes
    }

    /// Estimated number of allocations from this stack that are still live.
    pub fn retained_objects(&self) -> f64 {
        self.retained_objects
    }

    /// Estimated bytes allocated from this stack since the process started (growth by realloc included).
    pub fn allocated_bytes(&self) -> f64 {
        self.allocated_bytes
    }

    /// Estimated number of allocations made from this stack since the process started.
    pub fn allocated_objects(&self) -> f64 {
        self.allocated_objects
    }

    /// The symbolised frames, from the allocation site outwards: inlined frames expanded, the profiler's own
    /// frames and `<_ as Future>::poll` plumbing left out.
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// How long this stack's freed allocations lived.
    pub fn lifetime_histogram(&self) -> &LifetimeHistogram {
        &self.lifetimes
    }
}

/// The profiler's stacks, read: these methods of [`YingProfiler`] belong to the read side.
impl<A: GlobalAlloc> YingProfiler<A> {
    /// The `k` stacks that retain the most memory now (estimated from the samples), largest first.
    /// Symbols are resolved here, outside the allocator.
    pub fn top_k_stacks_by_retained(&self, k: usize) -> Vec<StackStats> {
        top_k(k, Order::Retained)
    }

    /// The `k` stacks that allocated the most bytes since the process started (estimated), largest first.
    pub fn top_k_stacks_by_allocated(&self, k: usize) -> Vec<StackStats> {
        top_k(k, Order::Allocated)
    }
}

/// How [`top_k`] ranks stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Order {
    Retained,
    Allocated,
}

/// A ranked stack, not symbolised yet.
pub(crate) struct Ranked {
    /// Its instruction pointers, innermost first.
    pub(crate) ips: Ips,
    /// Its estimates, without frames.
    pub(crate) stats: StackStats,
}

/// Every stack's estimates now, by stack index: what it allocated since the process started and what of it is
/// still live, fractional. Runs as the profiler, so its allocations are in no figure.
#[cfg(feature = "pprof")]
pub(crate) fn totals() -> Vec<(Ips, StackStats)> {
    as_profiler(|| {
        // Live samples first: a sample's stack is interned before its entry is inserted, so every stack the live
        // snapshot names is in the stack snapshot taken after it.
        let live = live::sampled();
        let records = stacks::snapshot();
        let stats = estimates(records.iter().map(|&(_, objects, bytes, lifetimes)| (objects, bytes, lifetimes)), live);
        records.iter().map(|record| record.0).zip(stats).collect()
    })
}

/// The estimates of the stacks whose figures are `figures` (by stack index, copied after `live` was): what each
/// allocated, and what of it the live samples say is still live.
fn estimates(
    figures: impl Iterator<Item = (f64, f64, LifetimeHistogram)>,
    live: RawVec<LiveSample>,
) -> Vec<StackStats> {
    let mut estimates: Vec<StackStats> = figures
        .map(|(allocated_objects, allocated_bytes, lifetimes)| StackStats {
            frames: Vec::new(),
            retained_bytes: 0.0,
            retained_objects: 0.0,
            allocated_bytes,
            allocated_objects,
            lifetimes,
        })
        .collect();
    for sample in live {
        let p = sample.weight.probability(sample.size);
        let stats = &mut estimates[sample.stack.index()];
        stats.retained_bytes += sample.size as f64 / p;
        stats.retained_objects += 1.0 / p;
    }
    estimates
}

/// The `k` largest stacks by each of `orders`, not symbolised: those of the first order, then those of the next that
/// are not among them already. Only the stacks kept are copied out of the stack table. Runs as the profiler, so its
/// allocations are in no figure.
pub(crate) fn ranked(k: usize, orders: &[Order]) -> Vec<Ranked> {
    as_profiler(|| {
        // Live samples first, as in `totals`.
        let live = live::sampled();
        let totals = estimates(stacks::figures().iter().copied(), live);
        let kept = top_indices(&totals, k, orders);
        kept.into_iter()
            .filter_map(|index| {
                let ips = stacks::ips(StackId::new(u32::try_from(index).ok()?))?;
                Some(Ranked { ips, stats: totals[index].clone() })
            })
            .collect()
    })
}

/// The indices of the `k` largest of `totals` by each of `orders`: those of the first order, then those of the next
/// that are not among them already. A stack with nothing to rank by (0 bytes) is left out.
fn top_indices(totals: &[StackStats], k: usize, orders: &[Order]) -> Vec<usize> {
    let mut kept: Vec<usize> = Vec::new();
    for &order in orders {
        let mut ranked: Vec<(usize, f64)> = totals
            .iter()
            .enumerate()
            .map(|(i, stats)| match order {
                Order::Retained => (i, stats.retained_bytes),
                Order::Allocated => (i, stats.allocated_bytes),
            })
            .filter(|&(_, key)| key > 0.0)
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(k);
        for (index, _) in ranked {
            if !kept.contains(&index) {
                kept.push(index);
            }
        }
    }
    kept
}

/// The `k` largest stacks by `order`, symbolised. Runs as the profiler, so its allocations are in no figure.
pub(crate) fn top_k(k: usize, order: Order) -> Vec<StackStats> {
    as_profiler(|| {
        ranked(k, &[order])
            .into_iter()
            .map(|ranked| StackStats { frames: symbolize(&ranked.ips), ..ranked.stats })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::{Order, StackStats, top_indices};

    fn stats(allocated_bytes: f64, retained_bytes: f64) -> StackStats {
        StackStats {
            frames: Vec::new(),
            retained_bytes,
            retained_objects: 0.0,
            allocated_bytes,
            allocated_objects: 0.0,
            lifetimes: Default::default(),
        }
    }

    #[test]
    fn the_top_stacks_of_each_order_are_kept_once_the_first_orders_first() {
        let totals = [stats(10.0, 0.0), stats(50.0, 5.0), stats(30.0, 40.0), stats(0.0, 90.0), stats(20.0, 0.0)];
        assert_eq!(top_indices(&totals, 2, &[Order::Allocated]), [1, 2]);
        assert_eq!(top_indices(&totals, 2, &[Order::Retained]), [3, 2]);
        // Stack 2 is in both: kept once, where the allocated order put it.
        assert_eq!(top_indices(&totals, 2, &[Order::Allocated, Order::Retained]), [1, 2, 3]);
        assert_eq!(top_indices(&totals, 9, &[Order::Retained]), [3, 2, 1], "stacks with nothing retained are left out");
    }
}
