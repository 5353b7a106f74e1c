//! Poisson byte-interval sampling.
//!
//! Sample points fall on the stream of allocated bytes as a Poisson process with mean spacing `R` bytes. Each
//! thread keeps a countdown to its next point, drawn from an exponential distribution with mean `R`; an allocation
//! of `S` bytes is sampled when it crosses the countdown, which happens with probability `p = 1 - exp(-S/R)`.
//! Because the exponential distribution is memoryless, a fresh countdown drawn after each hit is exact: one random
//! draw per sample, no loop over the points a large allocation crosses. A sample then stands for `1/p` allocations
//! and `S/p` bytes (the estimator Go's and jemalloc's heap profiles use), kept fractional until output.
//! `R = 0` samples every allocation (`p = 1`).

use crate::base::thread::ThreadState;
use core::num::NonZeroUsize;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// The default mean sampling interval: 512 KiB, as jemalloc and Go.
pub const DEFAULT_SAMPLE_INTERVAL: usize = 512 * 1024;

/// The allocator's sampling interval, as last seen by a recorded allocation: the period of profiles.
static INTERVAL_IN_FORCE: AtomicUsize = AtomicUsize::new(DEFAULT_SAMPLE_INTERVAL);

/// Notes the allocator's sampling interval; called off the fast path, when an allocation is recorded.
pub(crate) fn note_interval(interval: usize) {
    if INTERVAL_IN_FORCE.load(Relaxed) != interval {
        INTERVAL_IN_FORCE.store(interval, Relaxed);
    }
}

/// The allocator's sampling interval, as last noted.
pub(crate) fn interval_in_force() -> usize {
    INTERVAL_IN_FORCE.load(Relaxed)
}

/// Seeds for threads' random state; each thread takes the next one.
static SEEDS: AtomicU64 = AtomicU64::new(0x853c_49e6_748f_ea9b);

/// SplitMix64 finaliser: spreads a counter into a well-mixed 64-bit value.
const fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform draw in (0, 1] from the thread's xorshift64* state.
fn uniform(thread: &ThreadState) -> f64 {
    let mut x = thread.rng.get();
    if x == 0 {
        x = mix(SEEDS.fetch_add(0x9e37_79b9_7f4a_7c15, Relaxed)) | 1;
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    thread.rng.set(x);
    let bits = x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11; // 53 random bits
    (bits as f64 + 1.0) / (1u64 << 53) as f64
}

/// Draws the distance to the next sample point for mean interval `interval`.
fn draw(thread: &ThreadState, interval: usize) -> i64 {
    let distance = -uniform(thread).ln() * interval as f64;
    // Rounded up: an allocation of S bytes is then sampled when ceil(X) <= S, that is X <= S, with probability
    // exactly 1 - exp(-S/R) (rounding down would make it 1 - exp(-(S+1)/R), biased for small sizes). Capped well
    // inside i64.
    distance.ceil().clamp(1.0, (i64::MAX / 4) as f64) as i64
}

/// Advances the thread's countdown by `size` bytes and reports whether this allocation is sampled.
#[inline]
pub(crate) fn should_sample(thread: &ThreadState, size: usize, interval: usize) -> bool {
    !passes(thread, size, interval) && sample_point(thread, size, interval)
}

/// The allocator's fast path: when the thread's countdown was drawn for `interval` and an allocation of `size`
/// bytes reaches no sample point, advances the countdown and returns true. Otherwise changes nothing and returns
/// false, and the allocation goes through [`should_sample`].
#[inline(always)]
pub(crate) fn passes(thread: &ThreadState, size: usize, interval: usize) -> bool {
    let left = thread.countdown.get() - size as i64;
    let passes = thread.interval.get() == interval && left > 0;
    if passes {
        thread.countdown.set(left);
    }
    passes
}

/// [`should_sample`] past the fast path: a sample point was reached, the interval changed, or it is 0.
#[cold]
fn sample_point(thread: &ThreadState, size: usize, interval: usize) -> bool {
    if interval == 0 {
        // Every allocation is sampled; the countdown stays at 0, so that every one comes here.
        thread.interval.set(0);
        thread.countdown.set(0);
        return true;
    }
    if thread.interval.get() != interval {
        // First allocation on this thread, or the interval changed: start a fresh countdown for it.
        thread.interval.set(interval);
        thread.countdown.set(draw(thread, interval));
    }
    let left = thread.countdown.get() - size as i64;
    if left > 0 {
        thread.countdown.set(left);
        return false;
    }
    thread.countdown.set(draw(thread, interval));
    true
}

/// How a recorded block came to be recorded, and so what it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Weight {
    /// Recorded with certainty (`p = 1`): its scope records every stack, or the interval was 0, which samples every
    /// allocation.
    Certain,
    /// Picked by the sampler at this mean interval: it stands for `1/p` blocks.
    Sampled(NonZeroUsize),
}

