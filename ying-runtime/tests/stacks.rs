//! Stacks: captured at the allocation, symbolised lazily with names and lines, inlined frames expanded, the
//! profiler's own frames and `poll` plumbing filtered, lifetimes of freed samples recorded.

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new().sample_interval(0);

/// The stack whose innermost user frame is `function`, among those retaining memory.
fn retained_stack_of(function: &str) -> ying::StackStats {
    ALLOC
        .top_k_stacks_by_retained(usize::MAX)
        .into_iter()
        .find(|stack| stack.frames().iter().any(|f| f.function.ends_with(function)))
        .unwrap_or_else(|| panic!("no retained stack passes through {function}"))
}

#[inline(never)]
fn leaky_site() -> u32 {
    Box::leak(black_box(Box::new([9u8; 1000])));
    line!() - 1
}

#[test]
fn a_stack_names_the_function_file_and_line_of_the_allocation() {
    let line = leaky_site();
    let stack = retained_stack_of("stacks::leaky_site");
    assert_eq!(stack.retained_bytes(), 1000.0);
    assert_eq!(stack.retained_objects(), 1.0);
    let site = stack.frames().iter().find(|f| f.function == "stacks::leaky_site").unwrap();
    assert!(site.file.as_deref().is_some_and(|file| file.ends_with("tests/stacks.rs")), "{site:?}");
    assert_eq!(site.line, Some(line));
    // The caller is there too, outwards from the site.
    let position = |name: &str| stack.frames().iter().position(|f| f.function == name);
    let caller = "stacks::a_stack_names_the_function_file_and_line_of_the_allocation";
    assert!(position("stacks::leaky_site") < position(caller), "{:#?}", stack.frames());
}

#[test]
fn names_are_demangled_without_hashes_and_the_profiler_is_filtered() {
    leaky_site();
    let stack = retained_stack_of("stacks::leaky_site");
    // The stack starts in the standard library's `Box` code, just above the allocator: nothing of the profiler,
    // the allocator entry or the allocation plumbing is left above it.
    assert!(stack.frames()[0].function.starts_with("alloc::boxed::"), "{:#?}", stack.frames());
    for frame in stack.frames() {
        let hash = frame.function.rsplit("::").next().unwrap();
        let is_hash = hash.len() == 17 && hash.starts_with('h') && hash[1..].chars().all(|c| c.is_ascii_hexdigit());
        assert!(!is_hash, "hash suffix in {}", frame.function);
        assert!(!frame.function.starts_with("backtrace::") && !frame.function.starts_with("__rust"), "{frame:?}");
    }
}

#[inline(always)]
fn inlined_site() {
    Box::leak(black_box(Box::new([7u8; 333])));
}

#[inline(never)]
fn calls_inlined_site() {
    inlined_site();
}

#[test]
fn inlined_frames_are_expanded() {
    calls_inlined_site();
    let stack = retained_stack_of("stacks::calls_inlined_site");
    let names: Vec<_> = stack.frames().iter().map(|f| f.function.as_str()).collect();
    let inlined = names.iter().position(|&n| n == "stacks::inlined_site");
    let caller = names.iter().position(|&n| n == "stacks::calls_inlined_site");
    assert!(inlined.is_some() && inlined < caller, "{names:#?}");
}

/// A hand-written future: its `poll` is the kind of plumbing frame reports leave out.
struct Wrapper<F>(F);

impl<F: Future + Unpin> Future for Wrapper<F> {
    type Output = F::Output;

    #[inline(never)]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

async fn leak_in_async_fn() {
    Box::leak(black_box(Box::new([4u8; 444])));
}

#[test]
fn poll_frames_are_filtered_and_async_functions_kept() {
    let mut future = Wrapper(Box::pin(leak_in_async_fn()));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(Pin::new(&mut future).poll(&mut cx).is_ready());
    let stack = retained_stack_of("stacks::leak_in_async_fn::{{closure}}");
    for frame in stack.frames() {
        assert!(!frame.function.ends_with(">::poll"), "poll plumbing kept: {:#?}", stack.frames());
    }
    assert!(stack.frames().iter().any(|f| f.function.ends_with("poll_frames_are_filtered_and_async_functions_kept")));
}

#[inline(never)]
fn short_lived_site() {
    drop(black_box(vec![1u8; 50]));
}

#[test]
fn freed_samples_fill_the_lifetime_histogram() {
    for _ in 0..10 {
        short_lived_site();
    }
    let stack = ALLOC
        .top_k_stacks_by_allocated(usize::MAX)
        .into_iter()
        .find(|stack| stack.frames().iter().any(|f| f.function == "stacks::short_lived_site"))
        .expect("sampled");
    assert_eq!(stack.allocated_objects(), 10.0);
    assert_eq!(stack.retained_bytes(), 0.0);
    let histogram = stack.lifetime_histogram();
    assert_eq!(histogram.total(), 10.0);
    let (bound, count) = histogram.buckets().next().unwrap();
    assert_eq!(bound, Some(std::time::Duration::from_millis(1)));
    assert_eq!(count, 10.0, "a block dropped right away lives under a millisecond");
}

#[test]
fn frames_display_as_function_at_file_and_line() {
    let frame = ying::Frame::new("app::cache::insert", Some("src/cache.rs".into()), Some(42));
    assert_eq!(frame.to_string(), "app::cache::insert at src/cache.rs:42");
}
