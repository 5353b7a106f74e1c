//! Reference cycles of known shape (`fixtures/leak-tests/tests/cycles.rs`): the field each report says to make `Weak`
//! is the one its fixed variant made `Weak`, every fixed variant retains nothing, and index.html draws each cycle.

use super::{Fixture, entry, stderr, summary};
use std::path::Path;

/// Each shape's leak test, and the fields its cycles are to make `Weak`: `(type, field)`, one a cycle.
const SHAPES: &[(&str, &[(&str, &str)])] = &[
    ("tree", &[("cycles::TreeNode", "parent")]),
    ("doubly_linked_list", &[("cycles::ListNode", "prev")]),
    ("observer_registry", &[("cycles::Observer", "registry")]),
    ("self_loop", &[("cycles::Peer", "links[]")]),
    ("arc_mutex_ring", &[("cycles::RingNode", "next")]),
    ("closure_capturing_its_owner", &[("cycles::closure_capturing_its_owner::{closure}", "owner")]),
    ("index_and_shards", &[("cycles::Shard", "index")]),
    ("two_cycles", &[("cycles::Partner", "other"), ("cycles::Partner", "other")]),
    ("lost_without_a_cycle", &[]),
];

/// The report of the fixture's test `name`, from summary.json's path to it (under `ying/` of the target
/// directory `target`).
fn report(target: &Path, summary: &serde_json::Value, name: &str) -> serde_json::Value {
    let path = entry(summary, "cycles", name)["report"].as_str().unwrap_or_else(|| panic!("{name} has a report"));
    serde_json::from_slice(&std::fs::read(target.join("ying").join(path)).unwrap()).unwrap()
}

#[test]
fn each_cycle_names_the_field_its_fix_made_weak_and_each_fixed_variant_retains_nothing() {
    let fixture = Fixture::shared();
    let output = fixture.cargo_ying(&["--test", "cycles", "-j", "2"], &[]);
    assert_eq!(output.status.code(), Some(0), "every shape allows its leak: {}", stderr(&output));
    let summary = summary(&fixture.target_dir());
    for &(shape, fields) in SHAPES {
        let report = report(&fixture.target_dir(), &summary, shape);
        let cycles = report["cycles"].as_array().map(Vec::as_slice).unwrap_or_default();
        let named: Vec<(String, String)> = cycles
            .iter()
            .flat_map(|cycle| cycle["make_weak"].as_array().unwrap().iter())
            .map(|field| (field["from"].as_str().unwrap().to_owned(), field["field"].as_str().unwrap().to_owned()))
            .collect();
        let wanted: Vec<(String, String)> =
            fields.iter().map(|&(from, field)| (from.to_owned(), field.to_owned())).collect();
        assert_eq!(named, wanted, "{shape}: {cycles:#?}");
        for cycle in cycles {
            // Made `Weak`, the field frees the whole cycle: the bytes of its blocks, and no more than what is lost.
            let (bytes, freed) = (cycle["bytes"].as_u64().unwrap(), cycle["freed_if_weak"].as_u64().unwrap());
            assert!(bytes > 0 && freed >= bytes, "{shape}: {cycle:#}");
            assert!(freed <= report["figures"]["retained_bytes"].as_u64().unwrap(), "{shape}: {cycle:#}");
        }
        let fixed = format!("{shape}_fixed");
        let test = entry(&summary, "cycles", &fixed);
        assert_eq!((test["outcome"].as_str(), test["retained_bytes"].as_u64()), (Some("passed"), Some(0)), "{fixed}");
    }
    // index.html draws each cycle once, the field to make `Weak` dashed; summary.json lists them.
    let index = std::fs::read_to_string(fixture.target_dir().join("ying/index.html")).unwrap();
    let cycles: usize = SHAPES.iter().map(|(_, fields)| fields.len()).sum();
    assert_eq!(index.matches("<svg class=\"cycle\"").count(), cycles);
    assert_eq!(index.matches("class=\"edge weak\"").count(), cycles);
    assert_eq!(entry(&summary, "cycles", "two_cycles")["cycles"].as_array().map(Vec::len), Some(2));
    // A cycle already weakened leaves nothing.
    let weakened = entry(&summary, "cycles", "weakened_cycle");
    assert_eq!((weakened["outcome"].as_str(), weakened["retained_bytes"].as_u64()), (Some("passed"), Some(0)));
}
