//! The objects the dynamic loader has loaded (Linux), walked with `dl_iterate_phdr` without allocating: the stack
//! walker looks up call-frame information with it inside the allocator, symbolisation finds the executable's load
//! bias, pprof sessions list the mappings, and a refused giant allocation names the object of each frame.

use core::ffi::CStr;
use core::ops::ControlFlow;

/// A program header of the target's ELF class.
#[cfg(target_pointer_width = "64")]
pub(crate) type ProgramHeader = libc::Elf64_Phdr;
/// A program header of the target's ELF class.
#[cfg(target_pointer_width = "32")]
pub(crate) type ProgramHeader = libc::Elf32_Phdr;

/// One loaded object, as the loader describes it during the walk.
pub(crate) struct LoadedObject<'a> {
    /// The difference between the object's addresses in memory and in its file.
    pub(crate) bias: usize,
    /// Its program headers.
    pub(crate) headers: &'a [ProgramHeader],
    /// Its file name as the loader knows it; empty for the executable.
    pub(crate) name: &'a CStr,
    /// How many objects the loader has unloaded since the process started.
    pub(crate) unloads: u64,
}

impl LoadedObject<'_> {
    /// The in-memory range `(start, end)` of a program header's segment.
    pub(crate) fn range(&self, header: &ProgramHeader) -> (usize, usize) {
        let start = self.bias.wrapping_add(header.p_vaddr as usize);
        (start, start.wrapping_add(header.p_memsz as usize))
    }

    /// The in-memory ranges of the segments of type `kind` (`libc::PT_LOAD`, ...).
    pub(crate) fn segments(&self, kind: u32) -> impl Iterator<Item = (usize, usize, &ProgramHeader)> {
        self.headers.iter().filter(move |header| header.p_type == kind).map(|header| {
            let (start, end) = self.range(header);
            (start, end, header)
        })
    }

    /// The in-memory range `(start, end)` from its first loaded segment to the end of its last; empty (`start` not
    /// below `end`) when it has none.
    pub(crate) fn loaded_range(&self) -> (usize, usize) {
        self.segments(libc::PT_LOAD)
            .fold((usize::MAX, 0), |(start, end), segment| (start.min(segment.0), end.max(segment.1)))
    }

    /// Whether `address` lies in one of the object's loaded segments.
    pub(crate) fn holds(&self, address: usize) -> bool {
        self.segments(libc::PT_LOAD).any(|(start, end, _)| (start..end).contains(&address))
    }

    /// The object's GNU build id (the linker's hash of its contents, in its `NT_GNU_BUILD_ID` note), if it has one.
    pub(crate) fn build_id(&self) -> Option<&[u8]> {
        self.segments(libc::PT_NOTE).find_map(|(start, end, _)| {
            // SAFETY: a `PT_NOTE` segment of a loaded object lies in one of its loaded segments, mapped readable
            // while the object is loaded (it is: the loader is walking it).
            let notes = unsafe { core::slice::from_raw_parts(start as *const u8, end.saturating_sub(start)) };
            gnu_build_id(notes)
        })
    }
}

/// The description of the `NT_GNU_BUILD_ID` note among `notes` (a `PT_NOTE` segment: each note a name size, a
/// description size and a type, 4 bytes each, then the name and the description, each padded to 4 bytes).
fn gnu_build_id(mut notes: &[u8]) -> Option<&[u8]> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let word = |bytes: &[u8], at: usize| Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?) as usize);
    while notes.len() >= 12 {
        let (name_size, description_size, kind) = (word(notes, 0)?, word(notes, 4)?, word(notes, 8)?);
        let name_end = 12usize.checked_add(name_size.checked_next_multiple_of(4)?)?;
        let end = name_end.checked_add(description_size.checked_next_multiple_of(4)?)?;
        let name = notes.get(12..12 + name_size)?;
        if kind == NT_GNU_BUILD_ID as usize && name == b"GNU\0" {
            return notes.get(name_end..name_end + description_size).filter(|id| !id.is_empty());
        }
        notes = notes.get(end..)?;
    }
    None
}

