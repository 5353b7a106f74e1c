//! The type each retained site allocated, named by cargo ying from the test executable's debug information: in the
//! report, and in the lines a regression lists its grown sites with.

use super::{Fixture, REGRESSED, entry, stderr, summary};
use ying_report::report::LeakReport;
use ying_report::{TargetKind, TestId};

/// A test file added to the plain fixture: each test leaks one kind of allocation of a known type.
const TYPED: &str = r#"
use std::cell::RefCell;
use std::hint::black_box;
use std::rc::Rc;

pub struct Session {
    pub id: u64,
    pub name: String,
}

#[test]
fn leaks_a_session() {
    Box::leak(black_box(Box::new(Session { id: 7, name: String::new() })));
}

#[test]
fn forgets_a_buffer() {
    std::mem::forget(black_box(Vec::<u8>::with_capacity(2048)));
}

#[test]
fn leaks_a_string() {
    Box::leak(black_box(format!("session-{}", 7)).into_boxed_str());
}

pub struct Node {
    pub next: Option<Rc<RefCell<Node>>>,
}

#[test]
fn makes_a_cycle() {
    let a = Rc::new(RefCell::new(Node { next: None }));
    let b = Rc::new(RefCell::new(Node { next: Some(Rc::clone(&a)) }));
    a.borrow_mut().next = Some(b);
}
"#;

/// The types of the sites `test` of the `typed` target retained (excused ones left out) in the last run in
/// `fixture`, from its report.
fn site_types(fixture: &Fixture, test: &str) -> Vec<Option<String>> {
    let summary = summary(&fixture.target_dir());
    let entry = entry(&summary, "typed", test);
    let id = TestId::new("plain-fixtures", TargetKind::Test, "typed", test);
    let report =
        LeakReport::read(&fixture.target_dir().join("ying").join(entry["report"].as_str().unwrap()), &id).unwrap();
    report.retained_sites.iter().filter(|site| !site.excused).map(|site| site.type_name.clone()).collect()
}

#[test]
fn each_retained_site_names_the_type_it_allocated() {
    let fixture = Fixture::plain();
    let tests = fixture.path().join("tests/typed.rs");
    std::fs::write(&tests, TYPED).unwrap();
    let output = fixture.cargo_ying(&["--measure", "all", "--test", "typed", "--save-baseline"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));

    let typed = |name: &str| Some(name.to_owned());
    assert_eq!(site_types(&fixture, "leaks_a_session"), [typed("typed::Session")]);
    assert_eq!(site_types(&fixture, "forgets_a_buffer"), [typed("u8")]);
    assert_eq!(site_types(&fixture, "leaks_a_string"), [typed("u8")]);
    // Two `Rc`s of one type, allocated at two lines: the value each count holds, not the box of its counts.
    assert_eq!(site_types(&fixture, "makes_a_cycle"), vec![typed("core::cell::RefCell<typed::Node>"); 2]);

    // A grown site is listed with its type.
    let grown = TYPED.replacen("with_capacity(2048)", "with_capacity(8192)", 1);
    std::fs::write(&tests, grown).unwrap();
    let output = fixture.cargo_ying(&["--measure", "all", "--test", "typed"], &[]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), REGRESSED, "the gate fails the run\n{stderr}");
    let line =
        stderr.lines().find(|line| line.contains("in typed::forgets_a_buffer")).unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains(" in 1 block of u8, "), "{line}");
}
