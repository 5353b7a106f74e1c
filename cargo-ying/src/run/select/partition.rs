//! `--partition slice:M/N`, `hash:M/N` and `count:M/N`: splitting the tests across CI machines so that a matrix of
//! runners covers every test exactly once (and `cargo ying merge` joins their results), with cargo-nextest's
//! assignment, so that a shard holds the tests `cargo nextest run --partition` runs in it.
//!
//! As nextest does, the partition applies after every other filter, to the tests that run, in nextest's order:
//! binaries by their id's components (package, then kind and name), tests by name. Ignored tests that run
//! (`--run-ignored all`) are shared out on their own, so that marking a test ignored moves no other test. The
//! tests a run selects and does not run (ignored ones, reported as such) are shared out the same way apart, so
//! that each is reported by one shard only.

use std::fmt;

/// How tests are assigned to shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// Round-robin within each binary: the i-th test of a binary goes to shard i mod N.
    Count,
    /// A test goes to the shard its name hashes to (xxHash64, seed 0, nextest's for its 0.9 series): stable as
    /// tests come and go.
    Hash,
    /// Round-robin across the binaries: even shards however the tests are spread over binaries.
    Slice,
}

/// Shard `shard` (1-based) of `total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Partition {
    /// How tests are assigned.
    pub scheme: Scheme,
    /// This shard, from 1.
    pub shard: u64,
    /// The number of shards.
    pub total: u64,
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.scheme {
            Scheme::Count => "count",
            Scheme::Hash => "hash",
            Scheme::Slice => "slice",
        };
        write!(f, "{scheme}:{}/{}", self.shard, self.total)
    }
}

/// A test to be assigned to a shard.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Candidate<'a> {
    /// Its binary's id, as nextest writes it (`pkg`, `pkg::tests`, `pkg::bin/tool`).
    pub binary_id: &'a str,
    /// Its name as libtest lists it.
    pub name: &'a str,
    /// Marked `#[ignore]`.
    pub ignored: bool,
    /// Whether it runs, rather than being reported as ignored.
    pub runs: bool,
}

/// The order nextest gives a binary id: by package, then a library before a binary named without a kind, before
/// the others by kind and name.
pub(crate) fn binary_order(id: &str) -> (&str, u8, &str, &str) {
    match id.split_once("::") {
        None => (id, 0, "", ""),
        Some((package, rest)) => match rest.split_once('/') {
            None => (package, 1, "", rest),
            Some((kind, name)) => (package, 2, kind, name),
        },
    }
}

