//! UTC calendar time of a millisecond timestamp, for what people read (no time zone data).

/// A moment in UTC, split into its calendar fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcTime {
    /// The year.
    pub year: i64,
    /// 1–12.
    pub month: i64,
    /// 1–31.
    pub day: i64,
    /// 0–23.
    pub hour: i64,
    /// 0–59.
    pub minute: i64,
    /// 0–59.
    pub second: i64,
    /// 0–999.
    pub millisecond: i64,
}

impl UtcTime {
    /// The UTC time `millis` milliseconds after the Unix epoch (before it, when negative).
    pub fn of_millis(millis: i64) -> UtcTime {
        let (days, of_day) = (millis.div_euclid(86_400_000), millis.rem_euclid(86_400_000));
        // Civil from days (Howard Hinnant's algorithm).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let day_of_era = z.rem_euclid(146_097);
        let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
        let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
        let month_index = (5 * day_of_year + 2) / 153;
        let day = day_of_year - (153 * month_index + 2) / 5 + 1;
        let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
        UtcTime {
            year: year_of_era + era * 400 + i64::from(month <= 2),
            month,
            day,
            hour: of_day / 3_600_000,
            minute: of_day / 60_000 % 60,
            second: of_day / 1000 % 60,
            millisecond: of_day % 1000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timestamps fall on their UTC calendar dates, leap days and times before 1970 included.
    #[test]
    fn timestamps_are_civil_dates() {
        let at = |millis| {
            let t = UtcTime::of_millis(millis);
            (t.year, t.month, t.day, t.hour, t.minute, t.second, t.millisecond)
        };
        assert_eq!(at(0), (1970, 1, 1, 0, 0, 0, 0));
        assert_eq!(at(951_782_400_000), (2000, 2, 29, 0, 0, 0, 0));
        assert_eq!(at(1_796_180_706_789), (2026, 12, 2, 3, 5, 6, 789));
        assert_eq!(at(-1), (1969, 12, 31, 23, 59, 59, 999));
    }
}
