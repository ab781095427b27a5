//! The `dimlog` command line: parses flags, reads the environment, drives the library,
//! prints. The only module that touches the terminal, env vars and files.

mod backfill;
mod completions;
mod demo;
mod distribute;
mod doctor;
pub mod error;
mod history;
mod init;
mod key;
mod lookup;
mod man;
mod migrate;
mod new;
mod output;
mod rebuild;
mod run;
mod scaffold;
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
    after_help = "Exit codes: 0 success; 1 the run failed and nothing was committed; 2 usage or config error;\n3 `verify` found a discrepancy; 130 interrupted (Ctrl-C, SIGTERM), nothing of the work in progress committed.\nStart with `dimlog demo`, or `dimlog new` for your own table."
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
    /// Fired on SIGINT or SIGTERM (see [`main_with`]).
    #[arg(skip)]
    pub interrupt: crate::interrupt::Interrupt,
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
    /// Distribute the log and the dimension across a Citus cluster (local tables there).
    Distribute(distribute::DistributeArgs),
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
    /// Check the setup without writing anything: source, target, rights, clocks, lock.
    Doctor(doctor::DoctorArgs),
    /// Take a retyped source column's new type into the log and the record.
    Migrate(migrate::MigrateArgs),
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
        .with_writer(|| LogWriter)
        .with_target(false)
        .try_init();
}

/// Standard error for the log, whose writes never fail: the log's own writer complains
/// of a failed write with `eprintln!`, which panics on a closed pipe (`dimlog run -v 2>&1
/// | head -2`), and a log line nobody reads must not stop a run.
struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

/// Fires `interrupt` on the first SIGINT or SIGTERM; on a second one, exits at once
/// (status 130) without waiting for the rollback: the database still rolls back what was
/// not committed when the connection closes. Not while a run commits: that finishes.
async fn fire_on_signals(interrupt: crate::interrupt::Interrupt) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return;
    };
    loop {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        if interrupt.is_fired() {
            if interrupt.is_committing() {
                // Exiting now would leave the outcome to chance while saying otherwise.
                output::eprint_line(
                    "note",
                    "interrupted again while committing: a commit cannot be stopped, it finishes first \
                     (kill -9 stops at once; the database then keeps all of the commit or none of it)",
                );
                continue;
            }
            output::eprint_line("error", "interrupted again: exiting without waiting for the rollback");
            std::process::exit(130);
        }
        if interrupt.is_committing() {
            tracing::info!("interrupted while committing: the commit finishes and the run is kept");
        } else if interrupt.is_answered() {
            tracing::info!("interrupted: rolling back");
        } else {
            tracing::info!("interrupted: stopping; what is not committed is rolled back");
        }
        interrupt.fire();
    }
}

/// Runs the command line and returns the exit code.
pub async fn main_with(cli: Cli) -> i32 {
    init_tracing(&cli.global);
    let out = Output::new(cli.global.json).quiet(cli.global.quiet);
    let interrupt = cli.global.interrupt.clone();
    let signals = tokio::spawn(fire_on_signals(interrupt.clone()));
    let command = async {
        match cli.command {
            Command::Init(a) => init::run(&cli.global, a, &out).await,
            Command::Run(a) => run::run(&cli.global, a, &out).await,
            Command::Backfill(a) => backfill::run(&cli.global, a, &out).await,
            Command::Rebuild(a) => rebuild::run(&cli.global, a, &out).await,
            Command::Distribute(a) => distribute::run(&cli.global, a, &out).await,
            Command::Lookup(a) => lookup::run_lookup(&cli.global, a, &out).await,
            Command::AssignKeys(a) => lookup::run_assign(&cli.global, a, &out).await,
            Command::History(a) => history::run(&cli.global, a, &out).await,
            Command::Status(a) => status::run(&cli.global, a, &out).await,
            Command::Verify(a) => verify::run(&cli.global, a, &out).await,
            Command::Doctor(a) => doctor::run(&cli.global, a, &out).await,
            Command::Migrate(a) => migrate::run(&cli.global, a, &out).await,
            Command::Demo(a) => demo::run(&cli.global, a, &out).await,
            Command::New(a) => new::run(&cli.global, a, &out).await,
            Command::Completions(a) => completions::run(a, &out),
            Command::Man(a) => man::run(&cli.global, a, &out),
        }
    };
    // A run in progress answers an interrupt itself (it rolls back and records itself as
    // interrupted; `run` and `backfill` then report it): that answer is awaited. Any other
    // work is dropped where it is, which closes its connections, and the database rolls
    // back what they had not committed.
    let result = tokio::select! {
        biased;
        result = command => result,
        () = async {
            interrupt.fired().await;
            loop {
                while interrupt.is_answered() {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                // The command reports the answer: a moment to do so (or to start a run
                // that answers at once, between a backfill's chunks).
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                if !interrupt.is_answered() {
                    break;
                }
            }
        } => Err(Error::Interrupted { committed: 0 }),
    };
    signals.abort();
    match result {
        Ok(code) => code,
        Err(e) => {
            out.error(&e);
            e.exit_code()
        }
    }
}
