//! The system call a thread of this process waits in, as `/proc/self/task/<id>/syscall` tells it: its number and
//! arguments, and the thread's stack pointer and instruction pointer there. A thread that runs has none.

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
    pub(crate) fn of_thread(id: impl core::fmt::Display) -> Option<Self> {
        Self::parse(&std::fs::read_to_string(format!("/proc/self/task/{id}/syscall")).ok()?)
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
    use super::SystemCall;

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
            seen = SystemCall::of_thread(id).filter(SystemCall::waits_without_timeout);
            if seen.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert!(seen.is_some(), "the thread blocked in accept is seen waiting for a connection");
        drop(std::net::TcpStream::connect(address).unwrap());
        thread.join().unwrap();
    }
}
