//! README.md's CI workflows, run on the fixture: every `run:` step of its ```yaml blocks, job by job and in order
//! (a matrix job once per value), with `cargo ying` the built binary on a copy of the fixture. Artifacts are
//! uploaded and downloaded as the workflow's `actions/upload-artifact` and `download-artifact` steps say. A step
//! that is neither `cargo ying` nor one of the known setup steps fails the test, so README cannot show a command
//! that is not checked here.
//!
//! The fixture has failing tests by design: a `cargo ying` step exits 1, and the workflow must tolerate that where
//! later steps need to run (`if: always()`), as the step itself can only exit 0 or 1 (never 2, a usage error).

#![cfg(unix)]

use super::{Fixture, TEST_FAILED};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A step of a job: its keys (`run`, `uses`, `if`, and those under `with`), values as written.
type Step = BTreeMap<String, String>;

/// A job of a workflow.
#[derive(Debug, Default)]
struct Job {
    name: String,
    /// `strategy.matrix.shard`-like lists: the key and its values.
    matrix: Option<(String, Vec<String>)>,
    /// `if:` of the job itself.
    condition: Option<String>,
    /// `needs:`.
    needs: Option<String>,
    steps: Vec<Step>,
}

/// The ```yaml blocks of `readme`.
fn yaml_blocks(readme: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in readme.lines() {
        match &mut current {
            None if line.trim_end() == "```yaml" => current = Some(String::new()),
            Some(block) if line.trim_end() == "```" => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

/// The jobs of a workflow, read by indentation: jobs at 2 spaces under `jobs:`, their keys at 4, steps at 6.
fn jobs(workflow: &str) -> Vec<Job> {
    let mut jobs: Vec<Job> = Vec::new();
    let mut in_jobs = false;
    let mut matrix_key = false;
    for line in workflow.lines() {
        let indent = line.len() - line.trim_start().len();
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if indent == 0 {
            in_jobs = text == "jobs:";
            continue;
        }
        if !in_jobs {
            continue;
        }
        let (key, value) = match text.trim_start_matches("- ").split_once(':') {
            Some((key, value)) => (key.trim().to_owned(), value.trim().to_owned()),
            None => panic!("README workflow line not understood: {line}"),
        };
        match indent {
            2 => jobs.push(Job { name: key, ..Job::default() }),
            _ => {
                let job = jobs.last_mut().expect("a job before its keys");
                if indent == 6 && text.starts_with("- ") {
                    job.steps.push(Step::new());
                }
                if indent >= 6 && !job.steps.is_empty() && !matrix_key {
                    job.steps.last_mut().unwrap().insert(key, value);
                    continue;
                }
                match (indent, key.as_str()) {
                    (4, "if") => job.condition = Some(value),
                    (4, "needs") => job.needs = Some(value),
                    (4, "strategy" | "runs-on" | "steps") => {}
                    (6, "matrix") => matrix_key = true,
                    (6, "fail-fast") => {}
                    (8, _) if matrix_key => {
                        let values = value.trim_start_matches('[').trim_end_matches(']');
                        job.matrix = Some((key, values.split(',').map(|v| v.trim().to_owned()).collect()));
                        matrix_key = false;
                    }
                    _ => panic!("README workflow line not understood: {line}"),
                }
            }
        }
    }
    jobs
}

/// Setup steps that are not `cargo ying`: skipped, by pattern.
fn is_setup(run: &str) -> bool {
    run.starts_with("cargo install --git ") && run.ends_with(" cargo-ying --locked")
        || run == "cargo install --path cargo-ying --locked"
}

/// `${{ matrix.KEY }}` replaced by `value`.
fn expand(text: &str, matrix: Option<(&str, &str)>) -> String {
    match matrix {
        Some((key, value)) => text.replace(&format!("${{{{ matrix.{key} }}}}"), value),
        None => text.to_owned(),
    }
}

/// Runs one `cargo ying ...` line in the fixture's directory, through `sh` (globs as a runner's shell expands them),
/// `cargo ying SUB` being the built binary with `ying SUB --manifest-path <fixture>`. Returns the exit code and
/// standard error.
fn run_cargo_ying(fixture: &Fixture, line: &str) -> (Option<i32>, String) {
    let command = fixture.command(&[], &[]);
    let program = command.get_program().to_owned();
    let envs: Vec<(std::ffi::OsString, Option<std::ffi::OsString>)> =
        command.get_envs().map(|(key, value)| (key.to_owned(), value.map(ToOwned::to_owned))).collect();
    let mut shell = std::process::Command::new("sh");
    shell
        .arg("-c")
        .arg(format!(
            "cargo() {{ [ \"$1\" = ying ] || exit 127; sub=$2; shift 2; \"$YING_BIN\" ying \"$sub\" --manifest-path \
             \"$YING_MANIFEST\" \"$@\"; }}\n{line}"
        ))
        .current_dir(fixture.path())
        .env("YING_BIN", &program)
        .env("YING_MANIFEST", fixture.path().join("Cargo.toml"));
    for (key, value) in envs {
        match value {
            Some(value) => shell.env(key, value),
            None => shell.env_remove(key),
        };
    }
    let output = shell.output().unwrap();
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Whether the step at `index` of `job` may fail (exit 1) with the workflow still doing what it shows: it is the
/// job's last step, or every later step runs `if: always()`.
fn failure_tolerated(job: &Job, index: usize) -> bool {
    job.steps[index + 1..].iter().all(|step| step.get("if").is_some_and(|condition| condition == "always()"))
}

#[test]
fn the_readme_ci_workflows_run_on_the_fixture() {
    let readme = std::fs::read_to_string(super::repository().join("README.md")).unwrap();
    let fixture = Fixture::new();
    // `target/ying` in the workflows is the copy's own target directory, `target/` in it.
    assert_eq!(fixture.target_dir(), fixture.path().join("target"));
    let uploaded = tempfile::tempdir().unwrap();

    let workflows = yaml_blocks(&readme);
    assert!(workflows.len() >= 2, "README shows a workflow and a sharded one");
    let mut ran = Vec::new();
    for workflow in &workflows {
        let jobs = jobs(workflow);
        assert!(!jobs.is_empty(), "a workflow has jobs: {workflow}");
        let mut failed_jobs = Vec::new();
        for job in &jobs {
            if let Some(needs) = &job.needs
                && failed_jobs.contains(needs)
            {
                assert_eq!(job.condition.as_deref(), Some("always()"), "{}: runs after a failed job", job.name);
            }
            let values: Vec<Option<(&str, &str)>> = match &job.matrix {
                Some((key, values)) => values.iter().map(|value| Some((key.as_str(), value.as_str()))).collect(),
                None => vec![None],
            };
            for matrix in values {
                for (index, step) in job.steps.iter().enumerate() {
                    let uses = step.get("uses").map(String::as_str).unwrap_or_default();
                    if let Some(run) = step.get("run") {
                        let line = expand(run, matrix);
                        if is_setup(&line) {
                            continue;
                        }
                        assert!(line.starts_with("cargo ying "), "README runs a command this test knows not: {line}");
                        let (code, stderr) = run_cargo_ying(&fixture, &line);
                        match code {
                            Some(0) => {}
                            // The fixture fails by design: the workflow must go on where it needs to.
                            code if code == TEST_FAILED => {
                                assert!(
                                    failure_tolerated(job, index),
                                    "{}: `{line}` fails and stops the job",
                                    job.name
                                );
                                failed_jobs.push(job.name.clone());
                            }
                            _ => panic!("`{line}` exited with {code:?}:\n{stderr}"),
                        }
                        ran.push((line, stderr));
                    } else if uses.starts_with("actions/upload-artifact@") {
                        let name = expand(&step["name"], matrix);
                        let path = fixture.path().join(&step["path"]);
                        copy_dir(&path, &uploaded.path().join(&name));
                    } else if uses.starts_with("actions/download-artifact@") {
                        let pattern = &step["pattern"];
                        let prefix = pattern.strip_suffix('*').expect("a pattern of a prefix and *");
                        for entry in std::fs::read_dir(uploaded.path()).unwrap() {
                            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
                            if name.starts_with(prefix) {
                                let to: PathBuf = fixture.path().join(&step["path"]).join(&name);
                                copy_dir(&uploaded.path().join(&name), &to);
                            }
                        }
                    } else {
                        let setup = ["actions/checkout@", "dtolnay/rust-toolchain@"];
                        assert!(setup.iter().any(|known| uses.starts_with(known)), "unknown step {step:?}");
                    }
                }
            }
        }
    }

    // What the steps were there for: the JUnit file, each shard's summary, the merged one.
    let commands: Vec<&str> = ran.iter().map(|(line, _)| line.as_str()).collect();
    assert!(commands.iter().any(|line| line.contains("--junit")), "{commands:?}");
    let junit = std::fs::read_to_string(fixture.target_dir().join("ying/junit.xml"));
    let merge = ran.iter().find(|(line, _)| line.starts_with("cargo ying merge")).expect("README merges shards");
    assert!(merge.1.contains("Merged 3 summaries"), "{}", merge.1);
    assert!(junit.is_ok_and(|xml| xml.contains("<testsuites")), "the workflow's JUnit file was written");
    let shard = |n: usize| {
        let path = fixture.path().join(format!("shards/ying-shard-{n}/summary.json"));
        serde_json::from_slice::<serde_json::Value>(&std::fs::read(path).unwrap()).unwrap()
    };
    let shards: Vec<serde_json::Value> = (1..=3).map(shard).collect();
    let merged = super::summary(&fixture.target_dir());
    let count = |summary: &serde_json::Value| summary["tests"].as_array().unwrap().len();
    assert_eq!(count(&merged), shards.iter().map(count).sum::<usize>());
    assert!(shards.iter().all(|shard| count(shard) > 0 && count(shard) < count(&merged)), "each shard ran a part");
    // The doctests and the custom harness that no shard ran are named once in the merged summary, as in each shard.
    assert_eq!(merged["not_run"], shards[0]["not_run"]);
    assert_eq!(merged["not_run"].as_array().unwrap().len(), 2, "{}", merged["not_run"]);
}
