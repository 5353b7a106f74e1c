//! The house's own rules, checked as tests: a development crate of the workspace, never published and depended on
//! by no other crate.
//!
//! The first rule is the layering of every crate: each file of a crate's `src/` stands on a floor of the crate's
//! table ([`floors`]), no import runs up to a higher floor, no files import one another in a circle (the files of
//! one floor included), and a crate's own rules hold (imports it never allows, folders whose files stay apart).
//!
//! - [`source`]: a file's code, comments and literals blanked, with its test modules and inline modules;
//! - [`modules`]: the files of a crate's `src/` as modules;
//! - [`paths`]: the paths of a file that name a module file of its crate: its imports;
//! - [`graph`]: the circles of a crate's file graph;
//! - [`table`]: how a table is written, and [`floors`]: the tables, one per member of the workspace;
//! - [`check`]: the rules, checked on one crate, each breach one line;
//! - [`workspace`]: every member of the workspace checked against its table.

pub mod check;
pub mod floors;
pub mod graph;
pub mod modules;
pub mod paths;
pub mod source;
pub mod table;
pub mod workspace;
