//! Surrogate-key lookup for fact loaders.
//!
//! A fact stamped `ts` for key *k* gets the surrogate key of the dimension row with
//! `valid_from <= ts < valid_to`: half-open, so a fact at exactly a version's start gets
//! that version and one a microsecond earlier the one before. A fact before the key's
//! first version, after its tombstone, or for an unknown key gets the unknown member
//! `-1`. Three ways in: one lookup ([`lookup_one`]), set-based assignment of a staged
//! fact table in the target ([`assign_keys`], one statement family per backend), and an
//! in-memory [`Index`] for loaders written in Rust. They agree on every fact.

use crate::config::Backend;
use crate::context::{run_named, SqlContext};
use crate::db::types::ColumnKind;
use crate::db::{sql, BindKind, Conn, DbError, Param};
use crate::ident::Ident;
use crate::ts::{Micros, FAR_FUTURE};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::borrow::Cow;

/// The surrogate key of the unknown member.
pub const UNKNOWN: i64 = -1;

/// The surrogate key in effect for `key` at `at`, or `None`. Each key part is read in
/// its canonical form ([`canonical_key`]), as [`Index`] and [`assign_keys`] read it: on
/// PostgreSQL it is compared as a value of the key column's type (a part that is no
/// spelling of an integer, numeric, uuid or date value there finds nothing); on SQLite,
/// which may hold a value in any spelling, the candidate rows' keys are canonicalised
/// and compared here.
pub async fn lookup_one(conn: &mut Conn, ctx: &SqlContext, key: &[String], at: Micros) -> Result<Option<i64>, DbError> {
    let cols = &key_cols(conn.backend(), ctx);
    if conn.dialect().values_have_declared_types() {
        {
            let mut params = Vec::with_capacity(key.len() + 1);
            for (k, c) in key.iter().zip(cols) {
                match pg_key_value(c, k) {
                    Some(v) => params.push(Param::Text(v)),
                    None => return Ok(None),
                }
            }
            params.push(Param::Ts(at));
            let octx = OneContext {
                base: ctx,
                key_casts: cols.iter().map(|c| pg_cast_type(&c.target_type)).collect(),
                key_filters: vec![],
            };
            let sql = sql::statement(conn.backend(), "lookup", "one", &octx)?;
            let rows = conn.query_text("looking up the surrogate key", &sql, &params).await?;
            Ok(rows
                .first()
                .and_then(|r| r.first().cloned().flatten())
                .and_then(|v| v.parse().ok()))
        }
    } else {
        {
            let wanted: Vec<Cow<'_, str>> = key.iter().zip(cols).map(|(k, c)| canonical_key(c.kind, k)).collect();
            let (key_filters, mut params) = sqlite_key_filters(cols, key, 2);
            params.insert(0, Param::Ts(at));
            let octx = OneContext {
                base: ctx,
                key_casts: vec![],
                key_filters,
            };
            let sql = sql::statement(conn.backend(), "lookup", "one", &octx)?;
            let rows = conn.query_text("looking up the surrogate key", &sql, &params).await?;
            let n = cols.len();
            Ok(rows
                .iter()
                .find(|r| {
                    r[..n]
                        .iter()
                        .zip(cols)
                        .zip(&wanted)
                        .all(|((v, c), w)| v.as_deref().is_some_and(|v| canonical_key(c.kind, v) == *w))
                })
                .and_then(|r| r[n].as_deref())
                .and_then(|v| v.parse().ok()))
        }
    }
}

/// The keys to bind where a statement compares the key columns with bound values (as
/// `history` does): on PostgreSQL, one, each part in canonical form (cast to the
/// column's type there); on SQLite, every spelling the log holds of the key that is
/// `key` in canonical form (SQLite may hold one value in several). None when there is
/// no such key (on PostgreSQL: a part that is no spelling of a value of its integer,
/// numeric, uuid or date column, or out of the column's range).
pub async fn resolve_key(conn: &mut Conn, ctx: &SqlContext, key: &[String]) -> Result<Vec<Vec<String>>, DbError> {
    let cols = &key_cols(conn.backend(), ctx);
    if conn.dialect().values_have_declared_types() {
        Ok(key
            .iter()
            .zip(cols)
            .map(|(k, c)| pg_key_value(c, k))
            .collect::<Option<Vec<String>>>()
            .into_iter()
            .collect())
    } else {
        {
            let wanted: Vec<Cow<'_, str>> = key.iter().zip(cols).map(|(k, c)| canonical_key(c.kind, k)).collect();
            let (key_filters, params) = sqlite_key_filters(cols, key, 1);
            let octx = OneContext {
                base: ctx,
                key_casts: vec![],
                key_filters,
            };
            let sql = sql::statement(conn.backend(), "lookup", "key_spellings", &octx)?;
            let rows = conn.query_text("finding the key's spelling", &sql, &params).await?;
            let same = |r: &Vec<Option<String>>| {
                r.iter()
                    .zip(cols)
                    .zip(&wanted)
                    .all(|((v, c), w)| v.as_deref().is_some_and(|v| canonical_key(c.kind, v) == *w))
            };
            Ok(rows
                .iter()
                .filter(|r| same(r))
                .map(|r| r.iter().map(|v| v.clone().unwrap_or_default()).collect())
                .collect())
        }
    }
}

/// The key columns, each of the kind its type in the target says (the dimension's key
/// column, not the source's): the kind decides the key's canonical form, the same
/// whether a session read the source's schema or only the target's record.
pub fn key_cols(backend: Backend, ctx: &SqlContext) -> Vec<crate::extract::Col> {
    ctx.key_defs
        .iter()
        .map(|c| crate::extract::Col {
            kind: crate::db::kind_of_type(backend, &c.target_type),
            ..c.clone()
        })
        .collect()
}

/// PostgreSQL: the types key values are cast to, per key column ([`pg_cast_type`]), for
/// statements that compare the key columns with bound values.
pub(crate) fn key_casts(ctx: &SqlContext) -> Vec<String> {
    ctx.key_defs.iter().map(|c| pg_cast_type(&c.target_type)).collect()
}

/// SQLite: conditions on the key columns of `dimlog_d` that every row whose key is
/// `key` in canonical form meets (and that an index serves where it can), with their
/// parameters, numbered from `first`. Rows that meet them are candidates: their keys
/// are canonicalised and compared in Rust.
pub(crate) fn sqlite_key_filters(
    cols: &[crate::extract::Col],
    key: &[String],
    first: usize,
) -> (Vec<String>, Vec<Param>) {
    let mut filters = Vec::with_capacity(cols.len());
    let mut params = Vec::with_capacity(cols.len());
    for (i, (k, col)) in key.iter().zip(cols).enumerate() {
        let n = first + i;
        let c = format!("dimlog_d.{}", col.name);
        match (col.kind, read_key(col.kind, k)) {
            (ColumnKind::Int, Some(v)) => {
                filters.push(format!("{c} = ?{n}"));
                params.push(Param::I64(v.parse().expect("a canonical integer")));
            }
            (ColumnKind::Numeric, Some(v)) if matches!(v.as_ref(), "NaN" | "Infinity" | "-Infinity") => {
                // Held as text (or, for an infinity, a REAL) in any spelling: the
                // candidates are compared in canonical form by the caller.
                filters.push(format!("typeof({c}) IN ('text', 'real') AND ?{n} IS NOT NULL"));
                params.push(Param::Text(v.into_owned()));
            }
            (ColumnKind::Numeric, Some(v)) => {
                filters.push(format!("CAST({c} AS REAL) = CAST(?{n} AS REAL)"));
                params.push(Param::Text(v.into_owned()));
            }
            (ColumnKind::Uuid, Some(v)) => {
                filters.push(format!(
                    "lower(replace(replace(replace(trim(CAST({c} AS TEXT)), '-', ''), '{{', ''), '}}', '')) = ?{n}"
                ));
                params.push(Param::Text(v.replace('-', "")));
            }
            (ColumnKind::Date, Some(v)) => {
                filters.push(format!("instr(lower(CAST({c} AS TEXT)), ?{n}) > 0"));
                params.push(Param::Text(v[..4].to_string()));
            }
            (kind, Some(v)) if !has_spellings(kind) => {
                filters.push(format!("{c} = ?{n}"));
                params.push(Param::Text(v.into_owned()));
            }
            _ => {
                filters.push(format!("CAST({c} AS TEXT) = ?{n}"));
                params.push(Param::Text(k.clone()));
            }
        }
    }
    (filters, params)
}

/// PostgreSQL: the kind of a type for comparing a fact's key with a key column: types of
/// one family compare value for value as the key's canonical form does (any integer
/// width; any text type; `numeric` of any precision); any other type only with itself.
fn pg_type_family(type_name: &str) -> String {
    // Names as the catalog spells them (`bigint`) or as the driver does (`INT8`, for a
    // dimension read through `source.query`): type names are case-insensitive.
    let base = pg_cast_type(type_name).to_ascii_lowercase();
    match base.as_str() {
        "smallint" | "integer" | "bigint" | "int2" | "int4" | "int8" | "int" => "integer".into(),
        // Not `character(n)`: PostgreSQL compares it without its trailing blanks.
        "text" | "character varying" | "varchar" | "name" => "text".into(),
        "numeric" | "decimal" => "numeric".into(),
        "bool" => "boolean".into(),
        "float8" => "double precision".into(),
        "float4" => "real".into(),
        "timestamptz" => "timestamp with time zone".into(),
        "timestamp" => "timestamp without time zone".into(),
        _ => base,
    }
}

/// PostgreSQL: a key part in canonical form, to be cast to its column's type; `None`
/// when it is no value of that type (no spelling of one, or out of the range of a
/// `smallint` or `integer` column), so that it finds no key rather than failing.
fn pg_key_value(col: &crate::extract::Col, key: &str) -> Option<String> {
    let value = read_key(col.kind, key)?;
    if col.kind == ColumnKind::Int {
        let n: i64 = value.parse().ok()?;
        let fits = match pg_cast_type(&col.target_type).as_str() {
            "smallint" | "int2" => i16::try_from(n).is_ok(),
            "integer" | "int" | "int4" => i32::try_from(n).is_ok(),
            _ => true,
        };
        if !fits {
            return None;
        }
    }
    Some(value.into_owned())
}

