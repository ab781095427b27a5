//! The library's front door: one [`Dimension`], the commands of the `dimlog` binary as
//! its methods, and the types they take and return.
//!
//! A program that loads or reads a dimension needs only this module, [`crate::config`]
//! (to resolve a config with overrides of its own), [`crate::ts`] (times) and
//! [`crate::ident`] (names of fact tables). Each method does what its command does,
//! through the same functions, without printing and without reading the environment:
//! it opens the connections the command opens (a method that only reads the target
//! never connects to the source), does the work and closes them before it returns, so a
//! [`Dimension`] holds no connection between calls and may be shared freely; the futures
//! are `Send`, so they may be spawned.

use std::path::Path;
use std::time::Duration;

use crate::config::{Overrides, Plan};
use crate::db::Access;
use crate::ident::Ident;
use crate::pipeline::{self, Observer, Quiet, Session};
use crate::ts::Micros;
use crate::Error;

pub use crate::backfill::{BackfillOptions, Chunk, ChunkOutcome, Selection};
pub use crate::db::types::ColumnKind;
pub use crate::inspect::{Status, WatermarkRow};
pub use crate::lookup::{AssignReport, AssignSpec, BadFact, Index, LookupError, KEY_SEPARATOR, UNKNOWN};
pub use crate::pipeline::{DroppedDelete, RunOptions, RunReport};
pub use crate::state::{RunCounts, RunKind, RunRecord};
pub use crate::tables::DimensionRecord;
pub use crate::verify::{Check, VerifyReport};

/// One dimension, as a resolved config describes it: the entry point of the library.
///
/// ```no_run
/// # async fn example() -> Result<(), dimlog::Error> {
/// use dimlog::dimension::RunOptions;
/// let customers = dimlog::Dimension::load("dimlog.toml")?;
/// let report = customers.run(&RunOptions::incremental()).await?;
/// println!("{} new versions", report.counts.versions);
/// assert!(customers.verify(false).await?.ok);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Dimension {
    plan: Plan,
}

/// What a backfill did: the `--json` object of `dimlog backfill`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BackfillReport {
    /// The dimension.
    pub dimension: String,
    /// The backfill's watermark role, `backfill:<from>/<to>`: a backfill never moves the
    /// incremental watermark.
    pub role: String,
    /// Every chunk of `[from, to)`, in order, with what became of it here.
    pub chunks: Vec<ChunkOutcome>,
    /// How many chunks failed (each rolled back alone; rerun with
    /// [`Selection::OnlyFailed`]).
    pub failed: usize,
    /// How many chunks of the range are not loaded after it: failed, never run (after a
    /// failure with `fail_fast`), or not selected and never committed. A backfill of the
    /// same range with [`Selection::NotCommitted`] loads them all.
    pub not_loaded: usize,
}

/// Progress goes nowhere: the facade reports results, not progress.
struct Silent;
impl Observer for Silent {}
impl crate::backfill::BackfillObserver for Silent {}

impl Dimension {
    /// Reads and resolves the config file at `path`, as written: relative SQLite paths
    /// are taken from the file's folder. Nothing is connected yet. (The binary also
    /// applies `DIMLOG_SOURCE_URL` / `DIMLOG_TARGET_URL`; the library reads no
    /// environment, so pass [`Overrides`] to [`Plan::load`] and use
    /// [`Dimension::from_plan`] for that.)
    pub fn load(path: impl AsRef<Path>) -> Result<Dimension, Error> {
        Ok(Dimension::from_plan(Plan::load(path.as_ref(), &Overrides::default())?))
    }

    /// A dimension from a config resolved elsewhere ([`Plan::load`], [`Plan::from_toml`]).
    pub fn from_plan(plan: Plan) -> Dimension {
        Dimension { plan }
    }

    /// The resolved config.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The dimension's name (the config's `name`), under which dimlog's own tables keep
    /// its watermarks, runs and column sets.
    pub fn name(&self) -> &str {
        &self.plan.name
    }

