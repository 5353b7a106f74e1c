//! The end of a run, the same whether cargo ying ran the tests (`cargo ying test`), read what a nextest run left
//! (`cargo ying gate`) or joined shards' summaries (`cargo ying merge`): the run's files (flamegraphs, summary.json, index.html), the tables, GitHub's annotations and
//! JUnit, the baseline saved, the closing words and the exit code.

use crate::baseline::BaselineFile;
use crate::error::{BaselineFileError, Error, Result};
use crate::gate::Gating;
use crate::model::Run;
use crate::outputs::libtest_json::MessageFormat;
use crate::outputs::{artifacts, github, junit, terminal::Reporter};
use std::path::{Path, PathBuf};
use std::time::SystemTime;
use ying_report::{Measured, NotRunTarget, TestId};

/// What the end of a run needs besides the run.
pub(crate) struct Ending<'a> {
    /// The command that ran, as the job summary names it (`cargo ying test`).
    pub command: &'static str,
    /// `<target-dir>/ying`.
    pub out_dir: PathBuf,
    /// Where summary.json goes: in `out_dir`, but for `cargo ying merge --output`.
    pub summary_path: PathBuf,
    /// Flamegraphs drawn at once.
    pub jobs: usize,
    /// Which tests the run measured.
    pub measured: Measured,
    /// When the run's tests started.
    pub started_at: SystemTime,
    /// How the gate judged.
    pub gating: &'a Gating,
    /// `--save-baseline`.
    pub save_baseline: bool,
    /// Where to write JUnit XML, if anywhere.
    pub junit: Option<&'a Path>,
    /// How the run's events went to standard output.
    pub message_format: MessageFormat,
    /// The workspace's root, inside the repository (for GitHub's annotations).
    pub workspace_root: &'a Path,
    /// What `cargo test` would run and the run did not.
    pub not_run: &'a [NotRunTarget],
    /// The tests whose files a filtered run replaces (the other tests' stay); `None` for a run of every test.
    pub replaced: Option<&'a [TestId]>,
    /// The nextest run judged (`cargo ying gate`), and the tests it listed and skipped.
    pub nextest: Option<(&'a str, &'a [TestId])>,
}

/// Writes the run's files and shows its tables: everything but the closing words.
pub(crate) fn write(run: &mut Run, ending: &Ending<'_>, reporter: &Reporter, baseline: &BaselineFile) -> Result<()> {
    artifacts::flamegraphs(run, &ending.out_dir, ending.jobs)?;
    let mut summary = run.summary();
    summary.not_run = ending.not_run.to_vec();
    summary.measured = ending.measured;
    summary.workspace_root = Some(ending.workspace_root.display().to_string());
    if let Some((run_id, skipped)) = ending.nextest {
        summary.nextest_run_id = Some(run_id.to_owned());
        summary.skipped = skipped.to_vec();
    }
    summary.started_at = Some(humantime::format_rfc3339_millis(ending.started_at).to_string());
    summary.tolerance = Some(ending.gating.tolerance.stated());
    summary.exit_code = Some(run.exit_code(ending.save_baseline));
    artifacts::summary(run, &summary, &ending.out_dir, &ending.summary_path)?;
    artifacts::sweep(run, &ending.out_dir, ending.replaced, ending.not_run)?;
    reporter.finish(run);
    reporter.gate(run, &baseline.path, ending.save_baseline);
    reporter.artifacts(&ending.out_dir.join("index.html"));
    Ok(())
}

/// GitHub's annotations and JUnit, the baseline saved (when asked, unless the run was stopped), the closing words;
/// the exit code.
pub(crate) fn close(run: &Run, ending: &Ending<'_>, reporter: &Reporter, baseline: BaselineFile) -> Result<u8> {
    let written = write_ci_outputs(run, ending);
    let saved = (written.is_ok() && ending.save_baseline && run.interrupted.is_none())
        .then(|| save_baseline(run, baseline, ending));
    // The run ends on its Summary, after the baseline is saved and even when saving failed; the error comes last.
    reporter.close(run, ending.not_run);
    written?;
    if run.interrupted.is_none() {
        saved.transpose()?;
    }
    Ok(run.exit_code(ending.save_baseline))
}

/// Writes the baseline from `run`'s measured tests (the others' entries kept), and says so; refuses when the run
/// measured no test, leaving the file as it was. A baseline of an earlier form gets every measured test's entry
/// and is written whole in the current one.
fn save_baseline(run: &Run, baseline: BaselineFile, ending: &Ending<'_>) -> Result<()> {
    // Every measured test has an entry: count them, rather than build each entry again.
    let all = run.measured();
    if all == 0 {
        return Err(Error::SaveBaseline { path: baseline.path, source: BaselineFileError::NothingMeasured });
    }
    let entries = run.entries_to_save(ending.gating.figures(), baseline.is_of_earlier_form());
    let written = entries.len();
    let rewritten = baseline.save(entries, ending.measured)?;
    let kept = match all - written {
        0 => String::new(),
        kept => format!(": {written} written, {kept} within the tolerance kept as recorded"),
    };
    let form = match rewritten {
        Some(version) => format!("; rewritten from schema {version} in the current form, a line a test"),
        None => String::new(),
    };
    eprintln!("{:>12} {} ({all} measured tests{kept}{form})", "Saved", baseline.path.display());
    Ok(())
}

/// GitHub Actions annotations and job summary (when `GITHUB_ACTIONS=true`), and JUnit XML (when asked). The
/// annotations go to standard output, or to standard error when it carries `--message-format`'s events (the runner
/// reads workflow commands on both).
fn write_ci_outputs(run: &Run, ending: &Ending<'_>) -> Result<()> {
    if std::env::var("GITHUB_ACTIONS").is_ok_and(|value| value == "true") {
        for line in github::annotations(run, &github::repository_root(ending.workspace_root), &ending.summary_path) {
            if ending.message_format == MessageFormat::Human {
                println!("{line}");
            } else {
                eprintln!("{line}");
            }
        }
        if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY") {
            use std::io::Write;
            let path = Path::new(&path);
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut file| file.write_all(github::step_summary(run, ending.command).as_bytes()))
                .map_err(Error::io("append to", path))?;
        }
    }
    if let Some(path) = ending.junit {
        // A nextest profile's file goes under the target directory, where nothing may have made its directory.
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(Error::io("create", dir))?;
        }
        std::fs::write(path, junit::junit(run)).map_err(Error::io("write", path))?;
    }
    Ok(())
}
