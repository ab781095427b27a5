//! `dimlog run`.

use super::{failpoint_from_env, load_plan, parse_ts, GlobalArgs, Output};
use crate::pipeline::{self, RunOptions, RunReport, Session};
use crate::state::RunKind;
use crate::Error;

/// Load what changed since the last run: read [watermark - lookback, upper], dedupe,
/// detect changes, append to the version log, rebuild the touched keys, and commit all
/// of it with the new watermark in one transaction.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Fixed upper bound of the read (RFC 3339); default: the source's clock minus
    /// source.safety_lag. Give the same value to retry a run exactly.
    #[arg(long, value_name = "TS")]
    pub upper: Option<String>,
    /// Read the whole source through the same path; only genuine changes become versions.
    #[arg(long)]
    pub full_refresh: bool,
    /// Compare the source's full key list and tombstone missing keys (this run only).
    #[arg(long)]
    pub reconcile_deletes: bool,
    /// Let reconciliation close more than deletes.max_fraction of the live keys.
    #[arg(long)]
    pub allow_mass_delete: bool,
    /// Print the counts the run would commit, and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Exit 1 at once if another run of this dimension holds its lock.
    #[arg(long)]
    pub no_wait: bool,
    /// Migrate to changed [track] column sets: add new columns to the log, carry
    /// current versions over where the source agrees (no new versions), rebuild.
    #[arg(long)]
    pub accept_config_change: bool,
}

/// Runs `run`.
pub async fn run(global: &GlobalArgs, args: RunArgs, out: &Output) -> Result<i32, Error> {
    let plan = load_plan(global)?;
    let upper = args.upper.as_deref().map(|u| parse_ts("--upper", u)).transpose()?;
    let mut session = if args.dry_run {
        Session::open_to_compare(&plan, crate::db::Access::Create).await?
    } else {
        Session::open(&plan).await?
    };
    let opts = RunOptions {
        kind: if args.full_refresh {
            RunKind::FullRefresh
        } else {
            RunKind::Incremental
        },
        upper,
        reconcile_deletes: args.reconcile_deletes,
        allow_mass_delete: args.allow_mass_delete,
        dry_run: args.dry_run,
        wait: !args.no_wait,
        failpoint: failpoint_from_env(),
        accept_config_change: args.accept_config_change,
        interrupt: Some(global.interrupt.clone()),
        ..RunOptions::incremental()
    };
    let progress = out.progress();
    let report = pipeline::run(&mut session, &plan, &opts, &progress).await;
    drop(progress);
    // Closed cleanly, so the last connection folds SQLite's WAL into the file and removes
    // the `-wal` and `-shm` files (a reader who may not write the file needs them gone or
    // made by the owner: see `db::sqlite::connect`).
    session.close().await;
    let report = report?;
    log_summary(&report);
    if let Some(warning) = future_rows_warning(&report) {
        out.note("warning", &warning);
    }
    if let Some(warning) = dropped_deletes_warning(&report, &plan) {
        out.note("warning", &warning);
    }
    if let Some(warning) = late_in_full_refresh_warning(&report) {
        out.note("warning", &warning);
    }
    if out.json {
        out.print_json(&report);
    } else {
        out.line(summary(&report));
    }
    Ok(0)
}

fn opt(t: Option<crate::ts::Micros>) -> String {
    t.map(|t| t.to_text()).unwrap_or_else(|| "-".into())
}

/// The run's one-line summary, as logged at info level.
pub fn log_summary(r: &RunReport) {
    tracing::info!(
        dimension = %r.dimension,
        low = %opt(r.low_watermark),
        upper = %r.upper_bound,
        rows_read = r.counts.rows_read,
        versions = r.counts.versions,
        corrections = r.counts.corrections,
        tombstones = r.counts.tombstones,
        watermark_before = %opt(r.watermark_before),
        watermark_after = %opt(r.high_watermark),
        "run {}",
        r.status
    );
}

