//! Why retained memory is still there, in words: the one way a site's kinds ([`Why`]) read in failure messages,
//! terminal lines, JUnit, annotations and pages.

use crate::trim::{is_package_code, leak_site};
use ying_report::report::RetainedSite;
use ying_report::{ByteSize, Frame};

/// Whether the site's blocks are reference-counted: the stack passes through `Rc::new` or `Arc::new` (or their
/// kin), so a cycle among them is a reference cycle.
pub fn is_reference_counted(site: &RetainedSite) -> bool {
    site.frames.iter().any(|frame| {
        let function = frame.function.trim_start_matches('<');
        function.starts_with("alloc::rc::") || function.starts_with("alloc::sync::")
    })
}

/// What keeps a site's bytes, each kind with its share when there are several: `lost (nothing points to it)`,
/// `held by static my_crate::CACHE`, `1 KiB held by static a::B, 24 B lost (nothing points to it)`.
pub fn describe(site: &RetainedSite) -> Option<String> {
    let counted = is_reference_counted(site);
    match site.why.as_slice() {
        [] => None,
        [only] => Some(only.describe(counted)),
        several => Some(
            several
                .iter()
                .map(|why| format!("{} {}", ByteSize::new(why.bytes).rounded(), why.describe(counted)))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    }
}

/// [`site_line`] without the test it was reached from: the site as one cause of several tests' growth names it.
pub fn site_line_alone(site: &RetainedSite) -> String {
    let mut line = site_head(site);
    let at = leak_site(&site.frames).or((!site.frames.is_empty()).then_some(0));
    if let Some(frame) = at.and_then(|index| site.frames.get(index)) {
        line.push_str(&format!(", {}", frame_words("at", frame)));
    }
    line
}

/// One line for a retained site: its size, blocks and type, why it is still there, and where it was allocated
/// (the leak site's frame, else the innermost frame), then the test's line when that is another frame.
/// `512 B in 1 block of u8, lost (nothing points to it), at src/cache.rs:12 in app::Cache::fill, from
/// tests/cache.rs:40 in cache::fills`.
pub fn site_line(site: &RetainedSite) -> String {
    let mut line = site_line_alone(site);
    let at = leak_site(&site.frames).or((!site.frames.is_empty()).then_some(0));
    if let Some(test) = test_frame(&site.frames).filter(|&test| Some(test) != at) {
        line.push_str(&format!(", {}", frame_words("from", &site.frames[test])));
    }
    line
}

/// `at tests/leaks.rs:12 in leaks::forgotten` (`preposition` first), or `in leaks::forgotten` without a line.
fn frame_words(preposition: &str, frame: &Frame) -> String {
    match (&frame.file, frame.line) {
        (Some(file), Some(number)) => format!("{preposition} {file}:{number} in {}", frame.function),
        _ => format!("in {}", frame.function),
    }
}

/// The frame of the test in a site's stack: the outermost frame of the package's code (the test function, whose
/// closure may follow it under the same name: the innermost of those, the line in its body).
fn test_frame(frames: &[Frame]) -> Option<usize> {
    let mut test = frames.iter().rposition(is_package_code)?;
    while test > 0 && frames[test - 1].function == frames[test].function && is_package_code(&frames[test - 1]) {
        test -= 1;
    }
    Some(test)
}

/// The site that owns the lost bytes of site `index` of `sites` whole ([`RetainedSite::owns`]), the one owning
/// most of them; `None` when the site is listed on its own (some of its bytes are its own, or reached).
pub fn owner_of(sites: &[RetainedSite], index: usize) -> Option<usize> {
    owner_among(sites, &RetainedSite::owned_elsewhere(sites), index)
}

/// [`owner_of`], with the bytes of each site other sites own (`owned`, [`RetainedSite::owned_elsewhere`]) counted
/// once for every site asked about.
fn owner_among(sites: &[RetainedSite], owned: &[u64], index: usize) -> Option<usize> {
    let site = sites.get(index)?;
    if site.bytes == 0 || owned.get(index).copied().unwrap_or(0) < site.bytes {
        return None;
    }
    sites
        .iter()
        .enumerate()
        .filter(|&(owner, _)| owner != index)
        .filter_map(|(owner, site)| Some((owner, site.owns.iter().find(|item| item.site == index)?.bytes)))
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|(owner, _)| owner)
}

/// `chosen` (indices of `sites`) as valgrind groups lost memory: a site whose bytes another site's lost blocks own
/// whole is replaced by that owner, and each site is listed once, where it first appears.
pub fn grouped(sites: &[RetainedSite], chosen: impl IntoIterator<Item = usize>) -> Vec<usize> {
    let owned = RetainedSite::owned_elsewhere(sites);
    let mut listed = Vec::new();
    for index in chosen {
        let mut shown = index;
        // An owner is itself owned only through a longer chain; a few steps, never a loop.
        for _ in 0..sites.len() {
            match owner_among(sites, &owned, shown) {
                Some(owner) if owner != index => shown = owner,
                _ => break,
            }
        }
        if !listed.contains(&shown) {
            listed.push(shown);
        }
    }
    listed
}

