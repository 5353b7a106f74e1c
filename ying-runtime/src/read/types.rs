//! The type a retained site allocated, for the sites this process names itself: the generic argument at the frame
//! the frame rules pick, read from the executable's debug information by `ying-frames`' [`DebugTypes`], as
//! `cargo ying` reads it for the sites it names. The debug information is opened the first time a site needs it,
//! once per process; a symboliser gives no frame's entry, so it finds the entries itself, at the frame's address.
//!
//! [`DebugTypes`]: ying_frames::debug_types::DebugTypes

use ying_frames::types::AllocatedType;

/// The type `allocated` names at frame `index` of the `frames` frames named at the instruction pointer `ip` (a
/// return address); `None` outside the executable, where the platform is not supported, or where the executable's
/// debug information does not tell (none, line tables only, compressed, or frames other than those named).
pub(crate) fn read(ip: usize, index: usize, frames: usize, allocated: AllocatedType) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        use std::collections::HashMap;
        use std::sync::Mutex;

        /// The type read at each frame, by its instruction pointer and its index among the pointer's frames
        /// (`None`: none told): sites of one test often allocate through the same code (a vector's growth, say).
        type Read = HashMap<(usize, usize), Option<String>>;
        static READ: Mutex<Option<Read>> = Mutex::new(None);

        let mut read = READ.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let read = read.get_or_insert_with(HashMap::new);
        if let Some(known) = read.get(&(ip, index)) {
            return known.clone();
        }
        let named = at_frame(ip, index, frames, allocated, |types, call, entry| match allocated {
            AllocatedType::Known { name, .. } => Some(name.to_owned()),
            AllocatedType::Argument { parameter, .. } => types.argument(call, entry, parameter),
        });
        read.insert((ip, index), named.clone());
        named
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (ip, index, frames, allocated);
        None
    }
}

/// Where the pointers of the type `allocated` names lie (see [`read`]), by the fields that lead to them; `None` where
/// the debug information does not tell, or names a type no generic argument gives (a `String`'s bytes).
pub(crate) fn layout(
    ip: usize,
    index: usize,
    frames: usize,
    allocated: AllocatedType,
) -> Option<ying_frames::debug_types::layout::Layout> {
    #[cfg(target_os = "linux")]
    {
        let AllocatedType::Argument { parameter, .. } = allocated else { return None };
        at_frame(ip, index, frames, allocated, |types, call, entry| types.argument_layout(call, entry, parameter))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (ip, index, frames, allocated);
        None
    }
}

/// What `read` reads of the executable's debug information at the entry of frame `index` of the `frames` frames
/// named at `ip` (a return address): given the debug information, the call instruction's address in the file and
/// the frame's entry.
#[cfg(target_os = "linux")]
fn at_frame<T>(
    ip: usize,
    index: usize,
    frames: usize,
    allocated: AllocatedType,
    read: impl FnOnce(&ying_frames::debug_types::DebugTypes<&'static [u8]>, u64, usize) -> Option<T>,
) -> Option<T> {
    use std::sync::OnceLock;
    use ying_frames::debug_types::DebugTypes;

    /// The executable's debug information, opened on first need; `None` when it cannot be read.
    static DEBUG_TYPES: OnceLock<Option<DebugTypes<&'static [u8]>>> = OnceLock::new();

    // The call instruction, before the return address, as the executable's file places it.
    let call = super::symbol_table::executable_address(ip)?.checked_sub(1)?;
    let types = DEBUG_TYPES.get_or_init(|| DebugTypes::new(super::symbol_table::executable_bytes()?)).as_ref()?;
    // A unit that writes no generic arguments (the standard library's, as distributed) names none: its entries, a
    // pass over the whole unit to find the frames', are not read.
    if matches!(allocated, AllocatedType::Argument { .. }) && !types.has_arguments(call) {
        return None;
    }
    let entries = types.frame_entries(call);
    // The symboliser named frames the debug information does not give here: its index is not theirs.
    if entries.len() != frames {
        return None;
    }
    let entry = entries.get(index).copied().flatten()?;
    read(types, call, entry)
}
