//! The version log: append what [`crate::detect`] classified.
//!
//! The log is a ledger: rows are only ever inserted, each with the `load_id` of its
//! run, and everything else (the dimension) is derived from it. The append is a
//! set-based statement over the staged keys only (`sql/*/append.sql`); the rules are
//! spec section 1.4. Surrogate keys and log ids come from a block reserved in
//! `dimlog_dimensions` inside the same transaction.

use crate::context::{run_named, SqlContext};
use crate::db::{sql, Conn, DbError, Param};
use crate::detect::Changes;
use crate::ts::Micros;
use serde::Serialize;

/// Which rows a load appends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Append {
    /// The classified changes (`dimlog_changes`, see [`crate::detect::classify`]).
    Classified,
    /// A first load's staged rows as they are (see [`crate::detect::classify_first_load`]), numbered
    /// exactly as the classified path would number them.
    FirstLoad,
}

/// Appends a load's rows to the log under its load id, reserving their surrogate keys
/// and log ids.
pub async fn append(
    conn: &mut Conn,
    ctx: &SqlContext,
    rows: Append,
    dimension: &str,
    changes: &Changes,
    load_id: i64,
    loaded_at: Micros,
) -> Result<(), DbError> {
    /// With no tombstones every row gets a surrogate key, numbered like its log id, so
    /// the first-load statement needs one window function instead of two.
    #[derive(Serialize)]
    struct WithTombstones<'a> {
        #[serde(flatten)]
        ctx: &'a SqlContext,
        tombstones: bool,
    }
    let with = WithTombstones {
        ctx,
        tombstones: changes.tombstones + changes.unseen_deletes > 0,
    };
    let statement = match rows {
        Append::Classified => "append",
        Append::FirstLoad => "append_first",
    };
    if matches!(rows, Append::Classified) {
        // The appended rows are kept for the rebuild of the touched keys, where the
        // engine's rebuild reads them.
        run_named(conn, "append", &["appended_table"], ctx).await?;
    }
    let (next_log, next_sk) = reserve(conn, ctx, dimension).await?;
    if rows == Append::Classified && changes.total <= NUMBERED_BY_KEY_UP_TO {
        let offsets = sql::statement(conn.backend(), "append", "key_offsets", &with)?;
        if !offsets.is_empty() {
            let numbers = [next_log, next_sk, load_id];
            append_by_key_offsets(conn, &with, (&offsets, ctx.keys.len()), numbers, loaded_at).await?;
            return advance(conn, ctx, dimension, changes, load_id, loaded_at).await;
        }
    }
    let insert = sql::statement(conn.backend(), "append", statement, &with)?;
    conn.execute(
        &format!("log/{statement}"),
        &insert,
        &[
            Param::I64(next_log),
            Param::I64(next_sk),
            Param::I64(load_id),
            Param::Ts(loaded_at),
        ],
    )
    .await?;
    advance(conn, ctx, dimension, changes, load_id, loaded_at).await
}

/// Up to how many changes a load appends by key offsets where its engine does so
/// (`key_offsets` in `sql/*/append.sql`: Citus): the offsets go to every shard as
/// parameters, a few bytes per changed key.
const NUMBERED_BY_KEY_UP_TO: i64 = 50_000;

/// Appends the classified changes numbered from each key's offsets: the engine lists
/// each changed key (`key_columns` values) in key order with its changes and versions
/// (`offsets`, the `key_offsets` statement), the running sums of those are the key's first log id and
/// surrogate key past the reserved ones, and the engine numbers each key's changes from
/// there (`append_by_offsets`), then keeps what it appended (`append_kept`). The numbers
/// are those `append` gives.
async fn append_by_key_offsets<C: Serialize>(
    conn: &mut Conn,
    ctx: &C,
    (offsets, key_columns): (&str, usize),
    [next_log, next_sk, load_id]: [i64; 3],
    loaded_at: Micros,
) -> Result<(), DbError> {
    let rows = conn.query_text("numbering the changes by key", offsets, &[]).await?;
    let mut keys: Vec<Vec<String>> = vec![Vec::with_capacity(rows.len()); key_columns];
    let (mut log_offsets, mut sk_offsets) = (Vec::with_capacity(rows.len()), Vec::with_capacity(rows.len()));
    let (mut log_offset, mut sk_offset) = (0i64, 0i64);
    let count = |cell: &Option<String>| cell.as_deref().and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
    for row in &rows {
        for (column, value) in keys.iter_mut().zip(row) {
            column.push(value.clone().unwrap_or_default());
        }
        log_offsets.push(log_offset);
        sk_offsets.push(sk_offset);
        log_offset += count(&row[key_columns]);
        sk_offset += count(&row[key_columns + 1]);
    }
    let mut params = vec![
        Param::I64(next_log),
        Param::I64(next_sk),
        Param::I64(load_id),
        Param::Ts(loaded_at),
    ];
    params.extend(keys.into_iter().map(Param::TextArray));
    params.extend([Param::I64Array(log_offsets), Param::I64Array(sk_offsets)]);
    let insert = sql::statement(conn.backend(), "append", "append_by_offsets", ctx)?;
    conn.execute("log/append_by_offsets", &insert, &params).await?;
    let kept = sql::statement(conn.backend(), "append", "append_kept", ctx)?;
    conn.execute("log/append_kept", &kept, &[Param::I64(load_id)])
        .await
        .map(drop)
}

