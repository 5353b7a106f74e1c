//! What `cargo test` runs and `cargo ying test` does not, said rather than dropped: the library's doctests (rustdoc
//! builds and runs them; they are no test binary to list), when it has some, and targets with their own harness (`harness = false`),
//! whose `main` is the user's and knows nothing of libtest's `--list`. Those are set aside before discovery and never
//! started. Each is reported with why and the command that runs it.
//!
//! `cargo metadata` does not tell a target's `harness`: it is read from the package's Cargo.toml (`[lib]`,
//! `[[bin]]`, `[[test]]`, `[[bench]]`, `[[example]]` with `harness = false`).

use crate::error::{Error, ManifestError, Result};
use crate::run::select::build::TestBinary;
use cargo_metadata::Metadata;
use std::collections::BTreeSet;
use std::path::Path;
use ying_report::{NotRunTarget, TargetKind};

/// Why a doctest is not run.
pub(crate) const DOCTEST_REASON: &str = "doctests are built and run by rustdoc, not listed by a test binary";
/// Why a target with its own harness is not run.
pub(crate) const CUSTOM_HARNESS_REASON: &str = "harness = false: its own main, which cannot list its tests";

/// The test binaries to discover, and what is not run.
#[derive(Debug)]
pub(crate) struct Split {
    /// Binaries with libtest's harness: their tests are listed and run.
    pub binaries: Vec<TestBinary>,
    /// Binaries with their own harness: never started.
    pub own_harness: Vec<TestBinary>,
    /// Doctests and custom-harness targets, in the order of the packages and their binaries.
    pub not_run: Vec<NotRunTarget>,
}

/// Sets aside the built `binaries` that have their own harness and names the doctests `cargo test` would run
/// (only when no target is selected: `--lib`, `--bins`, `--tests`, `--examples`, `--all-targets` and the named
/// targets leave doctests out under `cargo test` too: `targets_selected`). The packages considered are those with a
/// test binary built.
pub(crate) fn split(binaries: Vec<TestBinary>, metadata: &Metadata, targets_selected: bool) -> Result<Split> {
    let mut packages: Vec<String> = Vec::new();
    for binary in &binaries {
        if !packages.contains(&binary.package) {
            packages.push(binary.package.clone());
        }
    }
    let mut custom = BTreeSet::new();
    let mut not_run = Vec::new();
    for name in &packages {
        let Some(package) = metadata.workspace_packages().into_iter().find(|package| package.name.as_str() == name)
        else {
            continue;
        };
        let manifest = package.manifest_path.as_std_path();
        for (kind, target) in custom_harness_targets(manifest)? {
            custom.insert((name.clone(), kind, target));
        }
        let doctested = package.targets.iter().find(|target| {
            target.doctest
                && crate::run::select::build::target_kind(target) == Some(TargetKind::Lib)
                && crate::run::select::doctests::has_doctests(target.src_path.as_std_path())
        });
        if let (false, Some(lib)) = (targets_selected, doctested) {
            not_run.push(NotRunTarget {
                package: name.clone(),
                kind: "doctest".to_owned(),
                target: lib.name.clone(),
                reason: DOCTEST_REASON.to_owned(),
                command: format!("cargo test --doc -p {name}"),
            });
        }
        for binary in binaries.iter().filter(|binary| &binary.package == name) {
            if is_custom(&custom, binary) {
                not_run.push(NotRunTarget {
                    package: name.clone(),
                    kind: binary.kind.name().to_owned(),
                    target: binary.name.clone(),
                    reason: CUSTOM_HARNESS_REASON.to_owned(),
                    command: command(name, binary.kind, &binary.name),
                });
            }
        }
    }
    let (own_harness, binaries) = binaries.into_iter().partition(|binary| is_custom(&custom, binary));
    Ok(Split { binaries, own_harness, not_run })
}

/// Whether `binary` is one of the `custom` targets. The library matches by kind: a package has one, and its
/// `[lib]` table need not name it.
fn is_custom(custom: &BTreeSet<(String, TargetKind, Option<String>)>, binary: &TestBinary) -> bool {
    let target = (binary.kind != TargetKind::Lib).then(|| binary.name.clone());
    custom.contains(&(binary.package.clone(), binary.kind, target))
}

/// The command that runs the target `name` of kind `kind` of `package` as `cargo test` does.
pub(crate) fn command(package: &str, kind: TargetKind, name: &str) -> String {
    match kind {
        TargetKind::Lib => format!("cargo test -p {package} --lib"),
        kind => format!("cargo test -p {package} --{kind} {name}"),
    }
}