/// PostgreSQL: the type a key value is cast to before it is compared with the key
/// column: the column's type without its modifier, so nothing is rounded (`numeric(10,2)`
/// would make `1.004` the key `1.00`) or cut short (`varchar(3)` would make `abcd` the
/// key `abc`).
pub(crate) fn pg_cast_type(target_type: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for ch in target_type.chars() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ if depth == 0 => out.push(ch),
            _ => {}
        }
    }
    let out = out.split_whitespace().collect::<Vec<_>>().join(" ");
    match out.as_str() {
        "character" | "char" => "bpchar".into(),
        "bit" => "bit varying".into(),
        _ => out,
    }
}

#[derive(Serialize)]
struct OneContext<'a> {
    #[serde(flatten)]
    base: &'a SqlContext,
    /// PostgreSQL: the type each key value is cast to.
    key_casts: Vec<String>,
    /// SQLite: conditions on the key columns (see [`sqlite_key_filters`]).
    key_filters: Vec<String>,
}

/// What `assign-keys` should fill.
#[derive(Clone, Debug)]
pub struct AssignSpec {
    /// The dimension's name (the config's `name`): what the record of filled
    /// surrogate-key columns is kept under.
    pub dimension: String,
    /// The staged fact table, in the target database.
    pub facts: Ident,
    /// Its columns holding the natural key, in `source.key` order.
    pub key_columns: Vec<Ident>,
    /// Its timestamp column.
    pub at_column: Ident,
    /// The surrogate-key column to fill (created if missing).
    pub sk_column: Ident,
    /// Fail (and write nothing) when a fact has no version.
    pub unknown_is_error: bool,
    /// Fill the surrogate-key column even when it holds values (other than NULL and -1)
    /// and `assign-keys` did not fill it for this dimension before.
    pub overwrite: bool,
    /// The zone of fact times written without one (`source.timezone`); without it such
    /// a time is no usable timestamp.
    pub timezone: Option<chrono_tz::Tz>,
}

/// What `assign-keys` did.
#[derive(Clone, Debug, Serialize)]
pub struct AssignReport {
    /// Facts that got a real surrogate key.
    pub facts_matched: i64,
    /// Facts that got the unknown member (those without a usable timestamp included).
    pub facts_unknown: i64,
    /// Facts whose timestamp could not be read (they got the unknown member).
    pub bad_timestamps: i64,
    /// The first of them (by key), when there are any.
    pub first_bad_timestamp: Option<BadFact>,
}

/// A fact whose timestamp could not be read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BadFact {
    /// Its natural key, as text.
    pub key: Vec<String>,
    /// Its timestamp value as the fact table holds it: `NULL`, a number, or `'text'`.
    pub value: String,
    /// Why it is no usable timestamp.
    pub reason: String,
}

impl std::fmt::Display for BadFact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "key ({}) at {}", self.key.join(", "), self.value)?;
        if !self.reason.is_empty() {
            write!(f, ": {}", self.reason)?;
        }
        Ok(())
    }
}

/// The part a fact-table column plays in an assignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FactColumn {
    /// One of the natural-key columns.
    Key,
    /// The timestamp column.
    At,
    /// The surrogate-key column.
    SurrogateKey,
}

impl std::fmt::Display for FactColumn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FactColumn::Key => "a key column",
            FactColumn::At => "the timestamp column",
            FactColumn::SurrogateKey => "the surrogate-key column",
        })
    }
}

/// Why `assign-keys` refused or failed; nothing was written to the fact table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AssignError {
    /// A database error.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The number of fact key columns differs from the dimension's key.
    #[error("{given} key column(s) of the fact table given; the dimension's key has {expected} ({names}): give one per key column, in that order")]
    KeyColumnCount {
        /// How many were given.
        given: usize,
        /// How many the key has.
        expected: usize,
        /// The dimension's key columns.
        names: String,
    },
    /// The fact table has a name dimlog keeps for its own tables and SQL names.
    #[error("table `{table}` starts with `{prefix}`, which dimlog keeps for its own tables and the names of its SQL; give the fact table another name")]
    ReservedFactTable {
        /// The fact table.
        table: String,
        /// The reserved prefix.
        prefix: &'static str,
    },
    /// The fact table names a SQLite schema other than `main` (`temp`, an attached
    /// database): a fact table is a lasting table of the target database.
    #[error("table {table} names the schema `{schema}`, but a fact table is a table of the target database, whose one lasting schema on SQLite is `main`; write `{name}` (or `main.{name}`)")]
    FactTableSchema {
        /// The fact table, as given.
        table: String,
        /// Its schema.
        schema: String,
        /// Its name without the schema.
        name: String,
    },
    /// The fact table has a name SQLite keeps for its own tables (`sqlite_…`).
    #[error("table {table} starts with `{prefix}`, a prefix reserved for SQLite's own tables; give the fact table another name")]
    SqliteReservedFactTable {
        /// The fact table, as given.
        table: String,
        /// The reserved prefix.
        prefix: &'static str,
    },
    /// The fact table is the source table, and source and target are one database.
    #[error("table {table} is the source table `{source_table}` (source and target are one database), and dimlog never writes a source; nothing was written")]
    SourceFactTable {
        /// The fact table, as given.
        table: String,
        /// The source table, as configured.
        source_table: String,
    },
    /// On Citus, the fact table is a reference table: Citus updates one from no table of
    /// the coordinator, where the assignment's map of keys is.
    #[error("table {table} is a Citus reference table, which assign-keys cannot update (Citus takes no table of the coordinator into an update of one); nothing was written. Stage the facts in a local table, or one distributed by the key and colocated with the dimension's log (the fastest), and assign keys there")]
    ReferenceFactTable {
        /// The fact table, as given.
        table: String,
    },
    /// The fact table is one of the tables dimlog writes: a dimension's log or dimension.
    #[error("table {table} is the {role} of dimension `{owner}`, which dimlog writes and owns; assign-keys fills staged fact tables only, and nothing was written")]
    OwnedFactTable {
        /// The fact table, as given.
        table: String,
        /// "log", "dimension" or "rebuild table" (where `dimlog rebuild` builds the
        /// dimension anew).
        role: &'static str,
        /// The dimension it belongs to.
        owner: String,
    },
    /// The fact table does not exist.
    #[error("table {table} does not exist in the target database")]
    NoFactTable {
        /// The fact table.
        table: String,
    },
    /// A key or timestamp column is not in the fact table.
    #[error("{role} `{column}` is not in {table}; it has: {columns}")]
    NoSuchColumn {
        /// Which column it was to be.
        role: FactColumn,
        /// The name given.
        column: String,
        /// The fact table.
        table: String,
        /// The columns it has.
        columns: String,
    },
    /// The surrogate-key column is one of the facts' inputs.
    #[error("the surrogate-key column `{column}` is {role} of {table}: filling it would overwrite the facts' own values, and nothing was written; name a column of its own (it is created if missing)")]
    SkIsInput {
        /// The surrogate-key column.
        column: String,
        /// Which input it is.
        role: FactColumn,
        /// The fact table.
        table: String,
    },
    /// The surrogate-key column cannot hold surrogate keys.
    #[error("the surrogate-key column `{column}` of {table} is {type_name}, not an integer type, so it cannot hold surrogate keys; nothing was written. Name an integer column, or a new one (it is created)")]
    SkNotInteger {
        /// The surrogate-key column.
        column: String,
        /// The fact table.
        table: String,
        /// Its declared type.
        type_name: String,
    },
    /// The surrogate-key column holds values, and `assign-keys` did not fill it for this
    /// dimension: it may be a column of other data whose values look like surrogate keys.
    #[error("the surrogate-key column `{column}` of {table} holds {count} {values} other than NULL and -1 (e.g. {example}), and assign-keys has not filled it for dimension `{dimension}`: it may be a column of other data (quantities, ids) whose values merely look like surrogate keys, so nothing was written")]
    SkNotAssigned {
        /// The surrogate-key column.
        column: String,
        /// The fact table.
        table: String,
        /// The dimension.
        dimension: String,
        /// How many such values.
        count: i64,
        /// "value" or "values".
        values: &'static str,
        /// One of them.
        example: String,
    },
    /// The surrogate-key column holds values that are no surrogate key of the dimension
    /// (nor -1), though `assign-keys` filled it before: the record names the table, and a
    /// table dropped and made again under that name holds other data.
    #[error("the surrogate-key column `{column}` of {table} holds {count} {values} that {are} no surrogate key of dimension `{dimension}` (e.g. {example}), though assign-keys filled that column before: the table may have been dropped and made again with other data in it, so nothing was written")]
    SkForeign {
        /// The surrogate-key column.
        column: String,
        /// The fact table.
        table: String,
        /// The dimension.
        dimension: String,
        /// How many such values.
        count: i64,
        /// "value" or "values".
        values: &'static str,
        /// "is" or "are".
        are: &'static str,
        /// One of them.
        example: String,
    },
    /// The fact key columns have the key columns' types in another order (PostgreSQL):
    /// most likely given in another order than `source.key`.
    #[error("the key columns of {table} were given as ({given}), whose types are those of the dimension's key ({key}) in another order; nothing was written. Give the fact key columns in the order of source.key: ({key})")]
    KeyColumnOrder {
        /// The fact key columns, as given.
        given: String,
        /// The dimension's key columns, in order.
        key: String,
        /// The fact table.
        table: String,
    },
    /// A fact key column's type is of another kind than the dimension's key column's
    /// (PostgreSQL), so the database would compare them by rules other than the key's
    /// canonical form (or not at all).
    #[error("the key column `{column}` of {table} is {type_name}, but the dimension's key column `{key_column}` is {key_type}; PostgreSQL would compare them by its own rules, not as every other way in reads the key, so nothing was written. Give the column the key's type (ALTER TABLE {table} ALTER COLUMN {column} TYPE {key_type} USING {column}::{key_type}), or assign through a table that has it")]
    KeyTypeMismatch {
        /// The fact key column.
        column: String,
        /// The fact table.
        table: String,
        /// Its type.
        type_name: String,
        /// The dimension's key column it stands for.
        key_column: String,
        /// That column's type.
        key_type: String,
    },
    /// The timestamp column's type holds no points in time (PostgreSQL).
    #[error("the timestamp column `{column}` of {table} is {type_name}, not a timestamp; nothing was written. Name a timestamptz column (or a timestamp column, with source.timezone)")]
    AtNotTimestamp {
        /// The timestamp column.
        column: String,
        /// The fact table.
        table: String,
        /// Its type.
        type_name: String,
    },
    /// The timestamp column holds local times and no zone is configured (PostgreSQL).
    #[error("the timestamp column `{column}` of {table} is {type_name}, which has no time zone; nothing was written. Set source.timezone to the zone its values are in, e.g. \"UTC\"")]
    AtNoZone {
        /// The timestamp column.
        column: String,
        /// The fact table.
        table: String,
        /// Its type.
        type_name: String,
    },
    /// Fact times without a zone and no zone configured (SQLite, whose column has no
    /// type to say so): reading them in any zone would be a guess.
    #[error("{count} {facts} in `{column}` of {table} {have} no zone (e.g. '{example}'), and source.timezone is not set, so dimlog cannot tell which instant {it_means}; nothing was written. Set source.timezone to the zone those times are in, e.g. \"UTC\", or store them with an offset")]
    AtNoZoneValues {
        /// The timestamp column.
        column: String,
        /// The fact table.
        table: String,
        /// How many distinct such values.
        count: usize,
        /// "fact" or "facts".
        facts: &'static str,
        /// "carries" or "carry".
        have: &'static str,
        /// "it means" or "they mean".
        it_means: &'static str,
        /// One of them.
        example: String,
    },
    /// Facts whose timestamp cannot be read, when they must not get the unknown member.
    #[error("{count} facts in {table} have no usable timestamp in `{column}` (first: {first}); nothing was written")]
    BadTimestamps {
        /// The fact table.
        table: String,
        /// The timestamp column.
        column: String,
        /// How many facts.
        count: i64,
        /// The first of them, by key.
        first: BadFact,
        /// Whether some of them are times without a zone (source.timezone would read
        /// them).
        no_zone: bool,
    },
    /// Facts without a version, when they must not get the unknown member.
    #[error("{count} facts have no version in {dimension} (first: key ({key}) at {at}); nothing was written. Load the dimension first")]
    Unknown {
        /// How many facts.
        count: i64,
        /// The dimension.
        dimension: String,
        /// The first one's key (by time).
        key: String,
        /// Its time.
        at: String,
    },
}

