//! Microsecond UTC timestamps: the one time type every stage speaks.
//!
//! Both backends and a later distributed engine agree on microseconds since the Unix
//! epoch in UTC, and the far-future sentinel `9999-12-31T00:00:00Z` fits in it (it would
//! overflow nanosecond types). SQLite stores the fixed-width text form so that text order
//! is time order.

use chrono::{DateTime, LocalResult, NaiveDate, NaiveDateTime, Offset, TimeZone, Utc};
use std::fmt;

/// A point in time, in microseconds since 1970-01-01T00:00:00Z.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Micros(pub i64);

/// The `valid_to` of an open version: never NULL, so range predicates stay simple.
pub const FAR_FUTURE: Micros = Micros(253_402_214_400_000_000);

/// The earliest change time dimlog accepts, `0001-01-01T00:00:00Z`: the fixed-width text
/// has four year digits and no sign, and PostgreSQL's `BC` years have no spelling in it.
pub const FIRST_INSTANT: Micros = Micros(-62_135_596_800_000_000);

/// The fixed-width text form: `2026-10-05T09:30:00.000000Z`.
pub const TEXT_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.6fZ";

impl Micros {
    /// Converts from chrono, truncating below a microsecond.
    pub fn from_utc(t: DateTime<Utc>) -> Micros {
        Micros(t.timestamp_micros())
    }

    /// Converts to chrono for binding to PostgreSQL.
    pub fn to_utc(self) -> DateTime<Utc> {
        DateTime::from_timestamp_micros(self.0).expect("micros within chrono range")
    }

    /// The fixed-width text that SQLite stores and everything prints. Written digit by
    /// digit: a first load formats a million of these, and chrono's `format` parses
    /// [`TEXT_FORMAT`] again each time (5% of a SQLite first load). Years outside
    /// 0000-9999 (never stored: see [`FIRST_INSTANT`]) keep chrono's spelling.
    pub fn to_text(self) -> String {
        let mut out = String::with_capacity(27);
        self.push_text(&mut out);
        out
    }

    /// [`Micros::to_text`] appended to `out` (a buffer reused from row to row).
    pub fn push_text(self, out: &mut String) {
        use chrono::{Datelike, Timelike};
        use std::fmt::Write;
        let t = self.to_utc();
        let year = t.year();
        if !(0..=9999).contains(&year) {
            let _ = write!(out, "{}", t.format(TEXT_FORMAT));
            return;
        }
        let fields = [
            (year as u32, 4, '-'),
            (t.month(), 2, '-'),
            (t.day(), 2, 'T'),
            (t.hour(), 2, ':'),
            (t.minute(), 2, ':'),
            (t.second(), 2, '.'),
            (t.nanosecond() / 1000, 6, 'Z'),
        ];
        for (value, width, after) in fields {
            let mut digits = [b'0'; 6];
            let mut rest = value;
            for digit in digits[..width].iter_mut().rev() {
                *digit = b'0' + (rest % 10) as u8;
                rest /= 10;
            }
            out.push_str(std::str::from_utf8(&digits[..width]).expect("ASCII digits"));
            out.push(after);
        }
    }

    /// Adds a (possibly negative) number of microseconds, saturating.
    pub fn plus(self, micros: i64) -> Micros {
        Micros(self.0.saturating_add(micros))
    }

