//! The logical kinds of column values that dimlog reasons about, whatever the engine:
//! each engine maps its own type names to them (see `db::<engine>::dialect`).

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
}

/// A boolean as people store them: `true`, `t`, `1`, `yes`, `y` and `false`, `f`, `0`,
/// `no`, `n` or empty (any case, spaces around ignored); `None` for anything else, which
/// no reading of it as a boolean would be sure of.
pub fn boolean(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "t" | "1" | "yes" | "y" => Some(true),
        "false" | "f" | "0" | "no" | "n" | "" => Some(false),
        _ => None,
    }
}

/// Reads a flag the way people store them: `true`, `t`, `1`, `yes`, `y` (any case).
pub fn is_truthy(text: &str) -> bool {
    matches!(
        text.trim().to_ascii_lowercase().as_str(),
        "true" | "t" | "1" | "yes" | "y"
    )
}
