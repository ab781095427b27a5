//! dimlog builds SCD Type 2 dimensions from changing source tables, on SQLite and
//! PostgreSQL: an append-only version log with surrogate keys, and a dimension derived
//! from it with `valid_from` / `valid_to` / `is_current`.
//!
//! The library's API is [`Dimension`]: one dimension as its config describes it, with
//! the commands of the `dimlog` binary as async methods ([`init`](Dimension::init),
//! [`run`](Dimension::run), [`backfill`](Dimension::backfill),
//! [`rebuild`](Dimension::rebuild), [`verify`](Dimension::verify),
//! [`status`](Dimension::status), [`lookup`](Dimension::lookup),
//! [`assign_keys`](Dimension::assign_keys)) and the in-memory lookup
//! [`index`](Dimension::index). The types they take and return are in [`dimension`];
//! [`config`] resolves a config, [`ts`] holds times, [`ident`] validates table and column
//! names. The library never prints and never reads the environment: the binary does.
//!
//! ```no_run
//! use dimlog::dimension::RunOptions;
//! use dimlog::ts::Micros;
//! use dimlog::Dimension;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let customers = Dimension::load("dimlog.toml")?;
//! // One load: what changed since the last run, committed in one transaction.
//! let report = customers.run(&RunOptions::incremental()).await?;
//! println!("{} new versions, watermark {:?}", report.counts.versions, report.high_watermark);
//! // The surrogate key in effect for customer 42 at a time (None: no version then).
//! let at = Micros::parse("2026-10-05T09:30:00Z", None)?;
//! let sk = customers.lookup(&["42"], at).await?;
//! // Many facts: load the dimension into memory once; it agrees with `lookup`
//! // (`UNKNOWN`, -1, where `lookup` says None).
//! let index = customers.index().await?;
//! let same = index.lookup(&["42"], at)?;
//! assert_eq!(same, sk.unwrap_or(dimlog::dimension::UNKNOWN));
//! // The invariants, and the dimension against the source.
//! assert!(customers.verify(true).await?.ok);
//! # Ok(()) }
//! ```
//!
//! With `default-features = false` the library builds without the binary's crates
//! (clap, indicatif, plotters, tracing-subscriber): the `cli` feature, on by default,
//! brings them and the binary.

// Module map, for contributors (the modules other than `dimension`, `config`, `ident` and
// `ts` are public for the binary and the tests, not an API, so they are hidden from the
// docs; docs/architecture.md has the map by layer). A load reads what changed in the
// source (a watermark with a lookback window and a fixed upper bound) into staging
// (`stage`), keeps one row per key (`dedupe`), hashes the tracked columns with a
// NULL-safe, length-prefixed encoding (`hash`) and classifies them against the log
// (`detect`), appends new versions, corrections and
// tombstones to an append-only version log with surrogate keys (`log`), and derives the
// dimension from that log with `LEAD` (`rebuild`), so a version that arrives late slots
// into its place in history. Log rows, dimension rows, the run record and the new
// watermark (`state`) commit in one transaction.
//
//     source ──extract──▶ dedupe ──▶ detect ──▶ log (append-only) ──rebuild──▶ dimension
//
// `config` resolves the TOML once into a `config::Plan`; `extract` reads the source;
// `dedupe`, `detect`, `log`, `rebuild` are the stages; `reconcile` finds hard deletes;
// `state` holds locks, watermarks and run records; `pipeline` orchestrates one load;
// `backfill`, `verify` and `lookup` are the other commands' work; `dimension` is the
// facade over them all. `db` is the engine seam: a stage asks the engine's
// `db::dialect::Dialect` what differs instead of matching on the engine, and each
// engine's folder (`db/sqlite/`, `db/postgres/`) is the only reader of its `sql/<engine>/`
// files. For people rather than pipelines: `inspect` reads histories and status back,
// and `timeline` draws a key's history as an SVG (feature `svg`). `cli` (feature `cli`)
// is the binary's command line: the only module that prints, reads the environment and
// exits, and the only one that names a flag (`cli::error` turns errors into hints that
// do); `dimlog new`'s guessing of a starter config lives there too (`cli::scaffold`).

// Printing to a closed pipe with these macros panics (exit 101): output goes through
// `cli::output`, whose writes ignore a failed write.
#![deny(clippy::print_stdout, clippy::print_stderr)]

