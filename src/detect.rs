//! Change detection: each staged row against its key's versions in the log, by the row
//! hash of its tracked columns ([`crate::hash`]).
//!
//! Classification is a set-based statement over the staged keys only
//! (`sql/*/classify.sql`): a row whose hash differs from its predecessor's opens a new
//! version (a late one when it is older than the key's newest), one with the same
//! `valid_from` and another hash is a correction, a flagged or missing row a tombstone;
//! the rules are spec section 1.4.

pub use crate::hash::{canonical, is_truthy, row_hash, ColumnKind, RowHasher, StagedRef, StagedRow, HASH_VERSION};

use crate::context::{run_named, SqlContext};
use crate::db::{sql, Conn, DbError, Param};
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
/// `history = "latest"` it first settles the rows of restored keys (see `settle_restored`),
/// whose new versions open at `upper`. `read_through`: see [`settle`].
pub async fn classify(
    conn: &mut Conn,
    ctx: &SqlContext,
    upper: Micros,
    read_through: Option<Micros>,
) -> Result<Changes, DbError> {
    let settled = settle(conn, ctx, upper, read_through).await?;
    compare(conn, ctx, settled, false).await
}

/// What [`settle`] did to the staged rows, for the counts of [`compare`].
#[derive(Debug)]
pub struct Settled {
    revived: i64,
    dropped_deletes: i64,
    dropped_delete_examples: Vec<(Vec<String>, Micros)>,
}

/// The first half of [`classify`]: reads the staged keys' history and settles the staged
/// rows that cannot be compared as they are (deletes at a live version's instant, rows
/// of restored keys), so that each staged row's predecessor is the one [`compare`] will
/// find. Between the two a load may carry earlier versions over to a new Type 2 column
/// set (see [`crate::log::find_stale_versions`]), against those predecessors.
///
/// `read_through`: the watermark before this load. Rows stamped up to it were most likely
/// read before (a window's lookback reads them again); those equal to their predecessor
/// are dropped first, so that only the rest need their keys' history.
pub async fn settle(
    conn: &mut Conn,
    ctx: &SqlContext,
    upper: Micros,
    read_through: Option<Micros>,
) -> Result<Settled, DbError> {
    if let (true, Some(read_through)) = (ctx.unique_as_read, read_through) {
        let unchanged = sql::statement(conn.backend(), "classify", "drop_unchanged", ctx)?;
        if !unchanged.is_empty() {
            conn.execute("classify/drop_unchanged", &unchanged, &[Param::Ts(read_through)])
                .await?;
        }
    }
    // The staged keys' history, kept for the rebuild (see `rebuild::rebuild_touched`)
    // where the engine's rebuild reads it.
    run_named(conn, "classify", &["history"], ctx).await?;
    // A delete at the same instant as a live version moves 1 µs after it (issue 21);
    // one that lands on another live version has no room, and is dropped and reported.
    run_named(conn, "classify", &["shift_deletes"], ctx).await?;
    let drop = sql::statement(conn.backend(), "classify", "drop_hidden_deletes", ctx)?;
    let dropped = conn.query_text("dropping deletes with no room", &drop, &[]).await?;
    let key_count = ctx.key_names.len();
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
    Ok(Settled {
        revived,
        dropped_deletes: dropped.len() as i64,
        dropped_delete_examples,
    })
}

/// The second half of [`classify`]: compares each settled staged row with its predecessor
/// into `dimlog_changes` and counts the changes. `stale`: the load carries earlier
/// versions over to a new Type 2 column set (`dimlog_stale`), and they compare with their
/// new hashes.
pub async fn compare(conn: &mut Conn, ctx: &SqlContext, settled: Settled, stale: bool) -> Result<Changes, DbError> {
    #[derive(Serialize)]
    struct Classify<'a> {
        #[serde(flatten)]
        ctx: &'a SqlContext,
        stale: bool,
    }
    run_named(conn, "classify", &["classify"], &Classify { ctx, stale }).await?;
    let at = counts(conn, ctx, "counts").await?;
    Ok(Changes {
        versions: at(0),
        late_versions: at(1),
        corrections: at(2),
        tombstones: at(3),
        type1_updates: at(4),
        total: at(5),
        unseen_deletes: at(6),
        revived: settled.revived,
        dropped_deletes: settled.dropped_deletes,
        dropped_delete_examples: settled.dropped_delete_examples,
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
/// tombstone. Pair with [`crate::log::Append::FirstLoad`].
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
