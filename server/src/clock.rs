//! Wall-clock time in Unix seconds, the unit of every stored timestamp.

use std::time::{SystemTime, UNIX_EPOCH};

pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS` (UTC, the proleptic Gregorian
/// calendar), as people read stored times.
pub fn utc(secs: u64) -> String {
    // Days to a civil date, with years starting in March so that a leap day
    // falls at a year's end.
    let z = (secs / 86_400) as i64 + 719_468;
    let (era, doe) = (z.div_euclid(146_097), z.rem_euclid(146_097));
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let s = secs % 86_400;
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
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
    }
}