    /// Reads the two UTC forms dimlog meets by the million without a general parser:
    /// its own fixed-width text (`2026-10-05T09:30:00.000000Z`, [`Micros::to_text`]) and
    /// PostgreSQL's timestamptz output in a UTC session (`2026-10-05 09:30:00.5+00`).
    /// `None` for anything else (then use [`Micros::parse`]). Both forms are also valid
    /// PostgreSQL timestamptz input, meaning the same instant.
    pub fn parse_fixed(b: &[u8]) -> Option<Micros> {
        if b.len() < 20
            || b[4] != b'-'
            || b[7] != b'-'
            || !matches!(b[10], b'T' | b' ')
            || b[13] != b':'
            || b[16] != b':'
        {
            return None;
        }
        let num = |r: &[u8]| -> Option<u32> {
            r.iter()
                .try_fold(0u32, |n, &d| d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0')))
        };
        let rest = &b[19..];
        let (frac, zone) = match rest.first() {
            Some(b'.') => {
                let digits = rest[1..].iter().take_while(|d| d.is_ascii_digit()).count();
                if !(1..=6).contains(&digits) {
                    return None;
                }
                (
                    num(&rest[1..1 + digits])? * 10u32.pow(6 - digits as u32),
                    &rest[1 + digits..],
                )
            }
            _ => (0, rest),
        };
        if zone != b"Z" && zone != b"+00" {
            return None;
        }
        let date = NaiveDate::from_ymd_opt(num(&b[0..4])? as i32, num(&b[5..7])?, num(&b[8..10])?)?;
        let t = date.and_hms_micro_opt(num(&b[11..13])?, num(&b[14..16])?, num(&b[17..19])?, frac)?;
        Some(Micros(t.and_utc().timestamp_micros()))
    }

    /// Parses a change-column or command-line time: RFC 3339 in any letter case, or
    /// `YYYY-MM-DD[ T]HH:MM[:SS[.f]]` followed by `Z`, `UTC`, `GMT` or an offset written
    /// `+hh`, `+hhmm` or `+hh:mm` (with or without a space before it). A value without a zone
    /// (or a bare date) is a local time in `zone` when given ([`Micros::from_local`]), else
    /// refused. Digits after the sixth fractional one are cut: dimlog keeps microseconds.
    pub fn parse(text: &str, zone: Option<&chrono_tz::Tz>) -> Result<Micros, TimestampError> {
        let s = text.trim();
        if let Some(t) = Micros::parse_fixed(s.as_bytes()) {
            return Ok(t);
        }
        let unparsable = || TimestampError::Unparsable(s.to_string());
        let (local, offset) = split_zone(s).ok_or_else(unparsable)?;
        let (naive, date_only) = parse_naive(local).ok_or_else(unparsable)?;
        match (offset, zone) {
            (Some(seconds), _) => {
                let offset = chrono::FixedOffset::east_opt(seconds).ok_or_else(unparsable)?;
                let t = naive.and_local_timezone(offset).single().ok_or_else(unparsable)?;
                Ok(Micros(t.timestamp_micros()))
            }
            (None, Some(z)) if date_only => Ok(Micros::start_of_day(naive.date(), z)),
            (None, Some(z)) => Micros::from_local(naive, z),
            (None, None) => Err(TimestampError::NoZone(s.to_string())),
        }
    }

    /// A change-column value's instant, checked to be one a version can start at: from
    /// year 1 and before the far-future sentinel that closes open versions (a row stamped
    /// at or after it could never be current). The same bounds on both backends.
    pub fn parse_change(text: &str, zone: Option<&chrono_tz::Tz>) -> Result<Micros, TimestampError> {
        match Micros::parse(text, zone) {
            Ok(t) => t.check_change(text),
            // PostgreSQL's spellings of times no version can start at: its infinities and
            // the years before year 1 (`0044-03-15 12:00:00 BC`).
            Err(TimestampError::Unparsable(s)) if beyond_the_years(&s, zone) => Err(TimestampError::OutOfRange(s)),
            Err(e) => Err(e),
        }
    }

    #[doc(hidden)]
    /// [`Micros::parse_change`]'s bounds, for a value read another way (`text` names it).
    pub fn check_change(self, text: &str) -> Result<Micros, TimestampError> {
        if self >= FAR_FUTURE || self < FIRST_INSTANT {
            return Err(TimestampError::OutOfRange(text.trim().to_string()));
        }
        Ok(self)
    }

    /// The one rule for a local time without a zone, on every backend: the instant it
    /// names in `zone`. A time the clocks show twice (when they are set back) is its
    /// **later** instant, so a row is never stamped earlier than it was written and no
    /// window that has passed it can miss it; a time the clocks skip (when they are set
    /// forward) names no instant and is refused. The zone rules are chrono-tz's copy of
    /// the IANA database, not the database server's, so both backends agree.
    pub fn from_local(naive: NaiveDateTime, zone: &chrono_tz::Tz) -> Result<Micros, TimestampError> {
        match zone.from_local_datetime(&naive) {
            LocalResult::Single(t) => Ok(Micros(t.timestamp_micros())),
            LocalResult::Ambiguous(a, b) => Ok(Micros(a.timestamp_micros().max(b.timestamp_micros()))),
            LocalResult::None => Err(TimestampError::NonexistentLocalTime {
                value: naive.format("%Y-%m-%d %H:%M:%S%.f").to_string(),
                zone: zone.name().to_string(),
            }),
        }
    }

    /// A date is the first instant of that day in `zone`: local midnight, or the end of
    /// the gap when the clocks skip midnight.
    pub fn start_of_day(date: NaiveDate, zone: &chrono_tz::Tz) -> Micros {
        let midnight = date.and_hms_opt(0, 0, 0).expect("midnight exists");
        (0..=24 * 60)
            .find_map(|minute| {
                let local = midnight + chrono::Duration::minutes(minute);
                zone.from_local_datetime(&local).earliest()
            })
            .map(|t| Micros(t.timestamp_micros()))
            .unwrap_or_else(|| Micros(midnight.and_utc().timestamp_micros()))
    }

    #[doc(hidden)]
    /// The local times (of `zone`, as written in a column without one) between which
    /// every value the rule of [`Micros::from_local`] places in `[low, high]` lies: each
    /// bound moved by the zone's most extreme offset around it, so a read bounded by them
    /// misses no row, and the exact window is applied to the converted instants.
    pub fn local_bounds(
        low: Option<Micros>,
        high: Micros,
        zone: &chrono_tz::Tz,
    ) -> (Option<NaiveDateTime>, NaiveDateTime) {
        // Offsets in force over two days after low / before high, every quarter hour (no
        // zone keeps an offset for less): a local value's offset differs from the bound's
        // by less than a day, so these cover every value.
        let offsets = |from: Micros| {
            (0..=2 * 24 * 4).map(move |quarter| {
                let t = from.plus(quarter * 900_000_000).to_utc();
                i64::from(zone.offset_from_utc_datetime(&t.naive_utc()).fix().local_minus_utc())
            })
        };
        let low = low.map(|l| {
            let min = offsets(l).min().unwrap_or(0);
            l.plus(min * 1_000_000).to_utc().naive_utc()
        });
        let max = offsets(high.plus(-2 * 24 * 60 * 60_000_000)).max().unwrap_or(0);
        (low, high.plus(max * 1_000_000).to_utc().naive_utc())
    }
}

/// Splits a time's text into its local part and its offset in seconds, if it has one:
/// `Z`, `UTC`, `GMT`, `+hh`, `+hhmm`, `+hh:mm`, optionally after a space. `None` when what
/// follows the time is not a zone.
fn split_zone(s: &str) -> Option<(&str, Option<i32>)> {
    let b = s.as_bytes();
    // The zone starts after the time of day, which starts at index 11 (`YYYY-MM-DDT`).
    if b.len() <= 10 {
        return Some((s, None));
    }
    let from = 11.min(b.len());
    let Some(at) = b[from..]
        .iter()
        .position(|c| c.is_ascii_alphabetic() || matches!(c, b'+' | b'-' | b' '))
        .map(|i| i + from)
    else {
        return Some((s, None));
    };
    let local = s[..at].trim_end();
    let zone = s[at..].trim_start();
    let upper = zone.to_ascii_uppercase();
    if matches!(upper.as_str(), "Z" | "UTC" | "GMT") {
        return Some((local, Some(0)));
    }
    let (sign, digits) = match zone.as_bytes().first()? {
        b'+' => (1, &zone[1..]),
        b'-' => (-1, &zone[1..]),
        _ => return None,
    };
    let digits: String = match digits.len() {
        2 | 4 if digits.bytes().all(|d| d.is_ascii_digit()) => digits.to_string(),
        5 if digits.as_bytes()[2] == b':' => digits.replace(':', ""),
        _ => return None,
    };
    if !digits.bytes().all(|d| d.is_ascii_digit()) {
        return None;
    }
    let hours: i32 = digits[..2].parse().ok()?;
    let minutes: i32 = digits
        .get(2..)
        .filter(|m| !m.is_empty())
        .map_or(Some(0), |m| m.parse().ok())?;
    if hours > 23 || minutes > 59 {
        return None;
    }
    Some((local, Some(sign * (hours * 3600 + minutes * 60))))
}

/// Reads `YYYY-MM-DD`, or that followed by `T`/`t`/space and `HH:MM[:SS[.f]]`; true when it
/// was a date alone.
fn parse_naive(s: &str) -> Option<(NaiveDateTime, bool)> {
    if s.len() == 10 {
        let d = NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
        return Some((d.and_hms_opt(0, 0, 0)?, true));
    }
    if s.len() < 16 || !matches!(s.as_bytes()[10], b'T' | b't' | b' ') {
        return None;
    }
    let (date, time) = (&s[..10], &s[11..]);
    if !date.bytes().all(|c| c.is_ascii_digit() || c == b'-') {
        return None;
    }
    let date = NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?;
    // Cut fractional digits after the sixth: chrono reads at most nine, dimlog keeps six.
    let time = match time.find('.') {
        Some(dot) if time.len() - dot - 1 > 6 => {
            let digits = &time[dot + 1..];
            if !digits.bytes().all(|d| d.is_ascii_digit()) {
                return None;
            }
            &time[..dot + 7]
        }
        _ => time,
    };
    let time = ["%H:%M:%S%.f", "%H:%M"]
        .iter()
        .find_map(|f| chrono::NaiveTime::parse_from_str(time, f).ok())?;
    Some((date.and_time(time), false))
}

/// Serialised as the fixed-width text, so JSON output reads like the tables.
impl serde::Serialize for Micros {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_text())
    }
}

