//! Byte sizes with units, parsed at compile time: `"0"`, `"512 B"`, `"64 KiB"`, `"1.5 MiB"`, `"2 GB"`.

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
];

/// Parses a size such as `"1.5 MiB"` into bytes, or says what is wrong with it.
pub(crate) fn parse(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number = number.replace('_', "");
    let unit = unit.trim();
    if number.is_empty() {
        return Err(format!("`{text}` does not start with a number; write a size like \"64 KiB\""));
    }
    let multiplier = if unit.is_empty() {
        1
    } else {
        let lower = unit.to_ascii_lowercase();
        UNITS.iter().find(|(name, _)| *name == lower).map(|&(_, bytes)| bytes).ok_or_else(|| {
            format!("unknown unit `{unit}`; use B, KB, KiB, MB, MiB, GB, GiB, TB or TiB (case does not matter)")
        })?
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((&number, ""));
    if whole.is_empty() || fraction.contains('.') || (number.contains('.') && fraction.is_empty()) {
        return Err(format!("`{number}` is not a number; write a size like \"1.5 MiB\""));
    }
    let digits: u128 = format!("{whole}{fraction}").parse().map_err(|_| format!("`{number}` is too large"))?;
    let scale = 10u128.pow(fraction.len() as u32);
    let scaled = digits * u128::from(multiplier);
    if !scaled.is_multiple_of(scale) {
        return Err(format!("`{text}` is not a whole number of bytes"));
    }
    u64::try_from(scaled / scale).map_err(|_| format!("`{text}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn sizes_with_units() {
        assert_eq!(parse("0"), Ok(0));
        assert_eq!(parse("512 B"), Ok(512));
        assert_eq!(parse("64 KiB"), Ok(65_536));
        assert_eq!(parse("64kib"), Ok(65_536));
        assert_eq!(parse("1.5 MiB"), Ok(1_572_864));
        assert_eq!(parse("2 GB"), Ok(2_000_000_000));
        assert_eq!(parse("2 gb"), Ok(2_000_000_000));
        assert_eq!(parse("1 KB"), Ok(1000));
        assert_eq!(parse("10_000"), Ok(10_000));
        assert_eq!(parse("0.5 KiB"), Ok(512));
    }

    #[test]
    fn bad_sizes_say_why() {
        assert!(parse("64 KiBs").unwrap_err().contains("unknown unit `KiBs`"));
        assert!(parse("lots").unwrap_err().contains("does not start with a number"));
        assert!(parse("1.3 B").unwrap_err().contains("not a whole number of bytes"));
        assert!(parse("1..3 KiB").unwrap_err().contains("not a number"));
        assert!(parse("99999999999 TiB").unwrap_err().contains("too large"));
    }
}
