//! Why retained memory is still there: leak tests of known cause, each run alone in a child process with a report
//! directory, and the kind (and root) the report gives the site of each leaked buffer, told apart by its size; and
//! the type each site allocated, which the test process names from its own debug information.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hint::black_box;
use std::path::Path;
use std::process::{Command, Output};
use std::rc::Rc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use ying::report::{LeakReport, Reach, RetainedSite};

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new();

#[ying::leak_test]
#[ignore = "run in a child process"]
fn forgotten_buffer() {
    std::mem::forget(black_box(vec![0u8; 513]));
}

/// What a leaked `Box<Session>` holds.
struct Session {
    id: u64,
    _name: [u8; 509],
}

#[ying::leak_test]
#[ignore = "run in a child process"]
fn leaked_box_whose_reference_is_dropped() {
    let session: &'static mut Session = Box::leak(black_box(Box::new(Session { id: 7, _name: [0; 509] })));
    assert_eq!(black_box(session).id, 7);
}

static CACHE: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

#[ying::leak_test]
#[ignore = "run in a child process"]
fn pushed_into_a_static() {
    CACHE.lock().unwrap().push(black_box(vec![0u8; 1531]));
}

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

#[ying::leak_test]
#[ignore = "run in a child process"]
fn thread_local_grown() {
    SCRATCH.with(|scratch| scratch.borrow_mut().extend_from_slice(&[1u8; 2045]));
}

/// A node of a reference cycle.
struct Node {
    _payload: Vec<u8>,
    next: Option<Rc<RefCell<Node>>>,
}

#[ying::leak_test]
#[ignore = "run in a child process"]
fn reference_cycle() {
    let first = Rc::new(RefCell::new(Node { _payload: vec![0; 777], next: None }));
    let second = Rc::new(RefCell::new(Node { _payload: vec![0; 778], next: Some(Rc::clone(&first)) }));
    first.borrow_mut().next = Some(second);
}

/// A node of a singly linked list.
struct ListNode {
    _value: u64,
    _next: Option<Box<ListNode>>,
}

#[ying::leak_test]
#[ignore = "run in a child process"]
fn list_forgotten_whole() {
    let mut head: Option<Box<ListNode>> = None;
    for value in 0..1000 {
        head = Some(Box::new(ListNode { _value: value, _next: head }));
    }
    std::mem::forget(black_box(head));
}

/// A tree's node that holds its parent as strongly as its children.
#[expect(dead_code, reason = "its parent is held, never read: the cycle is the test")]
struct TreeNode {
    _name: String,
    parent: RefCell<Option<Rc<TreeNode>>>,
    children: RefCell<Vec<Rc<TreeNode>>>,
}

#[ying::leak_test]
#[ignore = "run in a child process"]
fn tree_whose_children_hold_their_parent() {
    let root = Rc::new(TreeNode { _name: "root".into(), parent: RefCell::new(None), children: RefCell::default() });
    for name in ["a", "b", "c"] {
        let child = Rc::new(TreeNode {
            _name: name.into(),
            parent: RefCell::new(Some(Rc::clone(&root))),
            children: RefCell::default(),
        });
        root.children.borrow_mut().push(child);
    }
}

/// A window whose close callback may capture it.
struct Window {
    on_close: RefCell<Option<Box<dyn Fn()>>>,
}

#[ying::leak_test]
#[ignore = "run in a child process"]
fn callback_capturing_its_window() {
    let window = Rc::new(Window { on_close: RefCell::new(None) });
    let captured = Rc::clone(&window);
    *window.on_close.borrow_mut() = Some(Box::new(move || {
        black_box(black_box(&captured).on_close.borrow().is_some());
    }));
}

#[ying::leak_test(attribution = "process")]
#[ignore = "run in a child process"]
fn held_by_a_thread_that_never_ends() {
    let (started, wait) = std::sync::mpsc::sync_channel(0);
    std::thread::Builder::new()
        .name("keeper".to_owned())
        .spawn(move || {
            let held = black_box(vec![1u8; 3067]);
            started.send(()).unwrap();
            loop {
                std::thread::park();
                black_box(&held);
            }
        })
        .unwrap();
    wait.recv().unwrap();
}

static TABLE: Mutex<Option<HashMap<u32, String>>> = Mutex::new(None);

