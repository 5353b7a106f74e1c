//! `profile-spans`: the `tracing` spans a thread is in, recorded with each sampled stack.
//!
//! Install [`SpanLayer`] in the application's subscriber. On every span entry and exit it updates a per-thread
//! stack of span metadata that the allocator reads, without allocating, when it captures a sampled stack. The
//! spans then appear as frames named `span:<name>` (with the span's source location) outside the code frames in
//! reports, flamegraphs and profiles, so memory is grouped by the request, job or task that allocated it even
//! when the code frames are the same.
//!
//! ```
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! #[global_allocator]
//! static ALLOC: ying::YingProfiler = ying::YingProfiler::new().sample_interval(0);
//!
//! let subscriber = tracing_subscriber::registry().with(ying::spans::SpanLayer::new());
//! tracing::subscriber::with_default(subscriber, || {
//!     let _request = tracing::info_span!("handle_request").entered();
//!     let kept = Box::leak(vec![0u8; 4096].into_boxed_slice());
//!     # let _ = kept;
//! });
//! let stacks = ALLOC.top_k_stacks_by_retained(100);
//! assert!(stacks.iter().any(|s| s.frames().iter().any(|f| f.function == "span:handle_request")));
//! ```
//!
//! # Caveats
//!
//! - Entries and exits are matched per thread, last in first out, as span guards and
//!   `Instrument`ed futures produce them. A guard held across an `.await` (which tracing
//!   warns against) may exit on another thread; that thread's stack then loses its innermost span early.
//! - The outermost [`MAX_SPANS`] spans of a thread are recorded; spans nested deeper are left out.

use core::cell::Cell;
use tracing_core::span::Id;
use tracing_core::{Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;
use ying_report::Frame;

/// The number of spans recorded with a stack, counted from the outermost.
pub const MAX_SPANS: usize = 16;

/// The spans the thread is in: metadata addresses, outermost first.
struct SpanStack {
    /// How many spans the thread is in; may exceed [`MAX_SPANS`], whose excess is not stored.
    depth: Cell<usize>,
    spans: [Cell<usize>; MAX_SPANS],
}

std::thread_local! {
    static SPANS: SpanStack = const { SpanStack { depth: Cell::new(0), spans: [const { Cell::new(0) }; MAX_SPANS] } };
}

/// A [`Layer`] that keeps each thread's entered spans where the ying allocator records them with sampled stacks.
#[derive(Clone, Copy, Debug, Default)]
pub struct SpanLayer {
    _private: (),
}

impl SpanLayer {
    /// The layer; add it to a registry-based subscriber with `.with(SpanLayer::new())`.
    pub const fn new() -> Self {
        Self { _private: () }
    }
}

impl<S> Layer<S> for SpanLayer
where
    S: Subscriber + for<'lookup> LookupSpan<'lookup>,
{
    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let Some(metadata) = ctx.metadata(id) else { return };
        let _ = SPANS.try_with(|stack| {
            let depth = stack.depth.get();
            // Past the capacity only the depth is kept, so that exits stay balanced.
            if let Some(slot) = stack.spans.get(depth) {
                slot.set(core::ptr::from_ref::<Metadata<'static>>(metadata) as usize);
            }
            stack.depth.set(depth + 1);
        });
    }

    fn on_exit(&self, _id: &Id, _ctx: Context<'_, S>) {
        let _ = SPANS.try_with(|stack| stack.depth.set(stack.depth.get().saturating_sub(1)));
    }
}

/// Copies the calling thread's spans into `out`, innermost first, and returns how many there are. Allocates
/// nothing: the allocator calls it while capturing a sampled stack.
pub(crate) fn current(out: &mut [usize; MAX_SPANS]) -> usize {
    SPANS
        .try_with(|stack| {
            let len = stack.depth.get().min(MAX_SPANS);
            for (out, span) in out.iter_mut().zip(stack.spans[..len].iter().rev()) {
                *out = span.get();
            }
            len
        })
        .unwrap_or(0)
}

/// The frame that stands for a recorded span.
pub(crate) fn frame(span: usize) -> Frame {
    // SAFETY: `span` was stored by `SpanLayer::on_enter` from a `&'static Metadata<'static>`: it points to
    // metadata that lives as long as the program and is only ever read.
    let metadata = unsafe { &*(span as *const Metadata<'static>) };
    Frame::new(format!("span:{}", metadata.name()), metadata.file().map(str::to_owned), metadata.line())
}