/// Locks the dimension's counters for this transaction and returns the next log id and
/// surrogate key; [`advance`] moves them past what the load appended.
pub async fn reserve<C: Serialize>(conn: &mut Conn, ctx: &C, dimension: &str) -> Result<(i64, i64), DbError> {
    let sql = sql::statement(conn.backend(), "append", "reserve", ctx)?;
    let next = conn
        .query_i64s("reserving surrogate keys", &sql, &[Param::Text(dimension.into())])
        .await?;
    match (next.first().copied().flatten(), next.get(1).copied().flatten()) {
        (Some(next_sk), Some(next_log)) => Ok((next_log, next_sk)),
        _ => Err(DbError::Query {
            what: format!("reserving surrogate keys: dimension {dimension:?} has no counters in dimlog_dimensions"),
            source: sqlx::Error::RowNotFound,
        }),
    }
}

/// Moves the dimension's counters past a load's versions and log rows.
pub async fn advance<C: Serialize>(
    conn: &mut Conn,
    ctx: &C,
    dimension: &str,
    changes: &Changes,
    load_id: i64,
    loaded_at: Micros,
) -> Result<(), DbError> {
    let sql = sql::statement(conn.backend(), "append", "advance", ctx)?;
    conn.execute(
        "reserving surrogate keys",
        &sql,
        &[
            Param::Text(dimension.into()),
            Param::I64(changes.versions),
            Param::I64(changes.total),
            Param::I64(load_id),
            Param::Ts(loaded_at),
        ],
    )
    .await
    .map(drop)
}

/// A config change on a change feed (issue 21): the staged events stamped up to
/// `read_through` (the watermark) were read under the old column set, so only each key's
/// newest one stays, as the key's state when the change was made; they open or correct
/// no version of their own. Later events are read as usual.
pub async fn keep_newest_read(conn: &mut Conn, ctx: &SqlContext, read_through: Micros) -> Result<(), DbError> {
    let sql = sql::statement(conn.backend(), "classify", "feed_read_before", ctx)?;
    conn.execute("classify/feed_read_before", &sql, &[Param::Ts(read_through)])
        .await
        .map(drop)
}

/// The `dimlog_state` role that holds, for a change feed, the watermark of the last
/// accepted column change: events stamped up to it were read under an earlier column set.
pub const COLUMNS_CHANGED: &str = "columns-changed";

/// A change feed after a column change: drops the staged events stamped up to `through`
/// (see [`COLUMNS_CHANGED`]); they are history under the column sets of their time.
pub async fn drop_feed_history(conn: &mut Conn, ctx: &SqlContext, through: Micros) -> Result<(), DbError> {
    let sql = sql::statement(conn.backend(), "classify", "feed_drop_history", ctx)?;
    conn.execute("classify/feed_drop_history", &sql, &[Param::Ts(through)])
        .await
        .map(drop)
}

/// True when the log has no rows at all (before a dimension's first load).
pub async fn is_empty(conn: &mut Conn, ctx: &SqlContext) -> Result<bool, DbError> {
    let sql = sql::statement(conn.backend(), "append", "is_empty", ctx)?;
    let v = conn.query_i64s("looking at the log", &sql, &[]).await?;
    Ok(v.first() == Some(&Some(1)))
}

