//! What a run shows and writes, each from the run model: the terminal, the run's files (reports, flamegraphs,
//! summary.json, index.html), GitHub Actions' annotations and job summary, and JUnit XML; and the listing of the
//! tests a run would run.

pub mod artifacts;
pub mod flamegraph;
pub mod gate_table;
pub mod github;
pub mod html;
pub mod junit;
pub mod listing;
pub mod terminal;
