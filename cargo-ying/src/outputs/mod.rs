//! What a run shows and writes, each from the run model: the terminal, the run's files (reports, flamegraphs,
//! summary.json, index.html), GitHub Actions' annotations and job summary, JUnit XML and libtest's JSON events; and
//! the listing of the tests a run would run.

pub(crate) mod artifacts;
pub(crate) mod flamegraph;
pub(crate) mod gate_table;
pub(crate) mod github;
pub(crate) mod html;
pub(crate) mod junit;
pub(crate) mod libtest_json;
pub(crate) mod list_json;
pub(crate) mod listing;
pub(crate) mod terminal;
