//! Hard deletes by key reconciliation.
//!
//! A watermark cannot see a row that was deleted: only a comparison of the source's full
//! key list with the dimension's live keys can. The key list streams from the source
//! (keys only, never whole rows) into a staging table of the target and is compared
//! set-based; missing keys become staged tombstones, so they go through the same
//! classify → append → rebuild path as everything else. A guard refuses to close more
//! than `deletes.max_fraction` of the live keys in one run: an empty or partial source
//! must never wipe the dimension.

use crate::config::Plan;
use crate::context::{run_named, SqlContext};
use crate::db::{sql, BindKind, Conn, Param};
use crate::extract::{self, Layout};
use crate::ts::Micros;
use crate::{stage, Error};

/// What reconciliation found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// Live keys missing from the source, staged as tombstones.
    pub missing: i64,
    /// Source keys held live that are neither live in the dimension nor in this load
    /// (listed in `dimlog_unseen`): their rows must be read again, whatever their stamp.
    pub unseen: i64,
}

/// Stages tombstones for live keys missing from the source and lists the source's keys
/// that no window will read; returns the source connection (it was lent to the key
/// reader) and the counts.
pub async fn stage_missing_keys(
    source: Conn,
    target: &mut Conn,
    plan: &Plan,
    layout: &Layout,
    ctx: &SqlContext,
    upper: Micros,
    allow_mass_delete: bool,
) -> (Conn, Result<Reconciled, Error>) {
    let (source, result) = if source.passes_copy_text_to(target) {
        stage_keys_copy(source, target, plan, layout, ctx).await
    } else {
        stage_keys(source, target, plan, layout, ctx).await
    };
    let counted = match result {
        Ok(()) => match refuse_flags_spelling_neither(target, ctx, plan).await {
            Ok(()) => compare(target, ctx, plan, upper, allow_mass_delete).await,
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    (source, counted)
}

/// Stages the source's key list row by row (any backend).
async fn stage_keys(
    source: Conn,
    target: &mut Conn,
    plan: &Plan,
    layout: &Layout,
    ctx: &SqlContext,
) -> (Conn, Result<(), Error>) {
    let (mut batches, handle) = match extract::spawn_key_reader(source, plan, layout) {
        Ok(r) => r,
        Err(e) => unreachable_source(e),
    };
    let mut result: Result<(), Error> = run_named(target, "reconcile", &["keys_table"], ctx)
        .await
        .map_err(Error::from);
    let columns = key_list_columns(ctx);
    let mut kinds: Vec<BindKind> = layout.keys.iter().map(|c| BindKind::from(c.kind)).collect();
    if ctx.deleted_flag {
        kinds.push(BindKind::Bool);
    }
    while let Some(batch) = batches.recv().await {
        if result.is_err() {
            continue;
        }
        result = match batch {
            Ok(rows) => target
                .bulk_insert(
                    "staging the source key list",
                    "dimlog_source_keys",
                    &columns,
                    &kinds,
                    &rows,
                )
                .await
                .map_err(Error::from),
            Err(e) => Err(e.into()),
        };
    }
    let source = match handle.await {
        Ok(c) => c,
        Err(e) => panic!("the key reader task failed: {e}"),
    };
    (source, result)
}

/// Stages the source's key list from PostgreSQL to PostgreSQL: the source's COPY text
/// goes into `COPY dimlog_source_keys FROM STDIN` as it came, never parsed.
async fn stage_keys_copy(
    source: Conn,
    target: &mut Conn,
    plan: &Plan,
    layout: &Layout,
    ctx: &SqlContext,
) -> (Conn, Result<(), Error>) {
    let (mut chunks, handle) = match extract::spawn_raw_reader(source, plan, layout, extract::RawRead::Keys) {
        Ok(r) => r,
        Err(e) => unreachable_source(e),
    };
    let mut result: Result<(), Error> = run_named(target, "reconcile", &["keys_table"], ctx)
        .await
        .map_err(Error::from);
    if result.is_ok() {
        let columns = key_list_columns(ctx);
        result = stage::copy_into(
            target,
            "staging the source key list",
            "dimlog_source_keys",
            &columns,
            &mut chunks,
            |piece, out| -> Result<(), Error> {
                out.extend_from_slice(piece);
                Ok(())
            },
        )
        .await;
    }
    drop(chunks);
    let source = match handle.await {
        Ok(c) => c,
        Err(e) => panic!("the key reader task failed: {e}"),
    };
    (source, result)
}

/// Refuses a key list holding a soft-delete flag that spells neither true nor false (its
/// liveness NULL): read as either, it would close a live key or keep a deleted one, as a
/// window's read refuses it too ([`extract::ExtractError::NotBoolean`]).
async fn refuse_flags_spelling_neither(target: &mut Conn, ctx: &SqlContext, plan: &Plan) -> Result<(), Error> {
    let Some(flag) = plan.source.deleted_flag.as_ref().filter(|_| ctx.deleted_flag) else {
        return Ok(());
    };
    let sql = sql::statement(target.backend(), "reconcile", "flag_neither", ctx)?;
    let found = target
        .query_text("looking for soft-delete flags that are no boolean", &sql, &[])
        .await?;
    let Some(key) = found.into_iter().next() else {
        return Ok(());
    };
    Err(extract::ExtractError::NotBoolean {
        column: flag.name().to_string(),
        role: "source.deleted_flag",
        key: extract::key_text(&key, key.len()),
        value: "a value that spells neither true nor false (found reconciling deletes)".into(),
        fix: extract::FLAG_FIX,
    }
    .into())
}

/// The columns of the staged source key list: the keys, and whether the row is live
/// when a soft-delete column is configured.
fn key_list_columns(ctx: &SqlContext) -> Vec<String> {
    // The key hash, where there is one, is the database's to compute (see KEY_HASH).
    let mut columns = ctx.key_names.clone();
    if ctx.deleted_flag {
        columns.push("dimlog_live".into());
    }
    columns
}

fn unreachable_source(e: extract::ExtractError) -> ! {
    panic!("the key-list statement did not render: {e}")
}

/// The mass-delete guard: reconciliation refuses to close more than `max_fraction` of the
/// live keys unless allowed.
#[derive(Clone, Copy, Debug)]
struct MassDeleteGuard {
    max_fraction: f64,
    allowed: bool,
}

impl MassDeleteGuard {
    /// How many live keys to count at most to decide, for `missing` keys to close (None:
    /// nothing to decide). The guard trips when missing > max_fraction × live: once
    /// `live` reaches missing / max_fraction it cannot, so counting stops there.
    fn live_to_count(self, missing: i64) -> Option<i64> {
        if missing == 0 || self.allowed {
            return None;
        }
        Some(if self.max_fraction > 0.0 {
            ((missing as f64 / self.max_fraction).floor() as i64).saturating_add(1)
        } else {
            i64::MAX
        })
    }

    /// Whether closing `missing` of `live` (as counted, at most [`Self::live_to_count`])
    /// keys is refused.
    fn trips(self, missing: i64, live: i64) -> bool {
        missing > 0 && !self.allowed && (missing as f64) > self.max_fraction * (live as f64)
    }
}

async fn compare(
    target: &mut Conn,
    ctx: &SqlContext,
    plan: &Plan,
    upper: Micros,
    allow: bool,
) -> Result<Reconciled, Error> {
    let backend = target.backend();
    // The key list gets an index or statistics, as the engine's planner needs.
    run_named(target, "reconcile", &["key_index", "analyze", "key_diff_by_merge"], ctx).await?;
    // The plan setting of the key diff is put back whether or not the diff succeeded:
    // the connection may outlive a failed run (a library caller's).
    let diffed = run_named(target, "reconcile", &["key_diff"], ctx).await;
    let put_back = run_named(target, "reconcile", &["key_diff_done"], ctx).await;
    diffed?;
    put_back?;
    run_named(target, "reconcile", &["missing"], ctx).await?;
    let count = |statement: &str| sql::statement(backend, "reconcile", statement, ctx);
    let missing = target
        .query_count("counting missing keys", &count("missing_count")?, &[])
        .await?;
    let guard = MassDeleteGuard {
        max_fraction: plan.max_fraction,
        allowed: allow,
    };
    let live = match guard.live_to_count(missing) {
        Some(enough) => {
            target
                .query_count("counting live keys", &count("live_count")?, &[Param::I64(enough)])
                .await?
        }
        None => 0,
    };
    if guard.trips(missing, live) {
        return Err(Error::MassDelete {
            would_close: missing,
            live,
            max_fraction: plan.max_fraction,
        });
    }
    let tomb = sql::statement(backend, "reconcile", "tombstones", ctx)?;
    target
        .execute("staging tombstones for missing keys", &tomb, &[Param::Ts(upper)])
        .await?;
    {
        // Keys whose newest version is not before `upper` close 1 µs after it: listed
        // here by engines whose `tombstones` statement cannot say so itself (SQLite;
        // PostgreSQL's lists none).
        let late = sql::statement(backend, "reconcile", "late_missing", ctx)?;
        let rows = target
            .query_text("finding late missing keys", &late, &[Param::Ts(upper)])
            .await?;
        let key_count = ctx.keys.len();
        for mut r in rows {
            let vf = r
                .pop()
                .flatten()
                .and_then(|t| Micros::parse(&t, None).ok())
                .unwrap_or(upper);
            let mut cols = ctx.keys.clone();
            cols.extend(["valid_from".into(), "is_deleted".into()]);
            let mut kinds: Vec<BindKind> = ctx.key_defs.iter().map(|c| BindKind::from(c.kind)).collect();
            kinds.extend([BindKind::Text, BindKind::Bool]);
            r.truncate(key_count);
            r.push(Some(vf.plus(1).to_text()));
            r.push(Some("true".into()));
            target
                .bulk_insert("staging a late tombstone", "dimlog_stage", &cols, &kinds, &[r])
                .await?;
        }
    }
    // A change feed's rows are events at their own times: a late one is read by a full
    // refresh, and a key's deleted events would make it look unseen on every run.
    if ctx.history_all {
        return Ok(Reconciled { missing, unseen: 0 });
    }
    run_named(target, "reconcile", &["unseen"], ctx).await?;
    let unseen = target
        .query_count("counting source keys no window read", &count("unseen_count")?, &[])
        .await?;
    Ok(Reconciled { missing, unseen })
}

#[cfg(test)]
mod tests {
    use super::MassDeleteGuard;

    fn guard(max_fraction: f64) -> MassDeleteGuard {
        MassDeleteGuard {
            max_fraction,
            allowed: false,
        }
    }

    /// Counting live keys only up to the limit decides exactly as counting them all.
    #[test]
    fn counting_to_the_limit_decides_as_counting_all() {
        for max_fraction in [0.0, 0.01, 0.1, 0.25, 0.5, 1.0, 2.0] {
            for missing in 0..40 {
                for live in 0..200 {
                    let g = guard(max_fraction);
                    let counted = g.live_to_count(missing).map_or(live, |limit| live.min(limit));
                    assert_eq!(
                        g.trips(missing, counted),
                        g.trips(missing, live),
                        "max_fraction {max_fraction}, missing {missing}, live {live}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_guard_trips_above_the_fraction_only() {
        let g = guard(0.1);
        assert!(!g.trips(10, 100), "exactly 10% is allowed");
        assert!(g.trips(11, 100));
        assert!(!g.trips(0, 0), "nothing to close");
        assert!(g.trips(1, 0), "closing keys of an empty dimension's count");
        assert!(guard(0.0).trips(1, 1_000_000), "0 allows no delete");
        let allowed = MassDeleteGuard {
            max_fraction: 0.1,
            allowed: true,
        };
        assert!(!allowed.trips(100, 100));
        assert_eq!(allowed.live_to_count(100), None, "allowed: nothing is counted");
        assert_eq!(guard(0.1).live_to_count(0), None);
        assert_eq!(guard(0.1).live_to_count(10), Some(101));
    }
}
