//! The version log: classify staged rows against their predecessors and append.
//!
//! The log is a ledger: rows are only ever inserted, each with the `load_id` of its
//! run, and everything else (the dimension) is derived from it. Classification and
//! append are set-based statements over the staged keys only (`sql/*/classify.sql`,
//! `append.sql`); the rules are spec section 1.4. Surrogate keys and log ids come from a
//! block reserved in `dimlog_dimensions` inside the same transaction.

use crate::db::{sql, Conn, DbError, Param};
use crate::tables::{run_named, SqlContext};
use crate::ts::Micros;
use serde::Serialize;

/// What one load appends.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    /// New versions (new surrogate keys), late ones included.
    pub versions: i64,
    /// New versions earlier than their key's newest logged one.
    pub late_versions: i64,
    /// Corrections: same key, same valid_from, new values, same surrogate key.
    pub corrections: i64,
    /// Tombstones that close a version (a delete of a key with a version before it).
    pub tombstones: i64,
    /// Deletes of a key with no version before them (never seen): they close nothing, so
    /// they are counted apart, not in `tombstones`; their tombstones are still logged, so
    /// a late version before one is closed by it.
    pub unseen_deletes: i64,
    /// Deleted keys revived (their new versions are counted in `versions` too).
    pub revived: i64,
    /// Type 1 observations (only Type 1 columns changed; no version).
    pub type1_updates: i64,
    /// Every log row to append.
    pub total: i64,
    /// Deletes dropped for want of room: stamped at a live version's instant, they move
    /// 1 µs later, where the key had another live version. Never logged.
    pub dropped_deletes: i64,
    /// The first of them: each key (as text) and the delete's own stamp.
    #[serde(skip)]
    pub dropped_delete_examples: Vec<(Vec<String>, Micros)>,
}

/// Classifies the staged rows into `dimlog_changes` and counts them. With
/// `history = "latest"` it first settles the rows of restored keys (see [`settle_restored`]),
/// whose new versions open at `upper`.
pub async fn classify(conn: &mut Conn, ctx: &SqlContext, upper: Micros) -> Result<Changes, DbError> {
    // The staged keys' history, kept for the rebuild (see `rebuild::rebuild_touched`)
    // where the engine's rebuild reads it.
    run_named(conn, "classify", &["history"], ctx).await?;
    // A delete at the same instant as a live version moves 1 µs after it (issue 21);
    // one that lands on another live version has no room, and is dropped and reported.
    run_named(conn, "classify", &["shift_deletes"], ctx).await?;
    let drop = sql::statement(conn.backend(), "classify", "drop_hidden_deletes", ctx)?;
    let dropped = conn.query_text("dropping deletes with no room", &drop, &[]).await?;
    let key_count = ctx.keys.len();
    let dropped_delete_examples = dropped
        .iter()
        .take(DROPPED_EXAMPLES)
        .map(|r| {
            let key = r[..key_count].iter().map(|v| v.clone().unwrap_or_default()).collect();
            let moved = r[key_count].as_deref().and_then(|t| Micros::parse(t, None).ok());
            (key, moved.map_or(Micros(0), |m| m.plus(-1)))
        })
        .collect();
    let revived = if ctx.history_all {
        0
    } else {
        settle_restored(conn, ctx, upper).await?
    };
    run_named(conn, "classify", &["classify"], ctx).await?;
    let at = counts(conn, ctx, "counts").await?;
    Ok(Changes {
        versions: at(0),
        late_versions: at(1),
        corrections: at(2),
        tombstones: at(3),
        type1_updates: at(4),
        total: at(5),
        unseen_deletes: at(6),
        revived,
        dropped_deletes: dropped.len() as i64,
        dropped_delete_examples,
    })
}

/// How many dropped deletes a run names.
const DROPPED_EXAMPLES: usize = 5;

/// Spec 1.4, "Revival": with `history = "latest"` a staged row is its key's state now, so
/// a live row stamped behind its key's tombstone (restored from a backup, re-inserted
/// with its old stamp, or a reread of such a row) is settled before it is compared:
/// - the key's newest row is that tombstone: the key is revived, its row moved to `upper`
///   (or just after the tombstone, if that is later);
/// - the key is back already and the row equals its newest version: a reread, dropped;
/// - the key is back already and the row differs: a change with a stale stamp, moved after
///   the newest version like a revival (not counted as one).
///
/// Any load may do this, not only those that read the source's whole key list: a row a
/// window reads is in the source now. Returns how many keys were revived.
async fn settle_restored(conn: &mut Conn, ctx: &SqlContext, upper: Micros) -> Result<i64, DbError> {
    let backend = conn.backend();
    run_named(conn, "classify", &["restored"], ctx).await?;
    let revive = sql::statement(backend, "classify", "revive", ctx)?;
    let revived = conn
        .execute("reviving restored keys", &revive, &[Param::Ts(upper)])
        .await?;
    run_named(conn, "classify", &["drop_rereads"], ctx).await?;
    let restate = sql::statement(backend, "classify", "restate", ctx)?;
    conn.execute("moving changes of restored keys", &restate, &[Param::Ts(upper)])
        .await?;
    Ok(i64::try_from(revived).unwrap_or(i64::MAX))
}

/// Counts a first load's changes without comparing anything: into an empty log, with one
/// staged row per key, every live row opens a version and every deleted one a
/// tombstone. Pair with [`Append::FirstLoad`].
pub async fn classify_first_load(conn: &mut Conn, ctx: &SqlContext) -> Result<Changes, DbError> {
    let at = counts(conn, ctx, "first_counts").await?;
    Ok(Changes {
        versions: at(0),
        tombstones: at(1),
        total: at(2),
        unseen_deletes: at(3),
        ..Changes::default()
    })
}

/// Runs a counting statement of the classify family; the returned closure reads its
/// i-th number (0 where absent).
async fn counts(conn: &mut Conn, ctx: &SqlContext, statement: &str) -> Result<impl Fn(usize) -> i64, DbError> {
    let sql = sql::statement(conn.backend(), "classify", statement, ctx)?;
    let c = conn.query_i64s("counting changes", &sql, &[]).await?;
    // A sum over no staged rows is NULL: none.
    Ok(move |i: usize| c.get(i).copied().flatten().unwrap_or(0))
}

/// Which rows a load appends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Append {
    /// The classified changes (`dimlog_changes`, see [`classify`]).
    Classified,
    /// A first load's staged rows as they are (see [`classify_first_load`]), numbered
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
    let (next_log, _) = reserve(conn, ctx, dimension).await?;
    let insert = sql::statement(backend, "append", "rehash_append", ctx)?;
    conn.execute(
        "log/rehash",
        &insert,
        &[Param::I64(next_log), Param::I64(load_id), Param::Ts(loaded_at)],
    )
    .await?;
    let carried = Changes {
        total: n,
        ..Changes::default()
    };
    advance(conn, ctx, dimension, &carried, load_id, loaded_at).await?;
    Ok(n)
}
