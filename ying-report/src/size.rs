//! Byte sizes: the one grammar every budget, flag and configuration key is written in, and the one way ying shows
//! a size to a person.
//!
//! A size is a whole number of bytes written as a number with an optional unit: `0`, `512`, `512 B`, `64 KiB`,
//! `1.5 MiB`, `2 GB`. Units are binary (`KiB` = 1024 B ... `PiB`) or decimal (`KB` = 1000 B ... `PB`), in any case;
//! a space between number and unit is optional, `_` may separate digits, and decimals must come to whole bytes.

use core::fmt;
use core::str::FromStr;

/// Units and their sizes in bytes; matched case-insensitively.
const UNITS: &[(&str, u64)] = &[
    ("b", 1),
    ("kb", 1_000),
    ("kib", 1 << 10),
    ("mb", 1_000_000),
    ("mib", 1 << 20),
    ("gb", 1_000_000_000),
    ("gib", 1 << 30),
    ("tb", 1_000_000_000_000),
    ("tib", 1 << 40),
    ("pb", 1_000_000_000_000_000),
    ("pib", 1 << 50),
];

/// The units as they are written in messages.
const UNIT_NAMES: &str = "B, KB, KiB, MB, MiB, GB, GiB, TB, TiB, PB or PiB";

/// A number of bytes, parsed from and shown in ying's one size grammar.
///
/// ```
/// use ying_report::ByteSize;
///
/// assert_eq!("64 KiB".parse::<ByteSize>().unwrap().bytes(), 65_536);
/// assert_eq!(ByteSize::parse("1.5 mib").unwrap().bytes(), 1_572_864);
/// assert_eq!(ByteSize::parse("2 GB").unwrap().bytes(), 2_000_000_000);
/// assert_eq!(ByteSize::new(4096).to_string(), "4.0 KiB (4096 bytes)");
/// assert!(ByteSize::parse("64 KiBs").unwrap_err().to_string().contains("unknown unit `KiBs`"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(u64);

impl ByteSize {
    /// `bytes` bytes.
    pub const fn new(bytes: u64) -> Self {
        Self(bytes)
    }

    /// The number of bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }

    /// Parses a size such as `"1.5 MiB"`, or says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, SizeError> {
        let error = |kind| SizeError { text: text.to_owned(), kind };
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(error(SizeErrorKind::Empty));
        }
        if trimmed.starts_with('-') {
            return Err(error(SizeErrorKind::Negative));
        }
        let split = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(trimmed.len());
        let (number, unit) = trimmed.split_at(split);
        let unit = unit.trim_start();
        if !number.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(error(SizeErrorKind::NoNumber));
        }
        let multiplier = if unit.is_empty() {
            1
        } else {
            let lower = unit.to_ascii_lowercase();
            let known = UNITS.iter().find(|(name, _)| *name == lower).map(|&(_, bytes)| bytes);
            known.ok_or_else(|| error(SizeErrorKind::UnknownUnit(unit.to_owned())))?
        };
        let digits = number.replace('_', "");
        let (whole, fraction) = digits.split_once('.').unwrap_or((&digits, ""));
        if fraction.contains('.') || (digits.contains('.') && fraction.is_empty()) {
            return Err(error(SizeErrorKind::BadNumber));
        }
        // Every digit, then scaled back by the fraction's length: exact for any number of decimals that fits.
        let all: u128 = format!("{whole}{fraction}").parse().map_err(|_| error(SizeErrorKind::TooLarge))?;
        let scale = 10u128.checked_pow(fraction.len() as u32).ok_or_else(|| error(SizeErrorKind::TooLarge))?;
        let scaled = all.checked_mul(u128::from(multiplier)).ok_or_else(|| error(SizeErrorKind::TooLarge))?;
        if !scaled.is_multiple_of(scale) {
            return Err(error(SizeErrorKind::NotWhole));
        }
        u64::try_from(scaled / scale).map(Self).map_err(|_| error(SizeErrorKind::TooLarge))
    }
}

impl FromStr for ByteSize {
    type Err = SizeError;

    fn from_str(text: &str) -> Result<Self, SizeError> {
        Self::parse(text)
    }
}

impl From<u64> for ByteSize {
    fn from(bytes: u64) -> Self {
        Self(bytes)
    }
}

