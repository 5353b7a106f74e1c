//! The walker: from the registers of a running frame, the return addresses of its callers, one call-frame rule
//! ([`super::rules`]) per frame.

use super::rules::{Miss, rule_for};
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicBool, Ordering};

/// The calling function's instruction, stack and frame pointers, as a [`Regs`] to start a walk from. A macro, not a
/// function: a walk starts in the frame that read the registers, which must still be running.
macro_rules! registers {
    () => {{
        let (ip, sp, bp): (usize, usize, usize);
        // SAFETY: reads the instruction pointer, stack pointer and frame pointer into registers; touches no memory
        // and leaves the stack and flags as they were.
        unsafe {
            core::arch::asm!(
                "lea {ip}, [rip]",
                "mov {sp}, rsp",
                "mov {bp}, rbp",
                ip = out(reg) ip,
                sp = out(reg) sp,
                bp = out(reg) bp,
                options(nomem, nostack, preserves_flags),
            );
        }
        super::walk::Regs { ip, sp, bp }
    }};
}
pub(super) use registers;

/// Walks the calling thread's stack into `ips` (return addresses, innermost caller of `capture` first). Stops when
/// `ips` is full, at the first frame whose CFA lies past `limit` (when not 0, that frame included), or at the end
/// of the stack (a thread's entry, once [`end_stacks_at`](super::end_stacks_at) said where they are). Returns the
/// number of frames written, or `None` when the stack needs the system unwinder.
#[inline(never)]
pub(crate) fn capture(ips: &mut [MaybeUninit<usize>], limit: usize) -> Option<usize> {
    walk(registers!(), ips, limit)
}

/// The registers a walk needs: instruction, stack and frame pointers.
#[derive(Clone, Copy)]
pub(super) struct Regs {
    pub(super) ip: usize,
    pub(super) sp: usize,
    pub(super) bp: usize,
}

/// Set when the walker cannot walk even its own frame (no `.eh_frame_hdr`): every capture falls back.
static DISABLED: AtomicBool = AtomicBool::new(false);

/// Deepest plausible distance, in bytes, between the first frame and the outermost one: a CFA further away
/// means a rule went wrong, and the walk stops rather than read far memory.
const MAX_STACK_SPAN: usize = 1 << 30;

/// Walks from `regs` into `ips`, as [`capture`] does from its own frame.
pub(super) fn walk(regs: Regs, ips: &mut [MaybeUninit<usize>], limit: usize) -> Option<usize> {
    walk_reading(regs, ips, limit, |_, _| {})
}

/// The address [`walk_reading`] tells for the starting `rbp` (no slot of memory: never a multiple of 8).
pub(super) const BP_REGISTER: usize = 1;

/// The value a walk from `regs` finds at `address`, one it told [`walk_reading`]'s `reads` ([`BP_REGISTER`]: the
/// starting `rbp`).
///
/// # Safety
///
/// `address` is [`BP_REGISTER`], or a slot a walk from `regs` reads: each slot of a walk follows from `regs` and
/// the values read before it, so a caller that found every earlier value the same reads a live frame's slot.
#[inline(always)]
pub(super) unsafe fn value_at(address: usize, regs: Regs) -> usize {
    if address == BP_REGISTER {
        return regs.bp;
    }
    // SAFETY: a slot the walk itself reads (the caller's contract), aligned as `read` checked when it was told.
    unsafe { (address as *const usize).read() }
}

/// [`walk`], telling `reads` every slot of memory whose value the walk depends on and the value it found there,
/// in the order the walk reads them, and the starting `rbp` as a read of [`BP_REGISTER`] when it served as a CFA
/// base. Optimised code often keeps data in `rbp`, which frames save and restore as any callee-saved register: a
/// restored `rbp` counts (and its slot is told) only once a CFA is computed from it, and the starting one only if
/// a CFA is computed from it before any restore. What the walk finds is a function of its start (`ip`, `sp`) and
/// of these values, and so is each address it tells.
#[inline(always)]
pub(super) fn walk_reading(
    mut regs: Regs,
    ips: &mut [MaybeUninit<usize>],
    limit: usize,
    mut reads: impl FnMut(usize, usize),
) -> Option<usize> {
    if DISABLED.load(Ordering::Relaxed) {
        return None;
    }
    let start_sp = regs.sp;
    let mut len = 0;
    // The first address is inside `capture` itself (exact); the others are return addresses, looked up one
    // byte back so that a call at the very end of a function finds that function's rule.
    let mut lookup = regs.ip;
    let mut first = true;
    let mut bp_restored = false;
    let mut bp_told = false;
    // The slot the current `rbp` was restored from and its value, until a CFA is computed from it.
    let mut bp_slot = None;
    loop {
        let rule = match rule_for(lookup) {
            Ok(rule) => rule,
            Err(Miss::NoInfo) if len > 0 => return Some(len),
            Err(_) => {
                if len == 0 {
                    // Not even `capture` itself can be walked: this process needs the system unwinder.
                    DISABLED.store(true, Ordering::Relaxed);
                }
                return None;
            }
        };
        if rule.cfa_from_bp {
            if !bp_restored && !bp_told {
                reads(BP_REGISTER, regs.bp);
                bp_told = true;
            }
            if let Some((address, value)) = bp_slot.take() {
                reads(address, value);
            }
        }
        let base = if rule.cfa_from_bp { regs.bp } else { regs.sp };
        let cfa = base.wrapping_add_signed(rule.cfa_offset as isize);
        if cfa <= regs.sp || cfa - start_sp > MAX_STACK_SPAN {
            return Some(len); // not a caller's frame: stop
        }
        if !first {
            ips[len] = MaybeUninit::new(regs.ip);
            len += 1;
            if len == ips.len() || (limit != 0 && cfa > limit) {
                return Some(len);
            }
        }
        let Some(ra_offset) = rule.ra_offset else { return Some(len) };
        let ra_slot = cfa.wrapping_add_signed(isize::from(ra_offset));
        let ra = read(ra_slot)?;
        reads(ra_slot, ra);
        if let Some(bp_offset) = rule.bp_offset {
            let address = cfa.wrapping_add_signed(isize::from(bp_offset));
            regs.bp = read(address)?;
            bp_slot = Some((address, regs.bp));
            bp_restored = true;
        }
        if ra == 0 {
            return Some(len);
        }
        regs = Regs { ip: ra, sp: cfa, ..regs };
        lookup = ra - 1;
        first = false;
    }
}

