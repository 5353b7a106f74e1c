//! Call-frame rules kept across the test processes of a run ([`RULES_DIR_ENV`]).
//!
//! Each test process of a run computes the rules of the same few hundred return addresses (the test harness's, the
//! standard library's, the async runtime's, ying's own): 265 of them in a tokio-util test, a binary search of the
//! `.eh_frame_hdr` table and a call-frame program run for each, a tenth of what measuring costs such a process.
//! So a process keeps the rules it computed in the run's directory, by the object they belong to, and the processes
//! after it start from them. An object is known by its GNU build id, the linker's hash of its contents: a rule kept
//! for a build id is the rule of the same bytes at the same offset, wherever the object is loaded, and an object
//! rebuilt has another. Objects without one keep nothing.
//!
//! The file is `<build id of the executable>.rules` and holds, for each object, its build id and its rules as
//! (offset in the object, packed rule). It is read once a process, when the functions where stacks end become known
//! (the table is emptied then), and written after a test's report when there is none yet (written aside and
//! renamed: a reader sees one whole file).
//! A file that does not read as this layout is ignored; a rule it holds is trusted as the object's own call-frame
//! information is (the run's directory is the user's, as the executable is).

use super::rules;
use core::ops::ControlFlow;
use std::path::{Path, PathBuf};
use ying_report::RULES_DIR_ENV;

/// The first bytes of a file of kept rules.
const MAGIC: &[u8; 8] = b"yingrul1";
/// The largest file read: a few thousand rules at 16 bytes each fit many times over.
const MOST_BYTES: u64 = 1 << 20;

/// An object's build id and its kept rules, (offset in the object, packed rule).
type KeptRules = (Vec<u8>, Vec<(u64, u64)>);

/// A loaded object with a build id: where it lies in this process.
struct Object {
    id: Vec<u8>,
    bias: usize,
    loads: Vec<(usize, usize)>,
}

impl Object {
    fn holds(&self, address: usize) -> bool {
        self.loads.iter().any(|&(start, end)| (start..end).contains(&address))
    }
}

/// The loaded objects that have a build id, the executable first, and the loader's unload count; `None` when the
/// executable (the loader's first object) has none: nothing is kept for it.
fn objects() -> Option<(Vec<Object>, u64)> {
    let mut objects = Vec::new();
    let mut unloads = 0;
    let mut first = true;
    let executable_unknown = crate::base::loaded::find_map(|object| {
        unloads = object.unloads;
        let id = object.build_id();
        if core::mem::take(&mut first) && id.is_none() {
            return ControlFlow::Break(());
        }
        if let Some(id) = id {
            let loads = object.segments(libc::PT_LOAD).map(|(start, end, _)| (start, end)).collect();
            objects.push(Object { id: id.to_vec(), bias: object.bias, loads });
        }
        ControlFlow::Continue(())
    });
    executable_unknown.is_none().then_some((objects, unloads))
}

/// The file of the executable `executable` (its build id) in `dir`.
fn file_in(dir: &Path, executable: &[u8]) -> PathBuf {
    let hex: String = executable.iter().map(|byte| format!("{byte:02x}")).collect();
    dir.join(format!("{hex}.rules"))
}

/// The directory [`RULES_DIR_ENV`] names, and [`objects`].
fn place() -> Option<(PathBuf, Vec<Object>, u64)> {
    let dir = PathBuf::from(std::env::var_os(RULES_DIR_ENV)?);
    let (objects, unloads) = objects()?;
    Some((dir, objects, unloads))
}

/// Puts the rules kept for this executable into the table, where [`RULES_DIR_ENV`] names a directory that holds
/// them. Called once the functions where stacks end are known (which empties the table).
pub(crate) fn load() {
    let Some((dir, objects, unloads)) = place() else { return };
    let Ok(bytes) = ying_report::read_bounded(&file_in(&dir, &objects[0].id), MOST_BYTES) else { return };
    let Some(kept) = parse(&bytes) else { return };
    let rules = kept.into_iter().flat_map(|(id, rules)| {
        let object = objects.iter().find(|object| object.id == id);
        rules.into_iter().filter_map(move |(offset, word)| {
            let object = object?;
            let address = object.bias.checked_add(usize::try_from(offset).ok()?)?;
            object.holds(address).then_some((address, word))
        })
    });
    rules::put(rules, unloads);
}

/// Keeps this process's rules for the processes after it, when none are kept yet for its executable. Only the
/// first processes keep theirs: the rules every test needs (the harness's, the async runtime's, ying's) are among
/// them, and a later process computes those of its own test's code itself. Writing the union again from every
/// process that computed a few more cost a tokio-util run as much as the rules saved (a file written and renamed
/// in each of its 317 processes).
pub(crate) fn keep() {
    let Some((dir, objects, _)) = place() else { return };
    let path = file_in(&dir, &objects[0].id);
    if path.exists() {
        return;
    }
    let mut by_object: Vec<Vec<(u64, u64)>> = objects.iter().map(|_| Vec::new()).collect();
    rules::each(|address, word| {
        if let Some(index) = objects.iter().position(|object| object.holds(address)) {
            by_object[index].push(((address - objects[index].bias) as u64, word));
        }
    });
    let bytes = layout(objects.iter().map(|object| &object.id[..]).zip(by_object));
    // A directory gone (the run pruned) or a full disk: the next process computes the rules itself.
    let _ = std::fs::create_dir_all(&dir).and_then(|()| ying_report::write_own_bytes(&path, &bytes, false));
}

