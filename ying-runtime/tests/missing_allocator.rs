//! Without the ying allocator installed there is nothing to measure: `measure` says so instead of returning zeros.

#[test]
fn is_installed_is_false_without_the_allocator() {
    assert!(!ying::is_installed());
}

#[test]
#[should_panic(expected = "ying: the global allocator is not ying's")]
fn measure_refuses_to_pass_silently() {
    let _ = ying::measure(|| Box::leak(Box::new([0u8; 100])));
}

#[test]
fn the_message_shows_the_lines_to_add() {
    let panic = std::panic::catch_unwind(|| ying::measure(|| ())).unwrap_err();
    let message = panic.downcast_ref::<String>().unwrap();
    assert!(
        message.contains("#[global_allocator]\nstatic ALLOC: ying::YingProfiler = ying::YingProfiler::new();"),
        "{message}"
    );
}

#[cfg(feature = "pprof")]
#[test]
fn a_profiler_session_refuses_to_start() {
    let error = ying::Profiler::start(ying::ProfilerConfig::default()).unwrap_err();
    assert_eq!(error, ying::ProfilerError::MissingAllocator);
    assert!(error.to_string().contains("#[global_allocator] static ALLOC: ying::YingProfiler"), "{error}");
}