#[derive(Serialize)]
struct AssignContext<'a> {
    #[serde(flatten)]
    base: &'a SqlContext,
    facts: String,
    fact_keys: Vec<String>,
    fact_at: String,
    fact_sk: String,
    /// PostgreSQL: the timestamp column holds local times of `tz`.
    at_local: bool,
    /// PostgreSQL: that column is a `date` (a day's first instant; never in a gap).
    at_date: bool,
    tz: Option<String>,
    /// Citus: the fact table is distributed (colocated by the key, the assignment runs
    /// on the shards); a local one is assigned through a map on the coordinator.
    facts_distributed: bool,
    /// Citus: the fact table is distributed otherwise (not colocated by the key): Citus
    /// repartitions it and the dimension by the key into a map on the coordinator.
    facts_elsewhere: bool,
}

/// Whether two column names name the same column: SQLite compares names without regard
/// to (ASCII) case, PostgreSQL compares dimlog's quoted names exactly.
pub fn same_column(backend: Backend, a: &str, b: &str) -> bool {
    backend.dialect().same_name(a, b)
}

/// Whether a fact-table column of this declared type holds integers.
fn integer_type(backend: Backend, type_name: &str) -> bool {
    backend.dialect().integer_type(type_name)
}

/// How a PostgreSQL timestamp column's values are read: as instants, or as local times.
fn pg_at_kind(type_name: &str) -> Option<bool> {
    if type_name.starts_with("timestamp") && type_name.ends_with("with time zone") && !type_name.contains("without") {
        Some(false)
    } else if type_name == "date" || (type_name.starts_with("timestamp") && type_name.ends_with("without time zone")) {
        Some(true)
    } else {
        None
    }
}

/// Why a fact's timestamp value is no usable timestamp: `kind` is SQLite's `typeof`.
fn bad_reason(kind: &str, value: Option<&str>, zone: Option<&chrono_tz::Tz>) -> (String, bool) {
    match (kind, value) {
        ("null", _) | (_, None) => ("no value".into(), false),
        ("integer" | "real", _) => ("a number, not a timestamp".into(), false),
        ("blob", _) => ("bytes, not a timestamp".into(), false),
        (_, Some(v)) => match Micros::parse(v, zone) {
            Err(crate::ts::TimestampError::NoZone(_)) => (
                "a time without a zone (set source.timezone to the zone it is in)".into(),
                true,
            ),
            Err(crate::ts::TimestampError::NonexistentLocalTime { .. }) => (
                format!(
                    "a local time that does not exist in {} (a daylight-saving gap)",
                    zone.map_or("the zone", |z| z.name())
                ),
                false,
            ),
            _ => (
                "not a timestamp (expected RFC 3339, e.g. 2026-10-05T09:30:00Z)".into(),
                false,
            ),
        },
    }
}