/// The table is made (with room to spare) in the warm-up run; the measured run stores an entry in it.
#[ying::leak_test(warmup = 1, iterations = 1, max_retained = "0")]
#[ignore = "run in a child process"]
fn stored_in_a_table_made_before_the_test() {
    let mut table = TABLE.lock().unwrap();
    let table = table.get_or_insert_with(|| HashMap::with_capacity(64));
    let key = table.len() as u32;
    table.insert(key, black_box("x".repeat(4093)));
}

/// A table, and blocks beside it that make the heap large.
type TableAndBallast = (HashMap<u32, String>, Vec<Vec<u8>>);

static LARGE_TABLE: Mutex<Option<TableAndBallast>> = Mutex::new(None);

/// [`stored_in_a_table_made_before_the_test`] on a heap of over 8 MiB, which the scan reads a buffer at a time
/// rather than copy.
#[ying::leak_test(warmup = 1, iterations = 1, max_retained = "0")]
#[ignore = "run in a child process"]
fn stored_in_a_table_made_before_the_test_on_a_large_heap() {
    let mut table = LARGE_TABLE.lock().unwrap();
    let (table, ballast) =
        table.get_or_insert_with(|| (HashMap::with_capacity(64), (0..600).map(|_| vec![1u8; 16 << 10]).collect()));
    black_box(ballast);
    let key = table.len() as u32;
    table.insert(key, black_box("x".repeat(4091)));
}

/// What a leaked `Arc<Ticket>` holds.
struct Ticket {
    _payload: [u8; 1000],
}

/// Leaks one allocation of each of the standard library's other allocating generics, told apart by their sizes.
#[ying::leak_test]
#[ignore = "run in a child process"]
fn leaked_of_each_kind() {
    std::mem::forget(black_box(std::sync::Arc::new(Ticket { _payload: [0; 1000] })));
    std::mem::forget(black_box(std::collections::VecDeque::<u32>::with_capacity(300)));
    Box::leak(black_box(Box::new([0u16; 650])));
    std::mem::forget(black_box(String::with_capacity(1111)));
}

/// A word that hides an address from the scan: a static holding `address ^ HIDDEN` is no reference.
const HIDDEN: usize = 0x5a5a_5a5a_5a5a_5a5a;
/// The address of [`forgotten_beside_a_neighbour`]'s lost block, hidden, once it is lost.
static LOST_ADDRESS: AtomicUsize = AtomicUsize::new(0);
/// [`neighbour_holding_an_address`] holds the address on its stack.
static ADDRESS_HELD: AtomicBool = AtomicBool::new(false);

/// Loses a block while [`neighbour_holding_an_address`], another leak test of the process, holds a copy of its
/// address on its stack (as a stale word on a neighbour's stack would).
#[ying::leak_test]
#[ignore = "run in a child process"]
fn forgotten_beside_a_neighbour() {
    let lost = black_box(vec![0u8; 2063]);
    LOST_ADDRESS.store(lost.as_ptr().addr() ^ HIDDEN, Ordering::Release);
    std::mem::forget(lost);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ADDRESS_HELD.load(Ordering::Acquire) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Holds the address of [`forgotten_beside_a_neighbour`]'s lost block on its stack, waiting in a system call, until
/// that test has written its report.
#[ying::leak_test]
#[ignore = "run in a child process"]
fn neighbour_holding_an_address() {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut hidden = 0;
    while hidden == 0 && Instant::now() < deadline {
        hidden = LOST_ADDRESS.load(Ordering::Acquire);
        std::thread::sleep(Duration::from_millis(1));
    }
    let held = black_box(hidden ^ HIDDEN);
    ADDRESS_HELD.store(true, Ordering::Release);
    let dir = std::env::var_os(ying::report::REPORT_DIR_ENV).unwrap();
    while !reports_in(Path::new(&dir)).any(|report| report.test.name == "forgotten_beside_a_neighbour")
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(5));
        black_box(&held);
    }
}

/// The reports written to `dir` so far.
fn reports_in(dir: &Path) -> impl Iterator<Item = LeakReport> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "json"))
        .filter_map(|path| serde_json::from_slice(&std::fs::read(path).ok()?).ok())
}

/// Runs the ignored tests named `names` in one child process with a report directory, on as many threads;
/// returns its output and their reports.
fn run_together(names: &[&str]) -> (Output, Vec<LeakReport>) {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(std::env::current_exe().unwrap())
        .arg("--exact")
        .args(names)
        .args(["--ignored", "--nocapture", &format!("--test-threads={}", names.len())])
        .env_remove(ying::ATTRIBUTION_ENV)
        .env(ying::report::REPORT_DIR_ENV, dir.path())
        .output()
        .unwrap();
    let reports = reports_in(dir.path()).collect();
    (output, reports)
}

