//! Byte sizes for people: `1000 B`, `4.0 KiB (4096 bytes)`.

/// Formats `bytes` in binary units, with the exact count in parentheses once a unit larger than bytes is used.
pub(crate) fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {} ({bytes} bytes)", UNITS[unit])
}

/// A signed byte count, as [`human`] with its sign.
pub(crate) fn human_signed(bytes: i64) -> String {
    if bytes < 0 { format!("-{}", human(bytes.unsigned_abs())) } else { human(bytes as u64) }
}

#[cfg(test)]
mod tests {
    use super::{human, human_signed};

    #[test]
    fn sizes_read_in_binary_units_with_exact_bytes() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(1000), "1000 B");
        assert_eq!(human(4096), "4.0 KiB (4096 bytes)");
        assert_eq!(human(1536 * 1024), "1.5 MiB (1572864 bytes)");
        assert_eq!(human(3 << 30), "3.0 GiB (3221225472 bytes)");
        assert_eq!(human_signed(-2048), "-2.0 KiB (2048 bytes)");
    }
}
