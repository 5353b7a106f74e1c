//! The async tasks a leak test's body left, on the fixture's patterns of known answer (`fixtures/leak-tests/tests/
//! tasks.rs`): each test's tasks as summary.json lists them (kind, future, spawn line), and tokio's own count of the
//! tasks still alive as each body ended agreeing with the pending ones found.

use super::{Fixture, entry, repository, stderr, summary};

/// A task a pattern leaves: its kind, its future, and the label of its spawn line's `// spawn: <label>` mark.
type Task = (&'static str, &'static str, &'static str);

/// What each pattern leaves, by test.
const PATTERNS: &[(&str, &[Task])] = &[
    ("awaits_its_own_channel", &[("leaked", "tasks::own_channel", "own channel")]),
    (
        "awaits_its_own_channel_on_a_multi_thread_runtime",
        &[("leaked", "tasks::own_channel", "own channel, multi-thread")],
    ),
    (
        "two_tasks_await_each_others_handle",
        &[
            ("leaked", "tasks::await_other", "mutual join, first"),
            ("leaked", "tasks::await_other", "mutual join, second"),
        ],
    ),
    ("a_sleeping_loops_handle_dropped", &[("lingering", "tasks::sleeping_loop", "sleeping loop")]),
    ("a_receiver_whose_sender_a_static_holds", &[("lingering", "tasks::receive", "static sender")]),
    ("an_output_never_claimed", &[("unclaimed", "tasks::produce", "unclaimed")]),
    ("a_select_arm_never_polled_again", &[("leaked", "tasks::own_channel", "select arm")]),
    (
        "a_join_set_dropped_while_its_blocking_task_runs",
        &[("lingering", "tasks::a_join_set_dropped_while_its_blocking_task_runs::{closure}", "blocking")],
    ),
    ("a_task_on_a_runtime_never_driven", &[("lingering", "tasks::own_channel", "idle runtime")]),
    ("every_task_joined", &[]),
    ("handles_dropped_after_completion", &[]),
    ("a_join_set_aborted", &[]),
    ("a_library_helper_spawns", &[("lingering", "leak_fixtures::jobs::heartbeat", "library helper")]),
];

/// `file:line` of the spawn marked `// spawn: <label>` in the fixture's test file or its library's jobs.
fn spawn_line(label: &str) -> String {
    let mark = format!("// spawn: {label}");
    for file in ["tests/tasks.rs", "src/jobs.rs"] {
        let text = std::fs::read_to_string(repository().join("fixtures/leak-tests").join(file)).unwrap();
        if let Some(index) = text.lines().position(|line| line.ends_with(&mark)) {
            return format!("{file}:{}", index + 1);
        }
    }
    panic!("no spawn is marked `{mark}`")
}

#[test]
fn each_pattern_leaves_its_known_tasks_named_by_future_and_spawn_line_as_tokio_counts_them() {
    each_pattern_leaves_its_known_tasks(&Fixture::shared());
}

/// The same patterns with tokio pinned to each version `YING_E2E_TOKIO` lists (comma-separated; 1.39 or newer, whose
/// `num_alive_tasks` the fixture reads), in a copy of the fixture each: nothing of tokio's is written in ying but its
/// task cell's constructor and its wakers' vtable by name, and its state's flags (tokio's since 0.2.14). Fetches
/// tokio from the registry and builds it anew: `YING_E2E_TOKIO=1.39.3,1.43.4 cargo test -p cargo-ying --test e2e --
/// --ignored tasks::`.
#[test]
#[ignore = "builds the fixture against the tokio versions YING_E2E_TOKIO lists, from the registry"]
fn each_pattern_leaves_the_same_tasks_on_other_tokio_versions() {
    let versions = std::env::var("YING_E2E_TOKIO").expect("YING_E2E_TOKIO lists the tokio versions to try");
    for version in versions.split(',').map(str::trim).filter(|version| !version.is_empty()) {
        let fixture = Fixture::new();
        let update = std::process::Command::new(env!("CARGO"))
            .args(["update", "--quiet", "--package", "tokio", "--precise", version, "--manifest-path"])
            .arg(fixture.path().join("Cargo.toml"))
            .status()
            .unwrap();
        assert!(update.success(), "tokio {version} from the registry");
        let lock = std::fs::read_to_string(fixture.path().join("Cargo.lock")).unwrap();
        assert!(lock.contains(&format!("name = \"tokio\"\nversion = \"{version}\"")), "tokio {version} pinned");
        each_pattern_leaves_its_known_tasks(&fixture);
    }
}

/// Runs the fixture's task patterns and compares what each left with [`PATTERNS`] and with tokio's own count.
fn each_pattern_leaves_its_known_tasks(fixture: &Fixture) {
    let alive = fixture.scratch("alive");
    std::fs::create_dir_all(&alive).unwrap();
    let alive_env = alive.display().to_string();
    let output = fixture.cargo_ying(&["--test", "tasks", "-j", "2"], &[("YING_FIXTURE_ALIVE", &alive_env)]);
    assert_eq!(output.status.code(), Some(0), "every pattern allows what it leaves: {}", stderr(&output));
    let summary = summary(&fixture.target_dir());
    let measured = summary["tests"].as_array().unwrap().iter().filter(|test| test["retained_bytes"].is_u64()).count();
    assert_eq!(measured, PATTERNS.len(), "one leak test a pattern");
    for &(test, expected) in PATTERNS {
        let tasks: Vec<(String, String, String)> = entry(&summary, "tasks", test)["tasks"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|task| {
                let text = |key: &str| task[key].as_str().unwrap_or_default().to_owned();
                (text("kind"), text("future"), text("spawned_at"))
            })
            .collect();
        let wanted: Vec<(String, String, String)> = expected
            .iter()
            .map(|&(kind, future, label)| (kind.to_owned(), future.to_owned(), spawn_line(label)))
            .collect();
        assert_eq!(tasks, wanted, "{test}");
        // tokio's count of the tasks alive on the test's runtimes as the body ended: the pending ones found (those
        // just compared), but for a task on the blocking pool, which tokio does not count.
        let counted: usize = std::fs::read_to_string(alive.join(test)).unwrap().parse().unwrap();
        let pending = expected.iter().filter(|(kind, _, label)| *kind != "unclaimed" && *label != "blocking").count();
        assert_eq!(counted, pending, "{test}: tokio counts {counted} alive, ying found {tasks:?}");
    }
    // The terminal's table names them.
    assert!(stderr(&output).contains("1 unclaimed"), "{}", stderr(&output));
}

#[test]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn a_test_measured_from_outside_reports_the_task_it_left_on_a_static_runtime() {
    let fixture = Fixture::shared();
    let test = "a_plain_test_leaves_a_task_on_a_static_runtime";
    let output = fixture.cargo_ying(&["--measure", "all", "--test", "tasks", "--", "--exact", test], &[]);
    assert_eq!(output.status.code(), Some(0), "a test measured from outside has no task budget: {}", stderr(&output));
    let summary = summary(&fixture.target_dir());
    let tasks = &entry(&summary, "tasks", test)["tasks"];
    assert_eq!(tasks.as_array().map(Vec::len), Some(1), "{tasks}");
    // Polled once, then waiting for a channel only it holds: nothing can wake it, on a runtime never driven again.
    assert_eq!(tasks[0]["kind"], "leaked", "{tasks}");
    assert_eq!(tasks[0]["future"], "tasks::own_channel", "{tasks}");
    assert_eq!(tasks[0]["spawned_at"], spawn_line("static runtime").as_str(), "{tasks}");
    assert!(stderr(&output).contains("1 leaked"), "the table says so: {}", stderr(&output));
}