/// Fills the surrogate-key column of a staged fact table, set-based, in one
/// transaction. Safe to rerun: every fact is recomputed from the current dimension.
///
/// Refuses (writing nothing) a fact table that dimlog owns (a registered dimension's
/// log or dimension, or one of dimlog's own tables), and a surrogate-key column that is
/// one of the key columns or the timestamp column, that is not of an integer type, or
/// that holds values other than NULL and -1 while `assign-keys` never filled it for this
/// dimension (unless `spec.overwrite`). Which columns it filled is recorded in the
/// target (`dimlog_assigned`), in the assignment's transaction. A fact
/// whose timestamp cannot be read (NULL, a number, text that is not a time) gets the
/// unknown member and is counted; times without a zone when `spec.timezone` is not set
/// are refused, as PostgreSQL's zone-less column types are.
pub async fn assign_keys(conn: &mut Conn, ctx: &SqlContext, spec: &AssignSpec) -> Result<AssignReport, AssignError> {
    if spec.key_columns.len() != ctx.key_names.len() {
        return Err(AssignError::KeyColumnCount {
            given: spec.key_columns.len(),
            expected: ctx.key_names.len(),
            names: ctx
                .key_defs
                .iter()
                .map(|c| c.bare.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let prefix = crate::config::RESERVED_PREFIX;
    if spec
        .facts
        .name()
        .get(..prefix.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
    {
        return Err(AssignError::ReservedFactTable {
            table: spec.facts.name().to_string(),
            prefix,
        });
    }
    let backend = conn.backend();
    let dialect = conn.dialect();
    if dialect.single_schema() {
        if let Some(schema) = spec
            .facts
            .schema()
            .filter(|s| !s.eq_ignore_ascii_case(dialect.default_schema()))
        {
            return Err(AssignError::FactTableSchema {
                table: spec.facts.to_string(),
                schema: schema.to_string(),
                name: spec.facts.name().to_string(),
            });
        }
    }
    if let Some(prefix) = dialect.reserved_table_prefix() {
        if crate::config::reserved_by_engine(prefix, spec.facts.name()) {
            return Err(AssignError::SqliteReservedFactTable {
                table: spec.facts.to_string(),
                prefix,
            });
        }
    }
    check_not_owned(conn, ctx, spec).await?;
    let mut actx = AssignContext {
        base: ctx,
        facts: spec.facts.quoted(),
        fact_keys: spec.key_columns.iter().map(Ident::quoted).collect(),
        fact_at: spec.at_column.quoted(),
        fact_sk: spec.sk_column.quoted(),
        at_local: false,
        at_date: false,
        tz: spec.timezone.map(|z| z.name().to_string()),
        facts_distributed: false,
        facts_elsewhere: false,
    };
    let columns_sql = sql::statement(backend, "lookup", "fact_columns", &actx)?;
    // The catalog statement's first parameter names the table.
    let table_param = match dialect
        .table_params(spec.facts.name(), spec.facts.schema(), &spec.facts.quoted())
        .remove(0)
    {
        Param::Text(t) => t,
        _ => spec.facts.quoted(),
    };
    let columns = conn
        .query_text(
            "reading the fact table's columns",
            &columns_sql,
            &[Param::Text(table_param)],
        )
        .await?;
    if columns.is_empty() {
        return Err(AssignError::NoFactTable {
            table: spec.facts.to_string(),
        });
    }
    let columns: Vec<(String, String)> = columns
        .into_iter()
        .filter_map(|r| {
            Some((
                r.first().cloned().flatten()?,
                r.get(1).cloned().flatten().unwrap_or_default(),
            ))
        })
        .collect();
    let find = |c: &Ident| columns.iter().find(|(n, _)| same_column(backend, n, c.name()));
    let names = || columns.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ");
    let inputs = spec
        .key_columns
        .iter()
        .map(|c| (FactColumn::Key, c))
        .chain([(FactColumn::At, &spec.at_column)]);
    for (role, c) in inputs.clone() {
        if find(c).is_none() {
            return Err(AssignError::NoSuchColumn {
                role,
                column: c.name().to_string(),
                table: spec.facts.to_string(),
                columns: names(),
            });
        }
    }
    for (role, c) in inputs {
        if same_column(backend, c.name(), spec.sk_column.name()) {
            return Err(AssignError::SkIsInput {
                column: spec.sk_column.name().to_string(),
                role,
                table: spec.facts.to_string(),
            });
        }
    }
    let existing_sk = find(&spec.sk_column).cloned();
    if let Some((name, type_name)) = &existing_sk {
        if !integer_type(backend, type_name) {
            return Err(AssignError::SkNotInteger {
                column: name.clone(),
                table: spec.facts.to_string(),
                type_name: if type_name.is_empty() {
                    "declared without a type".into()
                } else {
                    type_name.clone()
                },
            });
        }
    }
    if dialect.values_have_declared_types() {
        let fact_types: Vec<(String, String)> = spec
            .key_columns
            .iter()
            .map(|c| find(c).cloned().unwrap_or_default())
            .collect();
        let families = |types: &mut dyn Iterator<Item = &String>| {
            let mut f: Vec<String> = types.map(|t| pg_type_family(t)).collect();
            f.sort();
            f
        };
        let in_order = fact_types
            .iter()
            .zip(&ctx.key_defs)
            .all(|((_, t), k)| pg_type_family(t) == pg_type_family(&k.target_type));
        if !in_order
            && families(&mut fact_types.iter().map(|(_, t)| t))
                == families(&mut ctx.key_defs.iter().map(|k| &k.target_type))
        {
            return Err(AssignError::KeyColumnOrder {
                given: fact_types
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                key: ctx
                    .key_defs
                    .iter()
                    .map(|k| k.bare.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                table: spec.facts.to_string(),
            });
        }
        for ((name, type_name), key) in fact_types.into_iter().zip(&ctx.key_defs) {
            if pg_type_family(&type_name) != pg_type_family(&key.target_type) {
                return Err(AssignError::KeyTypeMismatch {
                    column: name,
                    table: spec.facts.to_string(),
                    type_name,
                    key_column: key.bare.clone(),
                    key_type: key.target_type.clone(),
                });
            }
        }
        let (name, type_name) = find(&spec.at_column).cloned().unwrap_or_default();
        match pg_at_kind(&type_name) {
            None => {
                return Err(AssignError::AtNotTimestamp {
                    column: name,
                    table: spec.facts.to_string(),
                    type_name,
                })
            }
            Some(true) if spec.timezone.is_none() => {
                return Err(AssignError::AtNoZone {
                    column: name,
                    table: spec.facts.to_string(),
                    type_name,
                })
            }
            Some(local) => {
                actx.at_local = local;
                actx.at_date = type_name == "date";
            }
        }
    }
    let assigned_before = filled_before(conn, spec).await?;
    if let (Some((name, _)), false) = (&existing_sk, spec.overwrite) {
        // A column never filled may hold nothing but NULL and -1; one filled before,
        // nothing but those and the dimension's surrogate keys.
        let statement = if assigned_before { "sk_foreign" } else { "sk_filled" };
        let filled = conn
            .query_text(
                "checking the surrogate-key column's values",
                &sql::statement(backend, "lookup", statement, &actx)?,
                &[],
            )
            .await?;
        let row = filled.into_iter().next().unwrap_or_default();
        let count: i64 = row.first().cloned().flatten().and_then(|v| v.parse().ok()).unwrap_or(0);
        let (column, table, dimension) = (name.clone(), spec.facts.to_string(), spec.dimension.clone());
        let values = if count == 1 { "value" } else { "values" };
        let example = row.get(1).cloned().flatten().unwrap_or_else(|| "NULL".into());
        if count > 0 && assigned_before {
            return Err(AssignError::SkForeign {
                column,
                table,
                dimension,
                count,
                values,
                are: if count == 1 { "is" } else { "are" },
                example,
            });
        }
        if count > 0 {
            return Err(AssignError::SkNotAssigned {
                column,
                table,
                dimension,
                count,
                values,
                example,
            });
        }
    }
    conn.begin().await?;
    let result: Result<AssignReport, AssignError> = async {
        // One assignment of a fact table at a time: two would update its rows in
        // different orders and deadlock; the second waits, then assigns from what the
        // first left (SQLite's write transaction is this lock already).
        conn.execute(
            "waiting for another assign-keys on the fact table",
            &sql::statement(backend, "lookup", "assign_lock", &actx)?,
            &[Param::Text(format!("dimlog assign-keys {}", actx.facts))],
        )
        .await?;
        if existing_sk.is_none() {
            conn.execute(
                "adding the surrogate-key column",
                &sql::statement(backend, "lookup", "add_sk_column", &actx)?,
                &[],
            )
            .await?;
        }
        if !dialect.values_have_declared_types() {
            // Fact times and keys in any spelling: parsed and canonicalised by dimlog.
            parse_fact_times(conn, &actx, spec).await?;
            map_fact_keys(conn, ctx, &actx).await?;
        }
        let distributed = sql::statement(backend, "lookup", "facts_distributed", &actx)?;
        let layout = conn
            .query_count(
                "finding how the fact table is laid out",
                &distributed,
                &[Param::Text(actx.facts.clone())],
            )
            .await?;
        if layout == 3 {
            return Err(AssignError::ReferenceFactTable {
                table: spec.facts.to_string(),
            });
        }
        actx.facts_distributed = layout == 1;
        actx.facts_elsewhere = layout == 2;
        if actx.facts_distributed {
            tracing::info!(
                "assign-keys: {} is a distributed table, assigned on its shards",
                spec.facts
            );
        } else if actx.facts_elsewhere {
            tracing::info!(
                "assign-keys: {} is a distributed table not colocated with the dimension by its key{}: Citus \
                 repartitions both by the key to join them (slower than a fact table distributed by the key and \
                 colocated with the log)",
                spec.facts,
                if ctx.key_hash {
                    " (a key of several columns is distributed by its hash)"
                } else {
                    ""
                }
            );
        }
        let steps = [
            "assign_repartition",
            "assign_map",
            "assign_facts_seen",
            "assign_unknown",
        ];
        run_named(conn, "lookup", &steps, &actx).await?;
        conn.execute("assign-keys", &sql::statement(backend, "lookup", "assign", &actx)?, &[])
            .await?;
        let counts = conn
            .query_i64s(
                "counting assigned facts",
                &sql::statement(backend, "lookup", "counts", &actx)?,
                &[],
            )
            .await?;
        // A sum over no facts is NULL: none.
        let count = |i: usize| counts.get(i).copied().flatten().unwrap_or(0);
        let mut report = AssignReport {
            facts_matched: count(0),
            facts_unknown: count(1),
            bad_timestamps: count(2),
            first_bad_timestamp: None,
        };
        let mut no_zone = false;
        if report.bad_timestamps > 0 {
            let first = conn
                .query_text(
                    "finding a fact without a usable timestamp",
                    &sql::statement(backend, "lookup", "first_bad", &actx)?,
                    &[],
                )
                .await?;
            let row = first.into_iter().next().unwrap_or_default();
            let n = spec.key_columns.len();
            let key = row
                .iter()
                .take(n)
                .map(|v| v.clone().unwrap_or_else(|| "NULL".into()))
                .collect();
            let kind = row.get(n).cloned().flatten().unwrap_or_else(|| "null".into());
            let value = row.get(n + 1).cloned().flatten();
            let (reason, zone_less) = bad_reason(&kind, value.as_deref(), spec.timezone.as_ref());
            no_zone = zone_less;
            let shown = match (kind.as_str(), &value) {
                (_, None) | ("null", _) => "NULL".to_string(),
                ("integer" | "real", Some(v)) => v.clone(),
                (_, Some(v)) => format!("'{}'", v.replace('\'', "''")),
            };
            report.first_bad_timestamp = Some(BadFact {
                key,
                value: shown,
                reason,
            });
        }
        if spec.unknown_is_error && report.facts_unknown > 0 {
            if let Some(first) = report.first_bad_timestamp.clone() {
                return Err(AssignError::BadTimestamps {
                    table: spec.facts.to_string(),
                    column: spec.at_column.name().to_string(),
                    count: report.bad_timestamps,
                    first,
                    no_zone,
                });
            }
            let first = conn
                .query_text(
                    "finding an unknown fact",
                    &sql::statement(backend, "lookup", "first_unknown", &actx)?,
                    &[],
                )
                .await?;
            let row = first.into_iter().next().unwrap_or_default();
            let (at, key) = row
                .split_last()
                .map(|(a, k)| (a.clone(), k.to_vec()))
                .unwrap_or((None, vec![]));
            // Each part named by its column, text quoted: `(t="a, b", n=1)` is unambiguous.
            let key: Vec<String> = key
                .into_iter()
                .zip(&ctx.key_defs)
                .map(|(v, c)| match v {
                    None => format!("{}=NULL", c.bare),
                    Some(v) if has_spellings(c.kind) || c.kind == ColumnKind::Float => format!("{}={v}", c.bare),
                    Some(v) => format!("{}={v:?}", c.bare),
                })
                .collect();
            return Err(AssignError::Unknown {
                count: report.facts_unknown,
                dimension: ctx.dim.replace('"', ""),
                key: key.join(", "),
                at: at.unwrap_or_else(|| "NULL".into()),
            });
        }
        run_named(conn, "lookup", &["drop_at_parsed", "drop_key_map"], &actx).await?;
        if !assigned_before {
            // `init` makes it on PostgreSQL: CREATE TABLE IF NOT EXISTS would need CREATE on
            // the schema even where it exists.
            if !assigned_table_exists(conn).await? {
                run_named(conn, "lookup", &["assigned_table"], &actx).await?;
            }
            conn.execute(
                "recording the filled surrogate-key column",
                &sql::statement(backend, "lookup", "assigned_put", &actx)?,
                &[
                    Param::Text(spec.dimension.clone()),
                    Param::Text(spec.facts.to_string()),
                    Param::Text(spec.sk_column.name().to_string()),
                    Param::Ts(Micros::from_utc(chrono::Utc::now())),
                ],
            )
            .await?;
        }
        Ok(report)
    }
    .await;
    conn.finish(result).await
}

/// Refuses a fact table that is a registered dimension's log, dimension or rebuild table
/// (this one's or another's, in any spelling that names the same table). dimlog's own tables are refused by their prefix before.
async fn check_not_owned(conn: &mut Conn, ctx: &SqlContext, spec: &AssignSpec) -> Result<(), AssignError> {
    let backend = conn.backend();
    let unquote = |q: &str| q.replace('"', "");
    let mut owned: Vec<(String, &'static str, String)> = vec![
        (unquote(&ctx.log), "log", spec.dimension.clone()),
        (unquote(&ctx.dim), "dimension", spec.dimension.clone()),
        (unquote(&ctx.dim_new), "rebuild table", spec.dimension.clone()),
    ];
    let rows = conn
        .query_text(
            "reading the tables of dimlog's dimensions",
            &sql::statement(backend, "lookup", "owned_tables", &serde_json::json!({}))?,
            &[],
        )
        .await?;
    for row in rows {
        if let [Some(owner), Some(log), Some(dim)] = &row[..] {
            owned.push((log.clone(), "log", owner.clone()));
            owned.push((dim.clone(), "dimension", owner.clone()));
            owned.push((format!("{dim}_dimlog_new"), "rebuild table", owner.clone()));
        }
    }
    let given = spec.facts.to_string();
    match owned
        .into_iter()
        .find(|(table, _, _)| crate::db::same_table(backend, table, &given))
    {
        Some((_, role, owner)) => Err(AssignError::OwnedFactTable {
            table: given,
            role,
            owner,
        }),
        None => Ok(()),
    }
}

/// Refuses (nothing written) a fact table that is the source table when source and
/// target are one database: the same SQLite file or PostgreSQL URL, or, for PostgreSQL
/// URLs that differ, the same database by the servers' word (asked only when `facts`
/// names the source table; a source that cannot be reached is not the target, which
/// was). dimlog never writes a source.
pub async fn check_not_the_source(
    plan: &crate::config::Plan,
    target: &mut Conn,
    facts: &Ident,
) -> Result<(), AssignError> {
    let crate::config::Relation::Table(source_table) = &plan.source.relation else {
        return Ok(());
    };
    let backend = target.backend();
    if plan.source.url.backend.dialect().root() != backend.dialect().root()
        || !crate::db::same_table(backend, &facts.to_string(), &source_table.to_string())
    {
        return Ok(());
    }
    let same = if crate::config::same_database(&plan.source.url, &plan.target.url) {
        true
    } else if let Some(here) = target.database_identity().await? {
        match Conn::open(&plan.source.url, crate::db::Access::ReadOnly).await {
            Err(_) => false,
            Ok(mut source) => {
                let there = source.database_identity().await;
                let _ = source.close().await;
                there? == Some(here)
            }
        }
    } else {
        false
    };
    if same {
        return Err(AssignError::SourceFactTable {
            table: facts.to_string(),
            source_table: source_table.to_string(),
        });
    }
    Ok(())
}

/// Whether `dimlog_assigned` exists (made by `init` on PostgreSQL, by the first
/// assignment on SQLite).
async fn assigned_table_exists(conn: &mut Conn) -> Result<bool, DbError> {
    let sql = sql::statement(conn.backend(), "lookup", "assigned_exists", &serde_json::json!({}))?;
    Ok(conn.query_count("looking for dimlog_assigned", &sql, &[]).await? > 0)
}

/// Whether `assign-keys` filled this fact table's surrogate-key column for this
/// dimension before (its record in `dimlog_assigned`, in any spelling of the names).
async fn filled_before(conn: &mut Conn, spec: &AssignSpec) -> Result<bool, DbError> {
    let backend = conn.backend();
    if !assigned_table_exists(conn).await? {
        return Ok(false);
    }
    let rows = conn
        .query_text(
            "reading which surrogate-key columns assign-keys filled",
            &sql::statement(backend, "lookup", "assigned_get", &serde_json::json!({}))?,
            &[Param::Text(spec.dimension.clone())],
        )
        .await?;
    let given = spec.facts.to_string();
    Ok(rows.iter().any(|r| match &r[..] {
        [Some(table), Some(column)] => {
            crate::db::same_table(backend, table, &given) && same_column(backend, column, spec.sk_column.name())
        }
        _ => false,
    }))
}

/// SQLite: reads every fact timestamp the SQL does not take (see `at` in
/// `sql/sqlite/lookup.sql`) with [`Micros::parse`], in `zone` when it has none, into the
/// temporary table `dimlog_at_parsed`; what does not read stays out (no usable
/// timestamp).
async fn parse_fact_times(conn: &mut Conn, actx: &AssignContext<'_>, spec: &AssignSpec) -> Result<(), AssignError> {
    let zone = spec.timezone.as_ref();
    run_named(conn, "lookup", &["drop_at_parsed", "at_parsed"], actx).await?;
    let sql = sql::statement(conn.backend(), "lookup", "at_to_parse", actx)?;
    let rows = conn.query_text("reading fact timestamps", &sql, &[]).await?;
    let mut zone_less: Vec<String> = Vec::new();
    let parsed: Vec<Vec<Option<String>>> = rows
        .into_iter()
        .filter_map(|r| {
            let raw = r.into_iter().next().flatten()?;
            let at = match Micros::parse(&raw, zone) {
                Ok(at) => at,
                Err(crate::ts::TimestampError::NoZone(_)) => {
                    zone_less.push(raw);
                    return None;
                }
                Err(_) => return None,
            };
            Some(vec![Some(raw), Some(at.to_text())])
        })
        .collect();
    if !zone_less.is_empty() {
        zone_less.sort();
        let one = zone_less.len() == 1;
        return Err(AssignError::AtNoZoneValues {
            column: spec.at_column.name().to_string(),
            table: spec.facts.to_string(),
            count: zone_less.len(),
            facts: if one { "fact time" } else { "distinct fact times" },
            have: if one { "carries" } else { "carry" },
            it_means: if one { "it means" } else { "they mean" },
            example: zone_less.swap_remove(0),
        });
    }
    conn.bulk_insert(
        "reading fact timestamps",
        "dimlog_at_parsed",
        &["dimlog_raw".to_string(), "dimlog_utc".to_string()],
        &[BindKind::Text, BindKind::Text],
        &parsed,
    )
    .await?;
    Ok(())
}

/// SQLite: maps each distinct key of the facts (its text) to the versions of the
/// dimension's key that is the same value in canonical form ([`canonical_key`]), in the
/// temporary table `dimlog_key_map` the assignment joins; SQLite's own comparison
/// would read spellings by the columns' affinities (`1.0` is the integer `1` for one
/// column and not for another).
async fn map_fact_keys(conn: &mut Conn, ctx: &SqlContext, actx: &AssignContext<'_>) -> Result<(), AssignError> {
    let backend = conn.backend();
    run_named(conn, "lookup", &["drop_key_map", "key_map", "key_map_index"], actx).await?;
    let kinds: Vec<ColumnKind> = key_cols(backend, ctx).iter().map(|c| c.kind).collect();
    let n = kinds.len();
    let canon = |parts: &[Option<String>]| -> Option<String> {
        let parts: Vec<Cow<'_, str>> = parts
            .iter()
            .zip(&kinds)
            .map(|(v, k)| v.as_deref().map(|v| canonical_key(*k, v)))
            .collect::<Option<_>>()?;
        Some(join_key(&parts.iter().map(|p| p.as_ref()).collect::<Vec<_>>()))
    };
    let dimension = conn
        .query_text(
            "reading the dimension's keys",
            &sql::statement(backend, "lookup", "index_rows", ctx)?,
            &[],
        )
        .await?;
    type Version = (Option<String>, Option<String>, Option<String>);
    let mut versions: FxHashMap<String, Vec<Version>> = FxHashMap::default();
    for r in dimension {
        if let Some(k) = canon(&r[..n]) {
            versions
                .entry(k)
                .or_default()
                .push((r[n].clone(), r[n + 1].clone(), r[n + 2].clone()));
        }
    }
    let facts = conn
        .query_text(
            "reading the facts' keys",
            &sql::statement(backend, "lookup", "fact_keys", actx)?,
            &[],
        )
        .await?;
    let mut rows = Vec::new();
    for f in facts {
        let Some(found) = canon(&f).and_then(|k| versions.get(&k)) else {
            continue;
        };
        for (from, to, sk) in found {
            let mut row = f.clone();
            row.extend([from.clone(), to.clone(), sk.clone()]);
            rows.push(row);
        }
    }
    let mut columns: Vec<String> = (0..n).map(|i| format!("dimlog_k{i}")).collect();
    columns.extend(["dimlog_from", "dimlog_to", "dimlog_sk"].map(String::from));
    let mut binds = vec![BindKind::Text; n + 2];
    binds.push(BindKind::Int);
    conn.bulk_insert("mapping the facts' keys", "dimlog_key_map", &columns, &binds, &rows)
        .await?;
    Ok(())
}

/// One version's interval and surrogate key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    from: i64,
    to: i64,
    sk: i64,
}

/// A sealed step of a key's timeline: from `from` on (until the next step), `sk` is in
/// effect. A gap (after a tombstone) is a step to [`UNKNOWN`], and so the end of every
/// timeline is implied: 16 bytes a version instead of 24, so more of the index stays in
/// cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
struct Step {
    from: i64,
    sk: i64,
}

/// An in-memory point-in-time index over a dimension: per key, its versions sorted by
/// `valid_from`, binary-searched. Keys are the canonical text of the key columns
/// ([`canonical_key`]: `07` is the integer key `7`, `1.00` the numeric key `1`, an
/// upper-case uuid its lower-case form), joined with U+001F for composite keys.
///
/// Sealed, every key's versions lie next to each other in one array, and the key maps to
/// its slice of it; a key that is the canonical text of an `i64` (most keys are) is
/// hashed as that number, so a lookup costs a parse, one probe and one slice.
#[derive(Debug, Default)]
pub struct Index {
    /// How many columns the natural key has (from the dimension, else the first key
    /// inserted): a lookup with another number of parts is an error.
    key_parts: Option<usize>,
    /// The kinds of the key columns, when known (from the dimension, or
    /// [`Index::with_key_kinds`]): keys, stored and looked up, are compared in their
    /// canonical form ([`canonical_key`]). Empty: compared as given.
    kinds: Vec<ColumnKind>,
    /// Versions added since the last [`Index::seal`].
    pending: FxHashMap<Box<str>, Vec<Span>>,
    /// Sealed keys that are canonical integers → (start, length) in `steps`.
    ints: IntTable,
    /// Every other sealed key → (start, length) in `steps`.
    texts: FxHashMap<Box<str>, (u32, u32)>,
    /// Sealed timelines, grouped by key, each group sorted by `from`.
    steps: Vec<Step>,
    versions: usize,
}

/// A map from integer keys to their steps: open addressing with linear probing, one
/// 64-byte slot (a cache line) per key holding the key and, for a key of at most three
/// steps, the steps themselves; a lookup usually reads that one line. Longer timelines
/// are read from [`Index`]'s step array.
#[derive(Debug, Default)]
struct IntTable {
    /// `len == 0` marks an empty slot (every key has at least one step).
    slots: Vec<IntSlot>,
    shift: u32,
}

const INLINE_STEPS: usize = 3;

#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct IntSlot {
    key: i64,
    start: u32,
    len: u32,
    inline: [Step; INLINE_STEPS],
}

impl Default for Step {
    fn default() -> Step {
        Step { from: 0, sk: UNKNOWN }
    }
}

impl IntTable {
    /// Room for `keys` keys, at most three quarters full.
    fn with_capacity(keys: usize) -> IntTable {
        let bits = (keys.max(1) * 4 / 3 + 1).next_power_of_two().trailing_zeros().max(4);
        IntTable {
            slots: vec![IntSlot::default(); 1 << bits],
            shift: 64 - bits,
        }
    }

    fn home(&self, key: i64) -> usize {
        ((key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// Adds a key whose steps are `all[start..start + len]`.
    fn insert(&mut self, key: i64, (start, len): (u32, u32), all: &[Step]) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        while self.slots[i].len != 0 && self.slots[i].key != key {
            i = (i + 1) & mask;
        }
        let mut slot = IntSlot {
            key,
            start,
            len,
            ..IntSlot::default()
        };
        if len as usize <= INLINE_STEPS {
            slot.inline[..len as usize].copy_from_slice(&all[start as usize..(start + len) as usize]);
        }
        self.slots[i] = slot;
    }

    /// The steps of `key`, given the step array they were inserted from.
    fn get<'a>(&'a self, key: i64, all: &'a [Step]) -> Option<&'a [Step]> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let s = &self.slots[i];
            if s.len == 0 {
                return None;
            }
            if s.key == key {
                let len = s.len as usize;
                return Some(if len <= INLINE_STEPS {
                    &s.inline[..len]
                } else {
                    &all[s.start as usize..s.start as usize + len]
                });
            }
            i = (i + 1) & mask;
        }
    }

    fn drain(&mut self) -> impl Iterator<Item = (i64, (u32, u32))> {
        std::mem::take(&mut self.slots)
            .into_iter()
            .filter(|s| s.len != 0)
            .map(|s| (s.key, (s.start, s.len)))
    }
}

/// The `i64` whose canonical text (`i64::to_string`) `s` is, if any: no sign but a
/// leading `-`, no leading zeros, no `-0`. So a key maps to an integer exactly when it
/// is that integer's one spelling, and text keys like `007` stay text.
fn canonical_int(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let digits = b.strip_prefix(b"-").unwrap_or(b);
    match digits {
        [] => return None,
        [b'0'] if digits.len() == b.len() => return Some(0),
        [b'0', ..] => return None,
        _ => {}
    }
    if digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.parse().ok()
}

/// The canonical text of a key value of `kind`: what every way in (`dimlog lookup`,
/// `assign-keys`, [`Index`], `history --key`) compares, on both backends, so that every
/// spelling a database reads as the same value finds the same key:
///
/// - integer: decimal digits, `-` for a negative number, no `+`, no leading zeros, no
///   `-0` (`07`, `+7`, ` 7 ` → `7`);
/// - numeric (exact decimal): the shortest exact form: no `+`, no leading zeros before
///   the point (`0.5`, not `.5`), no trailing zeros after it and no point for a whole
///   number, no `-0`; an exponent is applied (`1.00`, `1.0`, `01`, `100e-2` → `1`;
///   `-.01` → `-0.01`; `NaN` in any case → `NaN`; `inf`, `Infinity` in any case →
///   `Infinity`, with `-` for the negative one), as PostgreSQL prints them;
/// - uuid: 32 lowercase hex digits in groups 8-4-4-4-12 (from upper case, braces, or
///   hyphens elsewhere or none);
/// - date: `YYYY-MM-DD` (from `2026-1-1`, `2026-01-1`), with ` BC` for a year before the
///   common era and more digits for a year after 9999; `infinity` and `-infinity` in any
///   case, as PostgreSQL prints them;
/// - every other kind (text above all): the text as it is, byte for byte.
///
/// Surrounding whitespace is ignored for integers, numerics, uuids and dates. Text that
/// is no spelling of a value of its kind is compared as it is (SQLite may hold it in a
/// column of any type).
pub fn canonical_key(kind: ColumnKind, text: &str) -> Cow<'_, str> {
    read_key(kind, text).unwrap_or(Cow::Borrowed(text))
}

/// [`canonical_key`] of a text that is a spelling of a value of `kind`, or `None` when
/// it is none (a kind compared as text reads every text).
pub fn read_key(kind: ColumnKind, text: &str) -> Option<Cow<'_, str>> {
    match kind {
        ColumnKind::Int => read_int(text),
        ColumnKind::Numeric => read_numeric(text),
        ColumnKind::Uuid => read_uuid(text),
        ColumnKind::Date => read_date(text),
        _ => Some(Cow::Borrowed(text)),
    }
}

/// Whether key values of `kind` have spellings other than their canonical text.
pub fn has_spellings(kind: ColumnKind) -> bool {
    matches!(
        kind,
        ColumnKind::Int | ColumnKind::Numeric | ColumnKind::Uuid | ColumnKind::Date
    )
}

fn read_int(text: &str) -> Option<Cow<'_, str>> {
    if canonical_int(text).is_some() {
        return Some(Cow::Borrowed(text));
    }
    let t = text.trim_ascii();
    let (negative, digits) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = digits.trim_start_matches('0');
    if digits.len() > 19 {
        return None;
    }
    let magnitude: i128 = if digits.is_empty() { 0 } else { digits.parse().ok()? };
    let value = if negative { -magnitude } else { magnitude };
    let value = i64::try_from(value).ok()?;
    Some(Cow::Owned(value.to_string()))
}

fn read_numeric(text: &str) -> Option<Cow<'_, str>> {
    let t = text.trim_ascii();
    if t.eq_ignore_ascii_case("nan") {
        return Some(borrowed_if_same(text, "NaN".into()));
    }
    let (negative, rest) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    // PostgreSQL's infinite numerics (`Infinity`, `inf`, any case, either sign).
    if rest.eq_ignore_ascii_case("infinity") || rest.eq_ignore_ascii_case("inf") {
        let out = if negative { "-Infinity" } else { "Infinity" };
        return Some(borrowed_if_same(text, out.into()));
    }
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => {
            let e = &rest[i + 1..];
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            // PostgreSQL's numeric reaches 10^131071 and 10^-16383.
            if digits.is_empty() || digits.len() > 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (&rest[..i], e.parse::<i64>().ok()?)
        }
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    // digits × 10^(point - len(digits)), with the point after `point` digits.
    let digits: Vec<u8> = int.bytes().chain(frac.bytes()).collect();
    let point = int.len() as i64 + exponent;
    let first = digits.iter().position(|&d| d != b'0');
    let Some(first) = first else {
        return Some(Cow::Borrowed("0"));
    };
    let last = digits.iter().rposition(|&d| d != b'0').expect("a nonzero digit");
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    let (first, last) = (first as i64, last as i64);
    // Integer part: digits before the point, from the first nonzero one.
    if point <= first {
        out.push('0');
    } else {
        for i in first..point {
            out.push(if i <= last { digits[i as usize] as char } else { '0' });
        }
    }
    if last >= point {
        out.push('.');
        for i in point..=last {
            out.push(if i < first { '0' } else { digits[i as usize] as char });
        }
    }
    Some(borrowed_if_same(t, out))
}

