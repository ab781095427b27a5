//! The row hash over the tracked columns, by which change is detected.
//!
//! A version opens only when the hash of its Type 2 columns differs from its
//! predecessor's, so the encoding decides what counts as a change. It is specified byte by
//! byte here and versioned ([`HASH_VERSION`]), so another engine can compute the same
//! bytes:
//!
//! ```text
//! row_hash = blake3( 0x01                                  -- encoding version
//!                    ‖ for each tracked column, in config order:
//!                        NULL  → 0x00
//!                        value → kind tag (1 byte, see ColumnKind::tag)
//!                                ‖ length of the canonical text (u32, little-endian)
//!                                ‖ the canonical text (UTF-8) )
//! ```
//!
//! NULL has its own marker, so NULL, `''` and `'NULL'` differ; the length prefix keeps
//! `('ab','c')` apart from `('a','bc')`. Canonical text is what the extract stage reads:
//! PostgreSQL's text output with timestamps normalised to `…Z` UTC microseconds, SQLite's
//! `CAST(… AS TEXT)`, booleans as `true`/`false`. This module never touches a database.

/// The row-hash encoding version, recorded per dimension so a change is noticed.
pub const HASH_VERSION: i64 = 1;

pub use crate::db::types::{is_truthy, ColumnKind};

/// Normalises a value's text to the canonical form of its kind (booleans read as `1`,
/// `t` or `true` all become `true`), so both backends hash the same fact alike.
pub fn canonical(kind: ColumnKind, text: &str) -> std::borrow::Cow<'_, str> {
    std::borrow::Cow::Borrowed(canonical_str(kind, text))
}

/// [`canonical`], borrowed: the canonical form is the text itself or a constant.
fn canonical_str(kind: ColumnKind, text: &str) -> &str {
    if kind == ColumnKind::Bool {
        return if is_truthy(text) { "true" } else { "false" };
    }
    text
}

/// The 32-byte row hash of the tracked values (already canonical), per the encoding above.
pub fn row_hash<'a>(values: impl IntoIterator<Item = (ColumnKind, Option<&'a str>)>) -> [u8; 32] {
    let mut hasher = RowHasher::default();
    hasher.start();
    for (kind, value) in values {
        hasher.push(kind, value);
    }
    hasher.finish()
}

/// The same encoding fed one value at a time, into a buffer that is reused from row to
/// row (the staging hot path hashes millions of rows without allocating).
#[derive(Debug, Default)]
pub struct RowHasher {
    buf: Vec<u8>,
}

impl RowHasher {
    /// Begins a row.
    pub fn start(&mut self) {
        self.buf.clear();
        self.buf.push(HASH_VERSION as u8);
    }

    /// Adds the next tracked value (already canonical).
    pub fn push(&mut self, kind: ColumnKind, value: Option<&str>) {
        match value {
            None => self.buf.push(0),
            Some(text) => {
                let len = u32::try_from(text.len()).expect("a value shorter than 4 GiB");
                self.buf.push(kind.tag());
                self.buf.extend_from_slice(&len.to_le_bytes());
                self.buf.extend_from_slice(text.as_bytes());
            }
        }
    }

    /// The row's hash.
    pub fn finish(&self) -> [u8; 32] {
        *blake3::hash(&self.buf).as_bytes()
    }
}

/// A source row ready for staging: its values (keys, Type 2, Type 1, tiebreak, in layout
/// order), its change time, its delete flag and its row hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedRow {
    /// Values in layout order, canonical text.
    pub values: Vec<Option<String>>,
    /// The source's `updated_at`, which becomes `valid_from`.
    pub valid_from: crate::ts::Micros,
    /// The soft-delete flag.
    pub is_deleted: bool,
    /// Hash of the Type 2 columns.
    pub row_hash: [u8; 32],
}

/// Canonicalises a row's values in place (see [`canonical`]) and returns its hash over
/// the Type 2 columns, which sit right after the `key_count` key columns. The values are
/// borrowed (a read's row, or an owned row's text): staging makes no copy of them.
pub fn canonicalise_and_hash(
    hasher: &mut RowHasher,
    kinds: &[ColumnKind],
    key_count: usize,
    tracked_count: usize,
    values: &mut [Option<&str>],
) -> [u8; 32] {
    for (v, kind) in values.iter_mut().zip(kinds) {
        if let Some(text) = v.as_mut() {
            *text = canonical_str(*kind, text);
        }
    }
    hasher.start();
    for (kind, value) in kinds[key_count..key_count + tracked_count]
        .iter()
        .zip(&values[key_count..key_count + tracked_count])
    {
        hasher.push(*kind, *value);
    }
    hasher.finish()
}

/// A source row admitted for staging, its values borrowed from the read (see
/// [`StagedRow`], its owned form).
pub struct StagedRef<'r, 'a> {
    /// Values in layout order, canonical text.
    pub values: &'r [Option<&'a str>],
    /// The source's `updated_at`, which becomes `valid_from`.
    pub valid_from: crate::ts::Micros,
    /// The soft-delete flag.
    pub is_deleted: bool,
    /// Hash of the Type 2 columns.
    pub row_hash: [u8; 32],
}

#[cfg(test)]
mod tests {
    use super::*;
    use ColumnKind::*;

    fn h(values: &[(ColumnKind, Option<&str>)]) -> [u8; 32] {
        row_hash(values.iter().copied())
    }

    #[test]
    fn null_empty_and_text_null_differ() {
        let a = h(&[(Text, None)]);
        let b = h(&[(Text, Some(""))]);
        let c = h(&[(Text, Some("NULL"))]);
        assert_ne!(a, b);
        assert_ne!(b, c);
        assert_ne!(a, c);
    }

    #[test]
    fn length_prefix_separates_columns() {
        assert_ne!(
            h(&[(Text, Some("ab")), (Text, Some("c"))]),
            h(&[(Text, Some("a")), (Text, Some("bc"))])
        );
    }

    #[test]
    fn column_order_is_hash_order() {
        assert_ne!(
            h(&[(Text, Some("gold")), (Text, Some("NL"))]),
            h(&[(Text, Some("NL")), (Text, Some("gold"))])
        );
    }

    #[test]
    fn kind_is_part_of_the_hash() {
        assert_ne!(h(&[(Int, Some("1"))]), h(&[(Text, Some("1"))]));
    }

    #[test]
    fn null_positions_matter() {
        assert_ne!(
            h(&[(Text, None), (Text, Some("x"))]),
            h(&[(Text, Some("x")), (Text, None)])
        );
    }

    #[test]
    fn booleans_are_canonical() {
        assert_eq!(canonical(Bool, "t"), "true");
        assert_eq!(canonical(Bool, "1"), "true");
        assert_eq!(canonical(Bool, "0"), "false");
        assert_eq!(canonical(Text, "t"), "t");
    }

    /// Pins the encoding: if this fails, the encoding changed and HASH_VERSION must too.
    #[test]
    fn golden_hash() {
        let mut bytes = vec![1u8];
        bytes.extend([5, 3, 0, 0, 0]);
        bytes.extend(b"a@x");
        bytes.push(0);
        bytes.extend([1, 2, 0, 0, 0]);
        bytes.extend(b"42");
        let expected = *blake3::hash(&bytes).as_bytes();
        let got = h(&[(Text, Some("a@x")), (Text, None), (Int, Some("42"))]);
        assert_eq!(got, expected);
        let hex: String = got.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, GOLDEN_HEX);
    }

    const GOLDEN_HEX: &str = "49612b9b38af1ca6568596f8ec56fa5dddce90aba4ff41c91164adfe278b5e67";
}
