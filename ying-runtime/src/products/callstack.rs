//! What the profiler's reports and flamegraphs measure (module path kept from the seed `ying_profiler` crate).

/// The figure a report or flamegraph ranks stacks by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Measurement {
    /// Bytes allocated and still live (the default: what leaks and OOMs are made of).
    #[default]
    RetainedBytes,
    /// Bytes allocated since the process started, freed or not.
    AllocatedBytes,
}
