//! Dates of the proleptic Gregorian calendar from days since 1970-01-01
//! and back (Howard Hinnant's `civil_from_days` and `days_from_civil`),
//! for the file names, timestamps and log lines Sluice writes and reads in
//! UTC: a calendar crate for three functions would be more than the rest.

/// Year, month (1 to 12) and day (1 to 31) of `days` since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Days since 1970-01-01 of a date (month 1 to 12).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let (month, day) = (i64::from(month), i64::from(day));
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `2024-01-01T00:00:05.250` for nanoseconds since the epoch, UTC, to the
/// millisecond (no zone suffix: the caller adds `Z` where its format has
/// one).
pub fn utc_millis(ns: u64) -> String {
    let secs = (ns / 1_000_000_000) as i64;
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let of_day = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        ns % 1_000_000_000 / 1_000_000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_from_the_calendar() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        // 2000 is a leap year (divisible by 400), 1900 is not.
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(days_from_civil(1900, 3, 1) - 1), (1900, 2, 28));
        assert_eq!(days_from_civil(2024, 1, 1), 19_723);
        for days in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(utc_millis(1_704_067_205_250_000_000), "2024-01-01T00:00:05.250");
    }
}