impl fmt::Display for Micros {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

/// Whether `text` is a time PostgreSQL can hold and dimlog cannot: `infinity`,
/// `-infinity`, or a time before year 1 (suffixed ` BC`).
fn beyond_the_years(text: &str, zone: Option<&chrono_tz::Tz>) -> bool {
    let lower = text.trim().to_ascii_lowercase();
    if matches!(lower.as_str(), "infinity" | "-infinity") {
        return true;
    }
    // Its zone does not matter: any instant before year 1 is out of range.
    let zone = zone.unwrap_or(&chrono_tz::UTC);
    lower
        .strip_suffix(" bc")
        .is_some_and(|before| Micros::parse(before, Some(zone)).is_ok())
}

/// Why a timestamp text could not become a [`Micros`].
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum TimestampError {
    /// The text has no offset and no zone was configured.
    #[error("timestamp {0:?} has no time zone")]
    NoZone(String),
    /// The local time falls in the gap the clocks skip when they are set forward.
    #[error("local time {value:?} does not exist in {zone} (the clocks skip it when they are set forward), so it names no instant")]
    NonexistentLocalTime {
        /// The local time as read.
        value: String,
        /// The configured zone.
        zone: String,
    },
    /// A time outside the years dimlog stores (1 to 9999, before the far-future sentinel).
    #[error("{0:?} is outside the times a version can start at (from 0001-01-01 to before 9999-12-31T00:00:00Z, the end of open versions)")]
    OutOfRange(String),
    /// Not a timestamp at all.
    #[error(
        "cannot read {0:?} as a timestamp (expected a date, a time and a zone: RFC 3339 such as 2026-10-05T09:30:00Z, \
         or 2026-10-05 09:30[:00[.123456]] followed by Z, UTC, GMT or an offset such as +02:00, +0200 or +02, or by nothing when source.timezone is set)"
    )]
    Unparsable(String),
}