/// What a site's lost blocks own of other sites, in words, the largest two of them named: `owning 5 more blocks,
/// 262.0 KiB: 256.0 KiB in 4 blocks at src/ffi/c.rs:109 in flate2::ffi::c::allocator::zalloc, 5.8 KiB in 1 block
/// in deflateInit2_`. `None` when it owns none.
pub fn owning(sites: &[RetainedSite], site: &RetainedSite) -> Option<String> {
    let owned: Vec<(&RetainedSite, u64, u64)> = site
        .owns
        .iter()
        .filter_map(|item| Some((sites.get(item.site)?, item.bytes, item.blocks)))
        .filter(|(other, _, _)| !core::ptr::eq(*other, site))
        .collect();
    let (bytes, blocks) = owned.iter().fold((0, 0), |(bytes, count), &(_, b, n)| (bytes + b, count + n));
    if bytes == 0 {
        return None;
    }
    let mut line = format!(
        "owning {blocks} more block{}, {}:",
        if blocks == 1 { "" } else { "s" },
        ByteSize::new(bytes).rounded()
    );
    // Owned sites told apart by what allocated them, in words: the C library's four windows are one part.
    let mut parts: Vec<(String, u64, u64)> = Vec::new();
    for &(other, bytes, blocks) in &owned {
        let mut words = other.type_name.as_ref().map(|type_name| format!(" of {type_name}")).unwrap_or_default();
        if let Some(frame) = allocating_frame(&other.frames) {
            let words_of_frame = if is_package_code(frame) {
                frame_words("at", frame)
            } else {
                format!("allocated by {}", frame.function)
            };
            words.push_str(&format!(" {words_of_frame}"));
        }
        match parts.iter_mut().find(|(known, _, _)| *known == words) {
            Some((_, known_bytes, known_blocks)) => {
                *known_bytes += bytes;
                *known_blocks += blocks;
            }
            None => parts.push((words, bytes, blocks)),
        }
    }
    let named: Vec<String> = parts
        .iter()
        .take(OWNED_NAMED)
        .map(|(words, bytes, blocks)| {
            let plural = if *blocks == 1 { "" } else { "s" };
            format!("{} in {blocks} block{plural}{words}", ByteSize::new(*bytes).rounded())
        })
        .collect();
    line.push_str(&format!(" {}", named.join(", ")));
    if parts.len() > OWNED_NAMED {
        line.push_str(&format!(" and {} more", parts.len() - OWNED_NAMED));
    }
    Some(line)
}

/// The code that allocated a site's blocks: its innermost frame outside the standard library (the package's
/// code, a dependency's, or a C function).
fn allocating_frame(frames: &[Frame]) -> Option<&Frame> {
    frames.iter().find(|frame| {
        let in_std = frame.file.as_deref().is_some_and(|file| file.starts_with("/rustc/"))
            || ["alloc::", "core::", "std::", "<alloc::", "<core::", "<std::", "__rust"]
                .iter()
                .any(|prefix| frame.function.starts_with(prefix));
        !in_std
    })
}

/// The owned sites [`owning`] names.
const OWNED_NAMED: usize = 2;

