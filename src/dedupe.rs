//! Dedupe: one row per natural key per load (per key and timestamp with
//! `history = "all"`), chosen deterministically.
//!
//! Rows staged in the target ([`crate::stage`]) are deduplicated there by one
//! set-based statement. The rule: the newest `updated_at` wins; a tie of key and
//! timestamp goes to the greatest `source.tiebreak` value when configured (NULLs
//! last), else to the greatest `row_hash` bytewise, so the result never depends on read
//! order. [`dedupe_rows`] states the same rule in Rust, as the reference the SQL is
//! tested against.

use crate::config::History;
use crate::context::{run_named, SqlContext};
use crate::db::{sql, Conn, DbError};
use crate::hash::StagedRow;
use std::cmp::Ordering;

/// Deduplicates the staged rows into `dimlog_stage`; returns how many remain.
///
/// When the source's primary key lies within the natural key, no key can appear twice
/// in one read, so the staged rows are taken over as they are instead of being sorted, and
/// `staged` (the rows staged) is the answer. `analyze` gathers statistics for the joins
/// that follow; a first load has none, so it skips the sampling.
pub async fn dedupe(conn: &mut Conn, ctx: &SqlContext, staged: i64, analyze: bool) -> Result<i64, DbError> {
    let step = if ctx.unique_as_read { "adopt" } else { "dedupe" };
    run_named(conn, "dedupe", &[step], ctx).await?;
    if analyze {
        run_named(conn, "stage", &["analyze"], ctx).await?;
    }
    if ctx.unique_as_read {
        // Adopted as staged: nothing was dropped.
        return Ok(staged);
    }
    let sql = sql::statement(conn.backend(), "dedupe", "count", ctx)?;
    conn.query_count("counting deduplicated rows", &sql, &[]).await
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
    use crate::db::types::ColumnKind;
    use crate::hash::row_hash;
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