/// `written` itself when the canonical form `out` spells it the same: no allocation
/// for a key that is already canonical (the common case on a loader's hot path).
fn borrowed_if_same(written: &str, out: String) -> Cow<'_, str> {
    if out == written {
        Cow::Borrowed(written)
    } else {
        Cow::Owned(out)
    }
}

fn read_uuid(text: &str) -> Option<Cow<'_, str>> {
    let t = text.trim_ascii();
    let inner = t.strip_prefix('{').and_then(|s| s.strip_suffix('}')).unwrap_or(t);
    if inner.starts_with('-') || inner.ends_with('-') || inner.contains("--") {
        return None;
    }
    let hex: Vec<u8> = inner.bytes().filter(|&b| b != b'-').collect();
    if hex.len() != 32 || !hex.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let mut out = String::with_capacity(36);
    for (i, b) in hex.iter().enumerate() {
        if matches!(i, 8 | 12 | 16 | 20) {
            out.push('-');
        }
        out.push(b.to_ascii_lowercase() as char);
    }
    Some(borrowed_if_same(text, out))
}

fn read_date(text: &str) -> Option<Cow<'_, str>> {
    let t = text.trim_ascii();
    if t.eq_ignore_ascii_case("infinity") || t.eq_ignore_ascii_case("+infinity") {
        return Some(borrowed_if_same(text, "infinity".into()));
    }
    if t.eq_ignore_ascii_case("-infinity") {
        return Some(borrowed_if_same(text, "-infinity".into()));
    }
    // PostgreSQL's era suffix: ` BC` for years before the common era (` AD` is implied).
    let era = t.len().checked_sub(3).and_then(|i| t.get(i..)).unwrap_or("");
    let (t, bc) = if era.eq_ignore_ascii_case(" bc") {
        (&t[..t.len() - 3], true)
    } else if era.eq_ignore_ascii_case(" ad") {
        (&t[..t.len() - 3], false)
    } else {
        (t, false)
    };
    let mut parts = t.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some()
        || !(4..=7).contains(&y.len())
        || !(1..=2).contains(&m.len())
        || !(1..=2).contains(&d.len())
        || !y.bytes().chain(m.bytes()).chain(d.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let (year, month, day): (i64, u32, u32) = (y.parse().ok()?, m.parse().ok()?, d.parse().ok()?);
    // Proleptic Gregorian, as PostgreSQL counts: 1 BC is astronomical year 0, a leap year.
    let astronomical = if bc { 1 - year } else { year };
    let leap =
        astronomical.rem_euclid(4) == 0 && (astronomical.rem_euclid(100) != 0 || astronomical.rem_euclid(400) == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if year == 0 || day == 0 || day > days {
        return None;
    }
    let out = format!("{year:04}-{month:02}-{day:02}{}", if bc { " BC" } else { "" });
    Some(borrowed_if_same(text, out))
}

/// A lookup the index cannot answer (as opposed to one with no version in effect, which
/// is [`UNKNOWN`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// The key has another number of parts than the dimension's natural key has columns.
    #[error(
        "the key has {given} part(s), but the dimension's natural key has {expected} column(s) (source.key): \
         pass one value per key column, in source.key order"
    )]
    KeyParts {
        /// Columns of the natural key.
        expected: usize,
        /// Parts given.
        given: usize,
    },
    /// A key part is no spelling of a value of its column's type (`1x` for an integer
    /// key): a typo, not a key without a version.
    #[error("{value:?} is not a value of the key column {column} ({type_name}): give the key as the column holds it")]
    NotAValue {
        /// The key column.
        column: String,
        /// The part as given.
        value: String,
        /// The column's type in the target.
        type_name: String,
    },
}

