//! The pprof session (`pprof` feature), read back with a decoder of its own: the messages below are transcribed
//! from `profile.proto` (github.com/google/pprof, package `perftools.profiles`), independently of the encoder.

use prost::Message;
use std::hint::black_box;
use ying::{Profiler, ProfilerConfig, ProfilerError};

/// Sampling every KiB on average: the estimates below rest on hundreds of thousands of samples.
#[global_allocator]
static ALLOC: ying::YingProfiler = ying::YingProfiler::new().sample_interval(1024);

mod decoded {
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub(crate) sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub(crate) sample: Vec<Sample>,
        #[prost(message, repeated, tag = "3")]
        pub(crate) mapping: Vec<Mapping>,
        #[prost(message, repeated, tag = "4")]
        pub(crate) location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub(crate) function: Vec<Function>,
        #[prost(string, repeated, tag = "6")]
        pub(crate) string_table: Vec<String>,
        #[prost(int64, tag = "7")]
        pub(crate) drop_frames: i64,
        #[prost(int64, tag = "8")]
        pub(crate) keep_frames: i64,
        #[prost(int64, tag = "9")]
        pub(crate) time_nanos: i64,
        #[prost(int64, tag = "10")]
        pub(crate) duration_nanos: i64,
        #[prost(message, optional, tag = "11")]
        pub(crate) period_type: Option<ValueType>,
        #[prost(int64, tag = "12")]
        pub(crate) period: i64,
        #[prost(int64, repeated, tag = "13")]
        pub(crate) comment: Vec<i64>,
        #[prost(int64, tag = "14")]
        pub(crate) default_sample_type: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct ValueType {
        #[prost(int64, tag = "1")]
        pub(crate) r#type: i64,
        #[prost(int64, tag = "2")]
        pub(crate) unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Sample {
        #[prost(uint64, repeated, tag = "1")]
        pub(crate) location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub(crate) value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        pub(crate) label: Vec<Label>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Label {
        #[prost(int64, tag = "1")]
        pub(crate) key: i64,
        #[prost(int64, tag = "2")]
        pub(crate) str: i64,
        #[prost(int64, tag = "3")]
        pub(crate) num: i64,
        #[prost(int64, tag = "4")]
        pub(crate) num_unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Mapping {
        #[prost(uint64, tag = "1")]
        pub(crate) id: u64,
        #[prost(uint64, tag = "2")]
        pub(crate) memory_start: u64,
        #[prost(uint64, tag = "3")]
        pub(crate) memory_limit: u64,
        #[prost(uint64, tag = "4")]
        pub(crate) file_offset: u64,
        #[prost(int64, tag = "5")]
        pub(crate) filename: i64,
        #[prost(int64, tag = "6")]
        pub(crate) build_id: i64,
        #[prost(bool, tag = "7")]
        pub(crate) has_functions: bool,
        #[prost(bool, tag = "8")]
        pub(crate) has_filenames: bool,
        #[prost(bool, tag = "9")]
        pub(crate) has_line_numbers: bool,
        #[prost(bool, tag = "10")]
        pub(crate) has_inline_frames: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Location {
        #[prost(uint64, tag = "1")]
        pub(crate) id: u64,
        #[prost(uint64, tag = "2")]
        pub(crate) mapping_id: u64,
        #[prost(uint64, tag = "3")]
        pub(crate) address: u64,
        #[prost(message, repeated, tag = "4")]
        pub(crate) line: Vec<Line>,
        #[prost(bool, tag = "5")]
        pub(crate) is_folded: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Line {
        #[prost(uint64, tag = "1")]
        pub(crate) function_id: u64,
        #[prost(int64, tag = "2")]
        pub(crate) line: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Function {
        #[prost(uint64, tag = "1")]
        pub(crate) id: u64,
        #[prost(int64, tag = "2")]
        pub(crate) name: i64,
        #[prost(int64, tag = "3")]
        pub(crate) system_name: i64,
        #[prost(int64, tag = "4")]
        pub(crate) filename: i64,
        #[prost(int64, tag = "5")]
        pub(crate) start_line: i64,
    }
}

use decoded::Profile;

/// One session owns the process's profile: the tests here take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn decode(bytes: &[u8]) -> Profile {
    Profile::decode(bytes).expect("a valid profile.proto message")
}

fn string(profile: &Profile, index: i64) -> &str {
    &profile.string_table[usize::try_from(index).unwrap()]
}

/// The function names of a sample's locations, innermost first, inlined callees before their callers.
fn function_names<'a>(profile: &'a Profile, sample: &decoded::Sample) -> Vec<&'a str> {
    sample
        .location_id
        .iter()
        .flat_map(|&id| &profile.location.iter().find(|location| location.id == id).unwrap().line)
        .map(|line| {
            let function = profile.function.iter().find(|function| function.id == line.function_id).unwrap();
            string(profile, function.name)
        })
        .collect()
}

/// The summed values (alloc_objects, alloc_space, inuse_objects, inuse_space) of samples through `function`.
fn totals_through(profile: &Profile, function: &str) -> [i64; 4] {
    let mut totals = [0; 4];
    for sample in &profile.sample {
        if function_names(profile, sample).iter().any(|name| name.ends_with(function)) {
            for (total, value) in totals.iter_mut().zip(&sample.value) {
                *total += value;
            }
        }
    }
    totals
}

fn assert_within_one_percent(estimate: i64, truth: i64, what: &str) {
    let error = (estimate - truth) as f64 / truth as f64;
    assert!(error.abs() < 0.01, "{what}: estimated {estimate}, truly {truth} ({:+.3}%)", error * 100.0);
}

#[inline(never)]
fn fill_population(into: &mut Vec<Box<[u8]>>, count: usize, size: usize) {
    for _ in 0..count {
        into.push(black_box(vec![1u8; size]).into_boxed_slice());
    }
}

#[inline(never)]
fn churn(count: usize, size: usize) {
    for _ in 0..count {
        drop(black_box(vec![1u8; size]));
    }
}

#[test]
fn a_known_population_is_reconstructed_within_one_percent() {
    let _alone = alone();
    let mut session = Profiler::start(ProfilerConfig::default()).unwrap();
    let mut live = Vec::with_capacity(500_000);
    fill_population(&mut live, 500_000, 768);
    churn(2_000_000, 64);
    let first = decode(&session.report().unwrap());

    let [alloc_objects, alloc_space, inuse_objects, inuse_space] = totals_through(&first, "::fill_population");
    assert_within_one_percent(inuse_objects, 500_000, "live objects");
    assert_within_one_percent(inuse_space, 500_000 * 768, "live bytes");
    assert_within_one_percent(alloc_objects, 500_000, "allocations");
    assert_within_one_percent(alloc_space, 500_000 * 768, "allocated bytes");
    let [alloc_objects, alloc_space, inuse_objects, inuse_space] = totals_through(&first, "::churn");
    assert_within_one_percent(alloc_objects, 2_000_000, "churned allocations");
    assert_within_one_percent(alloc_space, 2_000_000 * 64, "churned bytes");
    assert_eq!((inuse_objects, inuse_space), (0, 0), "churned blocks were all freed");

    // The next report covers what happened since the first: the population is gone and made no allocations.
    drop(live);
    churn(1_000_000, 64);
    let second = decode(&session.report().unwrap());
    assert_eq!(totals_through(&second, "::fill_population"), [0; 4]);
    let [alloc_objects, alloc_space, inuse_objects, _] = totals_through(&second, "::churn");
    assert_within_one_percent(alloc_objects, 1_000_000, "churned allocations of the second interval");
    assert_within_one_percent(alloc_space, 1_000_000 * 64, "churned bytes of the second interval");
    assert_eq!(inuse_objects, 0);
    session.stop().unwrap();
}

#[test]
fn the_profile_is_standard_pprof() {
    let _alone = alone();
    let mut session = Profiler::start(ProfilerConfig::default()).unwrap();
    let mut live = Vec::with_capacity(100);
    fill_population(&mut live, 100, 64 << 10);
    let profile = decode(&session.report().unwrap());
    drop(session);

    assert_eq!(profile.string_table[0], "");
    let types: Vec<(&str, &str)> =
        profile.sample_type.iter().map(|t| (string(&profile, t.r#type), string(&profile, t.unit))).collect();
    assert_eq!(
        types,
        [("alloc_objects", "count"), ("alloc_space", "bytes"), ("inuse_objects", "count"), ("inuse_space", "bytes")]
    );
    let period_type = profile.period_type.as_ref().unwrap();
    assert_eq!((string(&profile, period_type.r#type), string(&profile, period_type.unit)), ("space", "bytes"));
    assert_eq!(profile.period, 1024);
    assert_eq!(string(&profile, profile.default_sample_type), "inuse_space");
    assert!(profile.time_nanos > 0 && profile.duration_nanos >= 0);

    assert!(!profile.sample.is_empty());
    for sample in &profile.sample {
        assert_eq!(sample.value.len(), 4);
        let labels: Vec<(&str, &str)> =
            sample.label.iter().map(|label| (string(&profile, label.key), string(&profile, label.str))).collect();
        assert_eq!(labels, [("__delta__", "false")]);
        for id in &sample.location_id {
            assert!(profile.location.iter().any(|location| location.id == *id), "location {id} is defined");
        }
    }
    let mut ids: Vec<u64> = profile.location.iter().map(|location| location.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), profile.location.len(), "location ids are unique");
    for location in &profile.location {
        assert_ne!(location.id, 0);
        assert!(location.mapping_id == 0 || profile.mapping.iter().any(|mapping| mapping.id == location.mapping_id));
        for line in &location.line {
            assert!(profile.function.iter().any(|function| function.id == line.function_id));
        }
    }

    // The population's allocation site: this file's function, its line, and the executable's mapping.
    let sample = profile
        .sample
        .iter()
        .find(|sample| function_names(&profile, sample).iter().any(|name| name.ends_with("::fill_population")))
        .unwrap();
    assert_eq!(sample.value[2], 100, "blocks of 64 times the interval are sampled with certainty: exact");
    let (location, line) = sample
        .location_id
        .iter()
        .map(|&id| profile.location.iter().find(|location| location.id == id).unwrap())
        .find_map(|location| {
            let line = location.line.iter().find(|line| {
                let function = profile.function.iter().find(|function| function.id == line.function_id).unwrap();
                string(&profile, function.name).ends_with("::fill_population")
            })?;
            Some((location, line))
        })
        .unwrap();
    let function = profile.function.iter().find(|function| function.id == line.function_id).unwrap();
    assert!(string(&profile, function.filename).ends_with("pprof.rs"), "{}", string(&profile, function.filename));
    assert!(line.line > 0);
    assert_ne!(location.address, 0);
    if cfg!(target_os = "linux") {
        let mapping = profile.mapping.iter().find(|mapping| mapping.id == location.mapping_id).unwrap();
        assert!((mapping.memory_start..mapping.memory_limit).contains(&location.address));
        assert_eq!(string(&profile, mapping.filename), std::env::current_exe().unwrap().display().to_string());
        assert!(mapping.has_functions && mapping.has_line_numbers);
    }
    drop(live);
}

#[test]
fn max_stacks_keeps_the_largest() {
    let _alone = alone();
    let mut session = Profiler::start(ProfilerConfig::default().max_stacks(1)).unwrap();
    let mut live = Vec::new();
    fill_population(&mut live, 16, 1 << 20);
    let profile = decode(&session.report().unwrap());
    assert_eq!(profile.sample.len(), 1);
    assert!(function_names(&profile, &profile.sample[0]).iter().any(|name| name.ends_with("::fill_population")));
}

#[test]
fn one_session_at_a_time_and_a_stopped_one_stays_stopped() {
    let _alone = alone();
    let mut first = Profiler::start(ProfilerConfig::default()).unwrap();
    assert!(first.is_active());
    assert_eq!(Profiler::start(ProfilerConfig::default()).unwrap_err(), ProfilerError::AlreadyActive);

    first.stop().unwrap();
    assert!(!first.is_active());
    assert_eq!(first.report(), Err(ProfilerError::Inactive));
    assert_eq!(first.stop(), Err(ProfilerError::Inactive));

    // A later session is not released by the stopped one, neither by stopping nor by dropping it.
    let mut second = Profiler::start(ProfilerConfig::default()).unwrap();
    assert_eq!(first.stop(), Err(ProfilerError::Inactive));
    drop(first);
    assert!(second.is_active());
    assert_eq!(Profiler::start(ProfilerConfig::default()).unwrap_err(), ProfilerError::AlreadyActive);
    assert!(second.report().is_ok());

    // Dropping an active session releases the profile.
    drop(second);
    let third = Profiler::start(ProfilerConfig::default()).unwrap();
    assert!(third.is_active());
}

#[test]
fn an_invalid_configuration_is_refused_before_claiming_the_profile() {
    let _alone = alone();
    for (config, setting) in [
        (ProfilerConfig::default().max_stacks(0), "max_stacks"),
        (ProfilerConfig::default().max_frames(0), "max_frames"),
        (ProfilerConfig::default().max_frames(5000), "max_frames"),
    ] {
        match Profiler::start(config) {
            Err(ProfilerError::InvalidConfig { setting: named, reason }) => {
                assert_eq!(named, setting);
                assert!(!reason.is_empty());
            }
            other => panic!("expected an invalid configuration error for {setting}: {other:?}"),
        }
    }
    let message = Profiler::start(ProfilerConfig::default().max_frames(5000)).unwrap_err().to_string();
    assert_eq!(message, "ying: invalid profiler configuration: `max_frames` must be from 1 to 1024, not 5000");
    assert!(Profiler::start(ProfilerConfig::default()).is_ok(), "nothing was claimed");
}
