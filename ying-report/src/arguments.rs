//! The arguments of `#[ying::leak_test]`, defined once in [`ARGUMENTS`]: each argument's name, the line that
//! documents it, the kind of value it takes with its limits and the field of [`Written`] it fills, an example of
//! it, and the argument it needs beside it.
//!
//! The three readers of the attribute read this one table. The macro parses and checks what a test wrote against
//! it, and writes the checked values into the generated test as a list of (name, [`Value`]); the runtime
//! [resolves](resolve) that list through the table into the test's [`Written`] arguments; and the runtime's
//! documentation of the attribute lists the table, as `leak_test_arguments_doc!` writes it from the same list.

use crate::report::{Attribution, Budgets};
use core::fmt;

/// One argument of `#[ying::leak_test]`.
#[derive(Clone, Copy, Debug)]
pub struct Argument {
    /// Its name, as written: `max_retained`.
    pub name: &'static str,
    /// What it means: its row of the attribute's documentation (Markdown, without `|`).
    pub doc: &'static str,
    /// The kind of value it takes, with its limits, and what the value fills.
    pub kind: Kind,
    /// A value to show where an error names the fix: `"64 KiB"` for `max_retained = "64 KiB"`.
    pub example: &'static str,
    /// The argument it is judged with, which must be written beside it.
    pub needs: Option<Need>,
}

/// The kind of value an argument takes, and what the value fills.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// A size in ying's one size grammar ([`ByteSize`](crate::ByteSize)): a string with a unit, or an integer of
    /// bytes. Written as [`Value::Number`] of bytes.
    Size(fn(&mut Written, u64)),
    /// A whole number from `min` to `max`. Written as [`Value::Number`].
    Count {
        /// The smallest value allowed.
        min: u64,
        /// The largest value allowed.
        max: u64,
        /// Fills the number in.
        fill: fn(&mut Written, u64),
    },
    /// One of the names of [`ATTRIBUTIONS`], as a string. Written as [`Value::Text`].
    Attribution(fn(&mut Written, Attribution)),
    /// A list of non-empty strings. Written as [`Value::List`].
    Patterns(fn(&mut Written, &'static [&'static str])),
    /// A path, as a string, that the generated code names the runtime by. Read by the macro alone: it is not
    /// written into the test.
    RuntimePath,
}

/// An argument that another needs beside it, and what an error says when it is missing.
#[derive(Clone, Copy, Debug)]
pub struct Need {
    /// The name of the argument needed.
    pub argument: &'static str,
    /// The error, on the argument that needs it, that names the fix.
    pub message: &'static str,
}

/// A checked value of an argument as the generated code writes it: its form follows the argument's [`Kind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    /// A size in bytes, or a count.
    Number(u64),
    /// A name, such as an attribution's.
    Text(&'static str),
    /// A list of strings, such as the patterns of `allow`.
    List(&'static [&'static str]),
}

/// What a leak test's arguments set, before the runtime applies its defaults: `None`, zero or empty where not
/// written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Written {
    /// The budgets written.
    pub budgets: Budgets,
    /// Unmeasured runs of the body before the measured ones.
    pub warmup: u32,
    /// Measured runs of the body; `None`: one run, and no growth budget by default.
    pub iterations: Option<u32>,
    /// Which allocations the test counts; `None`: the runtime's default.
    pub attribution: Option<Attribution>,
    /// Patterns of the function names whose retained memory is excused.
    pub allow: &'static [&'static str],
}

/// The names an attribution is written with, and the attribution each means.
pub const ATTRIBUTIONS: &[(&str, Attribution)] = &[("thread", Attribution::Thread), ("process", Attribution::Process)];

/// A count of runs, within the table's limit of [`u32::MAX`].
fn runs(count: u64) -> u32 {
    u32::try_from(count).unwrap_or(u32::MAX)
}

