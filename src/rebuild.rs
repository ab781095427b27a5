//! Rebuild: derive the dimension from the log.
//!
//! Every dimension row is derived from the log, never patched from the change alone:
//! per key, the latest log row for each `valid_from`, ordered; `valid_to =
//! LEAD(valid_from)` or the far-future sentinel; tombstones close the version before
//! them. A load derives again every row of the keys it touched and writes the result
//! (on PostgreSQL 15+ a `MERGE` writes only the rows that differ; elsewhere the keys'
//! rows are deleted and inserted); `dimlog rebuild` builds a new table and swaps it in
//! within one transaction.

use crate::config::Backend;
use crate::db::{Conn, DbError};
use crate::tables::{run_named, SqlContext};

/// Rebuilds the dimension rows of the keys the classified changes touch (listed in
/// `dimlog_touched`).
///
/// On PostgreSQL the rows are derived into a temporary table from the history classify
/// read and the rows this load appended (no second pass over the log), then merged
/// where the server has `MERGE` (15 and later): a row that did not change is not
/// rewritten, a version that only closed is updated in place, and only new versions are
/// inserted. Elsewhere the touched keys' rows are deleted and inserted again.
pub async fn rebuild_touched(conn: &mut Conn, ctx: &SqlContext) -> Result<(), DbError> {
    run_named(conn, "rebuild", &["touched"], ctx).await?;
    if conn.backend() == Backend::Sqlite {
        return run_named(conn, "rebuild", &["delete_touched", "insert_touched"], ctx).await;
    }
    // The derivation joins the history with the key list and the merge joins the
    // dimension with the derived rows: give the planner their sizes.
    run_named(
        conn,
        "rebuild",
        &["analyze_touched", "derive_touched", "analyze_derived"],
        ctx,
    )
    .await?;
    if conn.has_merge() {
        run_named(conn, "rebuild", &["merge_touched"], ctx).await
    } else {
        run_named(conn, "rebuild", &["delete_touched", "insert_derived"], ctx).await
    }
}

/// Rebuilds every key in place, inside the caller's transaction: after a first load
/// into an empty log every log row is new, so this is the touched-keys rebuild without
/// the list of keys to join.
pub async fn rebuild_in_place(conn: &mut Conn, ctx: &SqlContext) -> Result<(), DbError> {
    run_named(conn, "rebuild", &["delete_all", "insert_all"], ctx).await
}

/// Fills the empty dimension after a first load appended one log row per key: each live
/// row is its key's only version, so no window over the log is needed.
pub async fn rebuild_first_load(conn: &mut Conn, ctx: &SqlContext) -> Result<(), DbError> {
    run_named(conn, "rebuild", &["insert_first"], ctx).await
}

/// Creates the swap table and fills it with the whole dimension derived from the log
/// (`dimlog rebuild`, and `verify` to compare). On PostgreSQL its primary key is built
/// after the rows are in, once, rather than updated row by row.
pub async fn build_swap_table(conn: &mut Conn, ctx: &SqlContext) -> Result<(), DbError> {
    let swap = ctx.for_swap_table();
    run_named(conn, "tables", &["dimension"], &swap).await?;
    let pk = serde_json::json!({ "table": swap.dim, "name": swap.dim_pk, "column": swap.sk });
    let postgres = conn.backend() == Backend::Postgres;
    if postgres {
        run_named(conn, "tables", &["drop_primary_key"], &pk).await?;
    }
    run_named(conn, "rebuild", &["insert_new"], ctx).await?;
    if postgres {
        run_named(conn, "tables", &["add_primary_key"], &pk).await?;
    }
    Ok(())
}

/// Rebuilds the whole dimension into a new table and swaps it in, inside the caller's
/// transaction, so readers see the old table until commit.
pub async fn rebuild_all(conn: &mut Conn, ctx: &SqlContext) -> Result<(), DbError> {
    build_swap_table(conn, ctx).await?;
    run_named(conn, "rebuild", &["drop_old", "rename_new"], ctx).await?;
    if conn.backend() == Backend::Postgres {
        run_named(conn, "rebuild", &["rename_pk"], ctx).await?;
    }
    run_named(conn, "tables", &["dimension_index"], ctx).await
}
