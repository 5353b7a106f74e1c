//! The tables: every member of the workspace's floors, lowest first, each with a line of why, and the rules of its
//! own. How a table is written: [`table`](crate::table).

use crate::table::{Apart, Floor, Never, Table};

/// Every member's table.
pub const TABLES: [Table; 8] =
    [YING_REPORT, YING_FRAMES, YING_RUNTIME, YING_MACROS, CARGO_YING, YING_BENCH, YING_PRELOAD, YING_HOUSE];

/// The contract between ying's parts: its words below, the formats built of them above.
pub const YING_REPORT: Table = Table {
    member: "ying-report",
    floors: &[
        Floor {
            modules: &["terms", "size", "test_id", "frame", "folded", "keys", "exit_code", "json", "end_mark", "stamp"],
            why: "the contract's words, each standing alone: the terms both formats use, sizes, test ids, frames, \
                  folded stacks, keys, exit codes, JSON files read and written whole, a test process's end mark, an \
                  executable's stamp",
        },
        Floor {
            modules: &["report", "totals"],
            why: "the report a leak test writes, and a run's totals by outcome and verdict",
        },
        Floor {
            modules: &["nextest"],
            why: "what each test of a nextest run of the profile leaves for the gate, and the setup it starts from",
        },
        Floor {
            modules: &["arguments", "figures"],
            why: "what is read off a report: the attribute's arguments, a test's figures",
        },
        Floor { modules: &["baseline"], why: "the baseline: the figures of each measured test, kept for the gate" },
        Floor { modules: &["summary"], why: "a run's summary, which a baseline is made from" },
        Floor { modules: &["lib"], why: "the crate root: the contract re-exported for its users" },
    ],
    never: &[],
    apart: &[],
};

/// The rules that read stacks: names below, the rules over frames above them, what they make on top.
pub const YING_FRAMES: Table = Table {
    member: "ying-frames",
    floors: &[
        Floor {
            modules: &["names", "debug_types"],
            why: "what one frame or one executable tells: a function's name and its pieces, the types debug \
                  information gives",
        },
        Floor {
            modules: &["debug_types/layout"],
            why: "where a type's pointers lie, by the user's fields, read with the debug information's reader",
        },
        Floor { modules: &["types", "trim", "excuses"], why: "the rules over a stack's frames, by their names" },
        Floor {
            modules: &["why", "fold", "known_code"],
            why: "what the rules make: the words of a site's kinds, folded stacks and site keys, the known code",
        },
        Floor { modules: &["tasks"], why: "what a tokio task cell's type tells: its future, the runtime's own" },
        Floor { modules: &["lib"], why: "the crate root" },
    ],
    never: &[],
    apart: &[],
};

/// The runtime: a layer uses only the layers below it, and the crate root's re-exports are its users' paths.
pub const YING_RUNTIME: Table = Table {
    member: "ying-runtime",
    floors: &[
        Floor {
            modules: &["base/"],
            why: "what every layer stands on: ids, raw memory, locks, threads, what the process has loaded",
        },
        Floor {
            modules: &["hot/"],
            why: "the allocator's hot path: counters, live blocks, scopes, stacks and their unwinding",
        },
        Floor { modules: &["read/"], why: "what is read afterwards: symbols, stack statistics, reachability" },
        Floor {
            modules: &["products/"],
            why: "what the runtime gives its users: the leak test, measures, reports, profiles",
        },
        Floor {
            modules: &["lib"],
            why: "the crate root, whose re-exports are its users' paths: an import through them runs up",
        },
    ],
    never: &[],
    apart: &[],
};

/// The attribute macro: its three steps, one on the other.
pub const YING_MACROS: Table = Table {
    member: "ying-macros",
    floors: &[
        Floor { modules: &["args"], why: "the arguments parsed, each with its spans" },
        Floor { modules: &["validate", "source"], why: "what the arguments and the function's file say, checked" },
        Floor { modules: &["expand"], why: "the test written from checked arguments" },
        Floor { modules: &["lib"], why: "the attribute: the steps in order" },
    ],
    never: &[],
    apart: &[],
};