/// Defines [`ARGUMENTS`] and `leak_test_arguments_doc!` (the Markdown table that documents them) from one list.
macro_rules! arguments {
    ($(Argument { name: $name:literal, doc: $doc:literal, $($field:ident: $value:expr),* $(,)? }),* $(,)?) => {
        /// The arguments of `#[ying::leak_test]`, in the order its documentation lists them.
        pub const ARGUMENTS: &[Argument] = &[$(Argument { name: $name, doc: $doc, $($field: $value),* }),*];

        /// The table of the arguments of `#[ying::leak_test]`, a row for each of [`ARGUMENTS`] with its name and
        /// its doc line, as a Markdown string literal for a `#[doc = ...]` attribute.
        #[doc(hidden)]
        #[macro_export]
        macro_rules! leak_test_arguments_doc {
            () => {
                ::core::concat!("| argument | meaning |\n|---|---|\n", $("| `", $name, "` | ", $doc, " |\n"),*)
            };
        }
    };
}

arguments! {
    Argument {
        name: "max_retained",
        doc: "bytes the measured runs may leave allocated; default `\"0\"` for a single run, unchecked with \
              `iterations` unless written",
        kind: Kind::Size(|written, bytes| written.budgets.max_retained = Some(bytes)),
        example: "\"64 KiB\"",
        needs: None,
    },
    Argument {
        name: "max_peak",
        doc: "bytes the measured runs may hold at once",
        kind: Kind::Size(|written, bytes| written.budgets.max_peak = Some(bytes)),
        example: "\"64 KiB\"",
        needs: None,
    },
    Argument {
        name: "max_allocated",
        doc: "bytes each measured run may allocate",
        kind: Kind::Size(|written, bytes| written.budgets.max_allocated = Some(bytes)),
        example: "\"64 KiB\"",
        needs: None,
    },
    Argument {
        name: "max_allocations",
        doc: "allocations each measured run may make",
        kind: Kind::Count {
            min: 0,
            max: u64::MAX,
            fill: |written, allocations| written.budgets.max_allocations = Some(allocations),
        },
        example: "10_000",
        needs: None,
    },
    Argument {
        name: "max_growth_per_iteration",
        doc: "net heap growth (allocated minus freed bytes, whatever their age) allowed per measured run; the test \
              fails when every run grew by more; default `\"0\"` with `iterations`, which it needs",
        kind: Kind::Size(|written, bytes| written.budgets.max_growth_per_iteration = Some(bytes)),
        example: "\"64 KiB\"",
        needs: Some(Need {
            argument: "iterations",
            message: "`max_growth_per_iteration` is judged over measured runs, and without `iterations` there is \
                      one: add `iterations = N` (and `warmup = 1` for one-time initialisation), or budget the one \
                      run with `max_retained`",
        }),
    },
    Argument {
        name: "max_lost",
        doc: "retained bytes that nothing points to any more (lost, or in a cycle of lost blocks) the measured runs \
              may leave; judged even where `max_retained` is not",
        kind: Kind::Size(|written, bytes| written.budgets.max_lost = Some(bytes)),
        example: "\"0\"",
        needs: None,
    },
    Argument {
        name: "max_held",
        doc: "retained bytes a static or a thread-local holds (directly, or through memory allocated before the test) \
              the measured runs may leave; judged even where `max_retained` is not",
        kind: Kind::Size(|written, bytes| written.budgets.max_held = Some(bytes)),
        example: "\"4 KiB\"",
        needs: None,
    },
    Argument {
        name: "max_leaked_tasks",
        doc: "async tasks the body may leave pending with nothing left to wake them (leaked); default 0, or the \
              workspace's `max-leaked-tasks`",
        kind: Kind::Count {
            min: 0,
            max: u64::MAX,
            fill: |written, tasks| written.budgets.max_leaked_tasks = Some(tasks),
        },
        example: "1",
        needs: None,
    },
    Argument {
        name: "max_lingering_tasks",
        doc: "async tasks the body may leave pending that something else can still wake (a timer, a channel \
              another holds); unchecked unless written, or the workspace's `max-lingering-tasks`",
        kind: Kind::Count {
            min: 0,
            max: u64::MAX,
            fill: |written, tasks| written.budgets.max_lingering_tasks = Some(tasks),
        },
        example: "0",
        needs: None,
    },
    Argument {
        name: "warmup",
        doc: "unmeasured runs of the body first (one-time initialisation)",
        kind: Kind::Count { min: 0, max: u32::MAX as u64, fill: |written, count| written.warmup = runs(count) },
        example: "1",
        needs: None,
    },
    Argument {
        name: "iterations",
        doc: "measured runs of the body (at least 1)",
        kind: Kind::Count {
            min: 1,
            max: u32::MAX as u64,
            fill: |written, count| written.iterations = Some(runs(count)),
        },
        example: "5",
        needs: None,
    },
    Argument {
        name: "attribution",
        doc: "`\"thread\"`: allocations of the test's thread and of threads that [enter](Scope::enter) its scope; \
              `\"process\"`: every allocation in the process",
        kind: Kind::Attribution(|written, attribution| written.attribution = Some(attribution)),
        example: "\"thread\"",
        needs: None,
    },
    Argument {
        name: "allow",
        doc: "retained memory allocated under a function whose name contains one of these is excused",
        kind: Kind::Patterns(|written, patterns| written.allow = patterns),
        example: "[\"regex::\", \"my_crate::interner\"]",
        needs: None,
    },
    Argument {
        name: "crate",
        doc: "the path the generated code names the runtime by, as a string; default `\"::ying\"`. A crate that \
              depends on `ying-runtime` under another name gives that name: with `yr = { package = \
              \"ying-runtime\", .. }`, `#[yr::leak_test(crate = \"yr\")]`",
        kind: Kind::RuntimePath,
        example: "\"yr\"",
        needs: None,
    },
}