/// A duration as a person reads it: its two largest units (`1157d 16h`, `3h 5m`, `42s`).
pub fn seconds_for_people(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    let (d, h, m, sec) = (s / 86_400, s % 86_400 / 3_600, s % 3_600 / 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{sec}s"),
        (0, 0, _) => format!("{m}m {sec}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// [`seconds_for_people`] of a [`std::time::Duration`].
pub fn for_people(d: std::time::Duration) -> String {
    seconds_for_people(d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The hand-written digits spell what chrono's `format` spells, over every instant
        /// chrono holds (years outside 0000-9999 take chrono's own path).
        #[test]
        fn to_text_spells_what_chrono_spells(
            micros in proptest::prop_oneof![
                FIRST_INSTANT.0..=FAR_FUTURE.0,
                -1_000_000_000_000_000_i64..=1_000_000_000_000_000_i64,
                (-62_167_219_200_000_000_i64 - 5_000_000)..=(-62_167_219_200_000_000_i64 + 5_000_000),
                (FAR_FUTURE.0 + 86_400_000_000 * 364)..=(FAR_FUTURE.0 + 86_400_000_000 * 366),
                -1_000_000_i64..=1_000_000_i64,
            ]
        ) {
            let t = Micros(micros);
            proptest::prop_assert_eq!(t.to_text(), t.to_utc().format(TEXT_FORMAT).to_string());
        }
    }

    #[test]
    fn sentinel_is_far_future_text() {
        assert_eq!(FAR_FUTURE.to_text(), "9999-12-31T00:00:00.000000Z");
    }

    #[test]
    fn parses_offsets_and_refuses_naive_without_zone() {
        let a = Micros::parse("2026-10-05T11:30:00+02:00", None).unwrap();
        let b = Micros::parse("2026-10-05 09:30:00+00", None).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.to_text(), "2026-10-05T09:30:00.000000Z");
        assert!(matches!(
            Micros::parse("2026-10-05 09:30:00", None),
            Err(TimestampError::NoZone(_))
        ));
        let z: chrono_tz::Tz = "Europe/Paris".parse().unwrap();
        assert_eq!(Micros::parse("2026-10-05 11:30:00", Some(&z)).unwrap(), a);
    }

    #[test]
    fn fixed_form_reads_like_the_general_parser() {
        for text in [
            "2026-10-05T09:30:00.000000Z",
            "1970-01-01T00:00:00.000001Z",
            "1969-12-31T23:59:59.999999Z",
            "2024-02-29T12:00:00.500000Z",
            "9999-12-31T00:00:00.000000Z",
            "2026-10-05 09:30:00+00",
            "2026-10-05 09:30:00.5+00",
            "2026-10-05 09:30:00.123456+00",
            "2026-10-05T09:30:00Z",
        ] {
            assert_eq!(
                Micros::parse_fixed(text.as_bytes()),
                Micros::parse(text, None).ok(),
                "{text}"
            );
        }
        for text in [
            "2026-10-05 09:30:00+02",
            "2026-10-05 09:30:00",
            "2026-10-05 09:30:00.1234567+00",
            "2026-10-05 09:30:00.+00",
            "2026-02-30T00:00:00.000000Z",
            "2026-10-05T09:30:00.00000xZ",
            "2026-10-05T24:00:00.000000Z",
        ] {
            assert_eq!(Micros::parse_fixed(text.as_bytes()), None, "{text}");
        }
    }

    fn tz(name: &str) -> chrono_tz::Tz {
        name.parse().unwrap()
    }

    fn utc(text: &str) -> String {
        Micros::parse(text, None).unwrap().to_text()
    }

    #[test]
    fn every_common_form_with_a_zone_reads_as_its_instant() {
        let want = "2026-05-01T08:00:01.000000Z";
        for text in [
            "2026-05-01T08:00:01Z",
            "2026-05-01t08:00:01z",
            "2026-05-01T10:00:01+02:00",
            "2026-05-01T10:00:01+0200",
            "2026-05-01T10:00:01+02",
            "2026-05-01 10:00:01 +02:00",
            "2026-05-01 08:00:01 UTC",
            "2026-05-01 08:00:01 utc",
            "2026-05-01 08:00:01 GMT",
            "2026-05-01 08:00:01Z",
            "2026-05-01 03:00:01-05:00",
            "2026-05-01 03:00:01-0500",
            " 2026-05-01T08:00:01Z ",
        ] {
            assert_eq!(utc(text), want, "{text}");
        }
        assert_eq!(utc("2026-05-01T08:00Z"), "2026-05-01T08:00:00.000000Z");
        assert_eq!(utc("2026-05-01T08:00:01.123456789Z"), "2026-05-01T08:00:01.123456Z");
        for text in [
            "garbage",
            "2026-05-01 08:00:01 CEST",
            "2026-05-01 08:00:01 +25:00",
            "2026-05-01 08:00:01 +2",
            "2026-05-01 08:00:01 PM",
            "2026-02-30T00:00:00Z",
            "2026-05-01T08:00:01.12a4567Z",
            "01/05/2026 08:00",
            "1746086401",
        ] {
            assert!(
                matches!(
                    Micros::parse(text, Some(&tz("UTC"))),
                    Err(TimestampError::Unparsable(_))
                ),
                "{text}"
            );
        }
    }

    #[test]
    fn a_local_time_shown_twice_is_its_later_instant_and_a_skipped_one_none() {
        let ams = tz("Europe/Amsterdam");
        let at = |s: &str| Micros::parse(s, Some(&ams)).map(|t| t.to_text());
        // Clocks set back at 03:00 CEST (01:00Z): 02:30 happens at 00:30Z and 01:30Z.
        assert_eq!(at("2026-10-25 02:30:00").unwrap(), "2026-10-25T01:30:00.000000Z");
        assert_eq!(at("2026-10-25 01:59:59").unwrap(), "2026-10-24T23:59:59.000000Z");
        assert_eq!(at("2026-10-25 03:00:00").unwrap(), "2026-10-25T02:00:00.000000Z");
        // Clocks set forward at 02:00 CET (01:00Z): 02:00–02:59 never happen.
        assert!(matches!(
            at("2026-03-29 02:30:00"),
            Err(TimestampError::NonexistentLocalTime { .. })
        ));
        assert_eq!(at("2026-03-29 03:30:00").unwrap(), "2026-03-29T01:30:00.000000Z");
        // The examples of docs/concepts/time-zones.md.
        for (zone, local, want) in [
            (
                "America/New_York",
                "2026-11-01 01:30",
                Some("2026-11-01T06:30:00.000000Z"),
            ),
            ("America/New_York", "2026-03-08 02:30", None),
            (
                "Australia/Lord_Howe",
                "2026-04-05 01:45",
                Some("2026-04-04T15:15:00.000000Z"),
            ),
            ("Australia/Lord_Howe", "2026-10-04 02:15", None),
        ] {
            let got = Micros::parse(local, Some(&tz(zone))).ok().map(|t| t.to_text());
            assert_eq!(got.as_deref(), want, "{zone} {local}");
        }
        // A date is its day's first instant there.
        assert_eq!(at("2026-03-29").unwrap(), "2026-03-28T23:00:00.000000Z");
        let sao = tz("America/Sao_Paulo");
        // 2018-11-04: clocks jumped from 00:00 to 01:00, so the day began at 01:00 local.
        assert_eq!(
            Micros::parse("2018-11-04", Some(&sao)).unwrap().to_text(),
            "2018-11-04T03:00:00.000000Z"
        );
    }

    #[test]
    fn the_rule_orders_local_times_like_their_instants() {
        // What lets a read bounded in local time find every row of an instant window.
        for name in ["Europe/Amsterdam", "America/New_York", "Australia/Lord_Howe"] {
            let zone = tz(name);
            let mut last: Option<Micros> = None;
            let start = NaiveDate::from_ymd_opt(2026, 1, 1)
                .unwrap()
                .and_hms_opt(0, 0, 0)
                .unwrap();
            for step in 0..(365 * 24 * 6) {
                let local = start + chrono::Duration::minutes(10 * step);
                if let Ok(t) = Micros::from_local(local, &zone) {
                    assert!(last.is_none_or(|l| l < t), "{name} {local}");
                    last = Some(t);
                }
            }
        }
    }

    #[test]
    fn local_bounds_hold_every_value_the_rule_places_in_the_window() {
        for name in ["Europe/Amsterdam", "America/New_York", "Australia/Lord_Howe", "UTC"] {
            let zone = tz(name);
            let start = Micros::parse("2026-01-01T00:00:00Z", None).unwrap();
            // Windows an hour long every 10 minutes through the year; values every 5.
            for step in (0..(365 * 24 * 6)).step_by(29) {
                let low = start.plus(step * 600_000_000);
                let high = low.plus(3_600_000_000);
                let (llow, lhigh) = Micros::local_bounds(Some(low), high, &zone);
                let llow = llow.unwrap();
                let base = low.to_utc().naive_utc() - chrono::Duration::hours(30);
                for m in 0..(62 * 12) {
                    let local = base + chrono::Duration::minutes(5 * m);
                    if let Ok(t) = Micros::from_local(local, &zone) {
                        if t >= low && t <= high {
                            assert!(local >= llow && local <= lhigh, "{name} {local} [{low}, {high}]");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn change_times_lie_between_year_one_and_the_sentinel() {
        assert_eq!(FIRST_INSTANT.to_text(), "0001-01-01T00:00:00.000000Z");
        for ok in ["0001-01-01T00:00:00Z", "9999-12-30T23:59:59.999999Z"] {
            assert!(Micros::parse_change(ok, None).is_ok(), "{ok}");
        }
        for bad in ["9999-12-31T00:00:00Z", "9999-12-31T05:00:00Z", "0000-12-31T23:59:59Z"] {
            assert!(
                matches!(Micros::parse_change(bad, None), Err(TimestampError::OutOfRange(_))),
                "{bad}"
            );
        }
        let ny = tz("America/New_York");
        assert!(matches!(
            Micros::parse_change("9999-12-31", Some(&ny)),
            Err(TimestampError::OutOfRange(_))
        ));
        // PostgreSQL's spellings of times before year 1, and its infinities.
        for bad in [
            "0044-03-15 12:00:00+00 BC",
            "0001-12-31 23:59:59.5+00 BC",
            "0044-03-15 BC",
            "infinity",
            "-Infinity",
        ] {
            assert!(
                matches!(Micros::parse_change(bad, Some(&ny)), Err(TimestampError::OutOfRange(_))),
                "{bad}"
            );
        }
        for unreadable in ["BC", "yesterday BC", "2026-02-30 BC"] {
            assert!(
                matches!(
                    Micros::parse_change(unreadable, None),
                    Err(TimestampError::Unparsable(_))
                ),
                "{unreadable}"
            );
        }
    }

    #[test]
    fn text_form_sorts_like_time() {
        let a = Micros::parse("2026-10-05T09:30:00.000001Z", None).unwrap();
        let b = Micros::parse("2026-10-05T09:30:00.1Z", None).unwrap();
        assert!(a < b && a.to_text() < b.to_text());
    }

    #[test]
    fn durations_read_in_their_two_largest_units() {
        use super::seconds_for_people as lag_text;
        assert_eq!(lag_text(99_954_000.0), "1156d 21h");
        assert_eq!(lag_text(3.0 * 3600.0 + 5.0 * 60.0 + 7.0), "3h 5m");
        assert_eq!(lag_text(65.4), "1m 5s");
        assert_eq!(lag_text(42.0), "42s");
        assert_eq!(lag_text(-3.0), "0s");
    }
}
