//! The nextest profile `ying` that `cargo ying setup nextest` writes into `.config/nextest.toml`: a setup script,
//! `ying-wrap --setup` (see `commands::setup_script`), which preloads the allocation interposer into every test of
//! the run (the interposer then starts each test's record itself: no process runs between nextest and the test), a
//! wrapper script that is `ying-wrap`, cargo-ying's small program (see `commands::wrap`), through which every binary
//! is listed (so the gate knows what nextest skipped and ignored, and each binary's known code is read once) and to
//! which the interposer hands an archive's tests, and a JUnit file (nextest's words for why a test failed). The
//! wrapper carries the interposer: an archive of the profile's tests needs nothing more. A profile that setup wrote
//! before the setup script (every test run through the wrapper) gets the setup script in the wrapper's place, one
//! written before it listed the listing rule, one without a JUnit file the file, and a script that is cargo-ying
//! itself (`cargo-ying ying wrap`, as setup wrote it before `ying-wrap`) becomes `ying-wrap`.
//!
//! The file is edited, not replaced: what is in it stays as written (comments, order, layout). `setup-scripts` and
//! `wrapper-scripts` are added to its `experimental` list; the scripts and the profile are added, or left alone when
//! they are there as setup writes them. A script or profile of those names that is something else is a conflict:
//! the file is left as it was, and the error names the table.

use crate::error::{Conflict, NextestConfigError};
use toml_edit::{DocumentMut, Item, Table};

/// The profile's name, as `cargo nextest run --profile ying` takes it.
pub(crate) const PROFILE: &str = "ying";
/// The wrapper script's name.
pub(crate) const SCRIPT: &str = "ying";
/// The setup script's name (nextest's script names are one namespace).
pub(crate) const SETUP_SCRIPT: &str = "ying-measure";
/// The setup script's command line.
const SETUP_COMMAND: &str = "ying-wrap --setup";
/// The features of nextest's the profile needs.
const FEATURES: [&str; 2] = ["setup-scripts", "wrapper-scripts"];
/// The wrapper's command line: `ying-wrap`, installed beside cargo-ying and found on the `PATH` as cargo finds
/// `cargo-ying` for `cargo ying`.
pub(crate) const WRAPPER_COMMAND: &str = "ying-wrap";
/// The wrapper's command line as earlier setups wrote it: cargo-ying itself, which still wraps a test as `ying-wrap`
/// does, at the cost of a larger program started for every test.
const EARLIER_WRAPPER_COMMAND: &str = "cargo-ying ying wrap";

/// The comment the template starts with.
fn header() -> String {
    format!(
        r#"# Measure every test nextest runs with `--profile {PROFILE}`: the setup script preloads cargo-ying's allocation
# interposer into each test, which records what it retained; `cargo ying gate` then reads the run, compares it with
# the baseline and gives the verdict. Written by `cargo ying setup nextest`.
"#
    )
}

/// The comment an earlier setup started its profile with, when each test ran under the wrapper: replaced by
/// [`header`] where it is found as written.
fn earlier_header() -> String {
    format!(
        r#"# Measure every test nextest runs with `--profile {PROFILE}`: each runs under cargo-ying, which records what it
# retained; `cargo ying gate` then reads the run, compares it with the baseline and gives the verdict. Written by
# `cargo ying setup nextest`.
"#
    )
}

/// What setup adds, as it is written into a file that has none of it.
fn template() -> String {
    let header = header();
    format!(
        r#"{header}experimental = ["setup-scripts", "wrapper-scripts"]

[scripts.setup.{SETUP_SCRIPT}]
command = "{SETUP_COMMAND}"

[scripts.wrapper.{SCRIPT}]
command = "{WRAPPER_COMMAND}"

[[profile.{PROFILE}.scripts]]
filter = "all()"
setup = "{SETUP_SCRIPT}"

[[profile.{PROFILE}.scripts]]
platform = "cfg(all())"
list-wrapper = "{SCRIPT}"

# Why a test failed, as nextest captured it, for `cargo ying gate`.
[profile.{PROFILE}.junit]
path = "junit.xml"
"#
    )
}

/// What setup did to the file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// The profile was added; the file's new text.
    Added(String),
    /// The profile was there, written by an earlier setup, and is brought up to date; the file's new text.
    Updated(String),
    /// It was there already, as setup writes it.
    AlreadySet,
}