/// `cargo ying`: the commands on top of the command line, the outputs and the pipeline's three stages below them,
/// the verdict and the ground at the bottom.
pub const CARGO_YING: Table = Table {
    member: "cargo-ying",
    floors: &[
        Floor {
            modules: &["error", "signals", "lock", "gate", "config", "workspace"],
            why: "the ground: errors, signals, locks, the gate's arithmetic, the configuration, the workspace",
        },
        Floor {
            modules: &["model", "baseline", "saved", "nextest/"],
            why: "the verdict: a run's model, the baseline, what is saved; nextest's profile and what its runs leave",
        },
        Floor {
            modules: &["run/process"],
            why: "the pipeline's ground: the processes of the build, the listing and the tests, started, stopped \
                  and waited for",
        },
        Floor { modules: &["run/names/"], why: "the pipeline's naming: the stacks reports left as addresses, named" },
        Floor {
            modules: &["run/select/"],
            why: "the pipeline's selection: the build, what is set aside, the listing, filters, the shard, the order",
        },
        Floor {
            modules: &["run/exec/", "run"],
            why: "the pipeline's execution: each test's process through one attempt, the runner, the reruns",
        },
        Floor { modules: &["outputs/"], why: "what a run is shown and written as; outputs decide nothing" },
        Floor {
            modules: &["cli", "settings", "ending"],
            why: "the command line, resolved into settings, and the end of a run, which two commands share",
        },
        Floor { modules: &["commands/"], why: "one module per command" },
        Floor {
            modules: &["lib", "main", "bin/"],
            why: "the crate root, which dispatches the commands, and the binaries: cargo-ying and nextest's ying-wrap",
        },
    ],
    never: &[Never {
        from: "outputs/",
        to: &["run/exec/", "run/process"],
        why: "the outputs read the run's model, never the tests' execution or the processes it starts",
    }],
    apart: &[Apart { folder: "commands/", why: "commands share code only through the modules below them" }],
};

/// The overhead benchmarks: the workloads over their generator, the binaries over the library.
pub const YING_BENCH: Table = Table {
    member: "ying-bench",
    floors: &[
        Floor { modules: &["rng"], why: "the deterministic generator every workload draws from" },
        Floor { modules: &["json_round_trip", "regex_search"], why: "the workloads too long to stand in the root" },
        Floor { modules: &["lib"], why: "the crate root: the workloads by name, and the binaries' main" },
        Floor { modules: &["bin/"], why: "one binary per allocator configuration, each a crate of its own" },
    ],
    never: &[],
    apart: &[],
};

/// The allocation interposer: the C library's allocator below, the functions exported in its place on top.
pub const YING_PRELOAD: Table = Table {
    member: "ying-preload",
    floors: &[
        Floor {
            modules: &["libc_malloc", "next"],
            why: "the definitions stood in front of: the C library's allocator, and the next definitions, looked up",
        },
        Floor { modules: &["own"], why: "the global allocator of this library's own Rust code" },
        Floor { modules: &["blocks"], why: "the program's blocks, each with its header" },
        Floor {
            modules: &["threads", "unwind"],
            why: "the functions stood in front of other than the allocator's: thread names, stack walks",
        },
        Floor { modules: &["exports"], why: "the C allocation functions, defined in place of the C library's" },
        Floor {
            modules: &["nextest"],
            why: "a test of nextest's profile: its record started and its measurement asked for, in its own process",
        },
        Floor { modules: &["ending"], why: "how the process ended, said for a test of nextest's profile" },
        Floor { modules: &["lib"], why: "the crate root" },
    ],
    never: &[],
    apart: &[],
};

/// This crate: the pieces below the rules, the rules below the workspace.
pub const YING_HOUSE: Table = Table {
    member: "ying-house",
    floors: &[
        Floor {
            modules: &["source", "modules", "graph", "table"],
            why: "the pieces: a file's code, a crate's modules, a graph's circles, how a table is written",
        },
        Floor { modules: &["paths", "floors"], why: "what is read off them: a file's imports; the tables, written" },
        Floor { modules: &["check"], why: "the rules, on one crate" },
        Floor { modules: &["workspace"], why: "every member against its table" },
        Floor { modules: &["lib"], why: "the crate root" },
    ],
    never: &[],
    apart: &[],
};
