//! `dimlog lookup` and `dimlog assign-keys`.

use super::{load_plan, parse_ts, GlobalArgs, Output};
use crate::db::Access;
use crate::ident::Ident;
use crate::lookup::{self, AssignSpec, UNKNOWN};
use crate::pipeline::Session;
use crate::{Dimension, Error};

/// What a fact with no version gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Unknown {
    /// The unknown member, -1.
    #[value(name = "-1")]
    Member,
    /// An error (exit 1).
    Error,
}

/// Print the surrogate key in effect for a key at a time (valid_from <= TS < valid_to),
/// or -1 when there is none. Reads the target only, with read rights alone; never
/// connects to the source.
#[derive(Debug, clap::Args)]
pub struct LookupArgs {
    /// The natural key: VALUE for a one-column key, else COLUMN=VALUE once per column.
    #[arg(long = "key", value_name = "K[=V]", required = true, num_args = 1.., allow_negative_numbers = true)]
    pub key: Vec<String>,
    /// The fact's timestamp (RFC 3339).
    #[arg(long, value_name = "TS")]
    pub at: String,
    /// -1 (the unknown member, exit 0) or error (exit 1).
    #[arg(long, value_enum, default_value = "-1", allow_hyphen_values = true)]
    pub unknown: Unknown,
}

/// Runs `lookup`.
pub async fn run_lookup(global: &GlobalArgs, args: LookupArgs, out: &Output) -> Result<i32, Error> {
    let plan = load_plan(global)?;
    // A time without a zone is a local time of source.timezone, as a fact's is.
    let at = match plan.source.timezone {
        Some(zone) => crate::ts::Micros::parse(&args.at, Some(&zone)).map_err(|e| {
            Error::Usage(format!(
                "--at {:?}: {e}; give an RFC 3339 time, e.g. 2026-10-05T09:30:00Z, or a local time of {} (source.timezone)",
                args.at,
                zone.name()
            ))
        })?,
        None => parse_ts("--at", &args.at)?,
    };
    let mut session = Session::open_target(&plan, Access::QueryOnly).await?;
    let session_layout = session.layout.clone();
    let found = async {
        let key = super::key::key_values(&session.layout, &args.key)?;
        let sk = lookup::lookup_one(&mut session.target, &session.ctx, &key, at).await?;
        if sk.is_none() {
            if let Some(typo) = lookup::not_a_value(session.target.backend(), &session.ctx, &key) {
                return Err(typo.into());
            }
        }
        Ok::<_, Error>((key, sk))
    }
    .await;
    session.close().await;
    let (key, sk) = found?;
    if sk.is_none() {
        if let Some(hint) = super::key::unfound_hint(&session_layout, &args.key) {
            out.note("hint", &hint);
        }
    }
    if sk.is_none() && args.unknown == Unknown::Error {
        return Err(Error::Discrepancy(format!("key {key:?} has no version in effect at {at}")).into_run_failure());
    }
    let sk = sk.unwrap_or(UNKNOWN);
    if out.json {
        out.print_json(&serde_json::json!({"surrogate_key": sk}));
    } else {
        out.line(sk.to_string());
    }
    Ok(0)
}

/// Fill the surrogate-key column of a staged fact table in the target database,
/// set-based, in one transaction (the column is created if missing). Safe to rerun.
#[derive(Debug, clap::Args)]
pub struct AssignKeysArgs {
    /// The fact table (in the target database).
    #[arg(long, value_name = "TABLE")]
    pub facts: String,
    /// Its natural-key column; repeat once per source.key column, in order.
    #[arg(long = "key-column", value_name = "C", required = true)]
    pub key_column: Vec<String>,
    /// Its timestamp column.
    #[arg(long, value_name = "C")]
    pub at_column: String,
    /// The surrogate-key column to fill.
    #[arg(long, value_name = "C")]
    pub sk_column: String,
    /// -1 (the unknown member) or error (write nothing, exit 1, name the first such fact).
    #[arg(long, value_enum, default_value = "-1", allow_hyphen_values = true)]
    pub unknown: Unknown,
    /// Fill --sk-column even if it holds values (other than NULL and -1) and assign-keys
    /// did not fill it for this dimension before (otherwise refused: it may be a column
    /// of other data).
    #[arg(long)]
    pub overwrite: bool,
}

/// Runs `assign-keys`.
pub async fn run_assign(global: &GlobalArgs, args: AssignKeysArgs, out: &Output) -> Result<i32, Error> {
    let plan = load_plan(global)?;
    let ident = |flag: &str, v: &str, table: bool| {
        if table { Ident::table(v) } else { Ident::column(v) }.map_err(|e| Error::Usage(format!("{flag}: {e}")))
    };
    let spec = AssignSpec {
        dimension: plan.name.clone(),
        facts: ident("--facts", &args.facts, true)?,
        key_columns: args
            .key_column
            .iter()
            .map(|c| ident("--key-column", c, false))
            .collect::<Result<_, _>>()?,
        at_column: ident("--at-column", &args.at_column, false)?,
        sk_column: ident("--sk-column", &args.sk_column, false)?,
        unknown_is_error: args.unknown == Unknown::Error,
        overwrite: args.overwrite,
        timezone: plan.source.timezone,
    };
    let started = std::time::Instant::now();
    let report = Dimension::from_plan(plan).assign_keys(&spec).await?;
    let seconds = started.elapsed().as_secs_f64();
    if let Some(first) = &report.first_bad_timestamp {
        let warning = format!(
            "{} facts in {} have no usable timestamp in `{}` (first: {first}); they got the unknown member -1",
            report.bad_timestamps, spec.facts, spec.at_column
        );
        if out.json || global.quiet {
            tracing::warn!("{warning}");
        } else {
            super::output::eprint_line("warning", &warning);
        }
    }
    if out.json {
        out.print_json(&serde_json::json!({
            "facts": spec.facts.to_string(),
            "facts_matched": report.facts_matched,
            "facts_unknown": report.facts_unknown,
            "bad_timestamps": report.bad_timestamps,
            "first_bad_timestamp": report.first_bad_timestamp,
            "seconds": seconds,
        }));
    } else {
        let bad = if report.bad_timestamps > 0 {
            format!(
                " ({} of them have no usable timestamp in `{}`)",
                report.bad_timestamps, spec.at_column
            )
        } else {
            String::new()
        };
        out.line(format!(
            "assigned {}: {} facts got a surrogate key, {} got the unknown member -1{bad} ({seconds:.2}s)",
            spec.facts, report.facts_matched, report.facts_unknown
        ));
    }
    Ok(0)
}
