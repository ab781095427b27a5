//! Verify: prove the dimension is what the log says, and (optionally) what the source
//! says.
//!
//! The invariant checks (half-open ordered intervals, no overlap, gaps only at
//! tombstones, one open current row per live key, surrogate keys never shared, and the
//! dimension equal to a fresh rebuild from the log) and the source comparison (keys
//! missing, extra, or with different tracked values) are set-based statements in
//! `sql/<backend>/verify.sql`, run inside a transaction that is always rolled back:
//! `verify` never writes. Without the source comparison it only reads: the fresh rebuild
//! it compares the dimension with is a common table expression of the check
//! (`rebuild.sql`'s `rebuilt`), not a table, so it runs on a read-only connection and
//! takes no lock a run would wait for.

use crate::config::Plan;
use crate::db::{sql, Conn, DbError};
use crate::extract::{self, Window};
use crate::pipeline::{Observer, Session};
use crate::tables::SqlContext;
use crate::Error;
use serde::Serialize;

/// How many offending keys a check lists.
pub const EXAMPLES: usize = 5;

/// The name of the fresh rebuild from the log that checks compare the dimension with
/// (`dim_new` in their templates).
const REBUILT: &str = "dimlog_rebuilt";

/// One check's findings.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// Its name.
    pub name: &'static str,
    /// What it checks.
    pub description: &'static str,
    /// Offending rows found.
    pub count: usize,
    /// The first few, as "key: detail".
    pub examples: Vec<String>,
    /// What to do about them.
    pub hint: &'static str,
}

/// The result of `verify`.
#[derive(Clone, Debug, Serialize)]
pub struct VerifyReport {
    /// The dimension.
    pub dimension: String,
    /// True when every check found nothing.
    pub ok: bool,
    /// Every check run.
    pub checks: Vec<Check>,
}

const INVARIANTS: &[(&str, &str, &str)] = &[
    (
        "bad_interval",
        "valid_from < valid_to on every row",
        "run `dimlog rebuild`",
    ),
    (
        "overlap_or_gap",
        "intervals of a key are ordered, without overlap, with gaps only at tombstones",
        "run `dimlog rebuild`",
    ),
    (
        "current",
        "at most one current row per key, and it is the open one",
        "run `dimlog rebuild`",
    ),
    (
        "sk_reused",
        "a surrogate key belongs to one version only",
        "the log was edited by hand; restore it from a backup",
    ),
    (
        "rebuild_diff",
        "the dimension equals a fresh rebuild from the log",
        "run `dimlog rebuild`",
    ),
];

const SOURCE_CHECKS: &[(&str, &str, &str)] = &[
    (
        "source_missing",
        "keys live in the source but not current in the dimension",
        "a late commit or a missed window: rerun with a longer source.lookback, or `dimlog run --full-refresh`",
    ),
    (
        "source_extra",
        "keys current in the dimension but gone from the source",
        "hard deletes: `dimlog run --reconcile-deletes` (or deletes.hard = \"reconcile\")",
    ),
    (
        "source_different",
        "keys whose tracked values differ between source and dimension",
        "a change that did not move updated_at: `dimlog run --full-refresh`",
    ),
];

async fn run_check(
    conn: &mut Conn,
    ctx: &SqlContext,
    (name, description, hint): (&'static str, &'static str, &'static str),
) -> Result<Check, DbError> {
    let check = sql::statement(conn.backend(), "verify", name, ctx)?;
    // A check that compares with a fresh rebuild gets it as a common table expression.
    let rebuilt = if check.contains(REBUILT) {
        Some(sql::statement(conn.backend(), "rebuild", "rebuilt", ctx)?)
    } else {
        None
    };
    let counted = serde_json::json!({ "check": check, "examples": EXAMPLES, "rebuilt": rebuilt });
    let sql = sql::statement(conn.backend(), "verify", "counted", &counted)?;
    let rows = conn.query_text(&format!("verify/{name}"), &sql, &[]).await?;
    let count = rows
        .first()
        .and_then(|r| r.first().cloned().flatten())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let examples = rows
        .iter()
        .map(|r| {
            format!(
                "{}: {}",
                r.get(1).cloned().flatten().unwrap_or_default(),
                r.get(2).cloned().flatten().unwrap_or_default()
            )
        })
        .collect();
    Ok(Check {
        name,
        description,
        count,
        examples,
        hint,
    })
}

/// Runs the checks; with `against_source`, also reads the whole source (up to its clock)
/// and compares current rows. Writes nothing, creates nothing: a dimension that was never
/// loaded is [`Error::NotLoaded`]. Without `against_source` the session needs no source
/// ([`Session::open_target`]) and only reads the target, in one read-only snapshot.
pub async fn verify(
    session: &mut Session,
    plan: &Plan,
    against_source: bool,
    observer: &dyn Observer,
) -> Result<VerifyReport, Error> {
    crate::tables::check_registered(&mut session.target, plan, &session.layout).await?;
    if against_source {
        // The source's rows are staged in temporary tables.
        session.target.begin().await?;
    } else {
        session.target.begin_read().await?;
    }
    let result = checks(session, plan, against_source, observer).await;
    session.target.rollback().await;
    let checks = result?;
    Ok(VerifyReport {
        dimension: plan.name.clone(),
        ok: checks.iter().all(|c| c.count == 0),
        checks,
    })
}

async fn checks(
    session: &mut Session,
    plan: &Plan,
    against_source: bool,
    observer: &dyn Observer,
) -> Result<Vec<Check>, Error> {
    let mut ctx = session.ctx.clone();
    ctx.dim_new = REBUILT.into();
    let mut out = Vec::new();
    for check in INVARIANTS {
        observer.phase(check.0);
        out.push(run_check(&mut session.target, &ctx, *check).await?);
    }
    if against_source {
        observer.phase("reading the source");
        let mut latest = ctx.clone();
        latest.history_all = false;
        crate::dedupe::create_staging(&mut session.target, &latest).await?;
        let upper = {
            let source = session.source.as_mut().expect("source connection");
            extract::source_now(source, plan, &session.layout).await?
        };
        let window = Window {
            low: None,
            high: upper,
            high_inclusive: true,
        };
        let staged = crate::pipeline::stage_window(session, plan, &window, observer)
            .await?
            .rows_read;
        crate::dedupe::dedupe(&mut session.target, &latest, staged, true).await?;
        for check in SOURCE_CHECKS {
            observer.phase(check.0);
            out.push(run_check(&mut session.target, &ctx, *check).await?);
        }
    }
    Ok(out)
}
