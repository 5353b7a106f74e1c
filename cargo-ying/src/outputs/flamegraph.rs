//! SVG flamegraphs of folded stacks (inferno, bytes as the unit, deterministic colours), and the differential
//! flamegraph of a test's retained memory, baseline against now. Retained memory is drawn with why it is still
//! there: a frame above each site names its kind (`[lost]`, `[static app::CACHE]`), so that its boxes share a colour
//! and the flamegraph's search finds them all, with their share of the whole; a tokio task's cell has one more, with
//! the future it runs (`[task app::serve]`).
//!
//! Each file starts with what it was drawn from (a hash of its lines and title, after the XML declaration): a run
//! that would draw a file from the same leaves it as it is, as most tests of a suite allocate alike run after run.
//! A file is written over in place with that start written last, so a write cut short (cargo ying killed) leaves a
//! file whose start says it was never finished, drawn anew by the next run, and the file is never emptied first
//! (which ext4 sends to the disk when it is closed, `auto_da_alloc`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Seek as _, Write};
use ying_report::{BaselineEntry, FoldedStack, LeakReport};

/// The XML declaration every flamegraph starts with.
const DECLARATION: &str = "<?xml version=\"1.0\" standalone=\"no\"?>";

/// What is drawn from the lines changes with this number: raise it when `write_lines` draws differently (the files
/// of earlier runs are then drawn anew).
const DRAWING: u32 = 1;

/// Writes a flamegraph of `stacks` to `path`; with no stacks, an SVG that says so.
pub(crate) fn write(stacks: &[FoldedStack], title: &str, path: &std::path::Path) -> std::io::Result<()> {
    let lines: Vec<String> = stacks.iter().map(ToString::to_string).collect();
    write_lines(&lines, title, path)
}

/// The folded stacks of `report`'s retained memory (excused sites left out), each site's with a frame above its leaf
/// for each kind of [`why`](ying_report::report::RetainedSite::why) it is still there, with that kind's bytes:
/// `[lost]`, `[cycle]`, `[static app::CACHE]`, `[thread_local app::BUF]`, `[thread_stack worker]`, `[heap]`. A site
/// the test did not say why of keeps its stack. Stacks end one frame below the user's code, whose frames keep their
/// lines ([`ying_frames::fold`]).
pub(crate) fn retained_stacks_by_kind(report: &LeakReport) -> Vec<FoldedStack> {
    let mut stacks: Vec<FoldedStack> = Vec::new();
    for site in report.retained_sites.iter().filter(|site| !site.excused) {
        if site.why.is_empty() {
            stacks.extend(ying_frames::fold(&site.frames, site.bytes));
            continue;
        }
        for why in &site.why {
            let Some(folded) = ying_frames::fold(&site.frames, why.bytes) else { continue };
            let mut functions = folded.functions().to_vec();
            functions.push(match &why.root {
                Some(root) => format!("[{} {root}]", why.kind.key()),
                None => format!("[{}]", why.kind.key()),
            });
            if let Some(future) = site.type_name.as_deref().and_then(ying_frames::tasks::task_of) {
                functions.push(format!("[task {future}]"));
            }
            stacks.push(FoldedStack::new(functions, why.bytes));
        }
    }
    stacks.sort();
    stacks
}

/// Writes the differential flamegraph of retained memory from the baseline's entry `before` to `report` to `path`.
pub(crate) fn write_differential(
    before: &BaselineEntry,
    report: &LeakReport,
    title: &str,
    path: &std::path::Path,
) -> std::io::Result<()> {
    write_lines(&differential_lines(before, report), title, path)
}

/// The frame under which a differential flamegraph draws the bytes of the sites the baseline did not name.
const OTHER_SITES: &str = "[other sites]";

/// Folded lines with two counts (`stack before after`), as inferno draws a differential flamegraph: each retained
/// site's key ([`ying_frames::site_key`]: the package's functions that allocated it, without lines), the bytes the
/// baseline's entry `before` recorded for it and those `report` retained there. Sites are matched by key, so a
/// site whose lines moved is the same site, and the key's last function, the one that allocated, is the leaf that
/// carries the change. A key is shown with the lines this run has for it, when all its sites agree on them. The
/// sites the baseline did not name are one stack, [`OTHER_SITES`], on its side.
pub(crate) fn differential_lines(before: &BaselineEntry, report: &LeakReport) -> Vec<String> {
    let mut counts: BTreeMap<String, [u64; 2]> = BTreeMap::new();
    for (key, bytes) in &before.sites {
        counts.entry(key.clone()).or_default()[0] += bytes;
    }
    if before.other > 0 {
        counts.entry(OTHER_SITES.to_owned()).or_default()[0] += before.other;
    }
    let mut shown: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for site in report.retained_sites.iter().filter(|site| !site.excused && site.bytes > 0) {
        let key = ying_frames::site_key(&site.frames);
        shown.entry(key.clone()).or_default().insert(ying_frames::shown_site_key(&site.frames));
        counts.entry(key).or_default()[1] += site.bytes;
    }
    counts
        .into_iter()
        .map(|(key, [was, now])| {
            let stack = match shown.get(&key).map(|forms| forms.iter().collect::<Vec<_>>()).as_deref() {
                Some([only]) => (*only).clone(),
                _ => key,
            };
            format!("{stack} {was} {now}")
        })
        .collect()
}

