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

use crate::base::span_stack;
use tracing_core::span::Id;
use tracing_core::{Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

pub use crate::base::span_stack::MAX_SPANS;

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
        // A `&'static Metadata<'static>`, read back as such by the symbolisation of the span's frame.
        span_stack::enter(core::ptr::from_ref::<Metadata<'static>>(metadata) as usize);
    }

    fn on_exit(&self, _id: &Id, _ctx: Context<'_, S>) {
        span_stack::exit();
    }
}