/// Adds the profile to `text` (the file's contents; empty when there is none).
pub(crate) fn apply(text: &str) -> Result<Change, NextestConfigError> {
    if text.trim().is_empty() {
        return Ok(Change::Added(template()));
    }
    let mut document: DocumentMut = text.parse().map_err(NextestConfigError::Parse)?;
    let ours: DocumentMut = template().parse().expect("the template is TOML");
    let mut changed = false;

    // The comment an earlier setup wrote before the file's first key says how that setup measured: it says how
    // this one does.
    if let Some((mut key, _)) = document.iter_mut().next() {
        let leading = key.leaf_decor().prefix().and_then(|prefix| prefix.as_str()).unwrap_or_default().to_owned();
        if leading.contains(&earlier_header()) {
            key.leaf_decor_mut().set_prefix(leading.replacen(&earlier_header(), &header(), 1));
            changed = true;
        }
    }

    // `experimental = [..., "setup-scripts", "wrapper-scripts"]`.
    match document.get_mut("experimental") {
        None => {
            document.insert("experimental", ours["experimental"].clone());
            changed = true;
        }
        Some(item) => {
            let Some(list) = item.as_array_mut() else {
                return Err(NextestConfigError::Conflict(Conflict {
                    what: "an `experimental` that is not a list".to_owned(),
                }));
            };
            for feature in FEATURES {
                if !list.iter().any(|listed| listed.as_str() == Some(feature)) {
                    list.push(feature);
                    changed = true;
                }
            }
        }
    }

    // `[scripts.setup.ying-measure]`.
    let setups = implicit_table(implicit_table(document.as_table_mut(), "scripts")?, "setup")?;
    match setups.get(SETUP_SCRIPT) {
        None => {
            setups.insert(SETUP_SCRIPT, ours["scripts"]["setup"][SETUP_SCRIPT].clone());
            changed = true;
        }
        Some(script) if script.get("command").and_then(Item::as_str) == Some(SETUP_COMMAND) => {}
        Some(_) => {
            return Err(NextestConfigError::Conflict(Conflict { what: format!("[scripts.setup.{SETUP_SCRIPT}]") }));
        }
    }

    // `[scripts.wrapper.ying]`.
    let wrappers = implicit_table(implicit_table(document.as_table_mut(), "scripts")?, "wrapper")?;
    match wrappers.get(SCRIPT) {
        None => {
            wrappers.insert(SCRIPT, ours["scripts"]["wrapper"][SCRIPT].clone());
            changed = true;
        }
        Some(script) if script.get("command").and_then(Item::as_str) == Some(WRAPPER_COMMAND) => {}
        Some(script) if script.get("command").and_then(Item::as_str) == Some(EARLIER_WRAPPER_COMMAND) => {
            let script = wrappers.get_mut(SCRIPT).and_then(Item::as_table_like_mut).expect("a script is a table");
            if let Some(command) = script.get_mut("command").and_then(Item::as_value_mut) {
                // The string replaced, its comments and spacing kept.
                let decor = command.decor().clone();
                *command = WRAPPER_COMMAND.into();
                *command.decor_mut() = decor;
            }
            changed = true;
        }
        Some(_) => return Err(NextestConfigError::Conflict(Conflict { what: format!("[scripts.wrapper.{SCRIPT}]") })),
    }

    // `[profile.ying]`, with its rule.
    let profiles = implicit_table(document.as_table_mut(), "profile")?;
    let had_profile = profiles.contains_key(PROFILE);
    match profiles.get(PROFILE) {
        None => {
            profiles.insert(PROFILE, ours["profile"][PROFILE].clone());
            changed = true;
        }
        Some(profile) if is_ours(profile) => {
            // A profile of a setup before the setup script: its rule that ran every test through the wrapper sets
            // the setup script up instead, its comments kept.
            let rules = profiles
                .get_mut(PROFILE)
                .and_then(|profile| profile.get_mut("scripts"))
                .and_then(Item::as_array_of_tables_mut)
                .expect("a profile of ours has its rules");
            for rule in rules.iter_mut().filter(|rule| is_wrapper_rule(rule)) {
                rule.remove("run-wrapper");
                rule.insert("setup", toml_edit::value(SETUP_SCRIPT));
                changed = true;
            }
            // A profile of a setup before the listing rule gains it.
            if !rules.iter().any(is_list_rule) {
                let list_rule = ours["profile"][PROFILE]["scripts"]
                    .as_array_of_tables()
                    .and_then(|rules| rules.get(1))
                    .cloned()
                    .expect("the template's second rule lists");
                rules.push(list_rule);
                changed = true;
            }
            // A profile of an earlier setup: nextest's JUnit holds why a test failed.
            let profile = profiles.get_mut(PROFILE).and_then(Item::as_table_like_mut).expect("a profile is a table");
            if profile.get("junit").is_none() {
                profile.insert("junit", ours["profile"][PROFILE]["junit"].clone());
                changed = true;
            }
        }
        Some(_) => return Err(NextestConfigError::Conflict(Conflict { what: format!("[profile.{PROFILE}]") })),
    }
    Ok(match (changed, had_profile) {
        (false, _) => Change::AlreadySet,
        (true, false) => Change::Added(document.to_string()),
        (true, true) => Change::Updated(document.to_string()),
    })
}