impl ByteSize {
    /// The size in binary units without the exact count, for where the count is shown beside it (a page's hover
    /// text): `1000 B`, `4.0 KiB`.
    pub const fn rounded(self) -> Rounded {
        Rounded(self)
    }
}

/// A [`ByteSize`] in binary units, one decimal, without the exact count: `1000 B`, `4.0 KiB`, `1.5 MiB`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rounded(ByteSize);

impl fmt::Display for Rounded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const LARGER: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
        let bytes = self.0.0;
        if bytes < 1024 {
            return write!(f, "{bytes} B");
        }
        let mut value = bytes as f64 / 1024.0;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < LARGER.len() {
            value /= 1024.0;
            unit += 1;
        }
        write!(f, "{value:.1} {}", LARGER[unit])
    }
}

/// In binary units, with the exact count in parentheses once a unit larger than bytes is used:
/// `1000 B`, `4.0 KiB (4096 bytes)`.
impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 < 1024 {
            return write!(f, "{}", self.rounded());
        }
        write!(f, "{} ({} bytes)", self.rounded(), self.0)
    }
}

/// A signed number of bytes (a growth), shown as [`ByteSize`] with its sign: `-2.0 KiB (2048 bytes)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SignedByteSize(pub i64);

impl fmt::Display for SignedByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 < 0 {
            f.write_str("-")?;
        }
        ByteSize(self.0.unsigned_abs()).fmt(f)
    }
}

/// Written as a number of bytes.
impl serde::Serialize for ByteSize {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.0)
    }
}

/// Read from a string in the size grammar (`"64 KiB"`) or a whole number of bytes (`65536`).
impl<'de> serde::Deserialize<'de> for ByteSize {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;

        impl serde::de::Visitor<'_> for Visitor {
            type Value = ByteSize;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size like \"64 KiB\" or a whole number of bytes")
            }

            fn visit_u64<E: serde::de::Error>(self, bytes: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(bytes))
            }

            fn visit_i64<E: serde::de::Error>(self, bytes: i64) -> Result<ByteSize, E> {
                u64::try_from(bytes)
                    .map(ByteSize)
                    .map_err(|_| E::custom(SizeErrorKind::Negative.message(&bytes.to_string())))
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<ByteSize, E> {
                ByteSize::parse(text).map_err(E::custom)
            }
        }

        deserializer.deserialize_any(Visitor)
    }
}

/// Why a text is not a size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeError {
    text: String,
    kind: SizeErrorKind,
}

impl SizeError {
    /// What is wrong.
    pub fn kind(&self) -> &SizeErrorKind {
        &self.kind
    }
}

/// What is wrong with a size.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SizeErrorKind {
    /// Nothing was written.
    Empty,
    /// It does not start with a digit.
    NoNumber,
    /// It starts with a minus sign.
    Negative,
    /// The number is malformed (`1..3`, `1.`).
    BadNumber,
    /// The unit is not one of the grammar's.
    UnknownUnit(String),
    /// Its decimals do not come to whole bytes (`1.3 B`).
    NotWhole,
    /// More than `u64::MAX` bytes.
    TooLarge,
}

impl SizeErrorKind {
    fn message(&self, text: &str) -> String {
        match self {
            Self::Empty => "a size cannot be empty; write a size like \"64 KiB\"".to_owned(),
            Self::NoNumber => format!("`{text}` does not start with a number; write a size like \"64 KiB\""),
            Self::Negative => format!("`{text}` is negative; a size is 0 or more, like \"64 KiB\""),
            Self::BadNumber => format!("`{text}` is not a number with a unit; write a size like \"1.5 MiB\""),
            Self::UnknownUnit(unit) => {
                format!("unknown unit `{unit}` in `{text}`; use {UNIT_NAMES} (case does not matter)")
            }
            Self::NotWhole => format!("`{text}` is not a whole number of bytes"),
            Self::TooLarge => format!("`{text}` is too large; a size is at most {} bytes", u64::MAX),
        }
    }
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.kind.message(self.text.trim()))
    }
}

impl std::error::Error for SizeError {}

