//! How the test process ends, said for a test of nextest's profile `ying`, whose process no wrapper waits for (the
//! interposer started its record, see [`nextest`](crate::nextest), or a wrapper `exec`ed it): when [`END_MARK_ENV`]
//! names a file, this library, as it is loaded (before `main`),
//!
//! - takes the variable out of the environment (the test's own children, which inherit the preload, say nothing);
//! - makes the process the subreaper of what its children leave running (`PR_SET_CHILD_SUBREAPER`);
//! - as the process exits, ends every process it still has as a child (with the groups they lead), and writes
//!   `exit <code>` (and `ended <n>`) and the time to the file ([`EndMark`]);
//! - as a signal that would end it arrives (`SIGTERM` at nextest's timeout, `SIGINT`, `SIGABRT` of a panic that
//!   aborts...), writes `signal <n>` and lets the signal end it. Only signals whose action is the default are
//!   caught (the time with it): a program's own handler, or one it set to be ignored, stays its. `SIGSEGV` and `SIGBUS` are left to
//!   the standard library, which reports a stack overflow on them.
//!
//! A process `fork`ed from the test (not `exec`ing) inherits the handlers and says nothing: only the process that
//! loaded the library writes the mark.

use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicI32, AtomicPtr, Ordering};
use ying_report::end_mark::{END_MARK_ENV, END_MARK_MAX, EndMark, Ending};

/// The mark's path, NUL-terminated; null when no mark is asked for.
static PATH: AtomicPtr<c_char> = AtomicPtr::new(core::ptr::null_mut());
/// The process that loaded this library: the one whose end the mark says.
static PROCESS: AtomicI32 = AtomicI32::new(0);

/// The signals whose default action ends the process, that a test's end is told by.
const CAUGHT: [c_int; 9] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGABRT,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGTRAP,
    libc::SIGSYS,
];

/// Run by the dynamic loader as the library is loaded, before the program's `main`.
#[used]
#[unsafe(link_section = ".init_array")]
static LOADED: extern "C" fn() = loaded;

extern "C" fn loaded() {
    use std::os::unix::ffi::OsStringExt as _;
    // A test of nextest's profile `ying` sets its end mark's variable here, first.
    crate::nextest::start();
    let Some(path) = std::env::var_os(END_MARK_ENV) else { return };
    // SAFETY: before `main`, in the loader's constructors: no other thread of the program reads the environment yet.
    unsafe { std::env::remove_var(END_MARK_ENV) };
    let Ok(path) = std::ffi::CString::new(path.into_vec()) else { return };
    PATH.store(path.into_raw(), Ordering::Release);
    // SAFETY: getpid(2) cannot fail and touches no memory.
    PROCESS.store(unsafe { libc::getpid() }, Ordering::Release);
    // SAFETY: prctl(2) with PR_SET_CHILD_SUBREAPER takes integers and touches no memory.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0 as libc::c_ulong, 0, 0) };
    // SAFETY: `exited` has the signature `on_exit` calls, and stays valid for the life of the process.
    unsafe { on_exit(exited, core::ptr::null_mut()) };
    for signal in CAUGHT {
        // SAFETY: sigaction(2) with a zeroed `sigaction` (a valid value: no flags, an empty mask) to read the
        // current action into, and then, if it is the default, `signalled` (an `extern "C" fn(c_int)`, valid for
        // the life of the process) as the handler, its action reset to the default as it runs.
        unsafe {
            let mut current: libc::sigaction = core::mem::zeroed();
            if libc::sigaction(signal, core::ptr::null(), &raw mut current) != 0
                || current.sa_sigaction != libc::SIG_DFL
            {
                continue;
            }
            let mut action: libc::sigaction = core::mem::zeroed();
            action.sa_sigaction = signalled as extern "C" fn(c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESETHAND;
            libc::sigemptyset(&raw mut action.sa_mask);
            libc::sigaction(signal, &raw const action, core::ptr::null_mut());
        }
    }
}

unsafe extern "C" {
    /// glibc's `on_exit(3)`: `function` is called with the exit status as the process exits.
    fn on_exit(function: extern "C" fn(c_int, *mut c_void), arg: *mut c_void) -> c_int;
}

/// As the process exits with `status`: ends what it leaves running, then says so.
extern "C" fn exited(status: c_int, _arg: *mut c_void) {
    if !is_the_test() {
        return;
    }
    let ended = end_children();
    write(Ending::Exited { code: status, ended });
}

/// As `signal` arrives, its action still the default one: says so, and lets it end the process (the action was
/// reset to the default as this handler started; the signal, raised again, is delivered as the handler returns).
extern "C" fn signalled(signal: c_int) {
    if is_the_test() {
        write(Ending::Signalled(signal));
    }
    // SAFETY: raise(3) is async-signal-safe and takes an integer.
    unsafe { libc::raise(signal) };
}

/// Whether this is the process that loaded the library with a mark to write (not a `fork` of it).
fn is_the_test() -> bool {
    // SAFETY: getpid(2) is async-signal-safe, cannot fail and touches no memory.
    !PATH.load(Ordering::Acquire).is_null() && PROCESS.load(Ordering::Acquire) == unsafe { libc::getpid() }
}

/// Writes `ending`, now, to the mark's file, created or truncated, never through a link. Async-signal-safe: no
/// allocation, four system calls.
fn write(ending: Ending) {
    let path = PATH.load(Ordering::Acquire);
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime(2) is async-signal-safe and writes the `timespec` it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &raw mut now) };
    let at_ns = u64::try_from(now.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(now.tv_nsec).unwrap_or(0);
    let mark = EndMark { ending, at_ns };
    let mut buf = [0u8; END_MARK_MAX];
    let len = mark.render(&mut buf);
    // SAFETY: `path` is the NUL-terminated string `loaded` leaked; `buf` holds `len` bytes. open(2), write(2) and
    // close(2) are async-signal-safe.
    unsafe {
        let fd = libc::open(
            path,
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o644 as libc::c_uint,
        );
        if fd >= 0 {
            libc::write(fd, buf.as_ptr().cast(), len);
            libc::close(fd);
        }
    }
}

/// Kills and reaps every child of this process (its own it did not wait for, and those it adopted), with the
/// process groups they lead; returns how many were still running. Repeated while killing them leaves it more (a
/// killed child's children are adopted as it dies).
fn end_children() -> u32 {
    let mut ended = 0;
    for _ in 0..100 {
        let children = children();
        if children.is_empty() {
            break;
        }
        for pid in children {
            let running = !is_zombie(pid);
            // SAFETY: kill(2) and waitpid(2) take integers (the status pointer may be null). `pid` is a child of
            // this process, not reaped, so it and the group it leads (if it leads one) are the ones it names.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, core::ptr::null_mut(), 0);
            }
            ended += u32::from(running);
        }
    }
    ended
}

/// This process's children, from each of its threads' `children` in `/proc`.
fn children() -> Vec<libc::pid_t> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    let mut children = Vec::new();
    for task in tasks.flatten() {
        let Ok(text) = std::fs::read_to_string(task.path().join("children")) else { continue };
        children.extend(text.split_whitespace().filter_map(|pid| pid.parse::<libc::pid_t>().ok()));
    }
    children
}

/// Whether process `pid` has ended and waits to be reaped (`Z` in `/proc/<pid>/stat`, after its name).
fn is_zombie(pid: libc::pid_t) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
        .unwrap_or(false)
}
