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
use crate::db::{sql, Conn, DbError, Param};
use crate::ident::Ident;
use crate::tables::SqlContext;
use crate::ts::Micros;
use crate::Error;
use rustc_hash::FxHashMap;
use serde::Serialize;

/// The surrogate key of the unknown member.
pub const UNKNOWN: i64 = -1;

/// The surrogate key in effect for `key` at `at`, or `None`.
pub async fn lookup_one(conn: &mut Conn, ctx: &SqlContext, key: &[String], at: Micros) -> Result<Option<i64>, DbError> {
    let sql = sql::statement(conn.backend(), "lookup", "one", ctx)?;
    let mut params: Vec<Param> = key.iter().map(|k| Param::Text(k.clone())).collect();
    params.push(Param::Ts(at));
    let rows = conn.query_text("looking up the surrogate key", &sql, &params).await?;
    Ok(rows
        .first()
        .and_then(|r| r.first().cloned().flatten())
        .and_then(|v| v.parse().ok()))
}

/// What `assign-keys` should fill.
#[derive(Clone, Debug)]
pub struct AssignSpec {
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
}

/// What `assign-keys` did.
#[derive(Clone, Debug, Serialize)]
pub struct AssignReport {
    /// Facts that got a real surrogate key.
    pub facts_matched: i64,
    /// Facts that got the unknown member.
    pub facts_unknown: i64,
}

#[derive(Serialize)]
struct AssignContext<'a> {
    #[serde(flatten)]
    base: &'a SqlContext,
    facts: String,
    fact_keys: Vec<String>,
    fact_at: String,
    fact_sk: String,
}

/// Fills the surrogate-key column of a staged fact table, set-based, in one
/// transaction. Safe to rerun: every fact is recomputed from the current dimension.
pub async fn assign_keys(conn: &mut Conn, ctx: &SqlContext, spec: &AssignSpec) -> Result<AssignReport, Error> {
    if spec.key_columns.len() != ctx.keys.len() {
        return Err(Error::Usage(format!(
            "--key-column was given {} times; the dimension's key has {} columns ({}), give one per column in that order",
            spec.key_columns.len(),
            ctx.keys.len(),
            ctx.key_defs.iter().map(|c| c.bare.as_str()).collect::<Vec<_>>().join(", ")
        )));
    }
    let backend = conn.backend();
    let actx = AssignContext {
        base: ctx,
        facts: spec.facts.quoted(),
        fact_keys: spec.key_columns.iter().map(Ident::quoted).collect(),
        fact_at: spec.at_column.quoted(),
        fact_sk: spec.sk_column.quoted(),
    };
    let columns_sql = sql::statement(backend, "lookup", "fact_columns", &actx)?;
    let table_param = match backend {
        Backend::Postgres => spec.facts.quoted(),
        Backend::Sqlite => spec.facts.name().to_string(),
    };
    let columns = conn
        .query_text(
            "reading the fact table's columns",
            &columns_sql,
            &[Param::Text(table_param)],
        )
        .await?;
    if columns.is_empty() {
        return Err(Error::Usage(format!(
            "--facts: table {} does not exist in the target database",
            spec.facts
        )));
    }
    let names: Vec<String> = columns.iter().filter_map(|r| r[0].clone()).collect();
    for (flag, c) in spec
        .key_columns
        .iter()
        .map(|c| ("--key-column", c))
        .chain([("--at-column", &spec.at_column)])
    {
        if !names.iter().any(|n| n == c.name()) {
            return Err(Error::Usage(format!(
                "{flag}: column `{}` is not in {}; it has: {}",
                c.name(),
                spec.facts,
                names.join(", ")
            )));
        }
    }
    conn.begin().await?;
    let result: Result<AssignReport, Error> = async {
        if !names.iter().any(|n| n == spec.sk_column.name()) {
            conn.execute("adding the surrogate-key column", &sql::statement(backend, "lookup", "add_sk_column", &actx)?, &[]).await?;
        }
        conn.execute("assign-keys", &sql::statement(backend, "lookup", "assign", &actx)?, &[]).await?;
        let counts = conn.query_i64s("counting assigned facts", &sql::statement(backend, "lookup", "counts", &actx)?, &[]).await?;
        let report = AssignReport { facts_matched: counts.first().copied().unwrap_or(0), facts_unknown: counts.get(1).copied().unwrap_or(0) };
        if spec.unknown_is_error && report.facts_unknown > 0 {
            let first = conn.query_text("finding an unknown fact", &sql::statement(backend, "lookup", "first_unknown", &actx)?, &[]).await?;
            let row = first.into_iter().next().unwrap_or_default();
            let (at, key) = row.split_last().map(|(a, k)| (a.clone(), k.to_vec())).unwrap_or((None, vec![]));
            let key: Vec<String> = key.into_iter().map(|v| v.unwrap_or_else(|| "NULL".into())).collect();
            return Err(Error::Discrepancy(format!(
                "{} facts have no version in {} (first: key ({}) at {}); nothing was written. Load the dimension first, or use --unknown -1",
                report.facts_unknown,
                ctx.dim,
                key.join(", "),
                at.unwrap_or_default()
            )));
        }
        Ok(report)
    }
    .await;
    conn.finish(result).await
}

