//! The products built on the layers below: the runner behind `#[ying::leak_test]` (`leak_test`), [`measure`]
//! (`measure`), the report a leak test writes (`report`), pprof sessions (`session`, `pprof`), the production
//! profiler of the seed crate (`utils`, `callstack`) and the `tracing` layer that records spans with stacks
//! (`spans`). The public modules among them are re-exported at the crate root, where their paths have always been.
//!
//! [`measure`]: crate::measure

pub mod callstack;
pub(crate) mod leak_test;
pub(crate) mod measure;
#[cfg(feature = "pprof")]
pub(crate) mod pprof;
pub mod report;
#[cfg(feature = "pprof")]
pub(crate) mod session;
#[cfg(feature = "profile-spans")]
pub mod spans;
#[cfg(feature = "profiler")]
pub mod utils;
