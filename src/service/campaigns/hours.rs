//! Calling hours and phone numbers: when a lead's daily window is open in its time zone,
//! and the E.164 form of a lead's number. Pure arithmetic, shared by the resource and the
//! dialing.

use chrono::{DateTime, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;

use crate::db::campaigns::Campaign;

/// `HH:MM`, 24-hour.
pub fn parse_hm(s: &str) -> Option<NaiveTime> {
    if s.len() != 5 {
        return None;
    }
    NaiveTime::parse_from_str(s, "%H:%M").ok()
}

/// Whether a local time of day lies in the window `[start, end)`; a window whose end is
/// before its start runs over midnight.
fn inside(t: NaiveTime, start: NaiveTime, end: NaiveTime) -> bool {
    if start <= end {
        start <= t && t < end
    } else {
        t >= start || t < end
    }
}

/// The first instant at or after `now` inside the daily window in `tz`.
pub fn next_open(now: DateTime<Utc>, tz: Tz, start: NaiveTime, end: NaiveTime) -> DateTime<Utc> {
    let local = now.with_timezone(&tz);
    if inside(local.time(), start, end) {
        return now;
    }
    let mut day = local.date_naive();
    if local.time() >= start {
        day = day.succ_opt().unwrap_or(day);
    }
    let naive = day.and_time(start);
    // A start inside a daylight-saving gap opens at the first valid instant after it.
    tz.from_local_datetime(&naive)
        .earliest()
        .or_else(|| {
            tz.from_local_datetime(&(naive + chrono::Duration::hours(1)))
                .earliest()
        })
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or(now + chrono::Duration::hours(1))
}

/// Whether a campaign's window is open now for a lead in `tz`.
pub(super) fn open_now(k: &Campaign, tz: &str, now: DateTime<Utc>) -> bool {
    let (Some(s), Some(e)) = (parse_hm(&k.hours_start), parse_hm(&k.hours_end)) else {
        return true;
    };
    let tz: Tz = tz.parse().unwrap_or(chrono_tz::UTC);
    next_open(now, tz, s, e) <= now
}

/// Digits of a phone number with its `+`, without spaces, dashes, dots or brackets; `None`
/// when what is left is not E.164.
pub fn normalize_phone(p: &str) -> Option<String> {
    let s: String = p
        .chars()
        .filter(|c| !matches!(c, ' ' | '-' | '(' | ')' | '.'))
        .collect();
    let digits = s.strip_prefix('+')?;
    ((7..=15).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0'))
    .then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows() {
        let t = |h, m| NaiveTime::from_hms_opt(h, m, 0).unwrap();
        assert!(inside(t(9, 0), t(9, 0), t(17, 0)));
        assert!(!inside(t(17, 0), t(9, 0), t(17, 0)));
        assert!(inside(t(23, 0), t(22, 0), t(6, 0)));
        assert!(inside(t(5, 59), t(22, 0), t(6, 0)));
        assert!(!inside(t(12, 0), t(22, 0), t(6, 0)));
        let now = Utc.with_ymd_and_hms(2026, 11, 23, 12, 30, 0).unwrap();
        // Inside: now. Before today's start: today. After: tomorrow.
        assert_eq!(next_open(now, chrono_tz::UTC, t(9, 0), t(17, 0)), now);
        assert_eq!(
            next_open(now, chrono_tz::UTC, t(14, 0), t(17, 0)),
            Utc.with_ymd_and_hms(2026, 11, 23, 14, 0, 0).unwrap()
        );
        assert_eq!(
            next_open(now, chrono_tz::UTC, t(8, 0), t(9, 0)),
            Utc.with_ymd_and_hms(2026, 11, 24, 8, 0, 0).unwrap()
        );
        // New York is UTC-5 in November: 09:00 there is 14:00 UTC.
        assert_eq!(
            next_open(now, chrono_tz::America::New_York, t(9, 0), t(17, 0)),
            Utc.with_ymd_and_hms(2026, 11, 23, 14, 0, 0).unwrap()
        );
    }

    #[test]
    fn phones() {
        assert_eq!(
            normalize_phone("+1 (415) 555-0123").as_deref(),
            Some("+14155550123")
        );
        assert_eq!(normalize_phone("4155550123"), None);
        assert_eq!(normalize_phone("+0123456789"), None);
    }
}
