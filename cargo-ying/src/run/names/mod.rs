//! Naming the stacks a test's report left as addresses: the [`Symbolizer`](symbols::Symbolizer) is the face
//! ([`symbols`]: each executable's debug information loaded once, the frames named kept for the next run by
//! [`symbol_cache`], the code executables share named once a run by [`code_units`]), reading the types retained
//! sites allocated with [`types`]; [`executable`] opens and maps a test executable for all of them.

pub(crate) mod code_units;
pub(crate) mod executable;
pub(crate) mod symbol_cache;
pub(crate) mod symbols;
pub(crate) mod types;
