//! SVG flamegraphs of folded stacks (inferno, bytes as the unit, deterministic colours), and the differential
//! flamegraph of a test's retained memory, baseline against now.
//!
//! Each file starts with what it was drawn from (a hash of its lines and title, after the XML declaration): a run
//! that would draw a file from the same leaves it as it is, as most tests of a suite allocate alike run after run.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write};
use ying_report::FoldedStack;

/// The XML declaration every flamegraph starts with.
const DECLARATION: &str = "<?xml version=\"1.0\" standalone=\"no\"?>";

/// What is drawn from the lines changes with this number: raise it when `write_lines` draws differently (the files
/// of earlier runs are then drawn anew).
const DRAWING: u32 = 1;

/// Writes a flamegraph of `stacks` to `path`; with no stacks, an SVG that says so.
pub fn write(stacks: &[FoldedStack], title: &str, path: &std::path::Path) -> std::io::Result<()> {
    let lines: Vec<String> = stacks.iter().map(ToString::to_string).collect();
    write_lines(&lines, title, path)
}

/// Writes the differential flamegraph of retained memory from `before` to `after` to `path`.
pub fn write_differential(
    before: &[FoldedStack],
    after: &[FoldedStack],
    title: &str,
    path: &std::path::Path,
) -> std::io::Result<()> {
    write_lines(&differential_lines(before, after), title, path)
}

/// Folded lines with two counts (`stack before after`), as inferno draws a differential flamegraph.
pub fn differential_lines(before: &[FoldedStack], after: &[FoldedStack]) -> Vec<String> {
    let by_stack = |stacks: &[FoldedStack]| -> BTreeMap<String, u64> {
        let mut totals = BTreeMap::new();
        for stack in stacks {
            *totals.entry(stack.stack()).or_default() += stack.bytes();
        }
        totals
    };
    let (before, after) = (by_stack(before), by_stack(after));
    let stacks: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    stacks
        .into_iter()
        .map(|stack| {
            let count = |totals: &BTreeMap<String, u64>| totals.get(stack).copied().unwrap_or_default();
            format!("{stack} {} {}", count(&before), count(&after))
        })
        .collect()
}

/// Writes the flamegraph of `lines` titled `title` to `path`, unless the file there was drawn from the same.
fn write_lines(lines: &[String], title: &str, path: &std::path::Path) -> std::io::Result<()> {
    let start = format!("{DECLARATION}<!--ying: drawn from {}-->", drawn_from(lines, title));
    if starts_with(path, start.as_bytes()) {
        return Ok(());
    }
    let mut svg = start.into_bytes();
    if lines.is_empty() {
        write!(
            svg,
            "\n<svg version=\"1.1\" width=\"1200\" height=\"60\" \
             xmlns=\"http://www.w3.org/2000/svg\"><text x=\"600\" y=\"34\" text-anchor=\"middle\" \
             font-family=\"Verdana\" font-size=\"15\">{}: nothing to show</text></svg>\n",
            super::html::escape(title)
        )?;
    } else {
        let mut options = inferno::flamegraph::Options::default();
        options.title = title.to_owned();
        options.count_name = "bytes".to_owned();
        options.deterministic = true;
        options.hash = true;
        let mut drawn = Vec::new();
        inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut drawn)
            .map_err(std::io::Error::other)?;
        svg.extend_from_slice(drawn.strip_prefix(DECLARATION.as_bytes()).unwrap_or(&drawn));
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, svg)
}

/// A hash of what a flamegraph is drawn from: its lines, its title, and how it is drawn.
fn drawn_from(lines: &[String], title: &str) -> String {
    let mut hasher = twox_hash::XxHash3_128::new();
    let drawing = format!("{} {DRAWING}", env!("CARGO_PKG_VERSION"));
    // Each part with its length first, so that no two inputs run together alike.
    for part in [drawing.as_str(), title].into_iter().chain(lines.iter().map(String::as_str)) {
        hasher.write(&part.len().to_le_bytes());
        hasher.write(part.as_bytes());
    }
    format!("xxh3-128 {:032x}", hasher.finish_128())
}

/// Whether the file at `path` starts with `start` (false when there is none).
fn starts_with(path: &std::path::Path, start: &[u8]) -> bool {
    let Ok(file) = std::fs::File::open(path) else { return false };
    let mut head = Vec::with_capacity(start.len());
    file.take(start.len() as u64).read_to_end(&mut head).is_ok_and(|_| head == start)
}

#[cfg(test)]
mod tests {
    use super::{differential_lines, write};
    use ying_report::FoldedStack;

    fn stacks(lines: &[&str]) -> Vec<FoldedStack> {
        lines.iter().map(|line| line.parse().unwrap()).collect()
    }

    #[test]
    fn a_flamegraph_drawn_from_the_same_is_left_as_it_was_and_drawn_anew_from_anything_else() {
        let dir = tempfile::tempdir().unwrap();
        let (path, fresh) = (dir.path().join("a.svg"), dir.path().join("fresh.svg"));
        let marked = |path: &std::path::Path| {
            let mut svg = std::fs::read(path).unwrap();
            svg.extend_from_slice(b"<!--left as it was-->");
            std::fs::write(path, svg).unwrap();
        };
        let is_left =
            |path: &std::path::Path| std::fs::read_to_string(path).unwrap().ends_with("<!--left as it was-->");
        for (lines, title) in [(&["a;b 10", "a;c 5"][..], "allocated"), (&[], "retained")] {
            write(&stacks(lines), title, &path).unwrap();
            marked(&path);
            write(&stacks(lines), title, &path).unwrap();
            assert!(is_left(&path), "drawn from the same: {lines:?}");
            for (other_lines, other_title) in [(&["a;b 11", "a;c 5"][..], title), (lines, "another title")] {
                write(&stacks(other_lines), other_title, &path).unwrap();
                write(&stacks(other_lines), other_title, &fresh).unwrap();
                assert_eq!(
                    std::fs::read(&path).unwrap(),
                    std::fs::read(&fresh).unwrap(),
                    "{other_lines:?} {other_title}"
                );
                std::fs::remove_file(&fresh).unwrap();
                write(&stacks(lines), title, &path).unwrap();
                marked(&path);
            }
        }
    }

    #[test]
    fn what_a_flamegraph_was_drawn_from_leaves_it_an_svg_document() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.svg");
        for lines in [&["a;b 10", "a;c 5"][..], &[]] {
            write(&stacks(lines), "allocated", &path).unwrap();
            let svg = std::fs::read_to_string(&path).unwrap();
            let options = roxmltree::ParsingOptions { allow_dtd: true, ..roxmltree::ParsingOptions::default() };
            let document = roxmltree::Document::parse_with_options(&svg, options).unwrap();
            assert_eq!(document.root_element().tag_name().name(), "svg");
            assert!(svg.starts_with("<?xml version=\"1.0\" standalone=\"no\"?><!--ying: drawn from xxh3-128 "));
        }
    }

    #[test]
    fn the_differential_pairs_each_stack_before_and_after() {
        let before = stacks(&["a;b 10", "a;c 5"]);
        let after = stacks(&["a;b 30", "a;d 1", "a;d 2"]);
        assert_eq!(differential_lines(&before, &after), ["a;b 10 30", "a;c 5 0", "a;d 0 3"]);
    }
}