#[cfg(test)]
mod architecture;
#[doc(hidden)]
pub mod backfill;
/// The `dimlog` binary's command line: not a library API.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
pub mod config;
#[doc(hidden)]
pub mod context;
#[doc(hidden)]
pub mod db;
#[doc(hidden)]
pub mod dedupe;
#[doc(hidden)]
pub mod detect;
pub mod dimension;
#[doc(hidden)]
pub mod doctor;
#[doc(hidden)]
pub mod extract;
#[doc(hidden)]
pub mod failpoint;
#[doc(hidden)]
pub mod hash;
pub mod ident;
#[doc(hidden)]
pub mod inspect;
pub mod interrupt;
#[doc(hidden)]
pub mod layout;
#[doc(hidden)]
pub mod log;
#[doc(hidden)]
pub mod lookup;
#[doc(hidden)]
pub mod pipeline;
#[doc(hidden)]
pub mod rebuild;
#[doc(hidden)]
pub mod reconcile;
#[doc(hidden)]
pub mod record;
#[doc(hidden)]
pub mod rights;
#[doc(hidden)]
pub mod secret;
#[doc(hidden)]
pub mod stage;
#[doc(hidden)]
pub mod state;
#[doc(hidden)]
pub mod tables;
/// The SVG timeline of `dimlog history --format svg`.
#[cfg(feature = "svg")]
#[doc(hidden)]
pub mod timeline;
pub mod ts;
#[doc(hidden)]
pub mod verify;

// The errors inside [`Error`], by layer, and what they name.
pub use backfill::{BackfillError, ChunkOutcome};
pub use db::DbError;
pub use dimension::Dimension;
pub use doctor::{Check as DoctorCheck, DoctorReport, Outcome as DoctorOutcome};
pub use extract::{ExtractError, WindowError};
pub use lookup::{AssignError, FactColumn, LookupError};
pub use tables::NotDistributable;
pub use tables::{Missing, NotLoaded};
pub use verify::{Check, Fix, VerifyReport};