/// The first part of `key` that is no spelling of a value of its key column's type, as
/// the error that names it. Callers ask only once nothing was found: SQLite may hold
/// such text in a column of any type.
pub(crate) fn not_a_value(backend: Backend, ctx: &SqlContext, key: &[String]) -> Option<LookupError> {
    key_cols(backend, ctx)
        .iter()
        .zip(key)
        .find(|(c, k)| read_key(c.kind, k).is_none())
        .map(|(c, k)| LookupError::NotAValue {
            column: c.bare.clone(),
            value: k.clone(),
            type_name: c.target_type.clone(),
        })
}

/// The separator of composite key parts in [`Index::lookup_joined`].
pub const KEY_SEPARATOR: char = '\u{1f}';

impl Index {
    #[doc(hidden)]
    /// An empty index whose keys have these kinds (one per key column, in `source.key`
    /// order): keys inserted and looked up are compared in their canonical form
    /// ([`canonical_key`]), as an index [`Index::load`]ed from a dimension does.
    pub fn with_key_kinds(kinds: &[ColumnKind]) -> Index {
        Index {
            key_parts: Some(kinds.len()),
            kinds: kinds.to_vec(),
            ..Index::default()
        }
    }

    /// Loads the whole dimension through a connection to its target (see
    /// [`Index::open`] for a program that has only the config).
    #[doc(hidden)]
    pub async fn load(conn: &mut Conn, ctx: &SqlContext) -> Result<Index, DbError> {
        let sql = sql::statement(conn.backend(), "lookup", "index_rows", ctx)?;
        let rows = conn.query_text("loading the lookup index", &sql, &[]).await?;
        let n = ctx.key_names.len();
        let kinds: Vec<ColumnKind> = key_cols(conn.backend(), ctx).iter().map(|c| c.kind).collect();
        let mut index = Index::with_key_kinds(&kinds);
        for r in rows {
            let key: Vec<&str> = r[..n].iter().map(|v| v.as_deref().unwrap_or("")).collect();
            let t = |v: &Option<String>| -> i64 {
                let s = v.as_deref().unwrap_or("");
                s.parse::<i64>()
                    .ok()
                    .or_else(|| Micros::parse(s, None).ok().map(|m| m.0))
                    .unwrap_or(i64::MIN)
            };
            let sk = r[n + 2].as_deref().and_then(|v| v.parse().ok()).unwrap_or(UNKNOWN);
            index.insert(&key, Micros(t(&r[n])), Micros(t(&r[n + 1])), sk);
        }
        index.seal();
        Ok(index)
    }