    /// Creates the tables and indexes that are missing, as `dimlog init` does: checks the
    /// config against the source first, takes the dimension's lock (waiting for it), and
    /// returns the column sets the dimension is built with. Idempotent; [`Dimension::run`]
    /// does it too, so this is for an owner who creates the tables before a loader with
    /// fewer rights runs.
    pub async fn init(&self) -> Result<DimensionRecord, Error> {
        let plan = &self.plan;
        let mut session = Session::open(plan).await?;
        let record = async {
            session.check_zone(plan).await?;
            session.create_target(plan).await?;
            session
                .under_lock(plan, true, async |session: &mut Session| {
                    Ok(crate::tables::init(&mut session.target, plan, &session.layout).await?)
                })
                .await
        }
        .await;
        session.close().await;
        record
    }

    /// One load, as `dimlog run` does: extract, dedupe, detect, append, rebuild the
    /// touched keys, and commit with the new watermark in one transaction (a failure
    /// leaves the previous state). With [`RunOptions::dry_run`] it computes the same
    /// report and writes nothing, reading the target with the rights a comparison needs.
    pub async fn run(&self, options: &RunOptions) -> Result<RunReport, Error> {
        let plan = &self.plan;
        let mut session = if options.dry_run {
            Session::open_to_compare(plan, Access::Create).await?
        } else {
            Session::open(plan).await?
        };
        let report = pipeline::run(&mut session, plan, options, &Quiet).await;
        session.close().await;
        report
    }

    /// Reloads `[from, to)` in chunks of `chunk`, as `dimlog backfill --from --to --chunk`
    /// does: each chunk reads exactly its window through the path of a run, in its own
    /// transaction, under the backfill's own watermark role, so the incremental watermark
    /// never moves. Chunks committed by an earlier backfill of the same range are skipped;
    /// a failed chunk is an outcome ([`BackfillReport::failed`]), not an error, and the
    /// others still run. [`Dimension::backfill_with`] takes the other options.
    pub async fn backfill(&self, from: Micros, to: Micros, chunk: Duration) -> Result<BackfillReport, Error> {
        let options = BackfillOptions {
            from,
            to,
            // A chunk longer than 292,000 years is one chunk all the same.
            chunk_micros: i64::try_from(chunk.as_micros()).unwrap_or(i64::MAX),
            selection: Selection::NotCommitted,
            fail_fast: false,
            wait: true,
            failpoint: None,
            interrupt: None,
        };
        self.backfill_with(&options).await
    }

    /// [`Dimension::backfill`] with every option: which chunks to run, whether to stop at
    /// the first failure, whether to wait for the dimension's lock.
    pub async fn backfill_with(&self, options: &BackfillOptions) -> Result<BackfillReport, Error> {
        let plan = &self.plan;
        let mut session = Session::open(plan).await?;
        let chunks = crate::backfill::run(&mut session, plan, options, &Silent).await;
        session.close().await;
        let chunks = chunks?;
        Ok(BackfillReport {
            dimension: plan.name.clone(),
            role: crate::backfill::role(options.from, options.to),
            failed: chunks.iter().filter(|c| c.outcome == "failed").count(),
            not_loaded: crate::backfill::not_loaded(&chunks),
            chunks,
        })
    }

    /// Rebuilds the whole dimension from the version log, as `dimlog rebuild` does: in
    /// place and in one transaction, writing only the rows that differ, so what users
    /// added to the table stays. Needs only the target; waits for the dimension's lock.
    pub async fn rebuild(&self) -> Result<(), Error> {
        let plan = &self.plan;
        let mut session = Session::open_target(plan, Access::ReadWrite).await?;
        let rebuilt = pipeline::rebuild_all(&mut session, plan, true).await;
        session.close().await;
        rebuilt
    }

