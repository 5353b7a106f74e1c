//! What `/proc` tells of a thread of this process: its files (read through `/proc/<id>`, see [`thread_file`]), and
//! the system call it waits in, as its `syscall` file tells it: the call's number and arguments, and the thread's
//! stack pointer and instruction pointer there. A thread that runs has none.

/// The text of file `name` of thread `id` of this process (`comm`, `syscall`); `None` when the thread has ended or
/// the file cannot be read.
///
/// Read through the thread's own directory at the top of `/proc`, not through `/proc/self/task/<id>`. The kernel
/// keeps the entries a path's lookup makes; those under the process's directory are walked again when its parent
/// reaps it, and a thread's entries, dropped as the thread ends, can still be dropping on another CPU as that walk
/// comes to them: the reaping parent then spins until they are gone, for up to a time slice on a busy machine (a
/// test runner's reaps took milliseconds until these reads moved: BENCHMARKS-LOG.md, the twelfth round of `--measure
/// all`). `/proc/<id>` is not under the process's directory. It names any thread of the system, so the thread is
/// checked to be this process's after the read: a thread's id is not given to another while the thread runs.
pub(crate) fn thread_file(id: u64, name: &str) -> Option<String> {
    let thread = libc::pid_t::try_from(id).ok()?;
    let text = proc_file(&format!("/proc/{id}/{name}"), 256)?;
    // SAFETY: getpid has no preconditions; tgkill with signal 0 sends nothing, it only checks that `thread` is a
    // thread of the process.
    let ours = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), thread, 0) } == 0;
    ours.then_some(text)
}

/// The text of a file of `/proc`, read in a buffer of `expected` bytes (larger if need be). `/proc` gives its files
/// no size, so `std::fs::read_to_string` asks for it (a `statx` and an `lseek`) and then reads 32 bytes, 32, 64, ...:
/// ten system calls for a test process's `maps`, where two do.
pub(crate) fn proc_file(path: &str, expected: usize) -> Option<String> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path).ok()?;
    let mut bytes = vec![0; expected.max(1)];
    let mut len = 0;
    loop {
        if len == bytes.len() {
            bytes.resize(len * 2, 0);
        }
        match file.read(&mut bytes[len..]) {
            Ok(0) => break,
            Ok(read) => len += read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    bytes.truncate(len);
    String::from_utf8(bytes).ok()
}

/// A system call a thread is blocked in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SystemCall {
    /// The call's number (the architecture's).
    pub number: i64,
    /// Its six argument registers.
    pub args: [u64; 6],
    /// The thread's stack pointer.
    pub sp: usize,
    /// The thread's instruction pointer.
    pub pc: usize,
}

impl SystemCall {
    /// The call thread `id` of this process waits in; `None` while it runs (or is blocked outside a system call), or
    /// when it has ended.
    pub(crate) fn of_thread(id: u64) -> Option<Self> {
        Self::parse(&thread_file(id, "syscall")?)
    }

    /// The call of a `syscall` file's line: `number arg1 .. arg6 sp pc`, the rest in hexadecimal.
    fn parse(text: &str) -> Option<Self> {
        let mut fields = text.split_ascii_whitespace();
        let number = fields.next()?.parse().ok().filter(|&number: &i64| number >= 0)?;
        let mut hex = || u64::from_str_radix(fields.next()?.trim_start_matches("0x"), 16).ok();
        let mut args = [0; 6];
        for arg in &mut args {
            *arg = hex()?;
        }
        let sp = usize::try_from(hex()?).ok()?;
        let pc = usize::try_from(hex()?).ok()?;
        Some(Self { number, args, sp, pc })
    }