/// One version's interval and surrogate key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    from: i64,
    to: i64,
    sk: i64,
}

/// An in-memory point-in-time index over a dimension: per key, its versions sorted by
/// `valid_from`, binary-searched. Keys are the text of the key columns (as the dimension
/// stores them), joined with U+001F for composite keys.
#[derive(Debug, Default)]
pub struct Index {
    spans: FxHashMap<Box<str>, Vec<Span>>,
    versions: usize,
}

/// The separator of composite key parts in [`Index::lookup_joined`].
pub const KEY_SEPARATOR: char = '\u{1f}';

impl Index {
    /// Loads the whole dimension.
    pub async fn load(conn: &mut Conn, ctx: &SqlContext) -> Result<Index, DbError> {
        let sql = sql::statement(conn.backend(), "lookup", "index_rows", ctx)?;
        let rows = conn.query_text("loading the lookup index", &sql, &[]).await?;
        let n = ctx.keys.len();
        let mut index = Index::default();
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

    /// Adds a version (call [`Index::seal`] after the last).
    pub fn insert(&mut self, key: &[&str], valid_from: Micros, valid_to: Micros, sk: i64) {
        let joined = join_key(key);
        self.spans.entry(joined.into_boxed_str()).or_default().push(Span {
            from: valid_from.0,
            to: valid_to.0,
            sk,
        });
        self.versions += 1;
    }

    /// Sorts each key's versions; required before lookups.
    pub fn seal(&mut self) {
        for v in self.spans.values_mut() {
            v.sort_unstable_by_key(|s| s.from);
        }
    }

    /// Number of versions held.
    pub fn len(&self) -> usize {
        self.versions
    }

    /// True when the dimension was empty.
    pub fn is_empty(&self) -> bool {
        self.versions == 0
    }

    /// The surrogate key in effect for `key` at `at`, or [`UNKNOWN`].
    pub fn lookup(&self, key: &[&str], at: Micros) -> i64 {
        if key.len() == 1 {
            return self.lookup_joined(key[0], at);
        }
        self.lookup_joined(&join_key(key), at)
    }

    /// Like [`Index::lookup`], for a key already joined with [`KEY_SEPARATOR`] (saves an
    /// allocation per composite-key fact).
    pub fn lookup_joined(&self, key: &str, at: Micros) -> i64 {
        let Some(spans) = self.spans.get(key) else {
            return UNKNOWN;
        };
        let i = spans.partition_point(|s| s.from <= at.0);
        if i == 0 {
            return UNKNOWN;
        }
        let s = spans[i - 1];
        if at.0 < s.to {
            s.sk
        } else {
            UNKNOWN
        }
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

    #[test]
    fn half_open_intervals() {
        let mut ix = Index::default();
        ix.insert(&["1"], Micros(100), Micros(200), 10);
        ix.insert(&["1"], Micros(200), Micros(300), 11);
        ix.insert(&["1"], Micros(400), crate::ts::FAR_FUTURE, 12);
        ix.seal();
        assert_eq!(ix.lookup(&["1"], Micros(99)), UNKNOWN);
        assert_eq!(ix.lookup(&["1"], Micros(100)), 10);
        assert_eq!(ix.lookup(&["1"], Micros(199)), 10);
        assert_eq!(ix.lookup(&["1"], Micros(200)), 11);
        assert_eq!(ix.lookup(&["1"], Micros(350)), UNKNOWN, "gap after a tombstone");
        assert_eq!(ix.lookup(&["1"], crate::ts::FAR_FUTURE.plus(-1)), 12);
        assert_eq!(ix.lookup(&["1"], crate::ts::FAR_FUTURE), UNKNOWN);
        assert_eq!(ix.lookup(&["2"], Micros(150)), UNKNOWN);
    }

    #[test]
    fn composite_keys() {
        let mut ix = Index::default();
        ix.insert(&["a", "1"], Micros(0), Micros(10), 5);
        ix.seal();
        assert_eq!(ix.lookup(&["a", "1"], Micros(5)), 5);
        assert_eq!(ix.lookup(&["a1"], Micros(5)), UNKNOWN);
        assert_eq!(ix.lookup_joined(&join_key(&["a", "1"]), Micros(5)), 5);
    }
}
