//! Every member of the workspace against its table: its files on floors, no import running up, no circle between
//! files, and its own rules.

use std::path::Path;

use ying_house::floors::TABLES;
use ying_house::workspace::check_workspace;

#[test]
fn every_crate_stands_on_its_floors_with_no_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the crate lies in the workspace");
    let breaches = check_workspace(root, &TABLES).unwrap_or_else(|error| panic!("{error}"));
    let lines: Vec<String> = breaches.iter().map(ToString::to_string).collect();
    assert!(breaches.is_empty(), "the layering is broken:\n{}", lines.join("\n"));
}
