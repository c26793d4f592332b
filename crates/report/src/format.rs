//! Number formatting and table style shared by every report: units always shown, precision that
//! fits the size.

use comfy_table::{presets::UTF8_BORDERS_ONLY, Cell, CellAlignment, Table};

/// A duration given in microseconds, in the unit that keeps 3-4 significant digits.
pub fn fmt_duration_us(us: f64) -> String {
    if us >= 1_000_000.0 {
        format!("{:.2} s", us / 1_000_000.0)
    } else if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else if us >= 100.0 {
        format!("{us:.0} µs")
    } else {
        format!("{us:.1} µs")
    }
}

/// A duration given in nanoseconds, as [`fmt_duration_us`] shows it.
pub fn fmt_duration_ns(ns: f64) -> String {
    fmt_duration_us(ns / 1000.0)
}

/// A per-request count: whole numbers without decimals, fractions with two.
pub fn fmt_count(v: f64) -> String {
    if (v - v.round()).abs() < 0.005 {
        format!("{:.0}", v.round())
    } else {
        format!("{v:.2}")
    }
}

/// A metric's value in its unit (as [`reqcost_analysis::phase_metrics::Metric::unit`] names it).
pub fn fmt_metric(v: f64, unit: &str) -> String {
    match unit {
        "µs" => fmt_duration_us(v),
        "req/s" => format!("{v:.0} req/s"),
        "B" => format!("{v:.0} B"),
        "%" => format!("{v:.0} %"),
        rate if rate.ends_with("/s") => format!("{v:.1} {rate}"),
        _ => fmt_count(v),
    }
}

/// The table style of every report.
pub fn table() -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    t
}

/// A right-aligned cell, for figures.
pub fn right(s: impl ToString) -> Cell {
    Cell::new(s.to_string()).set_alignment(CellAlignment::Right)
}

/// A byte count in the binary unit that keeps it short.
pub fn fmt_bytes(v: f64) -> String {
    if v >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} GiB", v / (1024.0 * 1024.0 * 1024.0))
    } else if v >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", v / (1024.0 * 1024.0))
    } else if v >= 1024.0 {
        format!("{:.1} KiB", v / 1024.0)
    } else {
        format!("{v:.0} B")
    }
}

/// `text` with `prefix` before each line.
pub(crate) fn indent(text: &str, prefix: &str) -> String {
    text.lines().map(|l| format!("{prefix}{l}\n")).collect()
}

/// `0 B`, `1 B`, `64-127 B`, `1-2 KiB` (1024 to 2047 bytes), `16 GiB or more`.
pub fn bucket_label(min_bytes: u64, max_bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    if max_bytes == u64::MAX {
        return format!("{} or more", fmt_bytes(min_bytes as f64));
    }
    if min_bytes == max_bytes {
        return format!("{} B", min_bytes);
    }
    let mut scale = 0;
    while scale + 1 < UNITS.len() && min_bytes >= 1 << (10 * (scale + 1)) {
        scale += 1;
    }
    if scale == 0 {
        format!("{}-{} B", min_bytes, max_bytes)
    } else {
        let unit = 1u64 << (10 * scale);
        format!(
            "{}-{} {}",
            min_bytes / unit,
            (max_bytes + 1) / unit,
            UNITS[scale]
        )
    }
}

/// Like `fmt_count`, but a rare event keeps two significant digits instead of showing as 0:
/// one accept per 8000 requests is `0.00012`.
pub fn fmt_rate(v: f64) -> String {
    if v > 0.0 && v < 0.005 {
        let decimals = 1 - v.log10().floor() as i32;
        format!("{v:.*}", decimals.max(0) as usize)
    } else {
        fmt_count(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_pick_their_unit() {
        assert_eq!(fmt_duration_us(12.34), "12.3 µs");
        assert_eq!(fmt_duration_us(123.4), "123 µs");
        assert_eq!(fmt_duration_us(1234.0), "1.23 ms");
        assert_eq!(fmt_duration_us(2_500_000.0), "2.50 s");
    }

    #[test]
    fn counts_drop_needless_decimals() {
        assert_eq!(fmt_count(100.0), "100");
        assert_eq!(fmt_count(0.5), "0.50");
        assert_eq!(fmt_count(2.999), "3");
    }

    #[test]
    fn rare_events_do_not_round_to_zero() {
        assert_eq!(fmt_rate(0.0), "0");
        assert_eq!(fmt_rate(0.000_123), "0.00012");
        assert_eq!(fmt_rate(0.0049), "0.0049");
        assert_eq!(fmt_rate(0.25), "0.25");
        assert_eq!(fmt_rate(3.0), "3");
    }

    #[test]
    fn bucket_labels() {
        assert_eq!(bucket_label(0, 0), "0 B");
        assert_eq!(bucket_label(1, 1), "1 B");
        assert_eq!(bucket_label(64, 127), "64-127 B");
        assert_eq!(bucket_label(1024, 2047), "1-2 KiB");
        assert_eq!(bucket_label(1 << 20, (2 << 20) - 1), "1-2 MiB");
        assert_eq!(bucket_label(1 << 34, u64::MAX), "16.0 GiB or more");
    }
}
