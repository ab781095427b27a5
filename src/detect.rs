//! Change detection: the row hash over the tracked columns.
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

/// The logical kind of a column: decides the hash tag and how values are bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnKind {
    /// Whole numbers.
    Int,
    /// Binary floating point.
    Float,
    /// Exact decimals, kept as text so no digit is lost.
    Numeric,
    /// true / false.
    Bool,
    /// Anything textual, and the fallback.
    Text,
    /// Calendar dates.
    Date,
    /// Timestamps without a zone.
    Timestamp,
    /// Timestamps with a zone, normalised to UTC.
    TimestampTz,
    /// UUIDs.
    Uuid,
    /// JSON documents.
    Json,
    /// Byte strings.
    Bytes,
}

impl ColumnKind {
    /// Values of this kind sort the same in every database that stores them with this
    /// kind (no collation, no declaration order): a first load may number rows in the
    /// source's key order and still give the numbers the target's order would.
    pub fn sorts_alike_everywhere(self) -> bool {
        matches!(
            self,
            ColumnKind::Int
                | ColumnKind::Numeric
                | ColumnKind::Date
                | ColumnKind::Timestamp
                | ColumnKind::TimestampTz
                | ColumnKind::Uuid
        )
    }

    /// The tag byte in the hash encoding. Never renumber: it would change every hash.
    pub fn tag(self) -> u8 {
        match self {
            ColumnKind::Int => 1,
            ColumnKind::Float => 2,
            ColumnKind::Numeric => 3,
            ColumnKind::Bool => 4,
            ColumnKind::Text => 5,
            ColumnKind::Date => 6,
            ColumnKind::Timestamp => 7,
            ColumnKind::TimestampTz => 8,
            ColumnKind::Uuid => 9,
            ColumnKind::Json => 10,
            ColumnKind::Bytes => 11,
        }
    }

    /// Classifies a PostgreSQL type name as `format_type` prints it.
    pub fn from_postgres(type_name: &str) -> ColumnKind {
        let t = type_name.to_ascii_lowercase();
        let base = t.split('(').next().unwrap_or("").trim();
        match base {
            "smallint" | "integer" | "bigint" | "int2" | "int4" | "int8" => ColumnKind::Int,
            "real" | "double precision" | "float4" | "float8" => ColumnKind::Float,
            "numeric" | "decimal" | "money" => ColumnKind::Numeric,
            "boolean" | "bool" => ColumnKind::Bool,
            "date" => ColumnKind::Date,
            "timestamp without time zone" | "timestamp" => ColumnKind::Timestamp,
            "timestamp with time zone" | "timestamptz" => ColumnKind::TimestampTz,
            "uuid" => ColumnKind::Uuid,
            "json" | "jsonb" => ColumnKind::Json,
            "bytea" => ColumnKind::Bytes,
            _ => ColumnKind::Text,
        }
    }

    /// Classifies a SQLite declared type by SQLite's own affinity rules, refined for the
    /// names people use for booleans, dates and timestamps.
    pub fn from_sqlite(declared: &str) -> ColumnKind {
        let t = declared.to_ascii_uppercase();
        if t.contains("INT") {
            ColumnKind::Int
        } else if t.contains("BOOL") {
            ColumnKind::Bool
        } else if t.contains("CHAR") || t.contains("CLOB") || t.contains("TEXT") {
            ColumnKind::Text
        } else if t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB") {
            ColumnKind::Float
        } else if t.contains("TIMESTAMP") || t.contains("DATETIME") {
            ColumnKind::Timestamp
        } else if t.starts_with("DATE") {
            ColumnKind::Date
        } else if t.contains("UUID") {
            ColumnKind::Uuid
        } else if t.contains("JSON") {
            ColumnKind::Json
        } else if t.contains("BLOB") {
            ColumnKind::Bytes
        } else if t.contains("NUM") || t.contains("DEC") {
            ColumnKind::Numeric
        } else {
            ColumnKind::Text
        }
    }

    /// The PostgreSQL type a target column of this kind gets when the source is not
    /// PostgreSQL (a PostgreSQL source keeps its exact declared type).
    pub fn postgres_type(self) -> &'static str {
        match self {
            ColumnKind::Int => "bigint",
            ColumnKind::Float => "double precision",
            ColumnKind::Numeric => "numeric",
            ColumnKind::Bool => "boolean",
            ColumnKind::Date => "date",
            ColumnKind::Uuid => "uuid",
            ColumnKind::Json => "jsonb",
            ColumnKind::Bytes => "bytea",
            // SQLite timestamps are free text; keep them as written.
            ColumnKind::Text | ColumnKind::Timestamp | ColumnKind::TimestampTz => "text",
        }
    }

    /// The SQLite declared type a target column of this kind gets; exact decimals stay
    /// text so no digit is lost to REAL affinity.
    pub fn sqlite_type(self) -> &'static str {
        match self {
            ColumnKind::Int => "INTEGER",
            ColumnKind::Float => "REAL",
            ColumnKind::Bool => "BOOLEAN",
            ColumnKind::Bytes => "BLOB",
            ColumnKind::Date => "DATE",
            ColumnKind::Timestamp | ColumnKind::TimestampTz => "TIMESTAMP",
            ColumnKind::Numeric | ColumnKind::Text | ColumnKind::Uuid | ColumnKind::Json => "TEXT",
        }
    }
}

/// Normalises a value's text to the canonical form of its kind (booleans read as `1`,
/// `t` or `true` all become `true`), so both backends hash the same fact alike.
pub fn canonical(kind: ColumnKind, text: &str) -> std::borrow::Cow<'_, str> {
    if kind == ColumnKind::Bool {
        return std::borrow::Cow::Borrowed(if is_truthy(text) { "true" } else { "false" });
    }
    std::borrow::Cow::Borrowed(text)
}

/// Reads a flag the way people store them: `true`, `t`, `1`, `yes`, `y` (any case).
pub fn is_truthy(text: &str) -> bool {
    matches!(
        text.trim().to_ascii_lowercase().as_str(),
        "true" | "t" | "1" | "yes" | "y"
    )
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

/// Canonicalises a row's values and computes its hash over the Type 2 columns, which sit
/// right after the `key_count` key columns.
pub fn stage_row(
    kinds: &[ColumnKind],
    key_count: usize,
    tracked_count: usize,
    mut values: Vec<Option<String>>,
    valid_from: crate::ts::Micros,
    is_deleted: bool,
) -> StagedRow {
    for (v, kind) in values.iter_mut().zip(kinds) {
        if *kind == ColumnKind::Bool {
            if let Some(text) = v.as_mut() {
                *text = canonical(ColumnKind::Bool, text).into_owned();
            }
        }
    }
    let row_hash = row_hash(
        kinds[key_count..key_count + tracked_count]
            .iter()
            .zip(&values[key_count..key_count + tracked_count])
            .map(|(k, v)| (*k, v.as_deref())),
    );
    StagedRow {
        values,
        valid_from,
        is_deleted,
        row_hash,
    }
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
