//! The `tracing` spans each thread is in (`profile-spans`), as `spans::SpanLayer` records them: a `const`
//! thread-local of plain cells, which the allocator reads without allocating when it captures a sampled stack.

use core::cell::Cell;

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

/// The calling thread enters the span whose metadata lies at `span`.
pub(crate) fn enter(span: usize) {
    let _ = SPANS.try_with(|stack| {
        let depth = stack.depth.get();
        // Past the capacity only the depth is kept, so that exits stay balanced.
        if let Some(slot) = stack.spans.get(depth) {
            slot.set(span);
        }
        stack.depth.set(depth + 1);
    });
}

/// The calling thread leaves its innermost span.
pub(crate) fn exit() {
    let _ = SPANS.try_with(|stack| stack.depth.set(stack.depth.get().saturating_sub(1)));
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