/// A site's size, blocks and type, and why it is still there, without where it was allocated: `512 B in 1 block of
/// u8, lost (nothing points to it)`. A failure message puts the site's frames under it.
pub fn site_head(site: &RetainedSite) -> String {
    let bytes = ByteSize::new(site.bytes);
    let mut line = if site.blocks == 0 {
        format!("{bytes} grown in blocks allocated before")
    } else {
        format!("{bytes} in {} block{}", site.blocks, if site.blocks == 1 { "" } else { "s" })
    };
    if let Some(type_name) = &site.type_name {
        line.push_str(&format!(" of {type_name}"));
    }
    if let Some(why) = describe(site) {
        line.push_str(&format!(", {why}"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::{describe, grouped, owner_of, owning, site_line};
    use ying_report::Frame;
    use ying_report::report::{Owned, Reach, RetainedSite, Why};

    fn why(kind: Reach, root: Option<&str>, bytes: u64) -> Why {
        Why { kind, root: root.map(str::to_owned), bytes, blocks: 1 }
    }

    fn site(bytes: u64, function: &str, whys: Vec<Why>) -> RetainedSite {
        let frames = vec![
            Frame::new(function, Some("/rustc/abc/library/alloc/src/rc.rs".into()), Some(3)),
            Frame::new("leaks::cycle", Some("tests/leaks.rs".into()), Some(12)),
        ];
        let mut site = RetainedSite::new(bytes, 2, false, frames);
        site.why = whys;
        site
    }

    #[test]
    fn a_site_reads_as_its_size_type_kind_and_the_line_that_allocated_it() {
        let mut forgotten = site(512, "alloc::raw_vec::RawVec<T>::allocate_in", vec![why(Reach::Lost, None, 512)]);
        forgotten.type_name = Some("u8".into());
        assert_eq!(
            site_line(&forgotten),
            "512 B in 2 blocks of u8, lost (nothing points to it), at tests/leaks.rs:12 in leaks::cycle"
        );
        let cycle = site(96, "alloc::rc::Rc<T>::new", vec![why(Reach::Cycle, None, 96)]);
        assert_eq!(describe(&cycle).unwrap(), "lost in a reference cycle");
        let cycle = site(96, "alloc::boxed::Box<T>::new", vec![why(Reach::Cycle, None, 96)]);
        assert_eq!(describe(&cycle).unwrap(), "lost in a cycle (only lost blocks point to it)");
        let mixed = site(
            2048,
            "alloc::alloc::exchange_malloc",
            vec![why(Reach::Static, Some("app::CACHE"), 2000), why(Reach::Lost, None, 48)],
        );
        assert_eq!(describe(&mixed).unwrap(), "2.0 KiB held by static app::CACHE, 48 B lost (nothing points to it)");
        assert_eq!(describe(&site(1, "f", Vec::new())), None);
    }

    #[test]
    fn a_site_line_names_the_tests_line_when_the_leak_site_is_another_frame() {
        let frames = vec![
            Frame::new(
                "alloc::raw_vec::RawVec<T>::allocate_in",
                Some("/rustc/abc/library/alloc/src/raw_vec.rs".into()),
                Some(3),
            ),
            Frame::new("app::Cache::fill", Some("src/cache.rs".into()), Some(12)),
            Frame::new("cache::fills", Some("tests/cache.rs".into()), Some(40)),
            // Its closure, named after the test function, at the function's line.
            Frame::new("cache::fills", Some("tests/cache.rs".into()), Some(38)),
        ];
        let mut site = RetainedSite::new(512, 1, false, frames);
        site.why = vec![why(Reach::Lost, None, 512)];
        assert_eq!(
            site_line(&site),
            "512 B in 1 block, lost (nothing points to it), at src/cache.rs:12 in app::Cache::fill, from \
             tests/cache.rs:40 in cache::fills"
        );
    }

    #[test]
    fn lost_sites_are_grouped_under_the_site_whose_lost_blocks_own_them() {
        let c_frames = |line: u32| {
            vec![
                Frame::new(
                    "flate2::ffi::c::allocator::zalloc",
                    Some("/registry/src/flate2/src/ffi/c.rs".into()),
                    Some(109),
                ),
                Frame::new("deflateInit2_", None, None),
                Frame::new("smoke::smoke", Some("tests/smoke.rs".into()), Some(line)),
            ]
        };
        let mut window = RetainedSite::new(65_544, 1, false, c_frames(10));
        window.why = vec![why(Reach::Cycle, None, 65_544)];
        let mut state = RetainedSite::new(5_960, 1, false, c_frames(10));
        state.why = vec![why(Reach::Cycle, None, 5_960)];
        let boxed_frames = vec![
            Frame::new("alloc::boxed::Box<T>::new", Some("/rustc/abc/library/alloc/src/boxed.rs".into()), Some(1)),
            Frame::new("smoke::smoke", Some("tests/smoke.rs".into()), Some(10)),
        ];
        let mut stream = RetainedSite::new(112, 1, false, boxed_frames);
        stream.type_name = Some("libz_sys::z_stream".into());
        stream.why = vec![why(Reach::Cycle, None, 112)];
        stream.owns = vec![Owned { site: 0, bytes: 65_544, blocks: 1 }, Owned { site: 1, bytes: 5_960, blocks: 1 }];
        let mut unrelated = RetainedSite::new(64, 1, false, Vec::new());
        unrelated.why = vec![why(Reach::Lost, None, 64)];
        let sites = [window, state, stream, unrelated];
        assert_eq!((owner_of(&sites, 0), owner_of(&sites, 1), owner_of(&sites, 2)), (Some(2), Some(2), None));
        // The owner takes the place of the first site it owns, once.
        assert_eq!(grouped(&sites, 0..4), [2, 3]);
        assert_eq!(
            owning(&sites, &sites[2]).unwrap(),
            "owning 2 more blocks, 69.8 KiB: 69.8 KiB in 2 blocks allocated by flate2::ffi::c::allocator::zalloc"
        );
        assert_eq!(owning(&sites, &sites[3]), None);
    }
}