    /// Turns the dimension's local tables on a Citus coordinator into distributed ones
    /// colocated by the key, as `dimlog distribute` does (see
    /// [`crate::tables::distribute`]); waits for the dimension's lock.
    pub async fn distribute(&self) -> Result<crate::tables::Distribution, Error> {
        let plan = &self.plan;
        let mut session = Session::open_target(plan, Access::ReadWrite).await?;
        let done = pipeline::distribute(&mut session, plan, true).await;
        session.close().await;
        done
    }

    /// Checks the dimension's invariants against its log, as `dimlog verify` does, and
    /// with `against_source` also compares the source's current rows with the
    /// dimension's. Findings are in the report ([`VerifyReport::ok`]), not an error.
    /// Without `against_source` it reads the target alone, with read rights, and never
    /// connects to the source.
    pub async fn verify(&self, against_source: bool) -> Result<VerifyReport, Error> {
        let plan = &self.plan;
        let mut session = if against_source {
            Session::open_to_compare(plan, Access::ReadWrite).await?
        } else {
            Session::open_target_to_verify(plan).await?
        };
        let report = crate::verify::verify(&mut session, plan, against_source, &Silent).await;
        session.close().await;
        report
    }

    /// Watermarks, the latest `runs` run records (newest first) and the column sets, as
    /// `dimlog status` shows them; with `against_source`, also the source's newest change
    /// and how far the incremental watermark lags behind it. Reads the target with read
    /// rights alone (and the source only when asked).
    pub async fn status(&self, runs: u32, against_source: bool) -> Result<Status, Error> {
        let plan = &self.plan;
        let mut session = Session::open_target(plan, Access::QueryOnly).await?;
        let status = read_status(plan, &mut session, i64::from(runs), against_source).await;
        session.close().await;
        status
    }

    /// Checks the setup without writing anything (what `dimlog doctor` prints): the
    /// source, its table and time zones, the target and the rights each command needs,
    /// the clocks, the recorded columns, the lock. A failed check is in the report, not
    /// an error.
    pub async fn doctor(&self) -> crate::doctor::DoctorReport {
        crate::doctor::doctor(&self.plan).await
    }

    /// The surrogate key in effect for `key` (one value per column of `source.key`, in
    /// that order) at `at`: the version with `valid_from <= at < valid_to`, as
    /// `dimlog lookup` finds it, or `None` where `dimlog lookup` prints the unknown member
    /// [`UNKNOWN`]. A key value is read as its column's type (`07` is the integer key
    /// `7`). Reads the target alone. For many facts, [`Dimension::index`] or
    /// [`Dimension::assign_keys`].
    pub async fn lookup(&self, key: &[&str], at: Micros) -> Result<Option<i64>, Error> {
        let expected = self.plan.source.key.len();
        if key.len() != expected {
            let e = LookupError::KeyParts {
                expected,
                given: key.len(),
            };
            return Err(e.into());
        }
        let key: Vec<String> = key.iter().map(|k| k.to_string()).collect();
        let mut session = Session::open_target(&self.plan, Access::QueryOnly).await?;
        let found = crate::lookup::lookup_one(&mut session.target, &session.ctx, &key, at).await;
        let typo = crate::lookup::not_a_value(session.target.backend(), &session.ctx, &key);
        session.close().await;
        match (found?, typo) {
            (None, Some(typo)) => Err(typo.into()),
            (found, _) => Ok(found),
        }
    }

    /// What to fill for [`Dimension::assign_keys`]: the staged fact table `facts` in the
    /// target database, its natural-key columns (one per column of `source.key`, in that
    /// order), its timestamp column, and the surrogate-key column to fill (created when
    /// missing). Facts without a version get [`UNKNOWN`]; set
    /// [`AssignSpec::unknown_is_error`] to refuse them instead, and
    /// [`AssignSpec::overwrite`] to fill a column holding values `assign_keys` did not put
    /// there. Times written without a zone are of `source.timezone`.
    pub fn assign_spec(&self, facts: Ident, key_columns: Vec<Ident>, at_column: Ident, sk_column: Ident) -> AssignSpec {
        AssignSpec {
            dimension: self.plan.name.clone(),
            facts,
            key_columns,
            at_column,
            sk_column,
            unknown_is_error: false,
            overwrite: false,
            timezone: self.plan.source.timezone,
        }
    }

