//! The rules, checked on one crate's `src/` against its table, each breach one line:
//!
//! - every file stands on a floor of the table;
//! - no import runs up to a higher floor;
//! - no circle between files, the files of one floor included: each circle is told once, with every arrow of it;
//! - the table's own rules: imports it never allows ([`Never`](crate::table::Never)), folders whose files never
//!   import one another ([`Apart`](crate::table::Apart)).
//!
//! An arrow of a circle that also runs up is told in its circle, marked as running up, and not again.

use std::collections::BTreeMap;
use std::fmt;

use crate::graph::circles;
use crate::modules::Modules;
use crate::paths::{Import, imports};
use crate::source::Source;
use crate::table::{Table, covers};

/// The rule a breach breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Every member has a table, and every table a member.
    Table,
    /// Every file stands on a floor.
    NoFloor,
    /// No import runs up to a higher floor.
    RunsUp,
    /// No circle between files.
    Circle,
    /// An import the table never allows.
    Never,
    /// Files of a folder kept apart import one another.
    Apart,
}

/// A breach of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breach {
    /// The rule it breaks.
    pub rule: Rule,
    /// Every place it names (`crate/src/file.rs:LINE`, or `crate/src/file.rs` for a file on no floor), the first
    /// where it is.
    pub sites: Vec<String>,
    /// The line that tells it: where, what is imported, and the rule or the fix.
    pub message: String,
}

impl fmt::Display for Breach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// One line's imports of one file from another, the leaves of a group together.
#[derive(Debug)]
struct Arrow {
    /// The line.
    line: usize,
    /// The path as one (`crate::cli::{GateOptions, TestArgs}`).
    path: String,
}

/// The breaches of the crate `table.member`, whose `src/` holds `files` (each its path under `src/`, with `/`
/// between folders, and its text): files on no floor first, then the imports' breaches by file and line, then the
/// circles.
pub fn check(table: &Table, files: &[(String, String)]) -> Vec<Breach> {
    let read = Crate::read(table, files);
    let mut breaches = read.files_on_no_floor();
    breaches.extend(read.imports_breaking(table));
    breaches.extend(read.circles.iter().map(|circle| read.circle(circle)));
    breaches
}

/// A crate, read: its files, the floor of each, the arrows between them and its circles.
struct Crate {
    /// The crate, as the workspace names it.
    member: &'static str,
    /// Its files.
    modules: Modules,
    /// The floor of each file and the entry that places it there.
    floors: Vec<Option<(usize, &'static str)>>,
    /// Every arrow between two files (from, to), with its lines.
    arrows: BTreeMap<(usize, usize), Vec<Arrow>>,
    /// Its circles.
    circles: Vec<Vec<usize>>,
}

impl Crate {
    /// Reads the crate `table.member`, whose `src/` holds `files`.
    fn read(table: &Table, files: &[(String, String)]) -> Self {
        let modules = Modules::new(files.iter().map(|(path, _)| path.as_str()));
        let floors = modules.files.iter().map(|file| table.floor_of(&file.name)).collect();
        let mut arrows: BTreeMap<(usize, usize), Vec<Arrow>> = BTreeMap::new();
        for (file, (_, text)) in files.iter().enumerate() {
            for (to, arrow) in merged(imports(&modules, file, &Source::read(text))) {
                arrows.entry((file, to)).or_default().push(arrow);
            }
        }
        let pairs: Vec<(usize, usize)> = arrows.keys().copied().collect();
        let circles = circles(files.len(), &pairs);
        Self { member: table.member, modules, floors, arrows, circles }
    }

    /// The module of `file`, as a table names it.
    fn name(&self, file: usize) -> &str {
        &self.modules.files[file].name
    }

    /// Where `file` is, as a breach names it: `crate/src/file.rs`.
    fn path(&self, file: usize) -> String {
        format!("{}/src/{}", self.member, self.modules.files[file].path)
    }

    /// The floors of an arrow that runs up (its file's, the floor it reaches and the entry that places that file
    /// there); `None` for one that does not.
    fn runs_up(&self, from: usize, to: usize) -> Option<(usize, usize, &'static str)> {
        match (self.floors[from], self.floors[to]) {
            (Some((own, _)), Some((theirs, entry))) if theirs > own => Some((own, theirs, entry)),
            _ => None,
        }
    }