/// The file's bytes: [`MAGIC`], the number of objects, then each object's build id (its length in a byte) and
/// rules (their number in 4 bytes, then each rule's offset and word in 8 bytes each), native-endian.
fn layout<'a>(objects: impl IntoIterator<Item = (&'a [u8], Vec<(u64, u64)>)>) -> Vec<u8> {
    let objects: Vec<_> = objects.into_iter().filter(|(id, rules)| !rules.is_empty() && id.len() <= 255).collect();
    let mut bytes = MAGIC.to_vec();
    bytes.extend((objects.len() as u32).to_ne_bytes());
    for (id, rules) in objects {
        bytes.push(id.len() as u8);
        bytes.extend(id);
        bytes.extend((rules.len() as u32).to_ne_bytes());
        for (offset, word) in rules {
            bytes.extend(offset.to_ne_bytes());
            bytes.extend(word.to_ne_bytes());
        }
    }
    bytes
}

/// Each object's build id and rules, from a file's bytes; `None` when they are not in [`layout`]'s form.
fn parse(mut bytes: &[u8]) -> Option<Vec<KeptRules>> {
    let mut take = |len: usize| {
        let (taken, rest) = bytes.split_at_checked(len)?;
        bytes = rest;
        Some(taken)
    };
    (take(MAGIC.len())? == MAGIC).then_some(())?;
    let count = |bytes: &[u8]| Some(u32::from_ne_bytes(bytes.try_into().ok()?) as usize);
    let word = |bytes: &[u8]| Some(u64::from_ne_bytes(bytes.try_into().ok()?));
    let objects = count(take(4)?)?;
    let mut parsed = Vec::new();
    for _ in 0..objects {
        let id_len = usize::from(*take(1)?.first()?);
        let id = take(id_len)?.to_vec();
        let rules = count(take(4)?)?;
        let table = take(rules.checked_mul(16)?)?;
        let rules =
            table.chunks_exact(16).map(|rule| Some((word(&rule[..8])?, word(&rule[8..])?))).collect::<Option<_>>()?;
        parsed.push((id, rules));
    }
    bytes.is_empty().then_some(parsed)
}

#[cfg(test)]
mod tests {
    use super::super::walk::capture;
    use super::super::walk::tests::buffer;
    use super::{layout, parse, rules};
    use ying_report::RULES_DIR_ENV;

    /// Walks from a few call sites of its own, then keeps the rules, and says how many it computed after the kept
    /// ones were read.
    #[test]
    #[ignore = "run by `a_process_starts_from_the_rules_the_one_before_it_kept`, in a process of its own"]
    fn walk_and_keep() {
        // Reads the kept rules, once a process.
        crate::read::symbol_table::end_stacks_at_thread_entries();
        let before = rules::computed();
        let mut lens = Vec::new();
        for depth in 0..6 {
            lens.push(nested(depth));
        }
        println!("computed {} for walks of {lens:?} frames", rules::computed() - before);
        super::keep();
    }

    #[inline(never)]
    fn nested(depth: usize) -> usize {
        if depth == 0 {
            let mut ips = buffer::<128>();
            capture(&mut ips, 0).expect("the caching walker handles this stack")
        } else {
            std::hint::black_box(nested(depth - 1))
        }
    }

    #[test]
    fn a_process_starts_from_the_rules_the_one_before_it_kept() {
        let dir = tempfile::tempdir().unwrap();
        let run = || {
            let output = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "hot::unwind::kept::tests::walk_and_keep", "--ignored", "--nocapture"])
                .arg("--test-threads=1")
                .env(RULES_DIR_ENV, dir.path())
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
            let line = stdout.lines().find_map(|line| line.split_once("computed ")).expect("the count").1.to_owned();
            let count: usize = line.split(' ').next().unwrap().parse().unwrap();
            (count, line)
        };
        let (first, said) = run();
        assert!(first >= 6, "{said}");
        let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|entry| entry.unwrap().path()).collect();
        assert_eq!(files.len(), 1, "{files:?}");
        assert!(files[0].extension().is_some_and(|extension| extension == "rules"), "{files:?}");
        // The same walks in the next process: every rule they need was kept but that of the thread's entry, where
        // the walks end, which depends on what the process was told and is computed again.
        let (second, said) = run();
        assert!(second <= 1, "{said} (the first process computed {first})");
    }

    #[test]
    fn kept_rules_read_back_as_written_and_anything_else_reads_as_nothing() {
        let objects = [(&[1u8, 2, 3][..], vec![(0x1000, 0x10_0000_0007), (0x2000, 16)]), (&[9; 20][..], vec![(8, 1)])];
        let bytes = layout(objects.iter().map(|(id, rules)| (*id, rules.clone())));
        let parsed = parse(&bytes).unwrap();
        let expected: Vec<super::KeptRules> = objects.iter().map(|(id, rules)| (id.to_vec(), rules.clone())).collect();
        assert_eq!(parsed, expected);
        // Cut short, one byte too many, another file's bytes.
        assert_eq!(parse(&bytes[..bytes.len() - 1]), None);
        assert_eq!(parse(&[&bytes[..], &[0]].concat()), None);
        assert_eq!(parse(b"{\"executable\":1}"), None);
        // An object without rules is left out.
        assert_eq!(parse(&layout([(&[5u8][..], Vec::new())])), Some(Vec::new()));
    }
}