    /// Whether no timeout ends this call: it returns only when something else acts (a connection comes, a futex is
    /// woken, a descriptor becomes ready). Waits that end by themselves (sleeps, waits with a timeout) and reads,
    /// which a child process may be about to feed, are not among them.
    pub(crate) fn waits_without_timeout(&self) -> bool {
        let [_, second, third, fourth, fifth, _] = self.args;
        match self.number {
            libc::SYS_accept4 => true,
            libc::SYS_futex => {
                // The operation without its private and clock flags.
                let operation = second as i32 & !(libc::FUTEX_PRIVATE_FLAG | libc::FUTEX_CLOCK_REALTIME);
                matches!(operation, libc::FUTEX_WAIT | libc::FUTEX_WAIT_BITSET) && fourth == 0
            }
            // The timeout in milliseconds, an `int`: negative waits for ever.
            libc::SYS_epoll_pwait => (fourth as i32) < 0,
            // The timeout is a pointer: null waits for ever.
            libc::SYS_ppoll => third == 0,
            libc::SYS_pselect6 => fifth == 0,
            #[cfg(target_arch = "x86_64")]
            libc::SYS_accept => true,
            #[cfg(target_arch = "x86_64")]
            libc::SYS_epoll_wait => (fourth as i32) < 0,
            #[cfg(target_arch = "x86_64")]
            libc::SYS_poll => (third as i32) < 0,
            #[cfg(target_arch = "x86_64")]
            libc::SYS_select => fifth == 0,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{SystemCall, proc_file, thread_file};

    #[test]
    fn a_proc_file_is_read_whole_past_the_size_expected() {
        let status = std::fs::read_to_string("/proc/self/cmdline").unwrap();
        assert_eq!(proc_file("/proc/self/cmdline", 1).as_deref(), Some(status.as_str()));
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
        assert!(limits.len() > 1000);
        assert_eq!(proc_file("/proc/self/limits", 7).as_deref(), Some(limits.as_str()));
        assert_eq!(proc_file("/proc/self/no such file", 64), None);
    }

    fn line(number: i64, args: [u64; 6]) -> String {
        let args: Vec<String> = args.iter().map(|arg| format!("0x{arg:x}")).collect();
        format!("{number} {} 0x7ffd0000 0x7f0000001234\n", args.join(" "))
    }

    #[test]
    fn a_syscall_files_line_is_read_whole_and_running_is_none() {
        let call = SystemCall::parse("202 0x55d0a8 0x80 0x0 0x0 0x0 0x0 0x7ffc5a0b8f10 0x7f3c1a2b3c4d\n").unwrap();
        assert_eq!(call.number, 202);
        assert_eq!(call.args, [0x55d0a8, 0x80, 0, 0, 0, 0]);
        assert_eq!((call.sp, call.pc), (0x7ffc_5a0b_8f10, 0x7f3c_1a2b_3c4d));
        assert_eq!(SystemCall::parse("running\n"), None);
        assert_eq!(SystemCall::parse("-1 0x7ffc5a0b8f10 0x7f3c1a2b3c4d\n"), None, "blocked outside a call");
        assert_eq!(SystemCall::parse("202 0x1 0x2\n"), None, "cut short");
    }

    #[test]
    fn waits_without_a_timeout_are_told_from_those_with_one() {
        let waits = |number, args| SystemCall::parse(&line(number, args)).unwrap().waits_without_timeout();
        let private_wait = (libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG) as u64;
        assert!(waits(libc::SYS_futex, [0x1000, private_wait, 0, 0, 0, 0]), "parked");
        assert!(!waits(libc::SYS_futex, [0x1000, private_wait, 0, 0x7ffd_0000, 0, 0]), "with a timeout");
        assert!(!waits(libc::SYS_futex, [0x1000, libc::FUTEX_WAKE as u64, 1, 0, 0, 0]), "waking");
        assert!(waits(libc::SYS_accept4, [3, 0, 0, 0x80000, 0, 0]));
        assert!(waits(libc::SYS_epoll_pwait, [4, 0x1000, 16, 0xffff_ffff, 0, 8]));
        assert!(!waits(libc::SYS_epoll_pwait, [4, 0x1000, 16, 100, 0, 8]));
        assert!(waits(libc::SYS_ppoll, [0x1000, 1, 0, 0, 8, 0]));
        assert!(!waits(libc::SYS_ppoll, [0x1000, 1, 0x2000, 0, 8, 0]));
        assert!(!waits(libc::SYS_clock_nanosleep, [0, 0, 0x1000, 0x1000, 0, 0]), "a sleep ends by itself");
        assert!(!waits(libc::SYS_read, [0, 0x1000, 4096, 0, 0, 0]), "a read may be fed");
    }

    #[test]
    fn a_thread_of_this_process_is_seen_waiting_in_its_call() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            sender.send(unsafe { libc::gettid() }).unwrap();
            let _ = listener.accept();
        });
        let id = receiver.recv().unwrap();
        let mut seen = None;
        for _ in 0..500 {
            seen = SystemCall::of_thread(u64::try_from(id).unwrap()).filter(SystemCall::waits_without_timeout);
            if seen.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert!(seen.is_some(), "the thread blocked in accept is seen waiting for a connection");
        drop(std::net::TcpStream::connect(address).unwrap());
        thread.join().unwrap();
    }

    #[test]
    fn a_threads_file_is_read_by_its_id_and_another_processs_is_not() {
        let (sender, receiver) = std::sync::mpsc::channel();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("ying-named".to_owned())
            .spawn(move || {
                // SAFETY: gettid has no preconditions.
                sender.send(unsafe { libc::gettid() }).unwrap();
                let _ = stopped.recv();
            })
            .unwrap();
        let id = u64::try_from(receiver.recv().unwrap()).unwrap();
        assert_eq!(thread_file(id, "comm").as_deref(), Some("ying-named\n"));
        stop.send(()).unwrap();
        thread.join().unwrap();

        // A thread of another process has its directory at the top of `/proc` too, and is none of this one's.
        let mut other = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let other_id = u64::from(other.id());
        // Named `sleep` once it has run `exec` (before, it bears the name of the thread that started it).
        let named = (0..1000).any(|_| {
            let name = std::fs::read_to_string(format!("/proc/{other_id}/comm"));
            name.is_ok_and(|name| name == "sleep\n") || {
                std::thread::sleep(std::time::Duration::from_millis(5));
                false
            }
        });
        assert!(named, "the other process's file is there to read");
        assert_eq!(thread_file(other_id, "comm"), None, "another process's thread is not read as this one's");
        other.kill().unwrap();
        other.wait().unwrap();
    }
}
