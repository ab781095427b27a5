//! The `dimlog` command line: parses flags, reads the environment, drives the library,
//! prints. The only module that touches the terminal, env vars and files.

mod backfill;
mod completions;
mod demo;
mod history;
mod init;
mod lookup;
mod man;
mod new;
mod output;
mod rebuild;
mod run;
mod status;
mod verify;

use crate::config::{Overrides, Plan};
use crate::Error;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

pub use output::Output;

/// Builds SCD Type 2 dimensions from changing source tables: an append-only version
/// log, rebuilt into a dimension with LEAD-derived valid_from / valid_to.
#[derive(Debug, Parser)]
#[command(
    name = "dimlog",
    version,
    propagate_version = true,
    max_term_width = 100,
    after_help = "Exit codes: 0 success; 1 the run failed and nothing was committed; 2 usage or config error;\n3 `verify` found a discrepancy. Start with `dimlog demo`, or `dimlog new` for your own table."
)]
pub struct Cli {
    /// Options every command takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Options shared by every command.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// The config file.
    #[arg(long, global = true, default_value = "dimlog.toml", value_name = "PATH")]
    pub config: PathBuf,
    /// Print one JSON object on stdout (errors too: {"error": {"kind", "message"}}).
    #[arg(long, global = true)]
    pub json: bool,
    /// More log output (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only errors.
    #[arg(short, long, global = true)]
    pub quiet: bool,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create dimlog's tables, the version log and the dimension (idempotent).
    Init(init::InitArgs),
    /// Load what changed: extract, dedupe, detect, append, rebuild, commit.
    Run(run::RunArgs),
    /// Re-load [from, to) chunk by chunk without touching the incremental watermark.
    Backfill(backfill::BackfillArgs),
    /// Rebuild the whole dimension from the log, in place.
    Rebuild(rebuild::RebuildArgs),
    /// Print the surrogate key in effect for a key at a time.
    Lookup(lookup::LookupArgs),
    /// Fill the surrogate-key column of a staged fact table, set-based.
    AssignKeys(lookup::AssignKeysArgs),
    /// Show every version of one key.
    History(history::HistoryArgs),
    /// Show watermarks and recent runs (and the lag behind the source, when asked).
    Status(status::StatusArgs),
    /// Check the dimension's invariants, and optionally compare it with the source.
    Verify(verify::VerifyArgs),
    /// A self-contained demonstration on an embedded SQLite database.
    Demo(demo::DemoArgs),
    /// Write a commented starter config for a source table.
    New(new::NewArgs),
    /// Print shell completions generated from this CLI.
    Completions(completions::CompletionsArgs),
    /// Print or write man pages generated from this CLI.
    Man(man::ManArgs),
}

/// Parses the command line, exiting on `--help`, `--version` or a usage error. With
/// `--json` anywhere on the line, a usage error is printed as the usual JSON error object
/// (exit 2), so an orchestrator parsing stdout never sees clap's text instead.
pub fn parse() -> Cli {
    match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() && std::env::args_os().any(|a| a == "--json") => {
            let message = e.to_string();
            let message = message.trim().trim_start_matches("error: ");
            Output::new(true).error(&Error::Usage(message.to_string()));
            std::process::exit(2)
        }
        Err(e) => e.exit(),
    }
}

/// Loads the plan, applying `DIMLOG_SOURCE_URL` / `DIMLOG_TARGET_URL`.
pub fn load_plan(global: &GlobalArgs) -> Result<Plan, Error> {
    let overrides = Overrides {
        source_url: std::env::var("DIMLOG_SOURCE_URL").ok().filter(|v| !v.is_empty()),
        target_url: std::env::var("DIMLOG_TARGET_URL").ok().filter(|v| !v.is_empty()),
    };
    Ok(Plan::load(&global.config, &overrides)?)
}

/// What to do about an error, in terms of the command line (the library's messages
/// never name a flag): printed after the message, and as `hint` in `--json` errors.
pub fn hint(e: &Error) -> Option<String> {
    use crate::lookup::{AssignError as A, FactColumn};
    if let Some(h) = privilege_hint(e) {
        return Some(h);
    }
    let Error::Assign(e) = e else { return None };
    Some(
        match e.as_ref() {
            A::KeyColumnCount { .. } => "repeat --key-column once per column of source.key, in that order",
            A::NoFactTable { .. } | A::ReservedFactTable { .. } => "--facts names a table in the target database",
            A::NoSuchColumn { role: FactColumn::At, .. } => "check --at-column",
            A::NoSuchColumn { .. } => "check --key-column",
            A::SkIsInput { .. } | A::SkNotInteger { .. } => {
                "--sk-column names the column to fill: give it an integer column of its own, or a new name (it is created)"
            }
            A::SkNotAssigned { .. } => {
                "if this column really is dimlog's surrogate-key column for this dimension and its values may be replaced, rerun with --overwrite"
            }
            A::FactTableSchema { .. } | A::SqliteReservedFactTable { .. } => {
                "--facts names your staged fact table, a lasting table of the target database"
            }
            A::SourceFactTable { .. } => {
                "--facts names your staged fact table, never the source table: copy the facts to a table of their own"
            }
            A::OwnedFactTable { .. } => "--facts names your staged fact table, never one of dimlog's tables",
            A::AtNotTimestamp { .. } => "--at-column names the facts' timestamp column",
            A::KeyTypeMismatch { .. } => "--key-column names fact columns of the key's types",
            A::KeyColumnOrder { .. } => "repeat --key-column once per column of source.key, in that order",
            A::BadTimestamps { .. } => {
                "fix those facts, or rerun with --unknown -1 to give them the unknown member -1 (they are counted)"
            }
            A::Unknown { .. } => "or rerun with --unknown -1 to give such facts the unknown member -1",
            _ => return None,
        }
        .to_string(),
    )
}

