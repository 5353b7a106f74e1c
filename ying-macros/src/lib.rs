//! Procedural macros of ying. Depend on `ying-runtime` and use them through it (`ying::leak_test`); this crate
//! holds the compile-time half only.
//!
//! It holds no macro yet: `#[ying::leak_test]` is the next piece of the project to land here.
