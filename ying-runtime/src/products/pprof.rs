//! The pprof encoder: stacks with fractional estimates in, `profile.proto` bytes out.
//!
//! Estimates stay `f64` while stacks are merged (two stacks can become one when frames are cut) and are rounded
//! once, here, when a sample is written.

use crate::read::objects::Segment;
use crate::read::symbolize::Place;
use std::collections::HashMap;
use ying_report::Frame;

/// The messages of `profile.proto` (github.com/google/pprof, package `perftools.profiles`) that ying writes.
mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub(super) sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub(super) sample: Vec<Sample>,
        #[prost(message, repeated, tag = "3")]
        pub(super) mapping: Vec<Mapping>,
        #[prost(message, repeated, tag = "4")]
        pub(super) location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub(super) function: Vec<Function>,
        #[prost(string, repeated, tag = "6")]
        pub(super) string_table: Vec<String>,
        #[prost(int64, tag = "9")]
        pub(super) time_nanos: i64,
        #[prost(int64, tag = "10")]
        pub(super) duration_nanos: i64,
        #[prost(message, optional, tag = "11")]
        pub(super) period_type: Option<ValueType>,
        #[prost(int64, tag = "12")]
        pub(super) period: i64,
        #[prost(int64, tag = "14")]
        pub(super) default_sample_type: i64,
    }

    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub(super) struct ValueType {
        #[prost(int64, tag = "1")]
        pub(super) r#type: i64,
        #[prost(int64, tag = "2")]
        pub(super) unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Sample {
        #[prost(uint64, repeated, tag = "1")]
        pub(super) location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub(super) value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        pub(super) label: Vec<Label>,
    }

    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub(super) struct Label {
        #[prost(int64, tag = "1")]
        pub(super) key: i64,
        #[prost(int64, tag = "2")]
        pub(super) str: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Mapping {
        #[prost(uint64, tag = "1")]
        pub(super) id: u64,
        #[prost(uint64, tag = "2")]
        pub(super) memory_start: u64,
        #[prost(uint64, tag = "3")]
        pub(super) memory_limit: u64,
        #[prost(uint64, tag = "4")]
        pub(super) file_offset: u64,
        #[prost(int64, tag = "5")]
        pub(super) filename: i64,
        #[prost(int64, tag = "6")]
        pub(super) build_id: i64,
        #[prost(bool, tag = "7")]
        pub(super) has_functions: bool,
        #[prost(bool, tag = "8")]
        pub(super) has_filenames: bool,
        #[prost(bool, tag = "9")]
        pub(super) has_line_numbers: bool,
        #[prost(bool, tag = "10")]
        pub(super) has_inline_frames: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Location {
        #[prost(uint64, tag = "1")]
        pub(super) id: u64,
        #[prost(uint64, tag = "2")]
        pub(super) mapping_id: u64,
        #[prost(uint64, tag = "3")]
        pub(super) address: u64,
        #[prost(message, repeated, tag = "4")]
        pub(super) line: Vec<Line>,
    }

    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub(super) struct Line {
        #[prost(uint64, tag = "1")]
        pub(super) function_id: u64,
        #[prost(int64, tag = "2")]
        pub(super) line: i64,
    }

    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub(super) struct Function {
        #[prost(uint64, tag = "1")]
        pub(super) id: u64,
        #[prost(int64, tag = "2")]
        pub(super) name: i64,
        #[prost(int64, tag = "3")]
        pub(super) system_name: i64,
        #[prost(int64, tag = "4")]
        pub(super) filename: i64,
    }
}

/// The sample types of a ying profile, in the order of [`Values`].
pub(crate) const SAMPLE_TYPES: [(&str, &str); 4] =
    [("alloc_objects", "count"), ("alloc_space", "bytes"), ("inuse_objects", "count"), ("inuse_space", "bytes")];

/// Estimated figures of one stack, in the order of [`SAMPLE_TYPES`], not rounded.
pub(crate) type Values = [f64; 4];

/// What a profile describes besides its stacks.
pub(crate) struct Header {
    /// When the profile's interval started, in nanoseconds since the Unix epoch.
    pub(crate) time_nanos: i64,
    /// How long the interval lasted.
    pub(crate) duration_nanos: i64,
    /// The mean sampling interval, in bytes.
    pub(crate) period: i64,
}

/// Builds a profile: interns strings, functions, locations and mappings, and merges samples whose places are the
/// same, adding their fractional values.
pub(crate) struct Builder {
    profile: proto::Profile,
    strings: HashMap<String, i64>,
    functions: HashMap<(i64, i64), u64>,
    locations: HashMap<(u64, Vec<(u64, i64)>), u64>,
    segments: Vec<Segment>,
    mapping_ids: Vec<Option<u64>>,
    samples: HashMap<Vec<u64>, Values>,
    order: Vec<Vec<u64>>,
}

impl Builder {
    /// A builder whose code addresses are matched against `segments` for their mappings.
    pub(crate) fn new(segments: Vec<Segment>) -> Self {
        let mut builder = Self {
            profile: proto::Profile::default(),
            strings: HashMap::new(),
            functions: HashMap::new(),
            locations: HashMap::new(),
            mapping_ids: vec![None; segments.len()],
            segments,
            samples: HashMap::new(),
            order: Vec::new(),
        };
        builder.string("");
        builder
    }

    fn string(&mut self, text: &str) -> i64 {
        if let Some(&index) = self.strings.get(text) {
            return index;
        }
        let index = self.profile.string_table.len() as i64;
        self.profile.string_table.push(text.to_owned());
        self.strings.insert(text.to_owned(), index);
        index
    }

    fn function(&mut self, frame: &Frame) -> u64 {
        let name = self.string(&frame.function);
        let filename = frame.file.as_deref().map_or(0, |file| self.string(file));
        let next = self.profile.function.len() as u64 + 1;
        let id = *self.functions.entry((name, filename)).or_insert(next);
        if id == next {
            self.profile.function.push(proto::Function { id, name, system_name: name, filename });
        }
        id
    }

    fn mapping(&mut self, address: u64) -> u64 {
        let Some(index) = self.segments.iter().position(|segment| (segment.start..segment.end).contains(&address))
        else {
            return 0;
        };
        if let Some(id) = self.mapping_ids[index] {
            return id;
        }
        let segment = self.segments[index].clone();
        let id = self.profile.mapping.len() as u64 + 1;
        let filename = self.string(&segment.path);
        let build_id = self.string(&segment.build_id);
        self.profile.mapping.push(proto::Mapping {
            id,
            memory_start: segment.start,
            memory_limit: segment.end,
            file_offset: segment.file_offset,
            filename,
            build_id,
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
            has_inline_frames: true,
        });
        self.mapping_ids[index] = Some(id);
        id
    }

    fn location(&mut self, place: &Place) -> u64 {
        let lines: Vec<(u64, i64)> =
            place.frames.iter().map(|frame| (self.function(frame), frame.line.map_or(0, i64::from))).collect();
        let address = place.address.unwrap_or(0);
        let next = self.profile.location.len() as u64 + 1;
        let id = *self.locations.entry((address, lines.clone())).or_insert(next);
        if id == next {
            let mapping_id = if place.address.is_some() { self.mapping(address) } else { 0 };
            let line = lines.into_iter().map(|(function_id, line)| proto::Line { function_id, line }).collect();
            self.profile.location.push(proto::Location { id, mapping_id, address, line });
        }
        id
    }

    /// Adds a stack (places innermost first) with its estimates; a stack already added gets them summed.
    pub(crate) fn add(&mut self, places: &[Place], values: Values) {
        let ids: Vec<u64> = places.iter().map(|place| self.location(place)).collect();
        match self.samples.get_mut(&ids) {
            Some(sum) => sum.iter_mut().zip(values).for_each(|(sum, value)| *sum += value),
            None => {
                self.order.push(ids.clone());
                self.samples.insert(ids, values);
            }
        }
    }

    /// The encoded profile: every sample's values rounded once, samples that round to nothing left out, each
    /// labelled `__delta__="false"` (its values cover the profile's interval, not a running total).
    pub(crate) fn finish(mut self, header: &Header) -> Vec<u8> {
        let sample_type =
            SAMPLE_TYPES.map(|(kind, unit)| proto::ValueType { r#type: self.string(kind), unit: self.string(unit) });
        self.profile.sample_type = sample_type.to_vec();
        self.profile.period_type = Some(proto::ValueType { r#type: self.string("space"), unit: self.string("bytes") });
        self.profile.period = header.period;
        self.profile.time_nanos = header.time_nanos;
        self.profile.duration_nanos = header.duration_nanos;
        self.profile.default_sample_type = sample_type[3].r#type;
        let delta = proto::Label { key: self.string("__delta__"), str: self.string("false") };
        for ids in std::mem::take(&mut self.order) {
            let values = self.samples[&ids].map(|value| value.round() as i64);
            if values.iter().all(|&value| value == 0) {
                continue;
            }
            self.profile.sample.push(proto::Sample { location_id: ids, value: values.to_vec(), label: vec![delta] });
        }
        prost::Message::encode_to_vec(&self.profile)
    }
}

#[cfg(test)]
mod tests {
    use super::{Builder, Header, Place};
    use prost::Message;
    use ying_report::Frame;

    fn place(address: u64, function: &str) -> Place {
        Place { address: Some(address), frames: vec![Frame::new(function, Some("src/lib.rs".into()), Some(7))] }
    }

    fn header() -> Header {
        Header { time_nanos: 1, duration_nanos: 2, period: 1024 }
    }

    #[test]
    fn fractions_are_summed_then_rounded_once() {
        let mut builder = Builder::new(Vec::new());
        let stack = [place(0x10, "app::leaf"), place(0x20, "app::main")];
        // Three samples of 0.4 objects each: 1.2 objects in all, where rounding each would write 0.
        for _ in 0..3 {
            builder.add(&stack, [0.4, 409.6, 0.4, 409.6]);
        }
        let profile = super::proto::Profile::decode(builder.finish(&header()).as_slice()).unwrap();
        assert_eq!(profile.sample.len(), 1);
        assert_eq!(profile.sample[0].value, [1, 1229, 1, 1229]);
    }

    #[test]
    fn strings_functions_and_locations_are_shared() {
        let mut builder = Builder::new(Vec::new());
        builder.add(&[place(0x10, "app::leaf"), place(0x20, "app::main")], [1.0; 4]);
        builder.add(&[place(0x30, "app::other"), place(0x20, "app::main")], [1.0; 4]);
        builder.add(&[place(0x40, "app::nothing")], [0.2; 4]);
        let profile = super::proto::Profile::decode(builder.finish(&header()).as_slice()).unwrap();
        assert_eq!(profile.string_table[0], "");
        assert_eq!(profile.location.len(), 4);
        assert_eq!(profile.function.len(), 4);
        assert_eq!(profile.sample.len(), 2, "a sample that rounds to nothing is left out");
        assert_eq!(profile.sample[0].location_id[1], profile.sample[1].location_id[1]);
        let names = profile.string_table.iter().filter(|s| s.as_str() == "app::main").count();
        assert_eq!(names, 1);
    }
}