    /// `key` joined, each part in canonical form when the kinds are known.
    fn joined<'a>(&self, key: &[&'a str]) -> Cow<'a, str> {
        if self.kinds.len() == key.len() {
            if let [one] = key {
                return canonical_key(self.kinds[0], one);
            }
            let parts: Vec<Cow<'_, str>> = key
                .iter()
                .zip(&self.kinds)
                .map(|(k, kind)| canonical_key(*kind, k))
                .collect();
            let parts: Vec<&str> = parts.iter().map(|p| p.as_ref()).collect();
            return Cow::Owned(join_key(&parts));
        }
        match key {
            [one] => Cow::Borrowed(*one),
            _ => Cow::Owned(join_key(key)),
        }
    }

    #[doc(hidden)]
    /// Adds a version (call [`Index::seal`] after the last).
    pub fn insert(&mut self, key: &[&str], valid_from: Micros, valid_to: Micros, sk: i64) {
        self.key_parts.get_or_insert(key.len());
        let joined = self.joined(key).into_owned();
        self.pending.entry(joined.into_boxed_str()).or_default().push(Span {
            from: valid_from.0,
            to: valid_to.0,
            sk,
        });
        self.versions += 1;
    }

    #[doc(hidden)]
    /// Sorts each key's versions and lays them out for lookups; required before lookups
    /// (of the versions inserted since the last seal).
    pub fn seal(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        // Everything is laid out anew: keys sealed before may have new versions.
        let mut groups = std::mem::take(&mut self.pending);
        let sealed = std::mem::take(&mut self.steps);
        let versions = |(start, len): (u32, u32)| {
            let steps = &sealed[start as usize..(start + len) as usize];
            steps
                .iter()
                .enumerate()
                .filter(|(_, s)| s.sk != UNKNOWN)
                .map(|(i, s)| Span {
                    from: s.from,
                    to: steps.get(i + 1).map_or(FAR_FUTURE.0, |n| n.from),
                    sk: s.sk,
                })
        };
        for (k, range) in self.ints.drain() {
            groups
                .entry(k.to_string().into_boxed_str())
                .or_default()
                .extend(versions(range));
        }
        for (k, range) in self.texts.drain() {
            groups.entry(k).or_default().extend(versions(range));
        }
        let mut steps = Vec::with_capacity(self.versions);
        let ints = groups.keys().filter(|k| canonical_int(k).is_some()).count();
        self.ints = IntTable::with_capacity(ints);
        for (key, mut group) in groups {
            // One value held under two spellings (SQLite) may have two versions from one
            // instant: the higher surrogate key, the newer version, wins, as in `lookup`
            // and `assign-keys`.
            group.sort_unstable_by_key(|s| (s.from, s.sk));
            let start = steps.len() as u32;
            for (i, v) in group.iter().enumerate() {
                steps.push(Step { from: v.from, sk: v.sk });
                let next = group.get(i + 1).map(|n| n.from);
                if v.to < FAR_FUTURE.0 && next.is_none_or(|n| v.to < n) {
                    steps.push(Step {
                        from: v.to,
                        sk: UNKNOWN,
                    });
                }
            }
            let range = (start, steps.len() as u32 - start);
            match canonical_int(&key) {
                Some(n) => {
                    self.ints.insert(n, range, &steps);
                }
                None => {
                    self.texts.insert(key, range);
                }
            }
        }
        self.steps = steps;
    }

    /// Number of versions held.
    pub fn len(&self) -> usize {
        self.versions
    }

    /// True when the dimension was empty.
    pub fn is_empty(&self) -> bool {
        self.versions == 0
    }

    /// The surrogate key in effect for `key` (one value per key column, in `source.key`
    /// order) at `at`, or [`UNKNOWN`] when no version is in effect; a key with another
    /// number of parts than the natural key has columns is an error.
    pub fn lookup(&self, key: &[&str], at: Micros) -> Result<i64, LookupError> {
        if let Some(expected) = self.key_parts.filter(|&n| n != key.len()) {
            return Err(LookupError::KeyParts {
                expected,
                given: key.len(),
            });
        }
        if let ([ColumnKind::Int], [one]) = (self.kinds.as_slice(), key) {
            return Ok(self.lookup_int_key(one, at));
        }
        Ok(self.lookup_canonical(&self.joined(key), at))
    }

    /// The hot path of a one-column integer key: one parse, no text in between (an
    /// integer in canonical form is looked up by its value; any other spelling goes the
    /// general way).
    fn lookup_int_key(&self, key: &str, at: Micros) -> i64 {
        match canonical_int(key) {
            Some(n) => self.in_effect(self.ints.get(n, &self.steps), at),
            None => self.lookup_canonical(&canonical_key(ColumnKind::Int, key), at),
        }
    }

    /// Like [`Index::lookup`], for a key already joined with [`KEY_SEPARATOR`] (saves an
    /// allocation per composite-key fact whose parts are canonical).
    pub fn lookup_joined(&self, key: &str, at: Micros) -> i64 {
        // One column: no split, and no allocation for a key already canonical.
        match self.kinds.as_slice() {
            [ColumnKind::Int] => return self.lookup_int_key(key, at),
            [kind] => return self.lookup_canonical(&canonical_key(*kind, key), at),
            _ => {}
        }
        if self.kinds.iter().any(|k| has_spellings(*k)) {
            let parts: Vec<&str> = key.split(KEY_SEPARATOR).collect();
            if parts.len() == self.kinds.len() {
                return self.lookup_canonical(&self.joined(&parts), at);
            }
        }
        self.lookup_canonical(key, at)
    }

    /// The lookup of a key in canonical form, joined.
    fn lookup_canonical(&self, key: &str, at: Micros) -> i64 {
        let steps = match canonical_int(key) {
            Some(n) => self.ints.get(n, &self.steps),
            None => self
                .texts
                .get(key)
                .map(|&(start, len)| &self.steps[start as usize..(start + len) as usize]),
        };
        self.in_effect(steps, at)
    }

    /// The surrogate key of a key's steps in effect at `at`.
    fn in_effect(&self, steps: Option<&[Step]>, at: Micros) -> i64 {
        let Some(steps) = steps else {
            return UNKNOWN;
        };
        if at >= FAR_FUTURE {
            return UNKNOWN;
        }
        let i = steps.partition_point(|s| s.from <= at.0);
        if i == 0 {
            return UNKNOWN;
        }
        steps[i - 1].sk
    }
}