/// A line for the terminal: `leak-fixtures::custom_harness (harness = false: ...): cargo test -p ...`.
pub(crate) fn describe(target: &NotRunTarget) -> String {
    let what = if target.kind == "doctest" {
        format!("{} doctests", target.package)
    } else {
        let kind = TargetKind::from_cargo(&[target.kind.as_str()]).unwrap_or(TargetKind::Test);
        ying_report::TestId::new(&target.package, kind, &target.target, "").binary_id()
    };
    format!("{what} ({}): run with `{}`", target.reason, target.command)
}

/// The targets of the manifest at `path` with `harness = false`: the library as `(Lib, None)`, the others with their
/// name (`name`, else the file stem of `path`, as cargo infers it).
fn custom_harness_targets(path: &Path) -> Result<Vec<(TargetKind, Option<String>)>> {
    let error = |source| Error::Manifest { path: path.to_owned(), source };
    let text = ying_report::read_text(path).map_err(|why| error(ManifestError::Io(why.into())))?;
    let manifest: toml::Table = text.parse().map_err(|why| error(ManifestError::Toml(why)))?;
    Ok(parse_custom_harness(&manifest))
}

fn parse_custom_harness(manifest: &toml::Table) -> Vec<(TargetKind, Option<String>)> {
    let custom = |table: &toml::Table| table.get("harness").and_then(toml::Value::as_bool) == Some(false);
    let mut targets = Vec::new();
    if manifest.get("lib").and_then(toml::Value::as_table).is_some_and(custom) {
        targets.push((TargetKind::Lib, None));
    }
    for (key, kind) in [
        ("bin", TargetKind::Bin),
        ("test", TargetKind::Test),
        ("bench", TargetKind::Bench),
        ("example", TargetKind::Example),
    ] {
        let tables = manifest.get(key).and_then(toml::Value::as_array).into_iter().flatten();
        for table in tables.filter_map(toml::Value::as_table).filter(|table| custom(table)) {
            let name = table.get("name").and_then(toml::Value::as_str).map(str::to_owned).or_else(|| {
                let path = table.get("path").and_then(toml::Value::as_str)?;
                Some(Path::new(path).file_stem()?.to_string_lossy().into_owned())
            });
            if let Some(name) = name {
                targets.push((kind, Some(name)));
            }
        }
    }
    targets
}

#[cfg(test)]
mod tests {
    use super::{command, custom_harness_targets, describe, parse_custom_harness};
    use ying_report::{NotRunTarget, TargetKind};

    #[test]
    fn targets_with_harness_false_are_found_by_name_or_path() {
        let manifest: toml::Table = r#"
            [package]
            name = "p"
            [lib]
            harness = false
            [[test]]
            name = "custom"
            harness = false
            [[test]]
            name = "plain"
            [[test]]
            name = "explicit"
            harness = true
            [[bench]]
            path = "benches/speed.rs"
            harness = false
            [[bin]]
            name = "tool"
        "#
        .parse()
        .unwrap();
        assert_eq!(
            parse_custom_harness(&manifest),
            [
                (TargetKind::Lib, None),
                (TargetKind::Test, Some("custom".to_owned())),
                (TargetKind::Bench, Some("speed".to_owned()))
            ]
        );
        assert!(parse_custom_harness(&"[package]\nname = \"p\"".parse().unwrap()).is_empty());
    }

    #[test]
    fn each_kind_has_the_command_that_runs_it() {
        assert_eq!(command("p", TargetKind::Test, "custom"), "cargo test -p p --test custom");
        assert_eq!(command("p", TargetKind::Lib, "p"), "cargo test -p p --lib");
        assert_eq!(command("p", TargetKind::Bin, "tool"), "cargo test -p p --bin tool");
        assert_eq!(command("p", TargetKind::Example, "e"), "cargo test -p p --example e");
        let target = |kind: &str, target: &str, command: &str| NotRunTarget {
            package: "p".to_owned(),
            kind: kind.to_owned(),
            target: target.to_owned(),
            reason: "why".to_owned(),
            command: command.to_owned(),
        };
        assert_eq!(
            describe(&target("test", "custom", "cargo test -p p --test custom")),
            "p::custom (why): run with `cargo test -p p --test custom`"
        );
        assert_eq!(
            describe(&target("doctest", "p", "cargo test --doc -p p")),
            "p doctests (why): run with `cargo test --doc -p p`"
        );
        assert_eq!(describe(&target("bin", "tool", "c")), "p::bin/tool (why): run with `c`");
    }

    #[test]
    fn a_manifest_that_is_not_toml_is_a_usage_error_naming_the_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Cargo.toml");
        std::fs::write(&path, "[package]\nname = \"p\"\n[[test]\n").unwrap();
        let error = custom_harness_targets(&path).unwrap_err();
        assert_eq!(error.exit_code(), ying_report::exit_code::USAGE);
        let chain = error.chain();
        assert!(chain.starts_with(&format!("failed to read the targets of {}: ", path.display())), "{chain}");
        assert!(chain.contains("line 3, column"), "{chain}");
    }
}
