//! The allocation lifetime histogram: how long the sampled allocations of a stack lived before they were freed.

use std::time::Duration;

/// Upper bounds of the histogram buckets; the last bucket holds everything longer.
const BOUNDS: [Duration; 7] = [
    Duration::from_millis(1),
    Duration::from_millis(10),
    Duration::from_millis(100),
    Duration::from_secs(1),
    Duration::from_secs(10),
    Duration::from_secs(60),
    Duration::from_secs(600),
];

/// How long the freed allocations of a stack lived, estimated from its samples.
///
/// Each bucket holds the estimated number of allocations (fractional, like every estimate) whose lifetime fell
/// below the bucket's bound and at or above the previous one. Allocations still live are not in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LifetimeHistogram {
    counts: [f64; BOUNDS.len() + 1],
}

impl LifetimeHistogram {
    pub(crate) fn add(&mut self, lifetime: Duration, objects: f64) {
        let bucket = BOUNDS.iter().position(|&bound| lifetime < bound).unwrap_or(BOUNDS.len());
        self.counts[bucket] += objects;
    }

    /// The buckets in order: each bucket's upper bound (`None` for the last, unbounded one) and its estimated
    /// number of freed allocations.
    pub fn buckets(&self) -> impl ExactSizeIterator<Item = (Option<Duration>, f64)> + '_ {
        self.counts.iter().enumerate().map(|(i, &count)| (BOUNDS.get(i).copied(), count))
    }

    /// The estimated number of freed allocations in all buckets.
    pub fn total(&self) -> f64 {
        self.counts.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::LifetimeHistogram;
    use std::time::Duration;

    #[test]
    fn lifetimes_land_in_their_bucket() {
        let mut histogram = LifetimeHistogram::default();
        histogram.add(Duration::from_micros(10), 2.0);
        histogram.add(Duration::from_millis(50), 1.5);
        histogram.add(Duration::from_secs(3600), 1.0);
        let buckets: Vec<_> = histogram.buckets().collect();
        assert_eq!(buckets[0], (Some(Duration::from_millis(1)), 2.0));
        assert_eq!(buckets[2], (Some(Duration::from_millis(100)), 1.5));
        assert_eq!(buckets[7], (None, 1.0));
        assert_eq!(histogram.total(), 4.5);
    }
}
