//! Run ids and the document's times: RFC 3339 UTC with nanoseconds, written and read without a
//! date crate.

/// A new run id: time and process based, unique in practice.
pub fn new_run_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let ns = unix_ns();
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("{:016x}-{:05x}-{n:x}", ns as u64, std::process::id())
}

/// Nanoseconds since the Unix epoch, now.
pub fn unix_ns() -> i128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i128).unwrap_or(0)
}

/// Now, as RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    rfc3339_utc(unix_ns() as f64 / 1e9)
}

/// Formats seconds since the Unix epoch as RFC 3339 UTC with millisecond precision.
pub fn rfc3339_utc(unix_seconds: f64) -> String {
    let secs = unix_seconds.floor() as i64;
    let millis = ((unix_seconds - secs as f64) * 1000.0).floor() as i64;
    format!("{}.{millis:03}Z", civil(secs))
}

/// Formats nanoseconds since the Unix epoch as RFC 3339 UTC with nanosecond precision.
pub fn format_rfc3339_ns(ns: i128) -> String {
    let secs = ns.div_euclid(1_000_000_000) as i64;
    let frac = ns.rem_euclid(1_000_000_000);
    format!("{}.{frac:09}Z", civil(secs))
}

/// `YYYY-MM-DDTHH:MM:SS` of Unix seconds (Howard Hinnant's civil-from-days).
fn civil(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction]Z` (UTC) into nanoseconds since the Unix epoch.
pub fn parse_rfc3339_ns(s: &str) -> Option<i128> {
    let s = s.trim().strip_suffix('Z').or_else(|| s.trim().strip_suffix("+00:00"))?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.splitn(3, ':').map(|x| x.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    if !frac.chars().all(|c| c.is_ascii_digit()) || frac.len() > 9 {
        return None;
    }
    let nanos: i128 = if frac.is_empty() { 0 } else { format!("{frac:0<9}").parse().ok()? };
    // days-from-civil
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + hh * 3600 + mm * 60 + ss) as i128 * 1_000_000_000 + nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        assert_eq!(rfc3339_utc(0.0), "1970-01-01T00:00:00.000Z");
        // 2026-12-02T11:55:00.250Z
        assert_eq!(rfc3339_utc(1_796_212_500.25), "2026-12-02T11:55:00.250Z");
        assert_eq!(rfc3339_utc(951_782_400.0), "2000-02-29T00:00:00.000Z");
        let ns = 1_796_212_500_250_000_123i128;
        assert_eq!(format_rfc3339_ns(ns), "2026-12-02T11:55:00.250000123Z");
        assert_eq!(parse_rfc3339_ns("2026-12-02T11:55:00.250000123Z"), Some(ns));
        assert_eq!(parse_rfc3339_ns("2000-02-29T00:00:00Z"), Some(951_782_400_000_000_000));
        assert_eq!(parse_rfc3339_ns("2000-02-29T00:00:00.5Z"), Some(951_782_400_500_000_000));
        assert_eq!(parse_rfc3339_ns("2000-13-01T00:00:00Z"), None);
        assert_eq!(parse_rfc3339_ns("yesterday"), None);
    }

    #[test]
    fn run_ids_are_unique() {
        let a = new_run_id();
        let b = new_run_id();
        assert_ne!(a, b);
    }
}
