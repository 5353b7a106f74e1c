//! A process that exits while a leak test's body runs (`std::process::exit` in the body, or in code it calls) never
//! lets the test report what it retained, and a test harness that ends that way reports success. The runner
//! registers an exit handler once; while a body runs, the handler names the test on standard error and ends the
//! process with exit code 101, as a test binary with a failed test does.
//!
//! A process that runs another program in its place (`exec`: `CommandExt::exec`, `libc::execv`...) while a body runs
//! ends the same way, and worse: the other program's exit code becomes the test binary's, so a test harness whose
//! process became `true` reports success. On Linux with glibc the runtime defines the exec functions a Rust program
//! reaches (`execve`, `execv`, `execvp`, `execvpe`, `fexecve`; the test binary's own definitions come before the C
//! library's): while a body runs in this process they name the test and end the process with 101 instead; in every
//! other case, and always in a child process (one `fork`ed to run a program, as `Command::spawn` may), they call the C
//! library's. (`execl` and its kin call the C library's `execve` from within it, and are not seen.)

use super::plan::LeakTest;
use core::sync::atomic::{AtomicI32, AtomicPtr, AtomicUsize, Ordering};
use std::sync::Once;

static REGISTERED: Once = Once::new();
/// Bodies running now, in every thread.
static RUNNING: AtomicUsize = AtomicUsize::new(0);
/// The leak test whose body started last, for the message.
static LAST: AtomicPtr<LeakTest> = AtomicPtr::new(core::ptr::null_mut());
/// The process the bodies run in: a child `fork`ed from it has another id, and runs programs freely.
static PROCESS: AtomicI32 = AtomicI32::new(0);

/// While it lives, an exit of the process fails: a leak test's body is running.
pub(super) struct Running(());

impl Running {
    pub(super) fn enter(test: &'static LeakTest) -> Self {
        REGISTERED.call_once(|| {
            // SAFETY: `on_exit` is an `extern "C" fn()` that stays valid for the life of the process.
            if unsafe { libc::atexit(on_exit) } != 0 {
                eprintln!("ying: could not register the exit handler: a leak test that exits will not be reported");
            }
        });
        LAST.store(core::ptr::from_ref(test).cast_mut(), Ordering::Release);
        // SAFETY: getpid(2) cannot fail and touches no memory.
        PROCESS.store(unsafe { libc::getpid() }, Ordering::Release);
        RUNNING.fetch_add(1, Ordering::AcqRel);
        Self(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The name of the leak test whose body started last.
fn last_name() -> &'static str {
    // SAFETY: `LAST` only ever holds null or a `&'static LeakTest`.
    unsafe { LAST.load(Ordering::Acquire).as_ref() }.map_or("?", |test| test.name)
}

extern "C" fn on_exit() {
    if RUNNING.load(Ordering::Acquire) == 0 {
        return;
    }
    let name = last_name();
    eprintln!(
        "ying: the process exited while leak test `{name}` was running, so it could not report what it retained; \
         a leak test must return (or panic) to be judged"
    );
    // SAFETY: `_exit` ends the process at once, without running the remaining exit handlers, which is what an
    // exit handler may do.
    unsafe { libc::_exit(101) }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod exec {
    use super::{PROCESS, RUNNING, last_name};
    use core::ffi::{c_char, c_int};
    use core::fmt::Write as _;
    use core::sync::atomic::Ordering;

    /// Ends the process with 101, naming the test, when a leak test's body runs in this very process (not in a
    /// child `fork`ed from it): called first by each exec function. Never returns then; allocates only in the
    /// process that runs the body, never in a child.
    fn refuse_in_a_body(function: &str) {
        // SAFETY: getpid(2) cannot fail and touches no memory; in a `fork`ed child it is the child's id.
        if RUNNING.load(Ordering::Acquire) == 0 || PROCESS.load(Ordering::Acquire) != unsafe { libc::getpid() } {
            return;
        }
        // Straight to the file descriptor: the test harness captures what the test's thread prints, and that is lost
        // as the process ends.
        let mut stderr = crate::base::stderr::Stderr::new();
        let _ = writeln!(
            stderr,
            "ying: leak test `{}` ran another program in its own process ({function}) while it ran, so it could not \
             report what it retained; a leak test must return (or panic) to be judged: run the program in a child \
             process (`std::process::Command::status`, `output` or `spawn`)",
            last_name()
        );
        stderr.flush();
        // SAFETY: `_exit` ends the process at once, as the exit handler does.
        unsafe { libc::_exit(101) }
    }

    /// The C library's `name` (the definition after this executable's), or null.
    fn next(name: &core::ffi::CStr) -> *mut libc::c_void {
        // SAFETY: `dlsym` with `RTLD_NEXT` and a NUL-terminated name: null, or the next object's symbol.
        unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) }
    }

    /// Fails with `ENOSYS` when the C library's function is not found.
    fn not_found() -> c_int {
        // SAFETY: `__errno_location` is this thread's `errno`, always valid to write.
        unsafe { *libc::__errno_location() = libc::ENOSYS };
        -1
    }

    /// Defines the exec function `name` (its parameters and C type as written), refused while a leak test's body
    /// runs in this process and otherwise the C library's.
    macro_rules! refused_in_a_body {
        ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*)) => {
            $(#[$doc])*
            ///
            /// # Safety
            ///
            /// As the C library's function of the name: NUL-terminated strings, NULL-terminated arrays of them.
            #[unsafe(no_mangle)]
            unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
                refuse_in_a_body(stringify!($name));
                // No allocation: a child forked to run a program calls it too.
                let name = concat!(stringify!($name), "\0").as_bytes();
                let next = next(core::ffi::CStr::from_bytes_with_nul(name).unwrap_or(c""));
                if next.is_null() {
                    return not_found();
                }
                // SAFETY: the C library's function of this name, which has this type.
                let next: unsafe extern "C" fn($($ty),*) -> c_int = unsafe { core::mem::transmute(next) };
                // SAFETY: the caller keeps the function's contract.
                unsafe { next($($arg),*) }
            }
        };
    }

    refused_in_a_body!(
        /// execve(2).
        execve(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char)
    );
    refused_in_a_body!(
        /// execvpe(3).
        execvpe(file: *const c_char, argv: *const *const c_char, envp: *const *const c_char)
    );
    refused_in_a_body!(
        /// execv(3).
        execv(path: *const c_char, argv: *const *const c_char)
    );
    refused_in_a_body!(
        /// execvp(3): what `CommandExt::exec` calls.
        execvp(file: *const c_char, argv: *const *const c_char)
    );
    refused_in_a_body!(
        /// fexecve(3).
        fexecve(fd: c_int, argv: *const *const c_char, envp: *const *const c_char)
    );
}
