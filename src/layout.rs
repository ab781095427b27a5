//! The columns of one dimension as a load carries them: resolved once per run from the
//! config and the source's schema (see `extract::SourceSchema::layout`) or from the
//! dimension's record, and read by every later step.

use crate::db::types::ColumnKind;
use serde::Serialize;

/// A column as dimlog carries it: its quoted name, its kind and its type on each side.
#[derive(Clone, Debug, Serialize)]
pub struct Col {
    /// Quoted identifier.
    pub name: String,
    /// Bare name, for messages and JSON.
    pub bare: String,
    /// Logical kind.
    pub kind: ColumnKind,
    /// The column type in the target database.
    pub target_type: String,
}

/// A Type 6 twin: the dimension column `current_<col>` showing the key's current value
/// of a Type 2 column on every row.
#[derive(Clone, Debug, Serialize)]
pub struct CurrentCol {
    /// The Type 2 column, quoted.
    pub source: String,
    /// The twin column, quoted.
    pub name: String,
    /// Its bare name.
    pub bare: String,
    /// Same type as the Type 2 column.
    pub target_type: String,
}

/// The columns of one load, in staging order. Built once per run from the source schema
/// and passed down the pipeline.
#[derive(Clone, Debug, Serialize)]
pub struct Layout {
    /// Natural key columns.
    pub keys: Vec<Col>,
    /// Type 2 columns (hashed), in config order.
    pub tracked: Vec<Col>,
    /// Type 1 columns (carried, not hashed).
    pub type1: Vec<Col>,
    /// `current_<col>` twins of Type 2 columns (Type 6), only in the dimension.
    pub current: Vec<CurrentCol>,
    /// Tie-breaking column, staged only to decide ties.
    pub tiebreak: Option<Col>,
    /// Kind of the change column.
    pub updated_at_kind: ColumnKind,
    /// The source is a table whose primary key lies within the natural key, so one read
    /// holds at most one row per key and dedupe has nothing to do.
    pub unique_key: bool,
    /// [`Layout::unique_key`], and the key's values as dimlog reads them (text) are as
    /// apart as the primary key keeps them: not so on an engine whose columns take values
    /// of any type (SQLite keeps `2`, `'2'` and `x'32'` apart, one key to dimlog) unless
    /// the key is a rowid alias, which holds integers only. Then a read's rows are taken
    /// as they are, without a dedupe.
    pub unique_as_read: bool,
}

impl Layout {
    /// A source can send its rows in the order the log numbers them (see
    /// `SqlContext::key_order`) when every key is text (sorted bytewise on both sides) or
    /// of a kind that sorts alike everywhere; booleans, floats, JSON and bytes keys are
    /// left to the target's own sort.
    pub fn key_order_is_portable(&self) -> bool {
        self.keys
            .iter()
            .all(|k| k.kind == ColumnKind::Text || k.kind.sorts_alike_everywhere())
    }

    /// Type 2 then Type 1 columns: the attributes every log row carries.
    pub fn attrs(&self) -> Vec<&Col> {
        self.tracked.iter().chain(self.type1.iter()).collect()
    }

    /// The setting that names each of [`Layout::read_columns`], in order.
    pub fn read_column_roles(&self) -> Vec<&'static str> {
        let mut roles = vec!["source.key"; self.keys.len()];
        roles.extend(std::iter::repeat_n("track.columns", self.tracked.len()));
        roles.extend(std::iter::repeat_n("track.type1", self.type1.len()));
        roles.extend(self.tiebreak.iter().map(|_| "source.tiebreak"));
        roles
    }

    /// Every column the reader selects before the change column, in order.
    pub fn read_columns(&self) -> Vec<&Col> {
        self.keys
            .iter()
            .chain(self.attrs())
            .chain(self.tiebreak.iter())
            .collect()
    }
}