/// The grammar's examples: each input with the bytes it means, or a part of the error it gives. Every reader of
/// sizes (the `leak_test` attribute, `--min-growth`, `[workspace.metadata.ying]`) is tested against this one table.
#[doc(hidden)]
pub const EXAMPLES: &[(&str, Result<u64, &str>)] = &[
    ("0", Ok(0)),
    ("512", Ok(512)),
    ("512 B", Ok(512)),
    ("512b", Ok(512)),
    ("64 KiB", Ok(65_536)),
    ("64kib", Ok(65_536)),
    ("1 KB", Ok(1000)),
    ("0.5 KiB", Ok(512)),
    ("1.5 MiB", Ok(1_572_864)),
    ("2 GB", Ok(2_000_000_000)),
    ("3 GiB", Ok(3 << 30)),
    ("1 TiB", Ok(1 << 40)),
    ("2 TB", Ok(2_000_000_000_000)),
    ("1 PiB", Ok(1 << 50)),
    ("10_000", Ok(10_000)),
    ("  7 MB  ", Ok(7_000_000)),
    ("", Err("cannot be empty")),
    ("lots", Err("does not start with a number")),
    ("-1 B", Err("is negative")),
    ("64 KiBs", Err("unknown unit `KiBs`")),
    ("4096u8", Err("unknown unit `u8`")),
    ("3 parsecs", Err("unknown unit `parsecs`")),
    ("1.3 B", Err("not a whole number of bytes")),
    ("1..3 KiB", Err("is not a number")),
    ("1. KiB", Err("is not a number")),
    ("99999999999 TiB", Err("too large")),
    ("18446744073709551616", Err("too large")),
];

#[cfg(test)]
mod tests {
    use super::{ByteSize, EXAMPLES, SignedByteSize};

    #[test]
    fn the_grammar_reads_its_examples() {
        for &(text, expected) in EXAMPLES {
            match (ByteSize::parse(text), expected) {
                (Ok(size), Ok(bytes)) => assert_eq!(size.bytes(), bytes, "{text:?}"),
                (Err(error), Err(part)) => assert!(error.to_string().contains(part), "{text:?}: {error}"),
                (got, expected) => panic!("{text:?}: got {got:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn sizes_read_in_binary_units_with_exact_bytes() {
        assert_eq!(ByteSize::new(0).to_string(), "0 B");
        assert_eq!(ByteSize::new(1000).to_string(), "1000 B");
        assert_eq!(ByteSize::new(4096).to_string(), "4.0 KiB (4096 bytes)");
        assert_eq!(ByteSize::new(1536 * 1024).to_string(), "1.5 MiB (1572864 bytes)");
        assert_eq!(ByteSize::new(3 << 30).to_string(), "3.0 GiB (3221225472 bytes)");
        assert_eq!(SignedByteSize(-2048).to_string(), "-2.0 KiB (2048 bytes)");
        assert_eq!(SignedByteSize(16).to_string(), "16 B");
    }

    #[test]
    fn a_rounded_size_leaves_out_the_exact_count() {
        assert_eq!(ByteSize::new(1000).rounded().to_string(), "1000 B");
        assert_eq!(ByteSize::new(2048).rounded().to_string(), "2.0 KiB");
        assert_eq!(ByteSize::new(3000).rounded().to_string(), "2.9 KiB");
        assert_eq!(ByteSize::new(1536 * 1024).rounded().to_string(), "1.5 MiB");
    }

    #[test]
    fn what_is_shown_reads_back_as_the_same_size() {
        for bytes in [0, 1, 1023, 1024, 65_536, 1 << 40] {
            let shown = ByteSize::new(bytes).to_string();
            let exact = shown.split_once(" (").map_or(shown.as_str(), |(_, exact)| exact.trim_end_matches(')'));
            assert_eq!(ByteSize::parse(&exact.replace("bytes", "B")).unwrap().bytes(), bytes, "{shown}");
        }
    }

    #[test]
    fn json_takes_a_string_or_a_whole_number() {
        assert_eq!(serde_json::from_str::<ByteSize>("\"1 KiB\"").unwrap().bytes(), 1024);
        assert_eq!(serde_json::from_str::<ByteSize>("4096").unwrap().bytes(), 4096);
        let error = serde_json::from_str::<ByteSize>("-5").unwrap_err().to_string();
        assert!(error.contains("is negative"), "{error}");
        let error = serde_json::from_str::<ByteSize>("\"lots\"").unwrap_err().to_string();
        assert!(error.contains("does not start with a number"), "{error}");
        let error = serde_json::from_str::<ByteSize>("1.5").unwrap_err().to_string();
        assert!(error.contains("a size like \"64 KiB\" or a whole number of bytes"), "{error}");
    }
}
