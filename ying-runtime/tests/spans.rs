//! `profile-spans`: the `tracing` spans a tokio task is in are recorded with its sampled stacks and appear as
//! frames in stacks, reports and flamegraphs.

use std::hint::black_box;
use tracing::{Instrument, info_span};
use ying::utils::{ProfilerRunnerBuilder, gen_flamegraph};
use ying::{Frame, Measurement};

#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new().sample_interval(0);

/// Installs the span layer once for the whole process, so that tokio's worker threads see it too.
fn install_layer() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber = tracing_subscriber::registry().with(ying::spans::SpanLayer::new());
        tracing::subscriber::set_global_default(subscriber).unwrap();
    });
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap()
}

#[inline(never)]
fn load_user(bytes: usize) -> usize {
    Box::leak(black_box(vec![7u8; bytes]).into_boxed_slice()).len()
}

#[inline(never)]
fn fill_cache(bytes: usize) -> usize {
    Box::leak(black_box(vec![7u8; bytes]).into_boxed_slice()).len()
}

#[inline(never)]
fn outside_spans(bytes: usize) -> usize {
    Box::leak(black_box(vec![7u8; bytes]).into_boxed_slice()).len()
}

async fn handle_request(bytes: usize) -> usize {
    tokio::task::yield_now().await;
    async move { load_user(bytes) }.instrument(info_span!("fetch_profile")).await
}

/// The frames of the retained stack whose code frames contain `function`.
fn stacks_through(function: &str) -> Vec<Vec<Frame>> {
    ALLOC
        .top_k_stacks_by_retained(usize::MAX)
        .into_iter()
        .map(|stack| stack.frames().to_vec())
        .filter(|frames| frames.iter().any(|frame| frame.function.ends_with(function)))
        .collect()
}

fn span_names(frames: &[Frame]) -> Vec<&str> {
    frames.iter().filter_map(|frame| frame.function.strip_prefix("span:")).collect()
}

#[test]
fn spans_of_a_tokio_task_are_frames_outside_its_code() {
    install_layer();
    let runtime = runtime();
    let leaked = runtime.block_on(async {
        let request = tokio::spawn(handle_request(3001).instrument(info_span!("request")));
        let batch = tokio::spawn(handle_request(3001).instrument(info_span!("batch_job")));
        request.await.unwrap() + batch.await.unwrap()
    });
    assert_eq!(leaked, 6002);
    // The same thread, once the task's spans are exited.
    let single = tokio::runtime::Builder::new_current_thread().build().unwrap();
    single.block_on(async {
        async {
            tokio::task::yield_now().await;
            black_box(vec![0u8; 10]);
        }
        .instrument(info_span!("short_lived"))
        .await;
        outside_spans(3001);
    });

    let stacks = stacks_through("::load_user");
    let mut spans: Vec<Vec<&str>> = stacks.iter().map(|frames| span_names(frames)).collect();
    spans.sort();
    // The same code under two requests is two stacks, told apart by their spans, innermost first.
    assert_eq!(spans, [vec!["fetch_profile", "batch_job"], vec!["fetch_profile", "request"]], "{stacks:#?}");
    for frames in &stacks {
        let first_span = frames.iter().position(|frame| frame.function.starts_with("span:")).unwrap();
        assert!(frames[first_span..].iter().all(|frame| frame.function.starts_with("span:")), "{frames:#?}");
        assert!(frames[..first_span].iter().any(|frame| frame.function.ends_with("::load_user")));
        let span = &frames[first_span];
        assert!(span.file.as_deref().is_some_and(|file| file.ends_with("spans.rs")), "{span:?}");
        assert!(span.line.is_some(), "{span:?}");
    }

    // Once the spans are exited, the thread's stacks carry none of them.
    let outside = stacks_through("::outside_spans");
    assert_eq!(outside.len(), 1, "{outside:#?}");
    assert_eq!(span_names(&outside[0]), Vec::<&str>::new());
}

#[test]
fn spans_appear_in_reports_and_flamegraphs() {
    install_layer();
    let runtime = runtime();
    let held = runtime.block_on(async {
        tokio::spawn(
            async { async { fill_cache(4 << 20) }.instrument(info_span!("warm_cache")).await }
                .instrument(info_span!("startup")),
        )
        .await
        .unwrap()
    });
    assert_eq!(held, 4 << 20);

    let dir = tempfile::tempdir().unwrap();
    let runner = ProfilerRunnerBuilder::default().reporting_path(dir.path()).gen_flamegraphs(true).build().unwrap();
    runner.check(&ALLOC, 0).unwrap().expect("a first check reports");
    let mut names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|entry| entry.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    let report = std::fs::read_to_string(dir.path().join(&names[0])).unwrap();
    let top = report.split("\n#").nth(1).expect("a top stack");
    assert!(top.contains("::fill_cache"), "{report}");
    let warm_cache = top.find("    span:warm_cache at ").expect("the inner span as a frame");
    let startup = top.find("    span:startup at ").expect("the outer span as a frame");
    assert!(warm_cache < startup, "innermost first: {top}");

    let svg = std::fs::read_to_string(dir.path().join(&names[1])).unwrap();
    assert!(names[1].ends_with(".svg"));
    assert!(svg.contains("span:startup") && svg.contains("span:warm_cache"), "the spans are flamegraph frames");
    let on_demand = dir.path().join("on-demand.svg");
    gen_flamegraph(&ALLOC, Measurement::AllocatedBytes, &on_demand).unwrap();
    assert!(std::fs::read_to_string(on_demand).unwrap().contains("span:warm_cache"));
}
