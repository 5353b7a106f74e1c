//! What a CI reader opens says what the run decided: the terminal lists again what failed the run after its
//! Summary, GitHub annotations put regressions first and attach to files from the repository root, and the job
//! summary's totals are the terminal's.

use super::{Fixture, TEST_FAILED, stderr};

#[test]
fn a_regression_is_the_first_annotation_at_its_file_from_the_repository_root_and_listed_after_the_summary() {
    let fixture = Fixture::new();
    let saved = fixture.cargo_ying(&["--no-fail-fast", "--save-baseline"], &[]);
    assert_eq!(saved.status.code(), TEST_FAILED, "{}", stderr(&saved));
    fixture.grow_budget_passes();

    // The workspace is a directory of the repository, as in a monorepo: GitHub's paths start at the checkout.
    let checkout = fixture.path().parent().unwrap();
    let workspace_dir = fixture.path().file_name().unwrap().to_str().unwrap();
    let summary_file = tempfile::NamedTempFile::new().unwrap();
    let output = fixture.cargo_ying(
        &["--no-fail-fast"],
        &[
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_WORKSPACE", checkout.to_str().unwrap()),
            ("GITHUB_STEP_SUMMARY", summary_file.path().to_str().unwrap()),
        ],
    );
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), TEST_FAILED, "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let commands: Vec<&str> = stdout.lines().filter(|line| line.starts_with("::")).collect();

    // The cause, at the line its memory was allocated at, naming the test and each figure that regressed.
    let regression = format!(
        "::error file={workspace_dir}/tests/leaks.rs,line=69,title=memory regression in 1 test::grown at: 2.9 KiB \
         (3000 bytes) in 1 block"
    );
    assert!(commands[0].starts_with(&regression), "{commands:#?}");
    assert!(
        commands[0].contains(
            ", at tests/leaks.rs:69 in leaks::budget_passes%0Aleak-fixtures::leaks budget_passes: retained bytes grew \
             from 1000 to 3000 (+2000, +200.0%25), past the tolerance"
        ),
        "{commands:#?}"
    );
    // The fixture fails 19 tests (2 of them crash): 10 errors in all, then a notice of the 10 left out.
    assert_eq!(commands.iter().filter(|line| line.starts_with("::error ")).count(), 10, "{commands:#?}");
    assert!(commands[1..10].iter().all(|line| line.contains("title=failed ") || line.contains("title=crashed ")));
    assert!(commands[10].starts_with("::notice "), "{commands:#?}");
    assert!(
        commands[10].contains("::10 more causes of regressions or failed tests are not annotated"),
        "{commands:#?}"
    );
    let summary_json = fixture.target_dir().join("ying/summary.json");
    let listed = summary_json.strip_prefix(checkout).unwrap_or(&summary_json).display().to_string();
    assert!(commands[10].ends_with(&format!("the job summary and {listed} list every one")), "{commands:#?}");
    // Failures say why: their panic's message or their budgets, never only that they failed.
    assert!(commands[1..10].iter().all(|line| !line.ends_with("::the test failed")), "{commands:#?}");
    assert_eq!(commands.len(), 11);

    // After the Summary: what failed the run, failures then the regression with the site it grew at.
    let summary_at = stderr.find("     Summary [").expect("a Summary line");
    let summary_line = stderr[summary_at..].lines().next().unwrap();
    let totals = &summary_line[summary_line.find("] ").unwrap() + 2..];
    assert!(totals.ends_with("; memory: 1 regressed"), "{totals}");
    let after: Vec<&str> = stderr[summary_at..].lines().skip(1).take_while(|line| !line.is_empty()).collect();
    assert!(after.iter().any(|line| line.trim_start().starts_with("FAIL [") && line.ends_with("leaks box_leak")));
    // The failures are listed again in the run's order, 9 of the 19 shown: whether a crash (a short test, started
    // last of the tests longest the run before) is among them depends on when it ended. Its line is the one it had
    // as it ended.
    let crash = stderr[..summary_at].lines().find(|line| line.trim_start().starts_with("CRASH [")).expect("a crash");
    assert!(after.contains(&crash) || after.iter().any(|line| line.contains(" more failed (19 in all")), "{after:#?}");
    let [regressed, site] = &after[after.len() - 2..] else { unreachable!() };
    assert!(regressed.trim_start().starts_with("REGRESSED"), "{after:#?}");
    assert!(regressed.starts_with(&format!("{:>12} ", "REGRESSED")), "{regressed}");
    assert!(regressed.contains("leak-fixtures::leaks budget_passes: retained bytes 1000 -> 3000"), "{regressed}");
    assert!(site.starts_with(&format!("{:12} 2.9 KiB (3000 bytes) in 1 block", "")), "{site}");
    assert!(site.ends_with(", at tests/leaks.rs:69 in leaks::budget_passes"), "{site}");
    assert_eq!(after.len(), 12, "9 of the 19 failed tests, how many more, 1 regressed and its site: {after:#?}");
    assert_eq!(after[9].trim_start(), "... and 10 more failed (19 in all, shown above; -v lists them here)");

    // The job summary opens on the verdict and states the terminal's totals.
    let step_summary = std::fs::read_to_string(summary_file.path()).unwrap();
    assert!(step_summary.starts_with("## ❌ cargo ying test: 1 test regressed, 19 tests failed\n"), "{step_summary}");
    assert!(step_summary.contains(&format!("\n{totals}\n")), "{totals}\n{step_summary}");
}
