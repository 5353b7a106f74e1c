//! What a capture that may recognise a remembered walk answers (see `remembered`).

/// What [`capture_cached`](super::capture_cached) found.
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux")),
    expect(dead_code, reason = "elsewhere every capture is `Unsupported`")
)]
pub(crate) enum Cached {
    /// The stack is one this thread walked before: the tag given to it with [`remember`](super::remember).
    Hit(u32),
    /// Walked into `ips` (`len` frames). With a ticket, [`remember`](super::remember) gives the stack its tag for
    /// the next time.
    Walked { len: u32, ticket: Option<Ticket> },
    /// The stack needs the system unwinder.
    Unsupported,
}

/// Names the walk [`capture_cached`](super::capture_cached) just remembered, to give it a tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux")),
    expect(dead_code, reason = "elsewhere nothing is remembered")
)]
pub(crate) struct Ticket(pub(super) core::num::NonZeroU64);