    /// Every arrow, in the order of its file's path and its line.
    fn arrows_by_file(&self) -> Vec<(usize, usize, &Arrow)> {
        let mut arrows: Vec<(usize, usize, &Arrow)> = self
            .arrows
            .iter()
            .flat_map(|(&(from, to), lines)| lines.iter().map(move |arrow| (from, to, arrow)))
            .collect();
        arrows
            .sort_by(|a, b| (&self.modules.files[a.0].path, a.2.line).cmp(&(&self.modules.files[b.0].path, b.2.line)));
        arrows
    }

    /// The files that stand on no floor, in the order of their paths.
    fn files_on_no_floor(&self) -> Vec<Breach> {
        let mut breaches: Vec<Breach> = (0..self.floors.len())
            .filter(|&file| self.floors[file].is_none())
            .map(|file| {
                let name = self.name(file);
                let entries = match name.split_once('/') {
                    Some((folder, _)) => format!("\"{folder}/\" or \"{name}\""),
                    None => format!("\"{name}\""),
                };
                Breach {
                    rule: Rule::NoFloor,
                    sites: vec![self.path(file)],
                    message: format!(
                        "{}: stands on no floor of {}'s table; add {entries} to a floor in ying-house/src/floors.rs",
                        self.path(file),
                        self.member,
                    ),
                }
            })
            .collect();
        breaches.sort_by(|a, b| a.sites.cmp(&b.sites));
        breaches
    }

    /// The imports that run up (outside a circle, which tells its own), that the table never allows, or that join
    /// two files of a folder kept apart.
    fn imports_breaking(&self, table: &Table) -> Vec<Breach> {
        let mut breaches = Vec::new();
        for (from, to, arrow) in self.arrows_by_file() {
            let site = format!("{}:{}", self.path(from), arrow.line);
            let at = format!("{site}: `{}` imports {}", arrow.path, self.name(to));
            let mut breach = |rule: Rule, message: String| {
                breaches.push(Breach { rule, sites: vec![site.clone()], message });
            };
            let in_circle = self.circles.iter().any(|circle| circle.contains(&from) && circle.contains(&to));
            if let Some((own, theirs, entry)) = self.runs_up(from, to).filter(|_| !in_circle) {
                let why = "an import runs up; move what it needs down, or the importer up";
                breach(Rule::RunsUp, format!("{at}, on floor {theirs} (\"{entry}\"), from floor {own}: {why}"));
            }
            for never in table.never {
                if covers(never.from, self.name(from)) && never.to.iter().any(|&entry| covers(entry, self.name(to))) {
                    let never_to = never.to.join(", ");
                    breach(Rule::Never, format!("{at}: \"{}\" never imports {never_to}: {}", never.from, never.why));
                }
            }
            for apart in table.apart {
                let inside = |file: usize| {
                    covers(apart.folder, self.name(file)) && self.name(file) != apart.folder.trim_end_matches('/')
                };
                if inside(from) && inside(to) {
                    let why = apart.why;
                    breach(
                        Rule::Apart,
                        format!("{at}: the files of \"{}\" never import one another: {why}", apart.folder),
                    );
                }
            }
        }
        breaches
    }

    /// The breach of `circle`: every arrow between its files, in the order of their files' paths and lines, those
    /// that run up marked.
    fn circle(&self, circle: &[usize]) -> Breach {
        let arrows = self.arrows_by_file();
        let inside = arrows.iter().filter(|&&(from, to, _)| circle.contains(&from) && circle.contains(&to));
        let (sites, told): (Vec<String>, Vec<String>) = inside
            .map(|&(from, to, arrow)| {
                let site = format!("{}:{}", self.path(from), arrow.line);
                let up = self.runs_up(from, to);
                let up = up.map_or(String::new(), |(own, theirs, _)| format!(" (runs up, floor {own} to {theirs})"));
                let told = format!("{site} `{}` -> {}{up}", arrow.path, self.name(to));
                (site, told)
            })
            .unzip();
        let mut names: Vec<&str> = circle.iter().map(|&file| self.name(file)).collect();
        names.sort_unstable();
        let message = format!(
            "{}: a circle between {}: {}; close it at its cause",
            self.member,
            names.join(", "),
            told.join(", ")
        );
        Breach { rule: Rule::Circle, sites, message }
    }
}

/// `imports` as arrows, each with the file it names: one per line and file, the leaves of a group on one line
/// written as one path.
fn merged(imports: Vec<Import>) -> Vec<(usize, Arrow)> {
    let mut lines: BTreeMap<(usize, usize), Vec<String>> = BTreeMap::new();
    for import in imports {
        let paths = lines.entry((import.to, import.line)).or_default();
        if !paths.contains(&import.path) {
            paths.push(import.path);
        }
    }
    lines.into_iter().map(|((to, line), paths)| (to, Arrow { line, path: one_path(&paths) })).collect()
}

/// `paths` (different paths written on one line) as one: the leaves of a group as their group
/// (`crate::cli::{GateOptions, TestArgs}`, `crate::read::symbolize::{self, symbolize}`), others side by side.
fn one_path(paths: &[String]) -> String {
    if let [path] = paths {
        return path.clone();
    }
    let split: Vec<Vec<&str>> = paths.iter().map(|path| path.split("::").collect()).collect();
    let mut common = 0;
    while split.iter().all(|segments| segments.len() > common && segments[common] == split[0][common]) {
        common += 1;
    }
    if common == 0 {
        return paths.join("`, `");
    }
    let branches: Vec<String> = split
        .iter()
        .map(|segments| if segments.len() == common { "self".to_owned() } else { segments[common..].join("::") })
        .collect();
    format!("{}::{{{}}}", split[0][..common].join("::"), branches.join(", "))
}

#[cfg(test)]
mod tests {
    use super::{Breach, Rule, check};
    use crate::floors::{CARGO_YING, YING_REPORT, YING_RUNTIME};
    use crate::paths::tests::RUNTIME_EXAMPLE;
    use crate::table::Table;