/// Reads a saved register from the stack.
fn read(address: usize) -> Option<usize> {
    if !address.is_multiple_of(core::mem::align_of::<usize>()) {
        return None;
    }
    // SAFETY: `address` is an aligned slot of a live frame of this thread's stack, between the current stack
    // pointer and the CFA of a caller still running: the call-frame information of the frame being unwound
    // says its caller's register was saved there.
    Some(unsafe { (address as *const usize).read() })
}

#[cfg(test)]
pub(super) mod tests {
    use super::capture;
    use core::mem::MaybeUninit;

    /// A walk's buffer, initialised so that the tests may read all of it.
    pub(in super::super) fn buffer<const N: usize>() -> [MaybeUninit<usize>; N] {
        [MaybeUninit::new(0); N]
    }

    /// The addresses in a [`buffer`].
    pub(in super::super) fn read(buffer: &[MaybeUninit<usize>]) -> Vec<usize> {
        // SAFETY: every buffer here comes from `buffer`, which initialises every element.
        buffer.iter().map(|ip| unsafe { ip.assume_init() }).collect()
    }

    /// Walks from here with both unwinders and checks that they agree on every caller.
    #[inline(never)]
    fn both_agree(depth: usize) -> usize {
        let mut ours = buffer::<128>();
        let len = capture(&mut ours, 0).expect("the caching walker handles this stack");
        let ours = read(&ours);
        let mut theirs = Vec::new();
        backtrace::trace(|frame| {
            // The system unwinder reports the end of the stack as a last frame at address 0.
            if !frame.ip().is_null() {
                theirs.push(frame.ip() as usize);
            }
            true
        });
        // `ours[0]` returns into this function, a different call site than the system unwinder's; from the
        // caller of this function on, both must list the same return addresses down to the end, or ours down to
        // the thread's entry once another test has told the walker where entries are.
        let ours = &ours[1..len];
        let at = theirs.iter().position(|&ip| ip == ours[0]).expect("the system unwinder saw our first caller");
        let theirs = &theirs[at..];
        assert_eq!(ours, &theirs[..ours.len().min(theirs.len())], "depth {depth}");
        assert!(ours.len() == theirs.len() || ends_at_thread_entry(ours), "depth {depth}");
        assert!(ours.len() > depth, "{} frames for {depth} nested calls", ours.len());
        ours.len()
    }

    /// Whether the last of `ips` returns into a thread's entry.
    fn ends_at_thread_entry(ips: &[usize]) -> bool {
        let last = ips.last().and_then(|&ip| crate::read::symbol_table::function_at(ip - 1));
        last.is_some_and(|name| ying_frames::is_thread_entry(&ying_report::Frame::new(name, None, None)))
    }

    #[test]
    fn a_walk_ends_at_its_threads_entry_once_told_where_entries_are() {
        crate::read::symbol_table::end_stacks_at_thread_entries();
        std::thread::spawn(|| {
            let mut ours = buffer::<128>();
            let len = capture(&mut ours, 0).expect("the caching walker handles this stack");
            let ours = read(&ours[..len]);
            assert!(ends_at_thread_entry(&ours), "{ours:x?}");
            // The system unwinder goes on into the thread's start-up.
            let mut theirs = 0;
            backtrace::trace(|_| {
                theirs += 1;
                true
            });
            assert!(theirs > len + 1, "{theirs} frames against {len}");
        })
        .join()
        .unwrap();
    }

    #[inline(never)]
    fn nested(depth: usize, buffer: &mut [u8]) -> usize {
        // A frame of varying size, and a loop of closures and iterators around the calls.
        let mut local = [0u8; 512];
        local[depth % 512] = buffer.first().copied().unwrap_or(1);
        if depth == 0 {
            return (0..1).map(|_| both_agree(local.len() / 512)).sum();
        }
        let mut total = 0;
        for item in [depth - 1].iter().copied() {
            total += nested(item, &mut local[..depth % 64 + 1]);
        }
        std::hint::black_box(total)
    }

    #[test]
    fn the_walker_finds_the_same_frames_as_the_system_unwinder() {
        for depth in [0, 1, 5, 30] {
            nested(depth, &mut [3]);
        }
        // On a spawned thread, the stack ends in the thread's start routine.
        std::thread::spawn(|| nested(10, &mut [7])).join().unwrap();
    }

    #[test]
    fn the_walk_stops_past_the_limit_and_when_full() {
        let mut all = buffer::<128>();
        let len = capture(&mut all, 0).unwrap();
        assert!(len > 4);
        let mut three = buffer::<3>();
        assert_eq!(capture(&mut three, 0), Some(3));
        // A limit just above this frame's locals: the walk keeps this test's frame and stops there.
        let marker = 0u8;
        let limit = core::ptr::from_ref(&marker) as usize;
        let mut limited = buffer::<128>();
        let kept = capture(&mut limited, limit).unwrap();
        assert_eq!(kept, 1, "{:x?}", &read(&limited)[..kept]);
    }
}