/// The right a PostgreSQL role lacks, in user terms, when a statement was refused for
/// want of it (SQLSTATE 42501, "permission denied for …", anywhere in the error's
/// chain): which right, on what, and the `GRANT` that gives it.
fn privilege_hint(e: &Error) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let message = loop {
        let c = cur?;
        if let Some(sqlx::Error::Database(db)) = c.downcast_ref::<sqlx::Error>() {
            if db.code().as_deref() == Some("42501") {
                break db.message().to_string();
            }
        }
        cur = c.source();
    };
    let role = "the role of target.url";
    let on = |what: &str| {
        message
            .strip_prefix(&format!("permission denied for {what} "))
            .map(|s| s.trim().to_string())
    };
    Some(if let Some(schema) = on("schema") {
        format!(
            "the PostgreSQL role lacks CREATE on schema {schema}, which dimlog needs to create its tables (and TEMPORARY on the database, for its work tables), \
             even for a dry run: GRANT CREATE ON SCHEMA {schema} TO {role}, or run as a role that has it; a role that may only read can run status, history, lookup and verify"
        )
    } else if let (Some(table), Error::Extract(_)) = (on("table"), e) {
        // Read on the source's connection: its role needs SELECT, nothing more.
        format!(
            "the PostgreSQL role of source.url may not read table {table}: GRANT SELECT ON {table} TO the role of source.url \
             (dimlog only reads the source)"
        )
    } else if let (Some(table), Error::Assign(_)) = (on("table"), e) {
        format!(
            "the PostgreSQL role lacks a right on table {table}: assign-keys needs SELECT and UPDATE on the fact table \
             (and SELECT, INSERT, UPDATE on dimlog_assigned): GRANT SELECT, UPDATE ON {table} TO {role}, or the rights \
             docs/recipes/postgres-to-postgres.md lists"
        )
    } else if let Some(table) = on("table") {
        format!(
            "the PostgreSQL role lacks a right on table {table}: the target's role needs the rights docs/recipes/postgres-to-postgres.md \
             lists on dimlog's tables (GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO {role} covers them all), the source's role \
             SELECT on the source table"
        )
    } else if let Some(database) = on("database").or_else(|| {
        message
            .strip_prefix("permission denied to create temporary tables in database ")
            .map(str::to_string)
    }) {
        format!(
            "the PostgreSQL role lacks TEMPORARY on database {database}, which dimlog needs for its work tables: GRANT TEMPORARY ON DATABASE {database} TO {role}"
        )
    } else if let Some(sequence) = on("sequence") {
        format!(
            "the PostgreSQL role lacks USAGE on sequence {sequence}: GRANT USAGE, SELECT ON SEQUENCE {sequence} TO {role}"
        )
    } else if let Some(what) = message.strip_prefix("must be owner of ") {
        format!(
            "the PostgreSQL role lacks ownership of {what}, which changing its columns needs: run as its owner, or GRANT the owner's role to {role}"
        )
    } else {
        format!("the PostgreSQL role lacks a right ({message}): GRANT it to {role}, or run as a role that has it")
    })
}

/// Parses a timestamp flag (RFC 3339 with an offset).
pub fn parse_ts(flag: &str, text: &str) -> Result<crate::ts::Micros, Error> {
    // The parser's message already says which form it expects.
    crate::ts::Micros::parse(text, None).map_err(|e| Error::Usage(format!("{flag}: {e}")))
}

/// The failpoint named by `DIMLOG_FAILPOINT` (only honoured with the `failpoints` feature).
pub fn failpoint_from_env() -> Option<String> {
    if cfg!(feature = "failpoints") {
        std::env::var("DIMLOG_FAILPOINT").ok().filter(|v| !v.is_empty())
    } else {
        None
    }
}

fn init_tracing(global: &GlobalArgs) {
    use tracing_subscriber::EnvFilter;
    let default = if global.quiet {
        "error"
    } else {
        match global.verbose {
            0 => "warn",
            1 => "info",
            _ => "debug",
        }
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(format!("dimlog={default},warn")));
    // Colour only for a terminal (and not with NO_COLOR): a redirected log stays text.
    use std::io::IsTerminal;
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

/// Runs the command line and returns the exit code.
pub async fn main_with(cli: Cli) -> i32 {
    init_tracing(&cli.global);
    let out = Output::new(cli.global.json).quiet(cli.global.quiet);
    let result = match cli.command {
        Command::Init(a) => init::run(&cli.global, a, &out).await,
        Command::Run(a) => run::run(&cli.global, a, &out).await,
        Command::Backfill(a) => backfill::run(&cli.global, a, &out).await,
        Command::Rebuild(a) => rebuild::run(&cli.global, a, &out).await,
        Command::Lookup(a) => lookup::run_lookup(&cli.global, a, &out).await,
        Command::AssignKeys(a) => lookup::run_assign(&cli.global, a, &out).await,
        Command::History(a) => history::run(&cli.global, a, &out).await,
        Command::Status(a) => status::run(&cli.global, a, &out).await,
        Command::Verify(a) => verify::run(&cli.global, a, &out).await,
        Command::Demo(a) => demo::run(&cli.global, a, &out).await,
        Command::New(a) => new::run(&cli.global, a, &out).await,
        Command::Completions(a) => completions::run(a, &out),
        Command::Man(a) => man::run(&cli.global, a, &out),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            out.error(&e);
            e.exit_code()
        }
    }
}
