//! The frames of the fixture's flamegraphs: every frame the symbol table can name is named (no bare address such
//! as `0x2a7047`), and a leak site's frame keeps its line, so two sites in one function are two frames, named as
//! the failure message names them.

use super::{Fixture, TEST_FAILED, entry, stderr, summary};
use std::path::{Path, PathBuf};

/// Whether `name` is an address standing for a frame no symboliser named (`0x2a7047`).
fn is_bare_address(name: &str) -> bool {
    name.strip_prefix("0x").is_some_and(|hex| !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()))
}

/// The frame names of an SVG flamegraph inferno drew: each frame's `<title>` is `name (count bytes, share)`.
fn svg_frames(svg: &str) -> Vec<String> {
    svg.split("<title>")
        .skip(1)
        .filter_map(|rest| rest.split_once("</title>").map(|(title, _)| title))
        .map(|title| title.rsplit_once(" (").map_or(title, |(name, _)| name))
        .map(|name| name.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&amp;", "&"))
        .collect()
}

/// Every SVG under `dir`, recursively.
fn svgs(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(svgs(&path));
        } else if path.extension().is_some_and(|extension| extension == "svg") {
            found.push(path);
        }
    }
    found
}

/// The lines (1-based) of `Box::leak` calls in the body of `function` in `source`.
fn leak_lines(source: &str, function: &str) -> Vec<usize> {
    let start = source.lines().position(|line| line.starts_with(&format!("fn {function}("))).unwrap();
    source
        .lines()
        .enumerate()
        .skip(start)
        .take_while(|(_, line)| *line != "}")
        .filter(|(_, line)| line.contains("Box::leak("))
        .map(|(index, _)| index + 1)
        .collect()
}

#[test]
fn flamegraphs_name_every_frame_and_a_leak_site_keeps_its_line() {
    let fixture = Fixture::shared();
    let output = fixture.cargo_ying(&["--no-fail-fast", "-j", "2"], &[]);
    let stderr = stderr(&output);
    assert_eq!(output.status.code(), TEST_FAILED, "{stderr}");
    let out = fixture.target_dir().join("ying");

    // No bare address in any flamegraph, nor in any folded stack of any report they are drawn from.
    let svgs = svgs(&out.join("flamegraphs"));
    assert!(svgs.len() > 40, "every leak test has its flamegraphs: {svgs:?}");
    let mut frames = 0;
    for svg in &svgs {
        let names = svg_frames(&std::fs::read_to_string(svg).unwrap());
        frames += names.len();
        let bare: Vec<&String> = names.iter().filter(|name| is_bare_address(name)).collect();
        assert!(bare.is_empty(), "{}: frames named by their address {bare:?}", svg.display());
    }
    assert!(frames > 500, "the flamegraphs have frames to check: {frames}");
    let mut stacks = 0;
    for test in ying_report::Summary::read(&out.join("summary.json")).unwrap().tests {
        let Some(report) = &test.report else { continue };
        let report = ying_report::LeakReport::read(&out.join(report), &test.id).unwrap();
        for stack in retained_stacks(&report).iter().chain(&ying_frames::allocated_stacks(&report)) {
            stacks += 1;
            assert!(!stack.functions().iter().any(|name| is_bare_address(name)), "{}: {stack}", test.id);
        }
    }
    assert!(stacks > 100, "the reports have stacks to check: {stacks}");

    // Two leaks in one function: two frames, each with its line, in the retained flamegraph, the report's folded
    // stacks and the failure message alike.
    let source = std::fs::read_to_string(fixture.path().join("tests/leaks.rs")).unwrap();
    let lines = leak_lines(&source, "two_sites_in_one_function");
    assert_eq!(lines.len(), 2, "the fixture leaks twice in one function");
    let sites: Vec<String> =
        lines.iter().map(|line| format!("leaks::two_sites_in_one_function at tests/leaks.rs:{line}")).collect();
    let summary = summary(&fixture.target_dir());
    let two_sites = entry(&summary, "leaks", "two_sites_in_one_function");
    assert_eq!(two_sites["outcome"], "failed");
    let svg = std::fs::read_to_string(out.join(two_sites["retained_flamegraph"].as_str().unwrap())).unwrap();
    let names = svg_frames(&svg);
    for site in &sites {
        assert_eq!(names.iter().filter(|name| *name == site).count(), 1, "{site} is one frame of {names:?}");
    }
    let id =
        ying_report::TestId::new("leak-fixtures", ying_report::TargetKind::Test, "leaks", "two_sites_in_one_function");
    let report = ying_report::LeakReport::read(&out.join(two_sites["report"].as_str().unwrap()), &id).unwrap();
    let retained: Vec<String> = retained_stacks(&report).iter().map(|stack| stack.stack()).collect();
    assert_eq!(retained.len(), 2, "{retained:?}");
    for site in &sites {
        assert_eq!(
            retained.iter().filter(|stack| stack.split(';').any(|name| name == site)).count(),
            1,
            "{retained:?}"
        );
        assert!(stderr.contains(&format!("\n      {site}\n")), "the failure message names {site}: {stderr}");
    }
}

/// The folded stacks a report's judged retained sites are drawn as.
fn retained_stacks(report: &ying_report::LeakReport) -> Vec<ying_report::FoldedStack> {
    let judged = report.retained_sites.iter().filter(|site| !site.excused);
    judged.filter_map(|site| ying_frames::fold(&site.frames, site.bytes)).collect()
}