impl Weight {
    /// The weight of a block the sampler picked at mean interval `interval` (0: every allocation, certain).
    #[inline]
    pub(crate) const fn of_interval(interval: usize) -> Self {
        match NonZeroUsize::new(interval) {
            Some(interval) => Self::Sampled(interval),
            None => Self::Certain,
        }
    }

    /// The probability that a block of `size` bytes was recorded.
    pub(crate) fn probability(self, size: usize) -> f64 {
        match self {
            Self::Certain => 1.0,
            Self::Sampled(interval) => inclusion_probability(size, interval.get()),
        }
    }

    /// The bytes a recorded event of `size` bytes stands for: `size / p`, with no division for a certain one (a
    /// leak test's every realloc).
    #[inline]
    pub(crate) fn bytes_of(self, size: usize) -> f64 {
        match self {
            Self::Certain => size as f64,
            Self::Sampled(interval) => size as f64 / inclusion_probability(size, interval.get()),
        }
    }
}

const _: () = assert!(size_of::<Weight>() == size_of::<usize>(), "a weight is one word, as the interval was");

/// The probability that an allocation of `size` bytes is sampled at mean interval `interval`.
pub(crate) fn inclusion_probability(size: usize, interval: usize) -> f64 {
    if interval == 0 {
        return 1.0;
    }
    // 1 - exp(-x), computed without cancellation for small x.
    -(-(size as f64) / interval as f64).exp_m1()
}

#[cfg(test)]
mod tests {
    use super::{Weight, inclusion_probability, should_sample};
    use crate::base::thread::THREAD;

    #[test]
    fn a_recorded_event_stands_for_its_bytes_over_the_probability_it_was_recorded_with() {
        assert_eq!(Weight::Certain.bytes_of(4096).to_bits(), 4096.0f64.to_bits());
        let sampled = Weight::of_interval(512 * 1024);
        let p = inclusion_probability(4096, 512 * 1024);
        assert_eq!(sampled.bytes_of(4096).to_bits(), (4096.0 / p).to_bits());
        assert!(sampled.bytes_of(4096) > 4096.0 * 100.0, "one 4 KiB pick stands for about 128 such events' bytes");
        assert_eq!(Weight::of_interval(0).bytes_of(100).to_bits(), 100.0f64.to_bits());
    }

    #[test]
    fn sampling_rate_matches_inclusion_probability() {
        THREAD.with(|thread| {
            for (size, interval) in
                [(1usize, 64usize), (16, 256), (64, 4096), (768, 1024), (4096, 1024), (100_000, 1 << 19)]
            {
                let draws = 200_000;
                let hits = (0..draws).filter(|_| should_sample(thread, size, interval)).count();
                let p = inclusion_probability(size, interval);
                let expected = p * draws as f64;
                // Binomial standard deviation; 5 sigma keeps this deterministic in practice.
                let sigma = (expected * (1.0 - p)).sqrt();
                assert!(
                    (hits as f64 - expected).abs() <= 5.0 * sigma + 1.0,
                    "size {size}, interval {interval}: {hits} hits, expected {expected:.0} ± {sigma:.0}"
                );
            }
        });
    }

    #[test]
    fn zero_interval_samples_everything() {
        THREAD.with(|thread| assert!((0..1000).all(|_| should_sample(thread, 1, 0))));
        assert_eq!(inclusion_probability(1, 0), 1.0);
    }

    #[test]
    fn probability_is_exact_for_small_and_large_sizes() {
        assert!((inclusion_probability(768, 1024) - (1.0 - (-0.75f64).exp())).abs() < 1e-15);
        assert!((inclusion_probability(1, 1 << 30) - 1.0 / (1u64 << 30) as f64).abs() < 1e-18);
        assert_eq!(inclusion_probability(1 << 40, 1024), 1.0);
    }
}
