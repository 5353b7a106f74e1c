//! The executable and shared objects loaded in the process, as pprof mappings describe them.

/// One executable segment of a loaded object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    /// First address of the segment in memory.
    pub(crate) start: u64,
    /// One past its last address.
    pub(crate) end: u64,
    /// Offset in the file of its first byte.
    pub(crate) file_offset: u64,
    /// The object's file (the executable's path for the executable).
    pub(crate) path: String,
    /// The GNU build ID, in hex, when the object has one.
    pub(crate) build_id: String,
}

/// The executable segments of every loaded object, the executable's first. Empty where the platform is not
/// supported (mappings are informational: addresses and symbols stay correct without them).
pub(crate) fn executable_segments() -> Vec<Segment> {
    #[cfg(target_os = "linux")]
    {
        linux::segments()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Vec::new()
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use super::Segment;
    use std::fmt::Write;

    /// `NT_GNU_BUILD_ID`: the note type of a GNU build ID.
    const NT_GNU_BUILD_ID: u32 = 3;

    pub(super) fn segments() -> Vec<Segment> {
        let mut segments: Vec<Segment> = Vec::new();
        crate::base::loaded::find_map::<()>(|object| {
            let path = if segments.is_empty() && object.name.is_empty() {
                // The executable comes first, with an empty name.
                std::env::current_exe().map(|path| path.display().to_string()).unwrap_or_default()
            } else {
                object.name.to_string_lossy().into_owned()
            };
            let build_id = object
                .segments(libc::PT_NOTE)
                .find_map(|(start, end, _)| {
                    // SAFETY: a PT_NOTE segment lies inside a loaded segment of this object: its bytes are mapped
                    // and readable while the object is loaded, which it is during the walk.
                    let notes = unsafe { std::slice::from_raw_parts(start as *const u8, end - start) };
                    build_id(notes)
                })
                .unwrap_or_default();
            for (start, end, header) in
                object.segments(libc::PT_LOAD).filter(|(_, _, header)| header.p_flags & libc::PF_X != 0)
            {
                #[expect(clippy::useless_conversion, reason = "`p_offset` is a u32 on 32-bit targets")]
                segments.push(Segment {
                    start: start as u64,
                    end: end as u64,
                    file_offset: u64::from(header.p_offset),
                    path: path.clone(),
                    build_id: build_id.clone(),
                });
            }
            core::ops::ControlFlow::Continue(())
        });
        segments
    }

    /// The GNU build ID in an ELF note section, in hex.
    fn build_id(mut notes: &[u8]) -> Option<String> {
        let word = |bytes: &[u8], at: usize| -> Option<usize> {
            Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?) as usize)
        };
        let padded = |length: usize| length.div_ceil(4) * 4;
        while notes.len() >= 12 {
            let (name_size, desc_size, kind) = (word(notes, 0)?, word(notes, 4)?, word(notes, 8)?);
            let name = notes.get(12..12 + name_size)?;
            let desc_start = 12 + padded(name_size);
            let desc = notes.get(desc_start..desc_start + desc_size)?;
            if kind == NT_GNU_BUILD_ID as usize && name == b"GNU\0" {
                return Some(desc.iter().fold(String::new(), |mut hex, byte| {
                    let _ = write!(hex, "{byte:02x}");
                    hex
                }));
            }
            notes = notes.get(desc_start + padded(desc_size)..)?;
        }
        None
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn the_build_id_is_read_from_a_gnu_note() {
            let mut notes = Vec::new();
            // An unrelated note first, then the build ID.
            for (name, kind, desc) in [(&b"XYZ\0"[..], 1u32, &[9u8, 9, 9][..]), (b"GNU\0", 3, &[0xab, 0x01, 0xff])] {
                notes.extend((name.len() as u32).to_ne_bytes());
                notes.extend((desc.len() as u32).to_ne_bytes());
                notes.extend(kind.to_ne_bytes());
                notes.extend(name);
                notes.extend(desc);
                notes.resize(notes.len().div_ceil(4) * 4, 0);
            }
            assert_eq!(super::build_id(&notes).as_deref(), Some("ab01ff"));
            assert_eq!(super::build_id(&notes[..20]), None);
        }

        #[test]
        fn the_executable_comes_first_and_holds_this_code() {
            let segments = super::segments();
            let here = the_executable_comes_first_and_holds_this_code as *const () as usize as u64;
            let executable = std::env::current_exe().unwrap().display().to_string();
            assert_eq!(segments[0].path, executable);
            assert!(
                segments
                    .iter()
                    .any(|segment| segment.path == executable && (segment.start..segment.end).contains(&here))
            );
        }
    }
}