/// Joins composite key parts with [`KEY_SEPARATOR`].
pub fn join_key(key: &[&str]) -> String {
    let mut out = String::new();
    for (i, k) in key.iter().enumerate() {
        if i > 0 {
            out.push(KEY_SEPARATOR);
        }
        out.push_str(k);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Index {
        /// [`Index::lookup`] of a key with the right number of parts.
        fn get(&self, key: &[&str], at: Micros) -> i64 {
            self.lookup(key, at).expect("one value per key column")
        }
    }

    #[test]
    fn a_wrong_number_of_key_parts_is_an_error() {
        let mut ix = Index::default();
        ix.insert(&["a", "1"], Micros(0), Micros(10), 5);
        ix.seal();
        assert_eq!(ix.lookup(&["a", "1"], Micros(5)), Ok(5));
        assert_eq!(
            ix.lookup(&["a"], Micros(5)),
            Err(LookupError::KeyParts { expected: 2, given: 1 })
        );
        assert_eq!(
            ix.lookup(&["a", "1", "x"], Micros(5)),
            Err(LookupError::KeyParts { expected: 2, given: 3 })
        );
    }

    #[test]
    fn half_open_intervals() {
        let mut ix = Index::default();
        ix.insert(&["1"], Micros(100), Micros(200), 10);
        ix.insert(&["1"], Micros(200), Micros(300), 11);
        ix.insert(&["1"], Micros(400), crate::ts::FAR_FUTURE, 12);
        ix.seal();
        assert_eq!(ix.get(&["1"], Micros(99)), UNKNOWN);
        assert_eq!(ix.get(&["1"], Micros(100)), 10);
        assert_eq!(ix.get(&["1"], Micros(199)), 10);
        assert_eq!(ix.get(&["1"], Micros(200)), 11);
        assert_eq!(ix.get(&["1"], Micros(350)), UNKNOWN, "gap after a tombstone");
        assert_eq!(ix.get(&["1"], crate::ts::FAR_FUTURE.plus(-1)), 12);
        assert_eq!(ix.get(&["1"], crate::ts::FAR_FUTURE), UNKNOWN);
        assert_eq!(ix.get(&["2"], Micros(150)), UNKNOWN);
    }

    #[test]
    fn integer_keys_only_match_their_one_spelling() {
        let mut ix = Index::default();
        ix.insert(&["42"], Micros(0), Micros(10), 1);
        ix.insert(&["042"], Micros(0), Micros(10), 2);
        ix.insert(&["-7"], Micros(0), Micros(10), 3);
        ix.insert(&["0"], Micros(0), Micros(10), 4);
        ix.insert(&["99999999999999999999"], Micros(0), Micros(10), 5);
        ix.seal();
        assert_eq!(ix.get(&["42"], Micros(5)), 1);
        assert_eq!(ix.get(&["042"], Micros(5)), 2);
        assert_eq!(ix.get(&["+42"], Micros(5)), UNKNOWN);
        assert_eq!(ix.get(&["-7"], Micros(5)), 3);
        assert_eq!(ix.get(&["0"], Micros(5)), 4);
        assert_eq!(ix.get(&["-0"], Micros(5)), UNKNOWN);
        assert_eq!(ix.get(&["99999999999999999999"], Micros(5)), 5);
        assert_eq!(canonical_int("9223372036854775807"), Some(i64::MAX));
        assert_eq!(canonical_int("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(canonical_int("9223372036854775808"), None);
        assert_eq!(canonical_int("-"), None);
    }

    #[test]
    fn sealing_again_keeps_earlier_versions() {
        let mut ix = Index::default();
        ix.insert(&["1"], Micros(0), Micros(10), 1);
        ix.insert(&["a"], Micros(0), Micros(10), 2);
        ix.seal();
        ix.insert(&["1"], Micros(10), Micros(20), 3);
        ix.seal();
        assert_eq!(ix.get(&["1"], Micros(5)), 1);
        assert_eq!(ix.get(&["1"], Micros(15)), 3);
        assert_eq!(ix.get(&["a"], Micros(5)), 2);
        assert_eq!(ix.len(), 3);
    }

    #[test]
    fn canonical_forms() {
        use ColumnKind::*;
        fn c(kind: ColumnKind, text: &str) -> String {
            canonical_key(kind, text).into_owned()
        }
        assert_eq!(c(Int, "07"), "7");
        assert_eq!(c(Int, "+7"), "7");
        assert_eq!(c(Int, " -007 "), "-7");
        assert_eq!(c(Int, "-0"), "0");
        assert_eq!(c(Int, "7.0"), "7.0", "no integer spelling: compared as it is");
        assert_eq!(c(Int, "99999999999999999999"), "99999999999999999999");
        assert_eq!(c(Numeric, "1"), "1");
        assert_eq!(c(Numeric, "1.0"), "1");
        assert_eq!(c(Numeric, "1.00"), "1");
        assert_eq!(c(Numeric, "-.01"), "-0.01");
        assert_eq!(c(Numeric, "+01.50"), "1.5");
        assert_eq!(c(Numeric, "150e-2"), "1.5");
        assert_eq!(c(Numeric, "1E3"), "1000");
        assert_eq!(c(Numeric, "-0.00"), "0");
        assert_eq!(c(Numeric, "1."), "1");
        assert_eq!(c(Numeric, "nan"), "NaN");
        assert_eq!(c(Numeric, "1.2.3"), "1.2.3");
        assert_eq!(c(Numeric, "."), ".");
        let u = "9f3c1a2b-4d5e-4f60-8a7b-1c2d3e4f5a6b";
        assert!(matches!(canonical_key(Uuid, u), Cow::Borrowed(_)));
        assert_eq!(c(Uuid, &u.to_ascii_uppercase()), u);
        assert_eq!(c(Uuid, &format!("{{{u}}}")), u);
        assert_eq!(c(Uuid, &u.replace('-', "")), u);
        assert_eq!(c(Uuid, "9f3c1a2b-"), "9f3c1a2b-");
        assert_eq!(c(Date, "2026-1-1"), "2026-01-01");
        assert_eq!(c(Date, "2026-01-1"), "2026-01-01");
        assert_eq!(c(Date, "2026-02-30"), "2026-02-30", "no date: compared as it is");
        assert_eq!(c(Date, "INFINITY"), "infinity");
        assert_eq!(c(Date, " -Infinity "), "-infinity");
        assert_eq!(c(Date, "0044-3-15 bc"), "0044-03-15 BC");
        assert_eq!(c(Date, "2026-01-01 AD"), "2026-01-01");
        assert_eq!(c(Date, "12026-1-1"), "12026-01-01");
        assert_eq!(c(Date, "0001-02-29 BC"), "0001-02-29 BC", "1 BC is a leap year");
        assert_eq!(c(Date, "0002-02-29 BC"), "0002-02-29 BC", "no date: compared as it is");
        assert_eq!(c(Date, "2000-02-29"), "2000-02-29");
        assert_eq!(read_key(Date, "1900-02-29"), None);
        assert_eq!(read_key(Date, "0000-01-01"), None);
        assert_eq!(c(Numeric, "1e10000"), format!("1{}", "0".repeat(10000)));
        assert_eq!(c(Numeric, "-25e-10001"), format!("-0.{}25", "0".repeat(9999)));
        assert_eq!(c(Numeric, "inf"), "Infinity");
        assert_eq!(c(Numeric, "+INFINITY"), "Infinity");
        assert_eq!(c(Numeric, "-inf"), "-Infinity");
        assert!(matches!(canonical_key(Numeric, "Infinity"), Cow::Borrowed(_)));
        assert!(matches!(canonical_key(Date, "0044-03-15 BC"), Cow::Borrowed(_)));
        assert_eq!(c(Text, " 07 "), " 07 ");
        assert_eq!(read_key(Int, "x"), None);
        assert_eq!(read_key(Text, "x").as_deref(), Some("x"));
    }

    #[test]
    fn an_index_with_kinds_reads_every_spelling() {
        let mut ix = Index::with_key_kinds(&[ColumnKind::Numeric, ColumnKind::Date]);
        ix.insert(&["1.00", "2026-01-01"], Micros(0), Micros(10), 5);
        ix.seal();
        assert_eq!(ix.get(&["1", "2026-1-1"], Micros(5)), 5);
        assert_eq!(ix.get(&["01.0", "2026-01-01"], Micros(5)), 5);
        assert_eq!(ix.lookup_joined(&join_key(&["1.0", "2026-1-01"]), Micros(5)), 5);
        assert_eq!(ix.get(&["1.01", "2026-01-01"], Micros(5)), UNKNOWN);
    }

    #[test]
    fn cast_types_drop_modifiers() {
        assert_eq!(pg_cast_type("numeric(10,2)"), "numeric");
        assert_eq!(pg_cast_type("character varying(20)"), "character varying");
        assert_eq!(pg_cast_type("character(4)"), "bpchar");
        assert_eq!(pg_cast_type("timestamp(3) with time zone"), "timestamp with time zone");
        assert_eq!(pg_cast_type("bigint"), "bigint");
    }

    #[test]
    fn composite_keys() {
        let mut ix = Index::default();
        ix.insert(&["a", "1"], Micros(0), Micros(10), 5);
        ix.seal();
        assert_eq!(ix.get(&["a", "1"], Micros(5)), 5);
        assert!(ix.lookup(&["a1"], Micros(5)).is_err(), "one part for a two-column key");
        assert_eq!(ix.lookup_joined("a1", Micros(5)), UNKNOWN);
        assert_eq!(ix.lookup_joined(&join_key(&["a", "1"]), Micros(5)), 5);
    }
}
