//! Why retained memory is still there, in words: the one way a site's kinds ([`Why`]) read in failure messages,
//! terminal lines, JUnit, annotations and pages.

use crate::trim::leak_site;
use ying_report::ByteSize;
use ying_report::report::RetainedSite;

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

/// One line for a retained site: its size, blocks and type, why it is still there, and where it was allocated
/// (the leak site's frame, else the innermost frame). `512 B in 1 block of u8, lost (nothing points to it), at
/// tests/leaks.rs:12 in leaks::forgotten`.
pub fn site_line(site: &RetainedSite) -> String {
    let mut line = site_head(site);
    let frame = leak_site(&site.frames).and_then(|index| site.frames.get(index)).or_else(|| site.frames.first());
    if let Some(frame) = frame {
        match (&frame.file, frame.line) {
            (Some(file), Some(number)) => line.push_str(&format!(", at {file}:{number} in {}", frame.function)),
            _ => line.push_str(&format!(", in {}", frame.function)),
        }
    }
    line
}

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
    use super::{describe, site_line};
    use ying_report::Frame;
    use ying_report::report::{Reach, RetainedSite, Why};

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
}