/// Calls `visit` with each loaded object, the executable first, until it breaks; returns the break value.
///
/// The walk holds the loader's lock (which does not allocate); `visit` must not load or unload objects. It may
/// allocate, but the stack walker's visitor, which runs inside the allocator, does not.
pub(crate) fn find_map<B>(mut visit: impl FnMut(&LoadedObject<'_>) -> ControlFlow<B>) -> Option<B> {
    struct Walk<'f, B> {
        visit: &'f mut dyn FnMut(&LoadedObject<'_>) -> ControlFlow<B>,
        found: Option<B>,
    }

    unsafe extern "C" fn each_object<B>(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `dl_iterate_phdr` passes a valid `info` for the duration of the call, and `data` is the `Walk`
        // that `find_map` gave it, used by this call alone.
        let (info, walk) = unsafe { (&*info, &mut *data.cast::<Walk<'_, B>>()) };
        let headers = if info.dlpi_phdr.is_null() {
            &[][..]
        } else {
            // SAFETY: `dlpi_phdr` points to `dlpi_phnum` program headers of the object, valid during the call.
            unsafe { core::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) }
        };
        let name = if info.dlpi_name.is_null() {
            c""
        } else {
            // SAFETY: a non-null `dlpi_name` is a C string owned by the loader, valid during the call.
            unsafe { CStr::from_ptr(info.dlpi_name) }
        };
        let object = LoadedObject { bias: info.dlpi_addr as usize, headers, name, unloads: info.dlpi_subs };
        match (walk.visit)(&object) {
            ControlFlow::Continue(()) => 0,
            ControlFlow::Break(found) => {
                walk.found = Some(found);
                1
            }
        }
    }

    let mut walk = Walk { visit: &mut visit, found: None };
    // SAFETY: the callback upholds `dl_iterate_phdr`'s contract and only uses `data`, which points to `walk`, alive
    // for the whole call.
    unsafe { libc::dl_iterate_phdr(Some(each_object::<B>), (&raw mut walk).cast()) };
    walk.found
}

#[cfg(test)]
mod tests {
    use core::ops::ControlFlow;

    #[test]
    fn the_executable_comes_first_and_holds_this_code() {
        let here = the_executable_comes_first_and_holds_this_code as *const () as usize;
        let mut seen = 0;
        let first = super::find_map(|object| {
            seen += 1;
            ControlFlow::Break((object.name.is_empty(), object.holds(here)))
        });
        assert_eq!((first, seen), (Some((true, true)), 1), "the walk stops at the first break");
        let libc_loaded = super::find_map(|object| {
            if object.name.to_bytes().windows(4).any(|part| part == b"libc") {
                ControlFlow::Break(object.segments(libc::PT_LOAD).count())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert!(libc_loaded.is_some_and(|loads| loads > 0), "{libc_loaded:?}");
    }

    #[test]
    fn an_objects_build_id_is_the_one_its_file_notes() {
        // The executable's, as `readelf -n` would print it, read from its file's section.
        let file = std::fs::read("/proc/self/exe").unwrap();
        let section = object::File::parse(&*file).ok().and_then(|file| {
            use object::{Object as _, ObjectSection as _};
            file.section_by_name(".note.gnu.build-id").and_then(|section| section.data().ok().map(<[u8]>::to_vec))
        });
        let in_memory = super::find_map(|object| ControlFlow::Break(object.build_id().map(<[u8]>::to_vec))).flatten();
        match section {
            Some(section) => {
                let id = in_memory.expect("the loaded executable's notes hold its build id");
                assert!(id.len() >= 8 && section.ends_with(&id), "{id:x?} in {section:x?}");
            }
            None => assert_eq!(in_memory, None),
        }
        // Two notes, the build id second, and one cut short.
        let mut notes = Vec::new();
        for (name, kind, description) in [(&b"GNU\0"[..], 1u32, &[0u8; 16][..]), (b"GNU\0", 3, &[7; 20])] {
            notes.extend((name.len() as u32).to_ne_bytes());
            notes.extend((description.len() as u32).to_ne_bytes());
            notes.extend(kind.to_ne_bytes());
            notes.extend(name);
            notes.extend(description);
        }
        assert_eq!(super::gnu_build_id(&notes), Some(&[7u8; 20][..]));
        assert_eq!(super::gnu_build_id(&notes[..notes.len() - 1]), None);
    }
}