/// The argument named `name`.
pub fn argument(name: &str) -> Option<&'static Argument> {
    ARGUMENTS.iter().find(|argument| argument.name == name)
}

/// The names of [`ARGUMENTS`], in order.
pub fn names() -> impl Iterator<Item = &'static str> {
    ARGUMENTS.iter().map(|argument| argument.name)
}

/// Resolves the arguments a leak test wrote (as the macro's expansion lists them, each by its name) through
/// [`ARGUMENTS`]: each value fills its field of [`Written`].
///
/// ```
/// use ying_report::arguments::{Value, resolve};
///
/// let written = resolve(&[("max_retained", Value::Number(1024)), ("iterations", Value::Number(5))]).unwrap();
/// assert_eq!((written.budgets.max_retained, written.iterations), (Some(1024), Some(5)));
/// ```
pub fn resolve(arguments: &[(&str, Value)]) -> Result<Written, ArgumentError> {
    let mut written = Written::default();
    for (index, &(name, value)) in arguments.iter().enumerate() {
        let error = |problem| ArgumentError { name: name.to_owned(), problem };
        let argument = argument(name).ok_or_else(|| error(Problem::Unknown))?;
        if arguments[..index].iter().any(|&(earlier, _)| earlier == name) {
            return Err(error(Problem::Duplicate));
        }
        match (argument.kind, value) {
            (Kind::Size(fill), Value::Number(bytes)) => fill(&mut written, bytes),
            (Kind::Count { min, max, fill }, Value::Number(count)) => {
                if !(min..=max).contains(&count) {
                    return Err(error(Problem::OutOfLimits));
                }
                fill(&mut written, count);
            }
            (Kind::Attribution(fill), Value::Text(text)) => {
                let &(_, attribution) =
                    ATTRIBUTIONS.iter().find(|(known, _)| *known == text).ok_or_else(|| error(Problem::Mistyped))?;
                fill(&mut written, attribution);
            }
            (Kind::Patterns(fill), Value::List(patterns)) => fill(&mut written, patterns),
            _ => return Err(error(Problem::Mistyped)),
        }
    }
    Ok(written)
}

/// Why an argument as the generated code wrote it cannot be resolved: the code and the table disagree, which the
/// macro never lets happen (it checks the same table); only code written by hand against the runtime's private
/// items can.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgumentError {
    name: String,
    problem: Problem,
}

/// What is wrong with an argument in an [`ArgumentError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Problem {
    Unknown,
    Duplicate,
    Mistyped,
    OutOfLimits,
}

impl fmt::Display for ArgumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.name;
        match self.problem {
            Problem::Unknown => write!(f, "`{name}` is not an argument of `leak_test`"),
            Problem::Duplicate => write!(f, "`{name}` is given twice"),
            Problem::Mistyped => write!(f, "the value of `{name}` is not of its kind"),
            Problem::OutOfLimits => write!(f, "the value of `{name}` is outside its limits"),
        }
    }
}