    /// The breaches of `files` (path under `src/`, text) against `table`.
    fn breaches(table: &Table, files: &[(&str, &str)]) -> Vec<Breach> {
        let files: Vec<(String, String)> =
            files.iter().map(|&(path, text)| (path.to_owned(), text.to_owned())).collect();
        check(table, &files)
    }

    /// Each breach's rule and sites.
    fn where_what(breaches: &[Breach]) -> Vec<(Rule, Vec<&str>)> {
        breaches.iter().map(|breach| (breach.rule, breach.sites.iter().map(String::as_str).collect())).collect()
    }

    #[test]
    fn a_breach_of_each_rule_is_found_with_its_file_and_line() {
        let files = [
            ("lib.rs", "mod commands;\nmod model;\nfn main() { commands::gate::run() }\n"),
            ("model.rs", "use crate::gate::Gating;\nuse crate::run::exec::runner::RunOptions;\n"),
            ("outputs/terminal.rs", "// [`x`](crate::run::process)\nfn f() { crate::run::process::name(); }\n"),
            ("run/exec/runner.rs", "use crate::{gate::Gating, settings::Settings};\n"),
            ("run/process.rs", ""),
            ("gate.rs", "use ying_crate::cli::X;\n"),
            ("settings.rs", ""),
            ("stray.rs", ""),
            ("commands/mod.rs", "pub(crate) mod gate;\npub(crate) mod test;\n"),
            ("commands/gate.rs", "\nuse super::test::run_tests;\n"),
            ("commands/test.rs", "use crate::settings::Settings;\n"),
        ];
        let found = breaches(&CARGO_YING, &files);
        assert_eq!(
            where_what(&found),
            [
                (Rule::NoFloor, vec!["cargo-ying/src/stray.rs"]),
                (Rule::Apart, vec!["cargo-ying/src/commands/gate.rs:2"]),
                (Rule::RunsUp, vec!["cargo-ying/src/model.rs:2"]),
                (Rule::Never, vec!["cargo-ying/src/outputs/terminal.rs:2"]),
                (Rule::RunsUp, vec!["cargo-ying/src/run/exec/runner.rs:1"]),
            ],
            "{found:#?}"
        );
        let lines: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "cargo-ying/src/stray.rs: stands on no floor of cargo-ying's table; add \"stray\" to a floor in \
                 ying-house/src/floors.rs",
                "cargo-ying/src/commands/gate.rs:2: `super::test::run_tests` imports commands/test: the files of \
                 \"commands/\" never import one another: commands share code only through the modules below them",
                "cargo-ying/src/model.rs:2: `crate::run::exec::runner::RunOptions` imports run/exec/runner, on floor 5 \
                 (\"run/exec/\"), from floor 1: an import runs up; move what it needs down, or the importer up",
                "cargo-ying/src/outputs/terminal.rs:2: `crate::run::process::name` imports run/process: \"outputs/\" \
                 never imports run/exec/, run/process: the outputs read the run's model, never the tests' execution \
                 or the processes it starts",
                "cargo-ying/src/run/exec/runner.rs:1: `crate::settings::Settings` imports settings, on floor 7 \
                 (\"settings\"), from floor 5: an import runs up; move what it needs down, or the importer up",
            ]
        );
    }

    #[test]
    fn a_path_up_a_layer_or_through_the_root_is_refused() {
        let source = RUNTIME_EXAMPLE;
        let mut files = vec![
            ("lib.rs", ""),
            ("base/mod.rs", ""),
            ("hot/mod.rs", ""),
            ("read/mod.rs", ""),
            ("products/mod.rs", ""),
            ("base/ids.rs", ""),
            ("hot/stacks.rs", ""),
            ("hot/scope/mod.rs", ""),
            ("hot/scope/parts.rs", ""),
            ("read/symbolize.rs", ""),
            ("read/stack_stats.rs", ""),
            ("products/measure.rs", ""),
            ("products/report.rs", ""),
            ("products/spans.rs", ""),
            ("hot/scope/example.rs", source),
        ];
        let found = breaches(&YING_RUNTIME, &files);
        let lines: Vec<&str> = found.iter().map(|breach| breach.sites[0].as_str()).collect();
        let at = "ying-runtime/src/hot/scope/example.rs";
        assert_eq!(lines, [2, 5, 7, 8, 8, 14].map(|line| format!("{at}:{line}")), "{found:#?}");
        assert!(found.iter().all(|breach| breach.rule == Rule::RunsUp));
        assert_eq!(
            found[2].to_string(),
            format!(
                "{at}:7: `crate::Scope` imports lib, on floor 4 (\"lib\"), from floor 1: an import runs up; move \
                     what it needs down, or the importer up"
            )
        );
        assert!(found[1].message.contains("`crate::read::symbolize::{self, symbolize}` imports read/symbolize"));
        // From the top layer, only the path through the root's re-exports runs up.
        files.last_mut().expect("the example").0 = "products/example/deeper.rs";
        let found = breaches(&YING_RUNTIME, &files);
        assert_eq!(where_what(&found), [(Rule::RunsUp, vec!["ying-runtime/src/products/example/deeper.rs:7"])]);
        // The crate root may use anything; a folder that is no layer is refused.
        files.last_mut().expect("the example").0 = "extra/file.rs";
        let found = breaches(&YING_RUNTIME, &files);
        assert_eq!(
            found[0].to_string(),
            "ying-runtime/src/extra/file.rs: stands on no floor of ying-runtime's table; add \"extra/\" or \
             \"extra/file\" to a floor in ying-house/src/floors.rs"
        );
        assert!(
            breaches(&YING_RUNTIME, &[("lib.rs", source), ("products/mod.rs", ""), ("read/mod.rs", "")]).is_empty()
        );
    }

    #[test]
    fn the_circle_between_cli_and_settings_is_found() {
        let files = [
            ("lib.rs", "mod cli;\nmod config;\nmod settings;\n"),
            (
                "cli.rs",
                "use clap::Parser;\n\nfn test_threads(text: &str) {\n    crate::config::test_threads(text, crate::settings::cores())\n}\n",
            ),
            ("settings.rs", "//! Settings.\n\nuse crate::cli::{GateOptions, TestArgs, TestFilter};\n"),
            ("config.rs", ""),
        ];
        let found = breaches(&CARGO_YING, &files);
        assert_eq!(
            where_what(&found),
            [(Rule::Circle, vec!["cargo-ying/src/cli.rs:4", "cargo-ying/src/settings.rs:3"])]
        );
        assert_eq!(
            found[0].to_string(),
            "cargo-ying: a circle between cli, settings: cargo-ying/src/cli.rs:4 `crate::settings::cores` -> settings, \
             cargo-ying/src/settings.rs:3 `crate::cli::{GateOptions, TestArgs, TestFilter}` -> cli; close it at its cause"
        );
    }

    #[test]
    fn the_circle_of_code_units_symbols_and_types_is_found() {
        // As it stood in `run/`, and as it would come back in `run/names/` were `map_executable` put back in
        // `symbols`, which the other two read it from.
        for folder in ["run", "run/names"] {
            let path = folder.replace('/', "::");
            let files = [
                ("run/mod.rs".to_owned(), "pub(crate) mod names;\n".to_owned()),
                (
                    format!("{folder}/mod.rs"),
                    "pub(crate) mod code_units;\npub(crate) mod symbols;\npub(crate) mod types;\n".to_owned(),
                ),
                (
                    format!("{folder}/code_units.rs"),
                    "fn units() {\n    let Some((_, bytes)) = super::symbols::map_executable(executable) else { \
                     return units };\n}\n"
                        .to_owned(),
                ),
                (
                    format!("{folder}/symbols.rs"),
                    format!(
                        "use crate::{path}::code_units::{{CodeKey, CodeUnits}};\n\
                         fn types() {{ self.debug_types.get_or_insert_with(|| crate::{path}::types::open(path)) }}\n"
                    ),
                ),
                (
                    format!("{folder}/types.rs"),
                    "pub(crate) fn open() {\n    let (_, map) = super::symbols::map_executable(executable)?;\n}\n"
                        .to_owned(),
                ),
            ];
            let files: Vec<(&str, &str)> = files.iter().map(|(file, text)| (file.as_str(), text.as_str())).collect();
            let found: Vec<_> = breaches(&CARGO_YING, &files)
                .into_iter()
                .filter(|breach| breach.rule != Rule::NoFloor || folder == "run/names")
                .collect();
            let sites = ["code_units.rs:2", "symbols.rs:1", "symbols.rs:2", "types.rs:2"]
                .map(|site| format!("cargo-ying/src/{folder}/{site}"));
            assert_eq!(where_what(&found), [(Rule::Circle, sites.iter().map(String::as_str).collect())], "{found:#?}");
            assert!(found[0].message.starts_with(&format!(
                "cargo-ying: a circle between {folder}/code_units, {folder}/symbols, {folder}/types: "
            )));
            assert!(found[0].message.contains(&format!("`super::symbols::map_executable` -> {folder}/symbols")));
            assert!(found[0].message.ends_with("close it at its cause"));
        }
    }

    #[test]
    fn the_circle_of_baseline_summary_and_totals_is_found_and_the_fixed_state_holds() {
        let summary = "\
use crate::baseline::{Measured, Sites};
use crate::figures::Figures;
use crate::totals::Totals;
struct SummaryTest {
    #[serde(default, skip_serializing_if = \"Vec::is_empty\", with = \"crate::baseline::sites\")]
    sites: Sites,
}
";
        let files = [
            ("lib.rs", "pub mod baseline;\npub mod summary;\nmod totals;\npub use totals::Totals;\n"),
            ("baseline.rs", "use crate::figures::{Figure, Figures};\nuse crate::summary::SummaryTest;\n"),
            ("summary.rs", summary),
            ("totals.rs", "//! A run's totals.\n\nuse crate::summary::{GateVerdict, TestOutcome};\n"),
            ("figures.rs", "use crate::report::LeakReport;\n"),
            ("report.rs", ""),
        ];
        let found = breaches(&YING_REPORT, &files);
        // The arrows that run up are told in the circle, not again.
        assert_eq!(
            where_what(&found),
            [(
                Rule::Circle,
                vec![
                    "ying-report/src/baseline.rs:2",
                    "ying-report/src/summary.rs:1",
                    "ying-report/src/summary.rs:3",
                    "ying-report/src/summary.rs:5",
                    "ying-report/src/totals.rs:3",
                ]
            )]
        );
        assert!(found[0].message.contains(
            "ying-report/src/totals.rs:3 `crate::summary::{GateVerdict, TestOutcome}` -> summary (runs up, floor 1 to 5)"
        ));
        // With the words both formats use in `terms`, and the conversion in `summary`, no rule is broken.
        let fixed = [
            ("lib.rs", "pub mod baseline;\npub mod summary;\nmod terms;\nmod totals;\npub use terms::Measured;\n"),
            ("terms.rs", ""),
            ("baseline.rs", "use crate::figures::{Figure, Figures};\nuse crate::terms::{Measured, Sites};\n"),
            (
                "summary.rs",
                "use crate::baseline::Baseline;\nuse crate::terms::{Measured, Sites};\nuse crate::totals::Totals;\n",
            ),
            ("totals.rs", "use crate::terms::{GateVerdict, TestOutcome};\n"),
            ("figures.rs", "use crate::report::LeakReport;\n"),
            ("report.rs", ""),
        ];
        assert!(breaches(&YING_REPORT, &fixed).is_empty(), "{:#?}", breaches(&YING_REPORT, &fixed));
    }

    #[test]
    fn a_circle_between_two_files_of_one_floor_is_found() {
        let files = [
            ("error.rs", "use crate::lock::Held;\n"),
            ("lock.rs", "pub(crate) struct Held;\n\nfn f() -> crate::error::Error { todo!() }\n"),
            ("gate.rs", "use crate::error::Error;\n"),
        ];
        let found = breaches(&CARGO_YING, &files);
        assert_eq!(
            found.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["cargo-ying: a circle between error, lock: cargo-ying/src/error.rs:1 `crate::lock::Held` -> lock, \
              cargo-ying/src/lock.rs:3 `crate::error::Error` -> error; close it at its cause"]
        );
    }
}