/// Writes the flamegraph of `lines` titled `title` to `path`, unless the file there was drawn from the same.
fn write_lines(lines: &[String], title: &str, path: &std::path::Path) -> std::io::Result<()> {
    let drawn_from = drawn_from(lines, title);
    let start = start(&drawn_from);
    if starts_with(path, start.as_bytes()) {
        return Ok(());
    }
    let mut svg = start.clone().into_bytes();
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
    // Written in place, and never through a link: one planted there goes, and one planted after is an error.
    if std::fs::symlink_metadata(path).is_ok_and(|metadata| metadata.file_type().is_symlink()) {
        std::fs::remove_file(path)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
    let mut file = options.open(path)?;
    write_over(&mut file, &svg, start.len(), unfinished(&drawn_from).as_bytes())
}

/// What a flamegraph drawn from `drawn_from` starts with.
fn start(drawn_from: &str) -> String {
    format!("{DECLARATION}<!--ying: drawn from {drawn_from}-->")
}

/// What a flamegraph drawn from `drawn_from` starts with until it is written whole: as long, and no hash.
fn unfinished(drawn_from: &str) -> String {
    start(&"?".repeat(drawn_from.len()))
}

/// A file written over in place: what [`write_over`] does to it.
trait InPlace {
    /// Writes `bytes` at `offset`.
    fn write_all_at(&mut self, bytes: &[u8], offset: u64) -> std::io::Result<()>;
    /// Cuts or extends the file to `len` bytes.
    fn set_len(&mut self, len: u64) -> std::io::Result<()>;
}

impl InPlace for std::fs::File {
    fn write_all_at(&mut self, bytes: &[u8], offset: u64) -> std::io::Result<()> {
        self.seek(std::io::SeekFrom::Start(offset))?;
        self.write_all(bytes)
    }

    fn set_len(&mut self, len: u64) -> std::io::Result<()> {
        std::fs::File::set_len(self, len)
    }
}

/// Writes `svg` over `file`, its first `head` bytes (what it was drawn from) last, after `unfinished` in their place:
/// until the write is whole the file starts with neither what it was drawn from before nor what it is drawn from now.
fn write_over(file: &mut impl InPlace, svg: &[u8], head: usize, unfinished: &[u8]) -> std::io::Result<()> {
    let (start, rest) = svg.split_at(head);
    file.write_all_at(unfinished, 0)?;
    file.write_all_at(rest, head as u64)?;
    file.set_len(svg.len() as u64)?;
    file.write_all_at(start, 0)
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

/// Whether the file at `path` starts with `start` (false when there is none, or a link is there).
fn starts_with(path: &std::path::Path, start: &[u8]) -> bool {
    if !std::fs::symlink_metadata(path).is_ok_and(|metadata| metadata.is_file()) {
        return false;
    }
    let Ok(file) = std::fs::File::open(path) else { return false };
    let mut head = Vec::with_capacity(start.len());
    file.take(start.len() as u64).read_to_end(&mut head).is_ok_and(|_| head == start)
}

#[cfg(test)]
mod tests {
    use super::{InPlace, differential_lines, retained_stacks_by_kind, start, unfinished, write, write_over};
    use ying_report::report::{Attribution, Budgets, Reach, RetainedSite, TestIdentity, Why};
    use ying_report::{BaselineEntry, FoldedStack, Frame, LeakReport};

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

    #[cfg(unix)]
    #[test]
    fn a_link_planted_where_a_flamegraph_goes_is_replaced_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let (path, elsewhere) = (dir.path().join("a.svg"), dir.path().join("elsewhere"));
        std::fs::write(&elsewhere, "the user's").unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        write(&stacks(&["a;b 10"]), "retained", &path).unwrap();
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "the user's");
        assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
        assert!(std::fs::read_to_string(&path).unwrap().contains("<svg"));
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

    /// A file in memory whose writes stop, part-way, after `left` bytes (a resize counts as one).
    struct CutShort {
        bytes: Vec<u8>,
        left: usize,
    }

    impl InPlace for CutShort {
        fn write_all_at(&mut self, bytes: &[u8], offset: u64) -> std::io::Result<()> {
            let offset = usize::try_from(offset).unwrap();
            let written = &bytes[..bytes.len().min(self.left)];
            self.left -= written.len();
            let end = offset + written.len();
            if self.bytes.len() < end {
                self.bytes.resize(end, 0);
            }
            self.bytes[offset..end].copy_from_slice(written);
            if written.len() < bytes.len() { Err(std::io::Error::other("cut short")) } else { Ok(()) }
        }

        fn set_len(&mut self, len: u64) -> std::io::Result<()> {
            self.left = self.left.checked_sub(1).ok_or_else(|| std::io::Error::other("cut short"))?;
            self.bytes.resize(usize::try_from(len).unwrap(), 0);
            Ok(())
        }
    }

    #[test]
    fn a_flamegraph_written_over_another_and_cut_short_anywhere_starts_like_neither() {
        let drawn = |hash: char| format!("xxh3-128 {}", hash.to_string().repeat(32));
        let old =
            [start(&drawn('a')).as_bytes(), &b"<svg>an older flamegraph, longer than the new one</svg>\n"[..]].concat();
        for body in [&b"<svg>new</svg>\n"[..], &[b'n'; 200][..]] {
            let head = start(&drawn('b'));
            let new = [head.as_bytes(), body].concat();
            let enough = 2 * (head.len() + new.len()) + 8;
            for left in 0..=enough {
                let mut file = CutShort { bytes: old.clone(), left };
                let written = write_over(&mut file, &new, head.len(), unfinished(&drawn('b')).as_bytes());
                let bytes = file.bytes;
                if written.is_ok() {
                    assert_eq!(bytes, new, "written whole with {left} bytes");
                } else {
                    assert!(left < enough, "written whole with {enough} bytes");
                    assert!(
                        bytes == old
                            || bytes == new
                            || !(bytes.starts_with(&old[..head.len()]) || bytes.starts_with(head.as_bytes())),
                        "cut short after {left} bytes: {}",
                        String::from_utf8_lossy(&bytes)
                    );
                }
            }
        }
    }

    #[test]
    fn retained_memory_is_drawn_with_a_frame_naming_why_it_is_still_there() {
        let identity = TestIdentity::new("app", None, "leaks", "t", "tests/leaks.rs", 3);
        let mut report = LeakReport::new(identity, Attribution::Process, Budgets::default());
        let site = |bytes, function: &str, excused, why: Vec<Why>| {
            let mut site = RetainedSite::new(bytes, 1, excused, vec![Frame::new(function, None, None)]);
            site.why = why;
            site
        };
        let why = |kind, root: Option<&str>, bytes| Why { kind, root: root.map(str::to_owned), bytes, blocks: 1 };
        report.retained_sites = vec![
            site(
                2048,
                "app::fill",
                false,
                vec![why(Reach::Static, Some("app::CACHE"), 2000), why(Reach::Lost, None, 48)],
            ),
            site(96, "app::link", false, vec![why(Reach::Cycle, None, 96)]),
            site(10, "app::unscanned", false, Vec::new()),
            site(7, "std::io::stdio::_print", true, vec![why(Reach::Lost, None, 7)]),
        ];
        let mut task = site(256, "app::spawn", false, vec![why(Reach::Lost, None, 256)]);
        task.type_name = Some("tokio::runtime::task::core::Cell<app::serve::{async_fn_env#0}, Arc<H>>".into());
        report.retained_sites.push(task);
        let lines: Vec<String> = retained_stacks_by_kind(&report).iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "app::fill;[lost] 48",
                "app::fill;[static app::CACHE] 2000",
                "app::link;[cycle] 96",
                "app::spawn;[lost];[task app::serve] 256",
                "app::unscanned 10"
            ]
        );
    }

    #[test]
    fn the_differential_matches_sites_by_key_shows_this_runs_lines_and_puts_the_change_on_the_users_function() {
        let identity = TestIdentity::new("app", None, "leaks", "t", "tests/leaks.rs", 3);
        let mut report = LeakReport::new(identity, Attribution::Process, Budgets::default());
        let at = |function: &str, file: &str, line| Frame::new(function, Some(file.to_owned()), Some(line));
        let stack = |line| {
            vec![
                at("alloc::vec::from_elem", "/rustc/0/library/alloc/src/vec/mod.rs", 3000),
                at("leaks::t", "tests/leaks.rs", line),
            ]
        };
        // The baseline: 4000 B at `leaks::t`, and 100 B at sites it did not name. Now the lines moved down by three
        // and the function retains 512 B more, at a new site.
        let before = BaselineEntry {
            sites: vec![("leaks::t".to_owned(), 4000), ("leaks::gone".to_owned(), 64)],
            other: 100,
            ..BaselineEntry::default()
        };
        report.retained_sites = vec![
            RetainedSite::new(4000, 1, false, stack(41)),
            RetainedSite::new(512, 1, false, stack(42)),
            RetainedSite::new(7, 1, true, vec![at("std::io::stdio::_print", "/rustc/0/library/std/src/io.rs", 1)]),
        ];
        let lines = differential_lines(&before, &report);
        assert_eq!(lines, ["[other sites] 100 0", "leaks::gone 64 0", "leaks::t 4000 4512"]);
        // One site of the key: shown at its line in this run.
        report.retained_sites.remove(1);
        report.retained_sites[0].bytes = 4512;
        let lines = differential_lines(&before, &report);
        assert_eq!(lines[2], "leaks::t at tests/leaks.rs:41 4000 4512");
    }
}