/// Whether `profile` sets the setup script up for every test, or (as setup wrote it before the setup script) runs
/// every test through the wrapper.
fn is_ours(profile: &Item) -> bool {
    profile.get("scripts").and_then(Item::as_array_of_tables).is_some_and(|rules| {
        rules.iter().any(|rule| {
            is_wrapper_rule(rule)
                || (rule.get("setup").and_then(Item::as_str) == Some(SETUP_SCRIPT)
                    && rule.get("filter").and_then(Item::as_str) == Some("all()"))
        })
    })
}

/// Whether `rule` runs every test through the wrapper (a profile of a setup before the setup script).
fn is_wrapper_rule(rule: &Table) -> bool {
    rule.get("run-wrapper").and_then(Item::as_str) == Some(SCRIPT)
        && rule.get("filter").and_then(Item::as_str) == Some("all()")
}

/// Whether `rule` lists every binary through the wrapper script.
fn is_list_rule(rule: &Table) -> bool {
    rule.get("list-wrapper").and_then(Item::as_str) == Some(SCRIPT)
        && rule.get("platform").and_then(Item::as_str) == Some("cfg(all())")
}

/// The table `key` of `table`, created implicit (no header of its own) when absent.
fn implicit_table<'a>(table: &'a mut Table, key: &str) -> Result<&'a mut Table, NextestConfigError> {
    let item = table.entry(key).or_insert_with(|| {
        let mut table = Table::new();
        table.set_implicit(true);
        Item::Table(table)
    });
    item.as_table_mut()
        .ok_or_else(|| NextestConfigError::Conflict(Conflict { what: format!("a `{key}` that is not a table") }))
}

#[cfg(test)]
mod tests {
    use super::{Change, NextestConfigError, apply, earlier_header, header, template};

    fn added(text: &str) -> String {
        match apply(text).unwrap() {
            Change::Added(text) | Change::Updated(text) => text,
            Change::AlreadySet => panic!("nothing added to:\n{text}"),
        }
    }

    #[test]
    fn a_new_file_gets_the_template_and_applying_it_again_changes_nothing() {
        let written = added("");
        assert_eq!(written, template());
        let parsed: toml::Table = written.parse().unwrap();
        assert_eq!(parsed["scripts"]["wrapper"]["ying"]["command"].as_str(), Some("ying-wrap"));
        assert_eq!(parsed["scripts"]["setup"]["ying-measure"]["command"].as_str(), Some("ying-wrap --setup"));
        assert_eq!(parsed["profile"]["ying"]["scripts"][0]["setup"].as_str(), Some("ying-measure"));
        assert_eq!(parsed["profile"]["ying"]["scripts"][0].get("run-wrapper"), None, "no test runs through a wrapper");
        assert_eq!(parsed["profile"]["ying"]["scripts"][1]["list-wrapper"].as_str(), Some("ying"));
        assert_eq!(apply(&written).unwrap(), Change::AlreadySet);
    }

    #[test]
    fn a_users_file_keeps_what_it_had_and_gains_the_feature_the_script_and_the_profile() {
        let users =
            "# Our CI profile.\nexperimental = [\"setup-scripts\"]\n\n[profile.ci]\nretries = 2 # flaky network\n";
        let written = added(users);
        assert!(written.starts_with("# Our CI profile.\n"), "{written}");
        assert!(written.contains("retries = 2 # flaky network"), "{written}");
        let parsed: toml::Table = written.parse().unwrap();
        let experimental: Vec<&str> =
            parsed["experimental"].as_array().unwrap().iter().map(|item| item.as_str().unwrap()).collect();
        assert_eq!(experimental, ["setup-scripts", "wrapper-scripts"]);
        assert_eq!(parsed["profile"]["ci"]["retries"].as_integer(), Some(2));
        assert_eq!(parsed["profile"]["ying"]["scripts"][0]["filter"].as_str(), Some("all()"));
        assert_eq!(apply(&written).unwrap(), Change::AlreadySet);
    }