/// What to say of deletes the run dropped for want of room (never silent), naming the
/// first keys; nothing when there are none.
pub fn dropped_deletes_warning(r: &RunReport, plan: &crate::config::Plan) -> Option<String> {
    if r.dropped_deletes == 0 {
        return None;
    }
    let names: Vec<&str> = plan.source.key.iter().map(|k| k.name()).collect();
    let examples: Vec<String> = r
        .dropped_delete_keys
        .iter()
        .map(|d| {
            let key: Vec<String> = names.iter().zip(&d.key).map(|(n, v)| format!("{n}={v}")).collect();
            format!("{} at {}", key.join(", "), d.at)
        })
        .collect();
    let (n, s, was) = match r.dropped_deletes {
        1 => (1, "", "was"),
        n => (n, "s", "were"),
    };
    Some(format!(
        "{n} delete{s} {was} dropped and not logged ({}{}): each is stamped at the same instant as a live version of its key, \
         so it would move 1 µs later to keep that version's surrogate key, but the key has another live version there. \
         If the key is really deleted, stamp its delete later than its last version (docs/concepts/deletes.md)",
        examples.join("; "),
        if r.dropped_deletes as usize > examples.len() { "; …" } else { "" }
    ))
}

/// A full refresh that logged late versions says so: each is a source row stamped
/// before its key's current version, which is a row committed late with an old stamp,
/// or an `updated_at` that moved backwards (wrong data at the source, never right after
/// a load); only the source can tell which.
pub fn late_in_full_refresh_warning(r: &RunReport) -> Option<String> {
    if r.kind != crate::state::RunKind::FullRefresh || r.counts.late_versions == 0 {
        return None;
    }
    let n = r.counts.late_versions;
    Some(format!(
        "{n} source row(s) are stamped before their key's current version and were logged as late versions: rows committed \
         late with an old updated_at, or an updated_at that moved backwards (then the source differs from the dimension's \
         current row: `dimlog verify --against-source` lists those keys as source_behind; fix updated_at at the source)"
    ))
}

/// What to say of the source rows stamped after the upper bound (spec section 1: counted
/// and warned, so a wrong clock at the source is seen), or nothing when there are none.
pub fn future_rows_warning(r: &RunReport) -> Option<String> {
    let count = r.counts.future_rows;
    if count == 0 {
        return None;
    }
    let newest = opt(r.newest_future_row);
    let why = match (r.newest_future_row, r.source_clock) {
        (Some(n), Some(clock)) if n > clock => format!(
            "the newest is later than the source's clock {clock}: the clock of whatever writes the source is wrong, and those rows will only be read once the source's clock passes them"
        ),
        _ => "a later run reads them once its upper bound passes them".to_string(),
    };
    Some(format!(
        "{count} source rows are stamped after this run's upper bound {} (the newest at {newest}) and were not read; {why}",
        r.upper_bound
    ))
}

/// A human summary of a run.
pub fn summary(r: &RunReport) -> String {
    let c = &r.counts;
    let head = if r.dry_run {
        "dry run (nothing written)".to_string()
    } else {
        format!("run {} {}", r.run_id.unwrap_or(0), r.status)
    };
    let mut text = format!(
        "{head}: {} read [{} .. {}], {} after dedupe ({} dropped), {} versions ({} late), {} corrections, {} tombstones",
        c.rows_read,
        opt(r.low_watermark),
        r.upper_bound,
        c.rows_after_dedupe,
        c.duplicates_dropped,
        c.versions,
        c.late_versions,
        c.corrections,
        c.tombstones,
    );
    if c.revived > 0 {
        text.push_str(&format!(", {} revived", c.revived));
    }
    if c.future_rows > 0 {
        text.push_str(&format!(", {} stamped after the upper bound", c.future_rows));
    }
    if r.type1_updates > 0 {
        text.push_str(&format!(", {} type 1 updates", r.type1_updates));
    }
    if r.unseen_deletes > 0 {
        let s = if r.unseen_deletes == 1 { "" } else { "s" };
        text.push_str(&format!(
            ", {} delete{s} of a key never seen (closing nothing; not counted as tombstones)",
            r.unseen_deletes
        ));
    }
    if let Some(change) = &r.config_change {
        text.push_str(&format!(
            ", config change accepted ({change}): {} current versions carried over",
            r.rehashed
        ));
    }
    if r.rehashed_earlier > 0 {
        text.push_str(&format!(
            ", {} earlier versions carried over to the new column set (a row read has their values)",
            r.rehashed_earlier
        ));
    }
    text.push_str(&format!(
        "; watermark {} -> {}",
        opt(r.watermark_before),
        opt(r.high_watermark)
    ));
    text
}