    /// Fills the surrogate-key column of a staged fact table, set-based and in one
    /// transaction, as `dimlog assign-keys` does ([`Dimension::assign_spec`] says what to
    /// fill). Safe to rerun. Refuses the source table and dimlog's own tables as facts.
    /// Needs only the target, with write rights.
    pub async fn assign_keys(&self, spec: &AssignSpec) -> Result<AssignReport, Error> {
        let plan = &self.plan;
        let mut session = Session::open_target(plan, Access::ReadWrite).await?;
        // A target whose dimlog tables a newer dimlog upgraded is not written.
        if let Err(e) = crate::db::migrate::refuse_newer(&mut session.target, &plan.target.url.redacted()).await {
            session.close().await;
            return Err(e.into());
        }
        let report = match crate::lookup::check_not_the_source(plan, &mut session.target, &spec.facts).await {
            Ok(()) => crate::lookup::assign_keys(&mut session.target, &session.ctx, spec).await,
            Err(e) => Err(e),
        };
        session.close().await;
        Ok(report?)
    }

    /// The whole dimension in memory, for a loader written in Rust that looks up many
    /// facts: [`Index::lookup`] gives every fact what [`Dimension::lookup`] and
    /// [`Dimension::assign_keys`] give it. Reads the target alone, once; the index does
    /// not follow later runs.
    pub async fn index(&self) -> Result<Index, Error> {
        Index::open(&self.plan).await
    }
}

/// The status of a dimension whose target `session` has open: what `dimlog status` and
/// [`Dimension::status`] show (`runs` is the number of run records, as given).
pub(crate) async fn read_status(
    plan: &Plan,
    session: &mut Session,
    runs: i64,
    against_source: bool,
) -> Result<Status, Error> {
    let record = crate::tables::existing_record(&mut session.target, plan).await?;
    let (newest, clock) = if against_source {
        let mut source = pipeline::open_source(plan).await?;
        let newest = crate::extract::source_newest(&mut source, plan, &session.layout).await;
        let clock = crate::extract::source_now(&mut source, plan, &session.layout).await;
        let _ = source.close().await;
        (newest?, Some(clock?))
    } else {
        (None, None)
    };
    let mut status = crate::inspect::status(&mut session.target, plan, newest, runs).await?;
    if let (Some(clock), Some(w)) = (clock, status.incremental_watermark()) {
        // A change stamped after the source's clock is read once the clock reaches it:
        // the lag a run can close ends at the clock.
        if newest.is_some_and(|n| n > clock) {
            status.lag_seconds = Some((clock.0 - w.0).max(0) as f64 / 1e6);
        }
    }
    status.source_clock = clock.map(|c| c.to_text());
    status.pending_config_change = record.pending_change(plan).map(|c| c.describe());
    status.change_column = crate::record::change_column_if_recorded(&mut session.target, plan).await;
    status.columns = Some(record);
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spawnable<T: Send>(_: T) {}

    /// Every method's future is `Send`, so a program may `tokio::spawn` it (checked when
    /// this compiles; never run).
    #[allow(dead_code)]
    fn futures_are_send(d: &Dimension, options: &RunOptions, spec: &AssignSpec) {
        spawnable(d.init());
        spawnable(d.run(options));
        spawnable(d.backfill(Micros(0), Micros(1), Duration::from_secs(1)));
        spawnable(d.rebuild());
        spawnable(d.verify(true));
        spawnable(d.status(1, true));
        spawnable(d.lookup(&["1"], Micros(0)));
        spawnable(d.assign_keys(spec));
        spawnable(d.index());
    }
}