    #[test]
    fn a_profile_written_before_the_listing_rule_and_the_setup_script_gains_them_and_keeps_the_rest() {
        let before = "experimental = [\"wrapper-scripts\"]\n\n[scripts.wrapper.ying]\ncommand = \"cargo-ying ying wrap\"\n\n\
                      [[profile.ying.scripts]]\nfilter = \"all()\"\nrun-wrapper = \"ying\" # each test\n\n\
                      [profile.ying]\nretries = 2\n";
        let written = added(before);
        let parsed: toml::Table = written.parse().unwrap();
        let experimental: Vec<&str> =
            parsed["experimental"].as_array().unwrap().iter().map(|item| item.as_str().unwrap()).collect();
        assert_eq!(experimental, ["wrapper-scripts", "setup-scripts"]);
        assert_eq!(parsed["scripts"]["setup"]["ying-measure"]["command"].as_str(), Some("ying-wrap --setup"));
        let rules = parsed["profile"]["ying"]["scripts"].as_array().unwrap();
        assert_eq!(rules.len(), 2, "{written}");
        assert_eq!(rules[0].get("run-wrapper"), None, "{written}");
        assert_eq!(rules[0]["setup"].as_str(), Some("ying-measure"), "{written}");
        assert_eq!(rules[1]["list-wrapper"].as_str(), Some("ying"));
        assert_eq!(parsed["profile"]["ying"]["retries"].as_integer(), Some(2));
        assert_eq!(apply(&written).unwrap(), Change::AlreadySet);
    }

    #[test]
    fn the_comment_of_a_setup_that_ran_each_test_under_the_wrapper_says_how_tests_are_measured_now() {
        let earlier = format!(
            "{}experimental = [\"wrapper-scripts\"]\n\n[scripts.wrapper.ying]\ncommand = \"cargo-ying ying wrap\"\n\n\
             [[profile.ying.scripts]]\nfilter = \"all()\"\nrun-wrapper = \"ying\"\n",
            earlier_header()
        );
        let written = added(&earlier);
        assert!(written.starts_with(&header()), "{written}");
        assert!(!written.contains("each runs under cargo-ying"), "{written}");
        assert_eq!(apply(&written).unwrap(), Change::AlreadySet);
        // A comment the user wrote stays as it is.
        let own = format!("# our profiles\n{}", template());
        assert_eq!(apply(&own).unwrap(), Change::AlreadySet);
    }

    #[test]
    fn a_script_that_is_cargo_ying_itself_becomes_ying_wrap_and_keeps_its_comment() {
        let before = template()
            .replace("command = \"ying-wrap\"", "command = \"cargo-ying ying wrap\" # every test through cargo-ying");
        let written = added(&before);
        assert_eq!(written, before.replace("cargo-ying ying wrap", "ying-wrap"), "{written}");
        assert!(matches!(apply(&before).unwrap(), Change::Updated(_)), "a profile that was there is updated");
        assert!(matches!(apply("").unwrap(), Change::Added(_)));
        assert_eq!(apply(&written).unwrap(), Change::AlreadySet);
    }

    #[test]
    fn a_ying_of_the_users_own_is_a_conflict_and_a_file_that_is_not_toml_an_error() {
        for (text, what) in [
            ("[profile.ying]\nretries = 1\n", "[profile.ying]"),
            ("[scripts.wrapper.ying]\ncommand = \"valgrind\"\n", "[scripts.wrapper.ying]"),
            ("[scripts.setup.ying-measure]\ncommand = \"db-up\"\n", "[scripts.setup.ying-measure]"),
            ("experimental = \"wrapper-scripts\"\n", "an `experimental` that is not a list"),
        ] {
            match apply(text) {
                Err(NextestConfigError::Conflict(conflict)) => assert_eq!(conflict.what, what, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        let error = apply("[profile\n").unwrap_err().to_string();
        assert!(error.contains("line 1"), "{error}");
    }
}
