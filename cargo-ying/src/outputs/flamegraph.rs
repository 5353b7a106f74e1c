//! SVG flamegraphs of folded stacks (inferno, bytes as the unit, deterministic colours), and the differential
//! flamegraph of a test's retained memory, baseline against now.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use ying_report::FoldedStack;

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

fn write_lines(lines: &[String], title: &str, path: &std::path::Path) -> std::io::Result<()> {
    let mut svg = Vec::new();
    if lines.is_empty() {
        write!(
            svg,
            "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg version=\"1.1\" width=\"1200\" height=\"60\" \
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
        inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg)
            .map_err(std::io::Error::other)?;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, svg)
}

#[cfg(test)]
mod tests {
    use super::differential_lines;
    use ying_report::FoldedStack;

    #[test]
    fn the_differential_pairs_each_stack_before_and_after() {
        let stacks = |lines: &[&str]| lines.iter().map(|line| line.parse().unwrap()).collect::<Vec<FoldedStack>>();
        let before = stacks(&["a;b 10", "a;c 5"]);
        let after = stacks(&["a;b 30", "a;d 1", "a;d 2"]);
        assert_eq!(differential_lines(&before, &after), ["a;b 10 30", "a;c 5 0", "a;d 0 3"]);
    }
}