/// After a change of the Type 2 column set: carries each key's current version over to
/// the new set where the source agrees with it on every column tracked before and after,
/// by appending a row with the same surrogate key and `valid_from` and the new hash. No
/// version is opened; returns how many were carried over.
pub async fn rehash_current_versions(
    conn: &mut Conn,
    ctx: &SqlContext,
    dimension: &str,
    load_id: i64,
    loaded_at: Micros,
    read_through: Option<Micros>,
) -> Result<i64, DbError> {
    let backend = conn.backend();
    let rehash = sql::statement(backend, "classify", "rehash", ctx)?;
    if ctx.history_all {
        // On a change feed the source's state is its newest event read before the change.
        let Some(read_through) = read_through else {
            return Ok(0);
        };
        conn.execute("classify/rehash", &rehash, &[Param::Ts(read_through)])
            .await?;
    } else {
        conn.execute("classify/rehash", &rehash, &[]).await?;
    }
    let count_sql = sql::statement(backend, "classify", "rehash_count", ctx)?;
    let n = conn
        .query_count("counting carried-over versions", &count_sql, &[])
        .await?;
    if n == 0 {
        return Ok(0);
    }
    append_carried(conn, ctx, dimension, "rehash_append", n, (load_id, loaded_at)).await?;
    Ok(n)
}

/// Appends `n` versions carried over to a new column set (append statement `statement`:
/// log ids from the reserved block, no new surrogate key), under the load's id and stamp.
async fn append_carried(
    conn: &mut Conn,
    ctx: &SqlContext,
    dimension: &str,
    statement: &str,
    n: i64,
    (load_id, loaded_at): (i64, Micros),
) -> Result<(), DbError> {
    let (next_log, _) = reserve(conn, ctx, dimension).await?;
    let insert = sql::statement(conn.backend(), "append", statement, ctx)?;
    conn.execute(
        &format!("log/{statement}"),
        &insert,
        &[Param::I64(next_log), Param::I64(load_id), Param::Ts(loaded_at)],
    )
    .await?;
    let carried = Changes {
        total: n,
        ..Changes::default()
    };
    advance(conn, ctx, dimension, &carried, load_id, loaded_at).await
}

/// The `dimlog_state` role whose `run_id` is the load that last accepted a change of the
/// Type 2 column set (its `high_watermark`, that load's upper bound, is for people).
/// Versions logged before that load hold hashes over an earlier column set: see
/// [`find_stale_versions`].
pub const TRACKED_CHANGED: &str = "tracked-columns-changed";

/// A change of the Type 2 columns rehashes each key's current version when the source
/// agrees with it ([`rehash_current_versions`]); every other version keeps the hash it
/// was logged with, over the columns of its time, so a row compared with it would differ
/// by hash even with the very values it holds (a late row, or the source back on a
/// current version it did not agree with at the change). Rehashing them all from their
/// logged values cannot give the source's hash everywhere (a target may keep a value in
/// another form than the source hashed: PostgreSQL `jsonb` or `uuid` from SQLite text),
/// and would rewrite every version of the dimension. Instead, when a staged row's
/// predecessor is such a version (its effective row logged by a load before
/// `stale_before`) and holds the same Type 2 values as the row, the version is carried
/// over to the new column set with the staged row's hash, which the source gave as it
/// gives every hash: the staged rows are then compared as usual, and the load appends
/// the carried-over rows ([`append_stale_versions`]). Nothing is written to the log here
/// (a dry run stops after classifying). Returns how many versions are carried over.
pub async fn find_stale_versions(
    conn: &mut Conn,
    ctx: &SqlContext,
    stale_before: i64,
    load_id: i64,
) -> Result<i64, DbError> {
    let backend = conn.backend();
    let stale = sql::statement(backend, "classify", "stale", ctx)?;
    conn.execute("classify/stale", &stale, &[Param::I64(stale_before)])
        .await?;
    run_named(conn, "classify", &["stale_index"], ctx).await?;
    let count = sql::statement(backend, "classify", "stale_count", ctx)?;
    let n = conn.query_count("counting versions carried over", &count, &[]).await?;
    let history = sql::statement(backend, "classify", "stale_history", ctx)?;
    if n > 0 && !history.is_empty() {
        conn.execute("classify/stale_history", &history, &[Param::I64(load_id)])
            .await?;
    }
    Ok(n)
}

/// Appends the `n` versions [`find_stale_versions`] carried over, under the load's id.
pub async fn append_stale_versions(
    conn: &mut Conn,
    ctx: &SqlContext,
    dimension: &str,
    n: i64,
    load_id: i64,
    loaded_at: Micros,
) -> Result<(), DbError> {
    append_carried(conn, ctx, dimension, "stale_append", n, (load_id, loaded_at)).await
}