impl Partition {
    /// Parses `slice:M/N`, `hash:M/N` or `count:M/N` (1 <= M <= N).
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let usage = || format!("`{text}` is not a partition; write slice:M/N, hash:M/N or count:M/N, e.g. hash:1/3");
        let (scheme, shards) = text.split_once(':').ok_or_else(usage)?;
        let scheme = match scheme {
            "count" => Scheme::Count,
            "hash" => Scheme::Hash,
            "slice" => Scheme::Slice,
            _ => return Err(usage()),
        };
        let (shard, total) = shards.split_once('/').ok_or_else(usage)?;
        let (shard, total): (u64, u64) = (shard.parse().map_err(|_| usage())?, total.parse().map_err(|_| usage())?);
        if total == 0 || shard == 0 || shard > total {
            return Err(format!("`{text}`: the shard must be between 1 and the number of shards"));
        }
        Ok(Self { scheme, shard, total })
    }

    /// Which of `tests` belong to this shard, in their order.
    pub(crate) fn select(&self, tests: &[Candidate<'_>]) -> Vec<bool> {
        let mut order: Vec<usize> = (0..tests.len()).collect();
        order.sort_by(|&a, &b| {
            let (a, b) = (&tests[a], &tests[b]);
            (binary_order(a.binary_id), a.name).cmp(&(binary_order(b.binary_id), b.name))
        });
        // A round-robin count for each group of tests shared out apart: running and not, ignored and not.
        let group = |test: &Candidate<'_>| usize::from(test.runs) * 2 + usize::from(test.ignored);
        let mut counts = [0_u64; 4];
        let mut binary = None;
        let mut chosen = vec![false; tests.len()];
        for index in order {
            let test = &tests[index];
            if self.scheme == Scheme::Count && binary != Some(test.binary_id) {
                binary = Some(test.binary_id);
                counts = [0; 4];
            }
            let key = match self.scheme {
                Scheme::Hash => twox_hash::XxHash64::oneshot(0, test.name.as_bytes()),
                Scheme::Count | Scheme::Slice => {
                    let count = &mut counts[group(test)];
                    *count += 1;
                    *count - 1
                }
            };
            chosen[index] = key % self.total == self.shard - 1;
        }
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::{Candidate, Partition, Scheme};

    fn running<'a>(binary_id: &'a str, name: &'a str) -> Candidate<'a> {
        Candidate { binary_id, name, ignored: false, runs: true }
    }

    /// The names of `tests` in shard `partition`.
    fn shard<'a>(partition: &str, tests: &[Candidate<'a>]) -> Vec<&'a str> {
        let chosen = Partition::parse(partition).unwrap().select(tests);
        tests.iter().zip(chosen).filter(|(_, chosen)| *chosen).map(|(test, _)| test.name).collect()
    }

    #[test]
    fn partitions_parse_as_nextests() {
        assert_eq!(Partition::parse("hash:2/3"), Ok(Partition { scheme: Scheme::Hash, shard: 2, total: 3 }));
        assert_eq!(Partition::parse("slice:1/1"), Ok(Partition { scheme: Scheme::Slice, shard: 1, total: 1 }));
        assert!(Partition::parse("hash:0/3").is_err() && Partition::parse("count:4/3").is_err());
        assert!(Partition::parse("slice:1/2/3").is_err() && Partition::parse("hash:1").is_err());
        assert!(Partition::parse("range:1/2").unwrap_err().contains("slice:M/N, hash:M/N or count:M/N"));
    }

    /// nextest's own examples: `count` counts within a binary, in name order (its
    /// `test_apply_per_binary_partitioning_count`), `slice` across binaries in their order (its documentation's
    /// table).
    #[test]
    fn count_and_slice_go_round_robin_as_in_nextest() {
        let tests = [
            running("pkg::binary2", "one"),
            running("pkg::binary2", "two"),
            running("pkg::binary2", "three"),
            running("pkg::binary1", "alpha"),
            running("pkg::binary1", "beta"),
            running("pkg::binary1", "gamma"),
            running("pkg::binary1", "delta"),
        ];
        assert_eq!(shard("count:1/2", &tests), ["one", "two", "alpha", "delta"]);
        let table: Vec<Candidate<'_>> =
            ["b1", "b2", "b3"].iter().flat_map(|b| [running(b, "t1"), running(b, "t2")]).collect();
        let slices = |partition| {
            let chosen = Partition::parse(partition).unwrap().select(&table);
            table.iter().zip(chosen).filter(|(_, c)| *c).map(|(t, _)| format!("{} {}", t.binary_id, t.name)).collect()
        };
        let of_two: Vec<String> = slices("slice:1/2");
        assert_eq!(of_two, ["b1 t1", "b2 t1", "b3 t1"]);
        let of_three: Vec<String> = slices("slice:3/3");
        assert_eq!(of_three, ["b2 t1", "b3 t2"]);
    }

    /// nextest's binary order: a package's library first, then its binaries by kind and name; `pkg::tests`
    /// (an integration test, no kind) before `pkg::bin/tool`, though `/` sorts before `s` as text.
    #[test]
    fn binaries_are_ordered_by_their_ids_components() {
        let tests =
            [running("pkg::bin/tool", "a"), running("pkg::tests", "a"), running("pkg", "a"), running("other", "a")];
        let chosen = Partition::parse("slice:1/4").unwrap().select(&tests);
        assert_eq!(chosen, [false, false, false, true], "`other` sorts first");
        let chosen = Partition::parse("slice:4/4").unwrap().select(&tests);
        assert_eq!(chosen, [true, false, false, false], "`pkg::bin/tool` sorts last");
    }

    /// The hash is xxHash64 of the test's name alone, with seed 0: the values below are xxh64's.
    #[test]
    fn hash_is_xxhash64_of_the_name() {
        assert_eq!(twox_hash::XxHash64::oneshot(0, b""), 0xef46_db37_51d8_e999);
        assert_eq!(twox_hash::XxHash64::oneshot(0, b"a"), 0xd24e_c4f1_a98c_6e5b);
        let name = "caches_4000_bytes";
        let hash = twox_hash::XxHash64::oneshot(0, name.as_bytes());
        for binary_id in ["pkg", "pkg::other"] {
            let test = [running(binary_id, name)];
            let shard = hash % 3 + 1;
            assert_eq!(Partition::parse(&format!("hash:{shard}/3")).unwrap().select(&test), [true]);
        }
    }

    #[test]
    fn ignored_and_not_running_tests_are_shared_out_apart_and_every_test_is_in_one_shard() {
        let mut tests = Vec::new();
        let names: Vec<String> = (0..40).map(|i| format!("test_{i:02}")).collect();
        for (i, name) in names.iter().enumerate() {
            let binary_id = ["pkg", "pkg::tests", "pkg::bin/tool"][i % 3];
            tests.push(Candidate { binary_id, name, ignored: i % 5 == 0, runs: i % 7 != 0 });
        }
        for scheme in ["count", "hash", "slice"] {
            let shards: Vec<Vec<bool>> =
                (1..=3).map(|m| Partition::parse(&format!("{scheme}:{m}/3")).unwrap().select(&tests)).collect();
            for index in 0..tests.len() {
                assert_eq!(shards.iter().filter(|shard| shard[index]).count(), 1, "{scheme} {}", tests[index].name);
            }
        }
        // A new ignored test, not run, moves no running test.
        let before = Partition::parse("slice:1/2").unwrap().select(&tests);
        tests.insert(0, Candidate { binary_id: "pkg", name: "a_new_ignored_test", ignored: true, runs: false });
        let after = Partition::parse("slice:1/2").unwrap().select(&tests);
        let running = |chosen: &[bool], tests: &[Candidate<'_>]| -> Vec<bool> {
            tests.iter().zip(chosen).filter(|(test, _)| test.runs).map(|(_, chosen)| *chosen).collect()
        };
        assert_eq!(running(&before, &tests[1..]), running(&after, &tests));
    }
}
