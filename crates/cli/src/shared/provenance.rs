//! What a JSON report says of where it was measured: the command line, the date (UTC) and the machine
//! (cores, CPU model, memory), so that `scripts/results.py` can cite every figure it tables. The commit
//! is the caller's to give (a build does not know it).

use serde_json::{json, Value};

/// The command line this process was started with, its words joined by spaces.
pub fn command() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// Today's date in UTC, `YYYY-MM-DD`.
pub fn utc_date() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian date of day `z` since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The machine: logical cores, the CPU's model name and the memory in GiB, where Linux's `/proc` says
/// (null otherwise).
pub fn machine() -> Value {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo.lines().find_map(|l| {
        l.strip_prefix("model name")?
            .split_once(':')
            .map(|(_, v)| v.trim().to_string())
    });
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_gib = meminfo.lines().find_map(|l| {
        let kib: f64 = l
            .strip_prefix("MemTotal:")?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some((kib / (1u64 << 20) as f64 * 10.0).round() / 10.0)
    });
    json!({"cores": cores, "cpu": cpu, "memory_gib": memory_gib})
}

#[cfg(test)]
mod tests {
    use super::civil_from_days;

    #[test]
    fn days_become_the_calendar_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_785), (2026, 11, 28));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }
}
