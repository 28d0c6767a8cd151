//! Wall-clock time in Unix seconds, the unit of every stored timestamp.

use std::time::{SystemTime, UNIX_EPOCH};

pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS` (UTC, the proleptic Gregorian
/// calendar, by jiff as every written time), as people read stored times.
pub fn utc(secs: u64) -> String {
    world_protocol::a2a::utc_datetime(secs).strftime("%Y-%m-%d %H:%M:%S").to_string()
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn utc_spells_a_civil_date_across_leap_days_and_centuries() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(utc(1_796_418_462), "2026-12-04 21:07:42");
        assert_eq!(utc(4_102_444_799), "2099-12-31 23:59:59");
        assert_eq!(utc(4_107_542_399), "2100-02-28 23:59:59");
        assert_eq!(utc(u64::MAX), "9999-12-31 23:59:59", "past a four-digit year, the last one");
    }
}
