//! Parsing of the sizes, rates and durations given on the command line.

use std::time::Duration;

/// Parses a byte count: `65536`, `64K`, `64KiB`, `1M`, `1MiB`, `1G`; `kB`/`MB`/`GB` are decimal.
/// Binary multiples for the bare letters follow curl's `--limit-rate`.
pub fn parse_size(text: &str) -> Option<u64> {
    let (value, unit) = number_and_unit(text)?;
    let mult: f64 = match unit.trim() {
        "" | "B" | "b" => 1.0,
        "k" | "K" | "KiB" | "kiB" => 1024.0,
        "kB" | "KB" => 1e3,
        "m" | "M" | "MiB" => 1024.0 * 1024.0,
        "MB" => 1e6,
        "g" | "G" | "GiB" => 1024.0 * 1024.0 * 1024.0,
        "GB" => 1e9,
        _ => return None,
    };
    let bytes = value * mult;
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
        return None;
    }
    Some(bytes as u64)
}

/// Splits `12.5ms` into the number and the unit that follows it.
fn number_and_unit(text: &str) -> Option<(f64, &str)> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    Some((num.parse().ok()?, unit))
}

/// Parses a bandwidth in bytes per second: a size with an optional `/s` (`100KiB/s`, `1M`).
pub fn parse_bandwidth(text: &str) -> Option<u64> {
    let t = text.trim();
    parse_size(t.strip_suffix("/s").unwrap_or(t))
}

/// Parses a request rate: `500`, `500/s`, `2.5`.
pub fn parse_rate(text: &str) -> Option<f64> {
    let t = text.trim();
    let rate: f64 = t.strip_suffix("/s").unwrap_or(t).trim().parse().ok()?;
    (rate.is_finite() && rate > 0.0).then_some(rate)
}

/// Parses a duration: `30s`, `500ms`, `2m`, `1h`, or a plain number of seconds.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let (value, unit) = number_and_unit(text)?;
    let secs = match unit {
        "" | "s" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        _ => return None,
    };
    if !secs.is_finite() || secs <= 0.0 || secs > 1e9 {
        return None;
    }
    Some(Duration::from_secs_f64(secs))
}

/// Formats a byte rate for reports: `100 KiB/s`, `1.5 MiB/s`.
pub fn format_bandwidth(bytes_per_s: u64) -> String {
    format!("{}/s", format_size(bytes_per_s))
}

pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (name, size) in UNITS {
        if bytes >= size {
            let v = bytes as f64 / size as f64;
            return if (bytes / size) * size == bytes {
                format!("{} {name}", bytes / size)
            } else {
                format!("{v:.1} {name}")
            };
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("65536"), Some(65536));
        assert_eq!(parse_size("64K"), Some(65536));
        assert_eq!(parse_size("64KiB"), Some(65536));
        assert_eq!(parse_size("64kB"), Some(64000));
        assert_eq!(parse_size("1.5M"), Some(1572864));
        assert_eq!(parse_size("1GB"), Some(1_000_000_000));
        assert_eq!(parse_size("0"), None);
        assert_eq!(parse_size("ten"), None);
        assert_eq!(parse_size("10X"), None);
    }

    #[test]
    fn rates_and_durations() {
        assert_eq!(parse_bandwidth("100KiB/s"), Some(102400));
        assert_eq!(parse_bandwidth("100K"), Some(102400));
        assert_eq!(parse_rate("500/s"), Some(500.0));
        assert_eq!(parse_rate("0"), None);
        assert_eq!(parse_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(format_bandwidth(102400), "100 KiB/s");
        assert_eq!(format_size(1536), "1.5 KiB");
        assert_eq!(format_size(100), "100 B");
    }
}
