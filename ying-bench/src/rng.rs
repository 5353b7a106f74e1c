//! The generator every workload draws its sizes, lengths and words from.

/// xorshift64*: deterministic sizes and lengths, the same in every configuration.
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    /// The next number.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// The next number below `bound`.
    pub(crate) fn below(&mut self, bound: u64) -> usize {
        (self.next() % bound) as usize
    }
}
