//! The crate's layering, as a test that reads `src/`: every module stands on a floor and imports (by `crate::`
//! path, in `use` lines or inline) only modules on its own floor or below; and the outputs, which decide nothing,
//! never import the pipeline's runner or its processes.
//!
//! | floor | modules |
//! |---|---|
//! | 6 | `lib.rs` |
//! | 5 | `commands/` |
//! | 4 | `cli`, `settings`: the command line, resolved; `ending`: the end of a run, which two commands share |
//! | 3 | `outputs/` |
//! | 2 | `run/` |
//! | 1 | `model`, `baseline`, `saved`: the verdict; `nextest`: nextest's profile, and what its runs leave |
//! | 0 | `error`, `signals`, `lock`, `gate`, `config`, `workspace` |

use std::path::{Path, PathBuf};

/// The floor of a module, by its path under `src/` (`run/runner`); `None` for one this table does not know.
fn floor(module: &str) -> Option<u8> {
    let top = module.split('/').next().unwrap_or(module);
    Some(match top {
        "lib" | "main" | "layers" => 6,
        "commands" => 5,
        "cli" | "settings" | "ending" => 4,
        "outputs" => 3,
        "run" => 2,
        "model" | "baseline" | "saved" | "nextest" => 1,
        "error" | "signals" | "lock" | "gate" | "config" | "workspace" => 0,
        _ => return None,
    })
}

/// What the outputs may never import: the pipeline's runner and the processes it starts.
const NEVER_FROM_OUTPUTS: &[&str] = &["run/runner", "run/process"];

/// One import of one file: the line, and the module it names (`run/runner`), as far as a module of the tree goes.
#[derive(Debug, PartialEq, Eq)]
struct Import {
    line: usize,
    module: String,
}

/// The `crate::` imports of `source`, whose modules are those in `modules` (paths under `src/`, `run/runner`).
/// Comment lines are skipped: a documentation link is no import.
fn imports(source: &str, modules: &[String]) -> Vec<Import> {
    let mut found = Vec::new();
    for (index, line) in source.lines().enumerate() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            // `crate::` inside a longer name (`ying_crate::`) is not this crate.
            let inside_name = rest[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_');
            if !inside_name {
                for path in paths(after) {
                    if let Some(module) = module_of(&path, modules) {
                        found.push(Import { line: index + 1, module });
                    }
                }
            }
            rest = after;
        }
    }
    found
}

/// The paths written after `crate::`: one (`run::runner::run`), or each of a group (`{model::Run, signals}`), as
/// segments.
fn paths(text: &str) -> Vec<Vec<String>> {
    let segment = |text: &str| text.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    if let Some(group) = text.strip_prefix('{') {
        let end = group.find('}').unwrap_or(group.len());
        return group[..end].split(',').map(|item| item.trim().split("::").map(segment).collect()).collect();
    }
    let mut path = Vec::new();
    let mut rest = text;
    loop {
        let name = segment(rest);
        if name.is_empty() {
            break;
        }
        rest = &rest[name.len()..];
        path.push(name);
        match rest.strip_prefix("::") {
            Some(next) if !next.starts_with('{') => rest = next,
            _ => break,
        }
    }
    vec![path]
}

/// The longest module of `modules` that `path` starts with (`run/runner` for `run::runner::run`).
fn module_of(path: &[String], modules: &[String]) -> Option<String> {
    (1..=path.len()).rev().map(|length| path[..length].join("/")).find(|module| modules.contains(module))
}

/// Every `.rs` file under `dir`, with its module path (`run/runner`, `run` for `run/mod.rs`).
fn files(dir: &Path, prefix: &str, found: &mut Vec<(String, PathBuf)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).expect("src/ is readable").flatten().collect();
    entries.sort_by_key(std::fs::DirEntry::path);
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            files(&path, &format!("{prefix}{name}/"), found);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            let module =
                if stem == "mod" { prefix.trim_end_matches('/').to_owned() } else { format!("{prefix}{stem}") };
            found.push((module, path));
        }
    }
}

/// What breaks the layering in the files given as (module, source): one line per import, naming the file, the
/// line and the rule.
fn breaches(sources: &[(String, String)]) -> Vec<String> {
    let modules: Vec<String> = sources.iter().map(|(module, _)| module.clone()).collect();
    let mut breaches = Vec::new();
    for (module, source) in sources {
        let Some(own) = floor(module) else {
            breaches.push(format!("src/{module}.rs: a module on no floor; give it one in `layers::floor`"));
            continue;
        };
        for import in imports(source, &modules) {
            let at = format!("src/{module}.rs:{}: imports `{}`", import.line, import.module);
            match floor(&import.module) {
                Some(theirs) if theirs > own => {
                    breaches.push(format!("{at}, on floor {theirs}, from floor {own}: an import runs up"));
                }
                _ => {}
            }
            if module.starts_with("outputs") && NEVER_FROM_OUTPUTS.contains(&import.module.as_str()) {
                breaches.push(format!("{at}: the outputs read the run model, never the runner or its processes"));
            }
        }
    }
    breaches
}

#[cfg(test)]
mod tests {
    use super::{Import, breaches, files, imports};
    use std::path::Path;

    #[test]
    fn no_import_runs_up_and_the_outputs_never_reach_the_runner() {
        let mut found = Vec::new();
        files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), "", &mut found);
        assert!(found.len() > 30, "the tree was read: {found:?}");
        let sources: Vec<(String, String)> = found
            .into_iter()
            .map(|(module, path)| (module, std::fs::read_to_string(path).expect("a source file is readable")))
            .collect();
        let breaches = breaches(&sources);
        assert!(breaches.is_empty(), "the layering is broken:\n{}", breaches.join("\n"));
    }

    #[test]
    fn a_breach_of_each_rule_is_found_with_its_file_and_line() {
        let sources = [
            ("model".to_owned(), "use crate::gate::Gating;\nuse crate::run::runner::RunOptions;\n".to_owned()),
            (
                "outputs/terminal".to_owned(),
                "// [`x`](crate::run::process)\nlet x = crate::run::process::name();\n".to_owned(),
            ),
            ("run/runner".to_owned(), "use crate::{model::TestRecord, settings::Settings};\n".to_owned()),
            ("run/process".to_owned(), String::new()),
            ("gate".to_owned(), "use ying_crate::cli::X;\n".to_owned()),
            ("settings".to_owned(), String::new()),
            ("cli".to_owned(), String::new()),
            ("stray".to_owned(), String::new()),
        ];
        assert_eq!(
            breaches(&sources),
            [
                "src/model.rs:2: imports `run/runner`, on floor 2, from floor 1: an import runs up",
                "src/outputs/terminal.rs:2: imports `run/process`: the outputs read the run model, never the runner \
                 or its processes",
                "src/run/runner.rs:1: imports `settings`, on floor 4, from floor 2: an import runs up",
                "src/stray.rs: a module on no floor; give it one in `layers::floor`",
            ]
        );
    }

    #[test]
    fn grouped_and_inline_paths_name_their_modules() {
        let modules = ["run".to_owned(), "run/plan".to_owned(), "model".to_owned(), "signals".to_owned()];
        let source = "use crate::{model::Run, signals};\nfn f() { crate::run::plan::Plan::make() }\n";
        let found = imports(source, &modules);
        let expected = [(1, "model"), (1, "signals"), (2, "run/plan")]
            .map(|(line, module)| Import { line, module: module.to_owned() });
        assert_eq!(found, expected);
    }
}
