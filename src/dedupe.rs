//! Dedupe: one row per natural key per load (per key and timestamp with
//! `history = "all"`), chosen deterministically.
//!
//! Rows are staged into the target as they stream in (COPY on PostgreSQL, batched
//! INSERTs on SQLite) and deduplicated there by one set-based statement, so memory does
//! not grow with the load. The rule: the newest `updated_at` wins; a tie of key and
//! timestamp goes to the greatest `source.tiebreak` value when configured (NULLs
//! last), else to the greatest `row_hash` bytewise, so the result never depends on read
//! order. [`dedupe_rows`] states the same rule in Rust, as the reference the SQL is
//! tested against.

use crate::config::History;
use crate::db::{bytea_hex, sql, BindKind, Conn, DbError};
use crate::detect::StagedRow;
use crate::tables::{run_named, SqlContext};
use std::cmp::Ordering;

/// Creates the session-temporary staging table of a load.
pub async fn create_staging(conn: &mut Conn, ctx: &SqlContext) -> Result<(), DbError> {
    if conn.backend() == crate::config::Backend::Sqlite {
        let drop = sql::statement(conn.backend(), "stage", "drop", ctx)?;
        conn.execute_script("stage/drop", &drop).await?;
    }
    run_named(conn, "stage", &["raw"], ctx).await
}

/// The staging table's columns and how each binds.
pub struct Stager {
    columns: Vec<String>,
    kinds: Vec<BindKind>,
}

impl Stager {
    /// Derives the staging columns from the context (keys, attributes, tiebreak, then
    /// valid_from, is_deleted, row_hash).
    pub fn new(ctx: &SqlContext) -> Stager {
        let mut columns = Vec::new();
        let mut kinds = Vec::new();
        for c in ctx.key_defs.iter().chain(&ctx.attr_defs) {
            columns.push(c.name.clone());
            kinds.push(BindKind::from(c.kind));
        }
        if let Some(t) = &ctx.tiebreak {
            columns.push("dimlog_tiebreak".into());
            kinds.push(BindKind::from(t.kind));
        }
        columns.extend(["valid_from".into(), "is_deleted".into(), "row_hash".into()]);
        kinds.extend([BindKind::Text, BindKind::Bool, BindKind::Bytes]);
        Stager { columns, kinds }
    }

    /// Writes one batch of rows to the staging table.
    pub async fn write(&self, conn: &mut Conn, rows: Vec<StagedRow>) -> Result<(), DbError> {
        let cells: Vec<Vec<Option<String>>> = rows
            .into_iter()
            .map(|r| {
                let mut v = r.values;
                v.push(Some(r.valid_from.to_text()));
                v.push(Some(if r.is_deleted { "true" } else { "false" }.into()));
                v.push(Some(bytea_hex(&r.row_hash)));
                v
            })
            .collect();
        conn.bulk_insert("staging source rows", "dimlog_raw", &self.columns, &self.kinds, &cells)
            .await
    }
}

/// Deduplicates the staged rows into `dimlog_stage`; returns how many remain.
pub async fn dedupe(conn: &mut Conn, ctx: &SqlContext) -> Result<i64, DbError> {
    run_named(conn, "dedupe", &["dedupe"], ctx).await?;
    if conn.backend() == crate::config::Backend::Postgres {
        run_named(conn, "stage", &["analyze"], ctx).await?;
    }
    let sql = sql::statement(conn.backend(), "dedupe", "count", ctx)?;
    Ok(conn
        .query_i64s("counting deduplicated rows", &sql, &[])
        .await?
        .first()
        .copied()
        .unwrap_or(0))
}

/// The dedupe rule in Rust: `key_len` leading values form the key; `tiebreak_at` is the
/// index of the tiebreak value, if any. Used as the reference in tests.
pub fn dedupe_rows(
    mut rows: Vec<StagedRow>,
    key_len: usize,
    tiebreak_at: Option<usize>,
    history: History,
) -> Vec<StagedRow> {
    let prefer = |a: &StagedRow, b: &StagedRow| -> Ordering {
        a.valid_from
            .cmp(&b.valid_from)
            .then_with(|| match tiebreak_at {
                Some(i) => match (&a.values[i], &b.values[i]) {
                    (Some(x), Some(y)) => x.cmp(y),
                    (Some(_), None) => Ordering::Greater,
                    (None, Some(_)) => Ordering::Less,
                    (None, None) => Ordering::Equal,
                },
                None => Ordering::Equal,
            })
            .then_with(|| a.row_hash.cmp(&b.row_hash))
            .then_with(|| a.is_deleted.cmp(&b.is_deleted))
    };
    let group = |r: &StagedRow| -> (Vec<Option<String>>, Option<crate::ts::Micros>) {
        (
            r.values[..key_len].to_vec(),
            (history == History::All).then_some(r.valid_from),
        )
    };
    rows.sort_by(|a, b| group(a).cmp(&group(b)).then_with(|| prefer(b, a)));
    rows.dedup_by(|later, first| group(later) == group(first));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::{row_hash, ColumnKind};
    use crate::ts::Micros;

    fn row(key: &str, t: i64, v: &str) -> StagedRow {
        StagedRow {
            values: vec![Some(key.into()), Some(v.into())],
            valid_from: Micros(t),
            is_deleted: false,
            row_hash: row_hash([(ColumnKind::Text, Some(v))]),
        }
    }

    #[test]
    fn newest_wins() {
        let out = dedupe_rows(
            vec![row("a", 1, "x"), row("a", 3, "y"), row("a", 2, "z")],
            1,
            None,
            History::Latest,
        );
        assert_eq!(out, vec![row("a", 3, "y")]);
    }

    #[test]
    fn ties_do_not_depend_on_order() {
        let a = vec![row("a", 5, "x"), row("a", 5, "y")];
        let mut b = a.clone();
        b.reverse();
        let da = dedupe_rows(a, 1, None, History::Latest);
        let db = dedupe_rows(b, 1, None, History::Latest);
        assert_eq!(da, db);
        assert_eq!(da.len(), 1);
        let greater = if row("a", 5, "x").row_hash > row("a", 5, "y").row_hash {
            "x"
        } else {
            "y"
        };
        assert_eq!(da[0].values[1].as_deref(), Some(greater));
    }

    #[test]
    fn history_all_keeps_each_timestamp() {
        let out = dedupe_rows(
            vec![row("a", 1, "x"), row("a", 2, "y"), row("a", 2, "y")],
            1,
            None,
            History::All,
        );
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn tiebreak_beats_hash() {
        let mut r1 = row("a", 5, "x");
        r1.values.push(Some("2".into()));
        let mut r2 = row("a", 5, "y");
        r2.values.push(Some("1".into()));
        let out = dedupe_rows(vec![r2.clone(), r1.clone()], 1, Some(2), History::Latest);
        assert_eq!(out, vec![r1]);
    }
}
