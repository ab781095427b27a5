//! `dimlog status`.

use super::{load_plan, output::table, GlobalArgs, Output};
use crate::db::Access;
use crate::pipeline::Session;
use crate::Error;

/// Show the watermark of each role, the latest runs, and the column sets the dimension
/// was built with. Reads the target only, with read rights alone; with --against-source,
/// also how far the incremental watermark lags behind the source's newest change.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// How many recent runs to show.
    #[arg(long, default_value_t = 10)]
    pub runs: i64,
    /// Also read the source: its newest change and the watermark's lag.
    #[arg(long)]
    pub against_source: bool,
}

/// Runs `status`.
pub async fn run(global: &GlobalArgs, args: StatusArgs, out: &Output) -> Result<i32, Error> {
    let plan = load_plan(global)?;
    let mut session = Session::open_target(&plan, Access::QueryOnly).await?;
    let status = crate::dimension::read_status(&plan, &mut session, args.runs, args.against_source).await;
    session.close().await;
    let status = status?;
    if out.json {
        out.print_json(&status);
        return Ok(0);
    }
    out.line(format!("dimension {}", status.dimension));
    if let Some(r) = &status.columns {
        out.line(format!(
            "tracks {} (row-hash encoding v{}){}{}",
            r.tracked_columns.join(", "),
            r.hash_version,
            if r.type1_columns.is_empty() {
                String::new()
            } else {
                format!("; type 1: {}", r.type1_columns.join(", "))
            },
            if r.current_columns.is_empty() {
                String::new()
            } else {
                format!("; current_: {}", r.current_columns.join(", "))
            },
        ));
    }
    if let Some(column) = &status.change_column {
        let configured = plan.source.updated_at.name();
        if column.eq_ignore_ascii_case(configured) {
            out.line(format!("versions stamped by {column}"));
        } else {
            out.line(format!(
                "versions stamped by {column}, but source.updated_at is {configured}: runs are refused (see `dimlog doctor`)"
            ));
        }
    }
    if let Some(c) = &status.pending_config_change {
        out.line(format!(
            "config changed since the last run ({c}): `dimlog run --accept-config-change` applies it"
        ));
    }
    if status.watermarks.is_empty() {
        out.line("no watermark yet: no run has read anything");
    } else {
        let rows: Vec<Vec<String>> = status
            .watermarks
            .iter()
            .map(|w| {
                vec![
                    w.role.clone(),
                    w.high_watermark.clone().unwrap_or_default(),
                    w.run_id.map(|r| r.to_string()).unwrap_or_default(),
                ]
            })
            .collect();
        out.line(table(&["role", "watermark", "run"], &rows));
    }
    match (&status.source_newest, status.lag_seconds) {
        (Some(n), Some(l)) => {
            let ahead = status
                .source_clock
                .as_deref()
                .filter(|c| crate::ts::Micros::parse(n, None).ok() > crate::ts::Micros::parse(c, None).ok());
            out.line(match ahead {
                Some(clock) => format!(
                    "source newest change {n}, after the source's clock {clock} (read once the clock reaches it); \
                     incremental watermark lags the clock by {}",
                    crate::ts::seconds_for_people(l)
                ),
                None => format!(
                    "source newest change {n}; incremental watermark lags by {}",
                    crate::ts::seconds_for_people(l)
                ),
            })
        }
        (Some(n), None) => out.line(format!("source newest change {n}")),
        _ => {}
    }
    if !status.runs.is_empty() {
        out.line("");
        let rows: Vec<Vec<String>> = status
            .runs
            .iter()
            .map(|r| {
                vec![
                    r.run_id.to_string(),
                    r.kind.clone(),
                    r.status.clone(),
                    r.upper_bound.clone().unwrap_or_default(),
                    r.counts.rows_read.to_string(),
                    r.counts.versions.to_string(),
                    r.counts.corrections.to_string(),
                    r.counts.tombstones.to_string(),
                    r.counts.revived.to_string(),
                    r.counts.future_rows.to_string(),
                    r.error.clone().unwrap_or_default(),
                ]
            })
            .collect();
        out.line(table(
            &[
                "run",
                "kind",
                "status",
                "upper",
                "read",
                "versions",
                "corrections",
                "tombstones",
                "revived",
                "future",
                "error",
            ],
            &rows,
        ));
    }
    Ok(0)
}