impl std::error::Error for ArgumentError {}

#[cfg(test)]
mod tests {
    use super::{ARGUMENTS, Kind, Value, Written, resolve};
    use crate::report::{Attribution, Budgets};

    #[test]
    fn every_value_fills_the_field_its_argument_names() {
        let written = resolve(&[
            ("max_retained", Value::Number(1)),
            ("max_peak", Value::Number(2)),
            ("max_allocated", Value::Number(3)),
            ("max_allocations", Value::Number(4)),
            ("max_growth_per_iteration", Value::Number(5)),
            ("max_lost", Value::Number(8)),
            ("max_held", Value::Number(9)),
            ("max_leaked_tasks", Value::Number(10)),
            ("max_lingering_tasks", Value::Number(11)),
            ("warmup", Value::Number(6)),
            ("iterations", Value::Number(7)),
            ("attribution", Value::Text("process")),
            ("allow", Value::List(&["regex::"])),
        ])
        .unwrap();
        let budgets = Budgets {
            max_retained: Some(1),
            max_peak: Some(2),
            max_allocated: Some(3),
            max_allocations: Some(4),
            max_growth_per_iteration: Some(5),
            max_lost: Some(8),
            max_held: Some(9),
            max_leaked_tasks: Some(10),
            max_lingering_tasks: Some(11),
        };
        assert_eq!(
            written,
            Written {
                budgets,
                warmup: 6,
                iterations: Some(7),
                attribution: Some(Attribution::Process),
                allow: &["regex::"],
            }
        );
        assert_eq!(resolve(&[]).unwrap(), Written::default());
        assert_eq!(resolve(&[("attribution", Value::Text("thread"))]).unwrap().attribution, Some(Attribution::Thread));
    }

    #[test]
    fn a_value_the_table_does_not_allow_is_refused_naming_its_argument() {
        let refused = |arguments: &[(&str, Value)]| resolve(arguments).unwrap_err().to_string();
        assert_eq!(refused(&[("max_retain", Value::Number(1))]), "`max_retain` is not an argument of `leak_test`");
        assert_eq!(refused(&[("warmup", Value::Number(1)), ("warmup", Value::Number(2))]), "`warmup` is given twice");
        assert_eq!(refused(&[("max_peak", Value::Text("1 KiB"))]), "the value of `max_peak` is not of its kind");
        assert_eq!(refused(&[("attribution", Value::Text("all"))]), "the value of `attribution` is not of its kind");
        assert_eq!(refused(&[("crate", Value::Text("yr"))]), "the value of `crate` is not of its kind");
        assert_eq!(refused(&[("iterations", Value::Number(0))]), "the value of `iterations` is outside its limits");
        let too_many = Value::Number(u64::from(u32::MAX) + 1);
        assert_eq!(refused(&[("warmup", too_many)]), "the value of `warmup` is outside its limits");
    }

    #[test]
    fn names_are_unique_and_each_needed_argument_is_one() {
        for (index, argument) in ARGUMENTS.iter().enumerate() {
            assert!(!ARGUMENTS[..index].iter().any(|earlier| earlier.name == argument.name), "{}", argument.name);
            assert!(!argument.doc.contains('|'), "the doc line of `{}` would split its table row", argument.name);
            if let Some(need) = argument.needs {
                assert!(super::argument(need.argument).is_some(), "`{}` needs `{}`", argument.name, need.argument);
            }
            if let Kind::Count { min, max, .. } = argument.kind {
                assert!(min <= max, "{}", argument.name);
            }
        }
    }

    #[test]
    fn the_documentation_lists_every_argument_in_order_with_its_doc_line() {
        let doc: &str = leak_test_arguments_doc!();
        let mut rows = doc.lines();
        assert_eq!(rows.next(), Some("| argument | meaning |"));
        assert_eq!(rows.next(), Some("|---|---|"));
        for argument in ARGUMENTS {
            assert_eq!(rows.next(), Some(format!("| `{}` | {} |", argument.name, argument.doc).as_str()));
        }
        assert_eq!(rows.next(), None);
    }
}
