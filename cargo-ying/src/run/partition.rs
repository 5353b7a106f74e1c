//! `--partition count:M/N` and `hash:M/N`: splitting the tests across CI machines, so that a matrix of runners
//! covers every test exactly once (and `cargo ying merge` joins their results).

use std::fmt;

/// How tests are assigned to shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// The i-th test of the run goes to shard i mod N: even shards, but a new test moves the others.
    Count,
    /// A test goes to the shard its id hashes to: stable as tests come and go.
    Hash,
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
        };
        write!(f, "{scheme}:{}/{}", self.shard, self.total)
    }
}

impl Partition {
    /// Parses `count:M/N` or `hash:M/N` (1 <= M <= N).
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let usage = || format!("`{text}` is not a partition; write count:M/N or hash:M/N, e.g. hash:1/3");
        let (scheme, shards) = text.split_once(':').ok_or_else(usage)?;
        let scheme = match scheme {
            "count" => Scheme::Count,
            "hash" => Scheme::Hash,
            _ => return Err(usage()),
        };
        let (shard, total) = shards.split_once('/').ok_or_else(usage)?;
        let (shard, total): (u64, u64) = (shard.parse().map_err(|_| usage())?, total.parse().map_err(|_| usage())?);
        if total == 0 || shard == 0 || shard > total {
            return Err(format!("`{text}`: the shard must be between 1 and the number of shards"));
        }
        Ok(Self { scheme, shard, total })
    }

    /// Whether the `index`-th test of the run, with id `id`, belongs to this shard.
    pub(crate) fn contains(&self, index: usize, id: &str) -> bool {
        let key = match self.scheme {
            Scheme::Count => index as u64,
            Scheme::Hash => ying_report::stable_hash(id),
        };
        key % self.total == self.shard - 1
    }
}

#[cfg(test)]
mod tests {
    use super::{Partition, Scheme};

    #[test]
    fn partitions_parse_and_cover_every_test_once() {
        assert_eq!(Partition::parse("hash:2/3"), Ok(Partition { scheme: Scheme::Hash, shard: 2, total: 3 }));
        assert!(Partition::parse("hash:0/3").is_err() && Partition::parse("count:4/3").is_err());
        assert!(Partition::parse("slice:1/2").unwrap_err().contains("count:M/N or hash:M/N"));
        let ids: Vec<String> = (0..100).map(|i| format!("pkg::bin test_{i}")).collect();
        for scheme in ["count", "hash"] {
            let shards: Vec<Partition> =
                (1..=3).map(|m| Partition::parse(&format!("{scheme}:{m}/3")).unwrap()).collect();
            for (index, id) in ids.iter().enumerate() {
                assert_eq!(shards.iter().filter(|shard| shard.contains(index, id)).count(), 1, "{scheme} {id}");
            }
        }
    }
}
