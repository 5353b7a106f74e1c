//! The house's own rules, checked as tests: a development crate of the workspace, never published and depended on
//! by no other crate.
