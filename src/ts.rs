//! Microsecond UTC timestamps: the one time type every stage speaks.
//!
//! Both backends and a later distributed engine agree on microseconds since the Unix
//! epoch in UTC, and the far-future sentinel `9999-12-31T00:00:00Z` fits in it (it would
//! overflow nanosecond types). SQLite stores the fixed-width text form so that text order
//! is time order.

use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};
use std::fmt;

/// A point in time, in microseconds since 1970-01-01T00:00:00Z.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Micros(pub i64);

/// The `valid_to` of an open version: never NULL, so range predicates stay simple.
pub const FAR_FUTURE: Micros = Micros(253_402_214_400_000_000);

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

    /// The fixed-width text that SQLite stores and everything prints.
    pub fn to_text(self) -> String {
        self.to_utc().format(TEXT_FORMAT).to_string()
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

    /// Parses a timestamp that carries its own offset (RFC 3339, or PostgreSQL's text
    /// output); a value without one is interpreted in `zone` when given, else refused.
    pub fn parse(text: &str, zone: Option<&chrono_tz::Tz>) -> Result<Micros, TimestampError> {
        let s = text.trim();
        if let Ok(t) = DateTime::parse_from_rfc3339(s) {
            return Ok(Micros(t.timestamp_micros()));
        }
        for f in [
            "%Y-%m-%d %H:%M:%S%.f%#z",
            "%Y-%m-%dT%H:%M:%S%.f%#z",
            "%Y-%m-%d %H:%M:%S%.f %#z",
        ] {
            if let Ok(t) = DateTime::parse_from_str(s, f) {
                return Ok(Micros(t.timestamp_micros()));
            }
        }
        let naive = [
            "%Y-%m-%d %H:%M:%S%.f",
            "%Y-%m-%dT%H:%M:%S%.f",
            "%Y-%m-%d %H:%M",
            "%Y-%m-%dT%H:%M",
        ]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
        .or_else(|| {
            NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        });
        match (naive, zone) {
            (Some(n), Some(z)) => match z.from_local_datetime(&n).earliest() {
                Some(t) => Ok(Micros(t.with_timezone(&Utc).timestamp_micros())),
                None => Err(TimestampError::NonexistentLocalTime(s.to_string())),
            },
            (Some(_), None) => Err(TimestampError::NoZone(s.to_string())),
            (None, _) => Err(TimestampError::Unparsable(s.to_string())),
        }
    }
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

/// Why a timestamp text could not become a [`Micros`].
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum TimestampError {
    /// The text has no offset and no zone was configured.
    #[error("timestamp {0:?} has no time zone")]
    NoZone(String),
    /// The local time falls in a daylight-saving gap.
    #[error("local time {0:?} does not exist in the configured time zone")]
    NonexistentLocalTime(String),
    /// Not a timestamp at all.
    #[error("cannot read {0:?} as a timestamp (expected RFC 3339, e.g. 2026-10-05T09:30:00Z)")]
    Unparsable(String),
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn text_form_sorts_like_time() {
        let a = Micros::parse("2026-10-05T09:30:00.000001Z", None).unwrap();
        let b = Micros::parse("2026-10-05T09:30:00.1Z", None).unwrap();
        assert!(a < b && a.to_text() < b.to_text());
    }
}