/// Runs the ignored test `name` alone in a child process with a report directory; returns its output and report.
fn run_alone(name: &str) -> (Output, LeakReport) {
    let (output, reports) = run_together(&[name]);
    let report = reports
        .into_iter()
        .find(|report| report.test.name == name)
        .unwrap_or_else(|| panic!("no report: {}", String::from_utf8_lossy(&output.stderr)));
    (output, report)
}

/// The site of the block of `bytes`.
fn site(report: &LeakReport, bytes: u64) -> &RetainedSite {
    report
        .retained_sites
        .iter()
        .find(|site| site.bytes == bytes)
        .unwrap_or_else(|| panic!("no site of {bytes} B in {:#?}", report.retained_sites))
}

/// The type the site of `bytes` allocated.
fn type_of(report: &LeakReport, bytes: u64) -> Option<&str> {
    site(report, bytes).type_name.as_deref()
}

/// The kinds and roots of the site of `bytes`.
fn why(report: &LeakReport, bytes: u64) -> Vec<(Reach, Option<String>)> {
    site(report, bytes).why.iter().map(|why| (why.kind, why.root.clone())).collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_forgotten_buffer_is_lost_and_the_failure_says_so() {
    let (output, report) = run_alone("forgotten_buffer");
    assert_eq!(why(&report, 513), [(Reach::Lost, None)]);
    assert_eq!(site(&report, 513).why[0].blocks, 1);
    assert_eq!(type_of(&report, 513), Some("u8"));
    assert!(stderr(&output).contains("513 B in 1 block of u8, lost (nothing points to it)"), "{}", stderr(&output));
}

#[test]
fn a_leaked_box_whose_reference_is_dropped_is_lost() {
    let (output, report) = run_alone("leaked_box_whose_reference_is_dropped");
    assert_eq!(why(&report, 520), [(Reach::Lost, None)]);
    assert_eq!(type_of(&report, 520), Some("why::Session"));
    assert!(stderr(&output).contains("520 B in 1 block of why::Session, lost"), "{}", stderr(&output));
}

#[test]
fn a_push_into_a_static_is_held_by_the_static_named() {
    let (output, report) = run_alone("pushed_into_a_static");
    assert_eq!(why(&report, 1531), [(Reach::Static, Some("why::CACHE".to_owned()))]);
    assert_eq!(type_of(&report, 1531), Some("u8"));
    assert!(stderr(&output).contains("held by static why::CACHE"), "{}", stderr(&output));
}

#[test]
fn a_thread_local_grown_is_held_by_the_thread_local_named() {
    let (_, report) = run_alone("thread_local_grown");
    let [(kind, Some(root))] = &why(&report, 2045)[..] else { panic!("one kind, with its root") };
    assert_eq!(*kind, Reach::ThreadLocal);
    // The thread-local, and the thread whose it is: the test's own, named after it (as the system keeps a thread's
    // name: its first 15 bytes).
    assert_eq!(root, "why::SCRATCH of thread `thread_local_gr`");
    assert_eq!(type_of(&report, 2045), Some("u8"));
}

#[test]
fn two_rcs_pointing_at_each_other_are_a_reference_cycle() {
    let (output, report) = run_alone("reference_cycle");
    assert_eq!(why(&report, 777), [(Reach::Cycle, None)]);
    assert_eq!(why(&report, 778), [(Reach::Cycle, None)]);
    let rc_sites: Vec<_> = report.retained_sites.iter().filter(|site| site.blocks == 2 && site.bytes > 778).collect();
    assert!(rc_sites.iter().all(|site| site.why.iter().all(|why| why.kind == Reach::Cycle)), "{rc_sites:#?}");
    assert!(stderr(&output).contains("lost in a reference cycle"), "{}", stderr(&output));
    // The nodes' payloads are bytes; each `Rc` allocated the `RefCell` it holds (with its counts).
    assert_eq!((type_of(&report, 777), type_of(&report, 778)), (Some("u8"), Some("u8")));
    let counted: Vec<Option<&str>> = report
        .retained_sites
        .iter()
        .filter(|site| site.frames.iter().any(|frame| frame.function == "alloc::rc::Rc<T>::new"))
        .map(|site| site.type_name.as_deref())
        .collect();
    assert_eq!(counted, [Some("core::cell::RefCell<why::Node>"); 2]);
}

#[test]
fn a_reference_cycle_names_its_members_its_edge_and_the_field_to_make_weak() {
    let (_, report) = run_alone("reference_cycle");
    assert_eq!(report.cycles.len(), 1, "{:#?}", report.cycles);
    let cycle = &report.cycles[0];
    assert_eq!(cycle.members, ["why::Node"]);
    let edges: Vec<(&str, &str, &str)> =
        cycle.edges.iter().map(|edge| (edge.from.as_str(), edge.field.as_str(), edge.to.as_str())).collect();
    assert_eq!(edges, [("why::Node", "next", "why::Node")]);
    let weak: Vec<String> = cycle.make_weak.iter().map(ToString::to_string).collect();
    assert_eq!(weak, ["Node.next"]);
    // The two `RcInner`s and the payloads they own; made `Weak`, `next` frees them all.
    let rc_bytes: u64 = report
        .retained_sites
        .iter()
        .filter(|site| site.type_name.as_deref() == Some("core::cell::RefCell<why::Node>"))
        .map(|site| site.bytes)
        .sum();
    assert_eq!(cycle.bytes, rc_bytes + 777 + 778);
    assert_eq!(cycle.freed_if_weak, cycle.bytes);
}

#[test]
fn the_inner_nodes_of_a_list_forgotten_whole_are_owned_by_lost_memory_on_the_sites_one_line() {
    let (output, report) = run_alone("list_forgotten_whole");
    let nodes = report.retained_sites.iter().find(|site| site.blocks == 1000).expect("one site of the 1000 nodes");
    let whys: Vec<(Reach, u64)> = nodes.why.iter().map(|why| (why.kind, why.blocks)).collect();
    assert_eq!(whys, [(Reach::Owned, 999), (Reach::Lost, 1)], "only the head is pointed to by nothing");
    assert!(report.cycles.is_empty(), "{:#?}", report.cycles);
    let message = stderr(&output);
    let lines: Vec<&str> = message.lines().filter(|line| line.contains("in 1000 blocks of why::ListNode")).collect();
    assert_eq!(lines.len(), 1, "{message}");
    assert!(lines[0].contains("lost, owned by lost memory (only lost blocks point to it)"), "{message}");
}

/// The edges of the only cycle of `report`, `(from, field, to)`, and its fields to make `Weak`.
fn only_cycle(report: &LeakReport) -> (Vec<(String, String, String)>, Vec<String>) {
    assert_eq!(report.cycles.len(), 1, "{:#?}", report.cycles);
    let cycle = &report.cycles[0];
    let edges = cycle.edges.iter().map(|edge| (edge.from.clone(), edge.field.clone(), edge.to.clone())).collect();
    (edges, cycle.make_weak.iter().map(ToString::to_string).collect())
}

#[test]
fn of_a_tree_whose_children_hold_their_parent_the_parent_field_is_made_weak() {
    let (output, report) = run_alone("tree_whose_children_hold_their_parent");
    let (edges, weak) = only_cycle(&report);
    // The failure says so, with the fix.
    let message = stderr(&output);
    assert!(message.contains("reference cycle of `TreeNode`"), "{message}");
    assert!(message.contains(": make `TreeNode.parent` a `Weak` (frees "), "{message}");
    let edge = |field: &str| ("why::TreeNode".to_owned(), field.to_owned(), "why::TreeNode".to_owned());
    assert_eq!(edges, [edge("children[]"), edge("parent")]);
    // Both break the cycle alone: three children point through `parent` to one node.
    assert_eq!(weak, ["TreeNode.parent"]);
    assert_eq!(report.cycles[0].members, ["why::TreeNode"]);
}

#[test]
fn of_a_callback_capturing_its_window_the_capture_is_made_weak() {
    let (_, report) = run_alone("callback_capturing_its_window");
    let (edges, weak) = only_cycle(&report);
    let closure = "why::callback_capturing_its_window::{closure}".to_owned();
    assert_eq!(
        edges,
        [
            ("why::Window".to_owned(), "on_close".to_owned(), closure.clone()),
            (closure.clone(), "captured".to_owned(), "why::Window".to_owned()),
        ]
    );
    assert_eq!(weak, ["callback_capturing_its_window::{closure}.captured"]);
}

#[test]
fn a_buffer_held_by_a_thread_that_never_ends_is_on_its_stack() {
    let (_, report) = run_alone("held_by_a_thread_that_never_ends");
    assert_eq!(why(&report, 3067), [(Reach::ThreadStack, Some("keeper".to_owned()))]);
    assert_eq!(type_of(&report, 3067), Some("u8"));
}

#[test]
fn an_address_on_the_stack_of_another_leak_test_of_the_process_is_no_reference() {
    let (output, reports) = run_together(&["forgotten_beside_a_neighbour", "neighbour_holding_an_address"]);
    let report = reports
        .iter()
        .find(|report| report.test.name == "forgotten_beside_a_neighbour")
        .unwrap_or_else(|| panic!("no report: {}", stderr(&output)));
    assert!(reports.iter().any(|report| report.test.name == "neighbour_holding_an_address"), "{}", stderr(&output));
    assert_eq!(why(report, 2063), [(Reach::Lost, None)]);
}

#[test]
fn an_entry_stored_in_a_table_made_before_the_test_is_not_lost() {
    let (output, report) = run_alone("stored_in_a_table_made_before_the_test");
    assert_eq!(why(&report, 4093), [(Reach::Heap, Some("why::TABLE".to_owned()))]);
    let stderr = stderr(&output);
    assert!(stderr.contains("held through memory allocated before the test (from why::TABLE)"), "{stderr}");
    // A budgeted test names its sites itself, typed too.
    assert_eq!(type_of(&report, 4093), Some("u8"));
}

#[test]
fn an_entry_stored_in_a_table_made_before_the_test_on_a_large_heap_is_not_lost() {
    let (_, report) = run_alone("stored_in_a_table_made_before_the_test_on_a_large_heap");
    assert_eq!(why(&report, 4091), [(Reach::Heap, Some("why::LARGE_TABLE".to_owned()))]);
}

#[test]
fn each_site_names_the_type_its_allocating_generic_was_given() {
    let (output, report) = run_alone("leaked_of_each_kind");
    // An `Arc`'s value with its counts, a deque's and a string's buffers, a box of an array.
    assert_eq!(type_of(&report, 1016), Some("why::Ticket"));
    assert_eq!(type_of(&report, 1200), Some("u32"));
    assert_eq!(type_of(&report, 1111), Some("u8"));
    assert_eq!(type_of(&report, 1300), Some("[u16; 650]"));
    assert!(stderr(&output).contains("(1300 bytes) in 1 block of [u16; 650], lost"), "{}", stderr(&output));
}

/// The size of the block [`forgotten_where_stale_copies_lie`] forgets.
const STALE: usize = 1000;
/// The addresses [`plant_stale_copies`] left copies of on the stack, hidden.
static PLANTED: [AtomicUsize; 7] = [const { AtomicUsize::new(0) }; 7];

/// Frees seven blocks of [`STALE`] bytes (the C library's cache of freed blocks of a size holds seven, and gives the
/// last freed to the next request of the size, as `calloc` would not: their bytes are not zeros) after filling
/// 64 KiB of the stack below the caller with copies of their addresses, as a function that returned leaves its
/// words behind.
#[inline(never)]
fn plant_stale_copies() {
    let blocks: Vec<Vec<u8>> = (0..PLANTED.len()).map(|_| black_box(vec![1u8; STALE])).collect();
    let copies =
        black_box(core::array::from_fn::<usize, 8192, _>(|index| blocks[index % blocks.len()].as_ptr().addr()));
    for (planted, address) in PLANTED.iter().zip(&copies) {
        planted.store(address ^ HIDDEN, Ordering::Relaxed);
    }
    drop(blocks);
}

/// Forgets a block at one of the addresses [`plant_stale_copies`] left copies of where the test's frames now lie.
#[ying::leak_test]
#[ignore = "run in a child process"]
fn forgotten_where_stale_copies_lie() {
    let block = black_box(vec![1u8; STALE]);
    let hidden = block.as_ptr().addr() ^ HIDDEN;
    assert!(
        PLANTED.iter().any(|planted| planted.load(Ordering::Relaxed) == hidden),
        "the block takes a freed one's address"
    );
    std::mem::forget(block);
}

#[test]
#[ignore = "run in a child process"]
fn leak_test_over_stale_copies() {
    plant_stale_copies();
    forgotten_where_stale_copies_lie();
}

#[test]
fn a_stale_copy_of_an_address_on_the_test_threads_stack_holds_nothing() {
    let (output, reports) = run_together(&["leak_test_over_stale_copies"]);
    let report = reports
        .iter()
        .find(|report| report.test.name == "forgotten_where_stale_copies_lie")
        .unwrap_or_else(|| panic!("no report: {}", stderr(&output)));
    assert_eq!(why(report, STALE as u64), [(Reach::Lost, None)], "{}", stderr(&output));
}

/// A stream whose state points back at it, as a C library's stream and state do.
struct Stream {
    state: RefCell<Option<Rc<StreamState>>>,
}

/// The state a [`Stream`] holds, holding the stream and a window.
struct StreamState {
    _stream: Rc<Stream>,
    _window: Vec<u8>,
}

/// Forgets a stream whose state (allocated after it) points back at it and holds a window of 4,099 bytes.
#[ying::leak_test]
#[ignore = "run in a child process"]
fn forgotten_stream_and_its_state() {
    let stream = Rc::new(Stream { state: RefCell::new(None) });
    let state = Rc::new(StreamState { _stream: Rc::clone(&stream), _window: vec![1; 4099] });
    *stream.state.borrow_mut() = Some(state);
}

#[test]
fn lost_memory_is_grouped_under_the_block_allocated_first_of_its_cycle() {
    let (output, report) = run_alone("forgotten_stream_and_its_state");
    let stream = report
        .retained_sites
        .iter()
        .find(|site| site.type_name.as_deref() == Some("why::Stream"))
        .unwrap_or_else(|| panic!("no stream's site: {:#?}", report.retained_sites));
    let owned: Vec<(Option<&str>, u64)> =
        stream.owns.iter().map(|item| (report.retained_sites[item.site].type_name.as_deref(), item.bytes)).collect();
    assert_eq!(owned.len(), 2, "{owned:?}");
    assert!(owned.contains(&(Some("u8"), 4099)), "{owned:?}");
    assert!(owned.iter().any(|(type_name, _)| *type_name == Some("why::StreamState")), "{owned:?}");
    // The message lists the stream first, owning the rest; the window is not a line of its own.
    let stderr = stderr(&output);
    let listed: Vec<&str> = stderr.lines().skip_while(|line| !line.starts_with("retained memory by")).skip(1).collect();
    assert!(listed[0].contains("of why::Stream, lost in a reference cycle"), "{stderr}");
    assert!(listed.iter().any(|line| line.trim_start().starts_with("owning 2 more blocks")), "{stderr}");
    assert!(!listed.iter().any(|line| line.contains("4.0 KiB (4099 bytes)")), "{stderr}");
}

/// A node of a doubly linked list whose links are all strong.
struct Link {
    _payload: Vec<u8>,
    next: Option<Rc<RefCell<Link>>>,
    _prev: Option<Rc<RefCell<Link>>>,
}

/// Builds a doubly linked list of eight nodes on the test's own thread and drops the handle to its head.
#[ying::leak_test]
#[ignore = "run in a child process"]
fn doubly_linked_list_dropped() {
    let head = Rc::new(RefCell::new(Link { _payload: vec![0; 3001], next: None, _prev: None }));
    let mut tail = Rc::clone(&head);
    for _ in 0..7 {
        let node = Rc::new(RefCell::new(Link { _payload: vec![0; 3001], next: None, _prev: Some(Rc::clone(&tail)) }));
        tail.borrow_mut().next = Some(Rc::clone(&node));
        tail = node;
    }
    black_box(&head);
}

/// A member of a ring of `Arc`s.
struct Member {
    _payload: Vec<u8>,
    next: Mutex<Option<std::sync::Arc<Member>>>,
}

/// Builds a ring of six `Arc`s on the test's own thread and drops the handle to it.
#[ying::leak_test]
#[ignore = "run in a child process"]
fn arc_ring_dropped() {
    let first = std::sync::Arc::new(Member { _payload: vec![0; 3002], next: Mutex::new(None) });
    let mut last = std::sync::Arc::clone(&first);
    for _ in 0..5 {
        let member = std::sync::Arc::new(Member { _payload: vec![0; 3002], next: Mutex::new(Some(last)) });
        last = member;
    }
    *first.next.lock().unwrap() = Some(last);
    black_box(&first);
}

#[test]
fn cycles_built_and_dropped_on_the_test_thread_are_cycles_whole() {
    for (name, payload, members) in [("doubly_linked_list_dropped", 3001, 8), ("arc_ring_dropped", 3002, 6)] {
        let (_, report) = run_alone(name);
        let payloads: u64 =
            report.retained_sites.iter().filter(|site| site.bytes % payload == 0).map(|site| site.bytes).sum();
        assert_eq!(payloads, payload * members, "{name}: {:#?}", report.retained_sites);
        assert!(
            report.retained_sites.iter().all(|site| site.why.iter().all(|why| why.kind == Reach::Cycle)),
            "{name}: {:#?}",
            report.retained_sites
        );
    }
}
