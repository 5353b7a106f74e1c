//! A test executable, open and mapped for reading: what every reader of one executable's bytes starts from (its
//! symbols and debug information when its stacks are named, its codegen units, the code its runtime knows by
//! address, whether it loads a preloaded library).

use std::path::Path;

/// The test executable at `executable`, open and mapped for reading.
pub(crate) fn map_executable(executable: &Path) -> Option<(std::fs::File, memmap2::Mmap)> {
    let file = std::fs::File::open(executable).ok()?;
    // SAFETY: a read-only private mapping of a test executable, which nothing writes while the run goes on (cargo
    // builds it before, and a running executable cannot be written); the bytes are only read, and a truncated file
    // at worst fails to parse.
    let bytes = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    Some((file, bytes))
}
