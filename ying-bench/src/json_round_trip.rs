//! `w6`: a serde_json round trip of a generated document of about 20 MB, as a program that reads and writes JSON.

use std::hint::black_box;

use serde::{Deserialize, Serialize};

use crate::rng::Rng;

/// Words of the generated strings: ASCII, accented and CJK letters, and characters JSON escapes.
const WORDS: [&str; 24] = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliett",
    "kilo",
    "lima",
    "Zoë",
    "naïve",
    "façade",
    "Ærøskøbing",
    "東京",
    "서울",
    "Αθήνα",
    "Москва",
    "\"quoted\"",
    "back\\slash",
    "tab\there",
    "line\nbreak",
];

/// One record of the document: strings, numbers, a nested object and arrays of strings and of objects.
#[derive(Serialize, Deserialize)]
struct Record {
    id: u64,
    name: String,
    email: String,
    active: bool,
    score: f64,
    tags: Vec<String>,
    address: Address,
    events: Vec<Event>,
    note: Option<String>,
}

/// A record's address: strings, a number and a fixed-length array.
#[derive(Serialize, Deserialize)]
struct Address {
    street: String,
    city: String,
    postcode: u32,
    location: [f64; 2],
}

/// One of a record's events.
#[derive(Serialize, Deserialize)]
struct Event {
    at: u64,
    kind: String,
    amount: i64,
}

/// A phrase of `least` to `least + more - 1` words from [`WORDS`].
fn phrase(rng: &mut Rng, least: usize, more: u64) -> String {
    let mut phrase = String::new();
    for i in 0..least + rng.below(more) {
        if i > 0 {
            phrase.push(' ');
        }
        phrase.push_str(WORDS[rng.below(WORDS.len() as u64)]);
    }
    phrase
}

/// A number of 1/1024ths: exactly representable, so that it reads back as the same `f64` and prints the same.
fn fraction(rng: &mut Rng, whole: u64) -> f64 {
    rng.below(whole * 1024) as f64 / 1024.0
}

/// The record of number `id`.
fn record(rng: &mut Rng, id: u64) -> Record {
    let events = rng.below(8);
    Record {
        id,
        name: phrase(rng, 2, 3),
        email: format!("{}.{id}@example{}.org", WORDS[rng.below(12)], rng.below(100)),
        active: rng.below(2) == 0,
        score: fraction(rng, 100),
        tags: (0..rng.below(6)).map(|_| WORDS[rng.below(WORDS.len() as u64)].to_owned()).collect(),
        address: Address {
            street: format!("{} {}", 1 + rng.below(999), phrase(rng, 2, 1)),
            city: WORDS[12 + rng.below(8)].to_owned(),
            postcode: 10_000 + rng.below(90_000) as u32,
            location: [fraction(rng, 90), -fraction(rng, 180)],
        },
        events: (0..events)
            .map(|_| Event {
                at: 1_700_000_000 + rng.below(100_000_000) as u64,
                kind: WORDS[rng.below(12)].to_owned(),
                amount: rng.below(2_000_000) as i64 - 1_000_000,
            })
            .collect(),
        note: (rng.below(4) == 0).then(|| phrase(rng, 4, 12)),
    }
}

/// Generates `records` records, serialises them to a string, parses that back both into a `serde_json::Value` and
/// into the typed records, and serialises the value, and the records pretty and compact. The compact text must
/// equal the first; the checksum adds the lengths of the four texts and the sums of the ids read back.
pub fn json_round_trip(records: usize, seed: u64) -> u64 {
    let mut rng = Rng::new(seed);
    let document: Vec<Record> = (0..records as u64).map(|id| record(&mut rng, id)).collect();
    let text = serde_json::to_string(&document).expect("records serialise");
    drop(document);

    let value: serde_json::Value = serde_json::from_str(&text).expect("the document parses as a value");
    let value_ids: u64 = value.as_array().expect("an array").iter().filter_map(|record| record["id"].as_u64()).sum();
    let value_text = serde_json::to_string(black_box(&value)).expect("a value serialises");
    drop(value);

    let typed: Vec<Record> = serde_json::from_str(&text).expect("the document parses as records");
    let typed_ids: u64 = typed.iter().map(|record| record.id).sum();
    let pretty_text = serde_json::to_string_pretty(black_box(&typed)).expect("records serialise");
    let compact_text = serde_json::to_string(&typed).expect("records serialise");
    assert!(compact_text == text, "the records read back serialise to the text they were read from");

    [text.len(), value_text.len(), pretty_text.len(), compact_text.len()]
        .into_iter()
        .fold(value_ids.wrapping_add(typed_ids), |checksum, length| checksum.wrapping_add(length as u64))
}