/// Every way a dimlog command can fail, by layer; the CLI maps each to an exit code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The config is wrong (exit 2).
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// A database failed (exit 1).
    #[error(transparent)]
    Db(#[from] db::DbError),
    /// Reading the source failed, or the source broke a rule (exit 1; config problems 2).
    #[error(transparent)]
    Extract(#[from] extract::ExtractError),
    /// `assign-keys` refused the fact table (exit 2) or found facts it may not give the
    /// unknown member (exit 1).
    #[error(transparent)]
    Assign(Box<lookup::AssignError>),
    /// Reconciliation would close too many keys (exit 1).
    #[error("reconciliation would close {would_close} of {live} live keys, more than deletes.max_fraction = {max_fraction}; nothing was committed. If the source really lost them, allow the mass delete for one run; otherwise check the source table (an empty or partial load?)")]
    MassDelete {
        /// Keys that would get tombstones.
        would_close: i64,
        /// Live keys now.
        live: i64,
        /// The configured guard.
        max_fraction: f64,
    },
    /// The dimension was never loaded into the target (exit 2): a command that only reads
    /// it says so rather than create anything.
    #[error("{0}; run `dimlog run` to load it, or check `name` and `target.url` in the config")]
    NotLoaded(#[from] tables::NotLoaded),
    /// A backfill's range or chunk size cannot make chunks (exit 2).
    #[error(transparent)]
    Backfill(#[from] backfill::BackfillError),
    /// A lookup's key does not fit the dimension's natural key (exit 2).
    #[error(transparent)]
    Lookup(#[from] lookup::LookupError),
    /// `migrate` found logged values of a column that do not convert to its new type:
    /// nothing changed (exit 1).
    #[error(transparent)]
    NotConvertible(Box<NotConvertible>),
    /// `distribute` refused the dimension's tables (exit 2).
    #[error(transparent)]
    NotDistributable(#[from] tables::NotDistributable),
    /// An [`interrupt::Interrupt`] stopped the command: the work in progress was rolled
    /// back (exit 130, as a shell reports a process stopped by SIGINT).
    #[error("{}", if *committed == 0 {
        "interrupted: nothing committed".to_string()
    } else {
        format!("interrupted: the work in progress was rolled back; {committed} chunk(s) before it had committed")
    })]
    Interrupted {
        /// Units of work that had committed before (a backfill's chunks); 0 for a run.
        committed: usize,
    },
    #[doc(hidden)]
    /// A failpoint fired (tests only).
    #[error("failpoint {0} fired; nothing after it was committed")]
    Failpoint(&'static str),
    /// Wrong input on the command line (exit 2); the library's own refusals of an
    /// argument have variants of their own ([`Error::Lookup`], [`Error::Backfill`]).
    #[error("{0}")]
    Usage(String),
    /// `verify` found discrepancies (exit 3).
    #[error("{0}")]
    Discrepancy(String),
    /// A lookup or assignment found facts without a version, with `--unknown error`
    /// (exit 1: nothing was written).
    #[error("{0}")]
    Unknown(String),
    /// A bug: something that should not happen.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<tables::InitError> for Error {
    fn from(e: tables::InitError) -> Self {
        match e {
            tables::InitError::Db(d) => Error::Db(d),
            tables::InitError::Config(c) => Error::Config(c),
        }
    }
}

impl From<tables::DistributeError> for Error {
    fn from(e: tables::DistributeError) -> Self {
        match e {
            tables::DistributeError::Db(d) => Error::Db(d),
            tables::DistributeError::Not(n) => Error::NotDistributable(n),
        }
    }
}

impl From<tables::RecordError> for Error {
    fn from(e: tables::RecordError) -> Self {
        match e {
            tables::RecordError::Db(d) => Error::Db(d),
            tables::RecordError::NotLoaded(n) => Error::NotLoaded(n),
            tables::RecordError::Config(c) => Error::Config(c),
        }
    }
}

impl From<lookup::AssignError> for Error {
    fn from(e: lookup::AssignError) -> Self {
        Error::Assign(Box::new(e))
    }
}

/// Logged values of a column that do not convert to the source's new type, found by
/// `dimlog migrate` (`pipeline::migrate_column`): nothing changed.
#[derive(Debug, thiserror::Error)]
#[error(
    "the logged values of column `{column}` do not all convert from {from} to {to}, so nothing was changed ({source}). \
     Keep the old type instead: {keep}"
)]
pub struct NotConvertible {
    /// The column.
    pub column: String,
    /// Its type in the log.
    pub from: String,
    /// The source's new type.
    pub to: String,
    /// How to keep loading it in the old type.
    pub keep: String,
    /// The database's refusal, naming the value.
    pub source: db::DbError,
}

impl Error {
    /// Turns a discrepancy into a run failure (exit 1) for commands where "not found"
    /// means the command failed rather than that a check found something.
    pub fn into_run_failure(self) -> Error {
        match self {
            Error::Discrepancy(m) => Error::Unknown(m),
            other => other,
        }
    }

    /// The database statement that failed, if that is what failed (`family/name`, e.g.
    /// `rebuild/merge_touched`): the message says the step in words.
    pub fn failed_step(&self) -> Option<&str> {
        match self {
            Error::Db(d) | Error::Extract(extract::ExtractError::Db(d)) => d.failed_step(),
            Error::Assign(a) => match a.as_ref() {
                lookup::AssignError::Db(d) => d.failed_step(),
                _ => None,
            },
            _ => None,
        }
    }

    /// The process exit code (spec section 4).
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Config(_)
            | Error::Usage(_)
            | Error::Backfill(_)
            | Error::Lookup(_)
            | Error::NotLoaded(_)
            | Error::NotDistributable(_) => 2,
            // Like the other refusals of a damaged log (config errors naming target.log).
            Error::Db(db::DbError::LogLostVersions(_)) => 2,
            Error::Db(db::DbError::MixedLayout { .. }) => 2,
            Error::Extract(extract::ExtractError::Config(_) | extract::ExtractError::Window(_)) => 2,
            Error::Discrepancy(_) => 3,
            Error::Interrupted { .. } => 130,
            Error::Assign(e) => match e.as_ref() {
                lookup::AssignError::Db(_)
                | lookup::AssignError::BadTimestamps { .. }
                | lookup::AssignError::Unknown { .. } => 1,
                _ => 2,
            },
            _ => 1,
        }
    }

    /// A short machine-readable kind for `--json` errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Config(_) | Error::Extract(extract::ExtractError::Config(_)) => "config",
            Error::Db(db::DbError::LogLostVersions(_)) => "config",
            Error::Usage(_) | Error::Backfill(_) | Error::Lookup(_) => "usage",
            Error::Extract(extract::ExtractError::Window(_)) => "window",
            Error::NotLoaded(_) => "not-loaded",
            Error::NotDistributable(_) | Error::Db(db::DbError::MixedLayout { .. }) => "not-distributable",
            Error::Db(
                db::DbError::Locked { .. } | db::DbError::TableLocked { .. } | db::DbError::NewFileBusy { .. },
            ) => "locked",
            Error::Db(
                db::DbError::Connect { .. }
                | db::DbError::ConnectTimeout { .. }
                | db::DbError::WouldCreateFiles { .. }
                | db::DbError::NotWritable { .. }
                | db::DbError::ReadOnlyMedium { .. }
                | db::DbError::WalOnReadOnlyMedium { .. }
                | db::DbError::NoFolder { .. }
                | db::DbError::NotReadable { .. }
                | db::DbError::NameTooLong { .. },
            ) => "connect",
            Error::Db(db::DbError::UnsettledCommit { .. }) => "unsettled-commit",
            Error::Db(_) => "database",
            Error::Extract(_) => "source",
            Error::MassDelete { .. } => "mass-delete",
            Error::Failpoint(_) => "failpoint",
            Error::Interrupted { .. } => "interrupted",
            Error::Discrepancy(_) => "discrepancy",
            Error::NotConvertible(_) => "not-convertible",
            Error::Unknown(_) => "unknown-member",
            Error::Assign(e) => match e.as_ref() {
                lookup::AssignError::Db(db::DbError::Locked { .. }) => "locked",
                lookup::AssignError::Db(_) => "database",
                lookup::AssignError::AtNoZone { .. } | lookup::AssignError::AtNoZoneValues { .. } => "config",
                lookup::AssignError::BadTimestamps { .. } => "bad-timestamp",
                lookup::AssignError::Unknown { .. } => "unknown-member",
                _ => "usage",
            },
            Error::Internal(_) => "internal",
        }
    }
}
