//! One load, start to finish: lock → watermark → extract → dedupe → detect → append →
//! rebuild → state → commit.
//!
//! This module only orchestrates; each step lives in its stage module and data flows
//! one way through them. Everything a load writes (log rows, dimension rows, the run
//! record, the watermark) commits in one transaction of the target, so a crash anywhere
//! leaves the previous state and the retry loads everything.

use crate::config::{ConfigError, HardDeletes, Plan};
use crate::db::types::ColumnKind;
use crate::db::{Access, Conn, DbError};
use crate::extract::{self, Layout, SourceSchema, Window};
use crate::hash::{RowHasher, StagedRef, StagedRow};
use crate::rights::Need;
use crate::state::{self, RunBounds, RunCounts, RunKind};
use crate::tables::{self, SqlContext};
use crate::ts::Micros;
use crate::{dedupe, detect, failpoint, log, rebuild, reconcile, record, rights, stage, Error};
use serde::Serialize;
use std::sync::atomic::Ordering;

/// Receives progress; the CLI draws bars, the library never prints.
pub trait Observer: Send + Sync {
    /// A step started.
    fn phase(&self, _name: &str) {}
    /// More source rows were read (running total).
    fn rows_read(&self, _total: u64) {}
    /// The step under way did not finish: the work failed or was interrupted in it.
    fn stopped(&self) {}
}

/// An observer that ignores everything.
pub struct Quiet;
impl Observer for Quiet {}

/// Passes everything on to `inner`, keeping the rows read so far: a run that fails or is
/// interrupted records how many it had read.
struct CountingRows<'a> {
    inner: &'a dyn Observer,
    rows: std::sync::atomic::AtomicU64,
}

impl CountingRows<'_> {
    fn rows_read(&self) -> i64 {
        i64::try_from(self.rows.load(Ordering::Relaxed)).unwrap_or(i64::MAX)
    }
}

impl Observer for CountingRows<'_> {
    fn phase(&self, name: &str) {
        self.inner.phase(name);
    }
    fn rows_read(&self, total: u64) {
        self.rows.store(total, Ordering::Relaxed);
        self.inner.rows_read(total);
    }
    fn stopped(&self) {
        self.inner.stopped();
    }
}

/// How to run one load.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Which kind of run the record says.
    pub kind: RunKind,
    /// The watermark role (`incremental`, or a backfill's own).
    #[doc(hidden)]
    pub role: String,
    /// The fixed upper bound; else the source's clock minus `source.safety_lag`.
    pub upper: Option<Micros>,
    /// A fixed window (backfill chunks); replaces watermark and lookback.
    #[doc(hidden)]
    pub window: Option<Window>,
    /// Reconcile hard deletes in this run.
    pub reconcile_deletes: bool,
    /// Let reconciliation close more than `deletes.max_fraction` of live keys.
    pub allow_mass_delete: bool,
    /// Do everything, then roll back; write no run record.
    pub dry_run: bool,
    /// Wait for another run's lock (else fail at once).
    pub wait: bool,
    #[doc(hidden)]
    /// A failpoint to trigger (only with the `failpoints` feature).
    pub failpoint: Option<String>,
    /// Migrate to changed column sets (never done silently).
    pub accept_config_change: bool,
    /// Stops the run when fired: it rolls back, is recorded as `interrupted`, and
    /// returns [`Error::Interrupted`].
    pub interrupt: Option<crate::interrupt::Interrupt>,
}

impl RunOptions {
    /// An incremental run with defaults.
    pub fn incremental() -> RunOptions {
        RunOptions {
            kind: RunKind::Incremental,
            role: state::INCREMENTAL.into(),
            upper: None,
            window: None,
            reconcile_deletes: false,
            allow_mass_delete: false,
            dry_run: false,
            wait: true,
            failpoint: None,
            accept_config_change: false,
            interrupt: None,
        }
    }
}

/// What a load did: the fields of `dimlog_runs`, plus the watermark before it.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// The run id (`load_id` of its log rows); none for a dry run.
    pub run_id: Option<i64>,
    /// The dimension.
    pub dimension: String,
    /// incremental / full-refresh / backfill.
    pub kind: RunKind,
    /// Watermark role.
    pub role: String,
    /// Low side of the window read (`>=`); none when the whole source was read.
    pub low_watermark: Option<Micros>,
    /// The watermark after the run.
    pub high_watermark: Option<Micros>,
    /// The watermark before the run.
    pub watermark_before: Option<Micros>,
    /// The fixed upper bound.
    pub upper_bound: Micros,
    /// Counts.
    #[serde(flatten)]
    pub counts: RunCounts,
    /// The latest stamp among the rows after the upper bound (`future_rows`).
    pub newest_future_row: Option<Micros>,
    /// The source database's clock when the run started (none for backfill chunks).
    pub source_clock: Option<Micros>,
    /// Live keys closed by reconciliation (included in `tombstones`).
    pub reconciled_deletes: i64,
    /// Type 1 observations appended (only Type 1 columns changed; no version).
    pub type1_updates: i64,
    /// Deletes of keys with no version before them (never seen): they close nothing and
    /// are not counted in `tombstones`; their tombstones are logged all the same.
    pub unseen_deletes: i64,
    /// Deletes dropped for want of room: stamped at a live version's instant, each moved
    /// 1 µs later (to keep that version's surrogate key) onto another live version of
    /// its key. Never logged; not counted in `tombstones`.
    pub dropped_deletes: i64,
    /// The first few of them: the key (one value per key column) and the delete's stamp.
    pub dropped_delete_keys: Vec<DroppedDelete>,
    /// Current versions carried over to a changed Type 2 column set (no version).
    pub rehashed: i64,
    /// Earlier versions carried over to the Type 2 column set of the last accepted change
    /// (no version): logged before it, with a hash over the columns of their time, each
    /// is the predecessor of a row this run read with the same Type 2 values (a late row,
    /// or the source back on a version it did not agree with at the change).
    pub rehashed_earlier: i64,
    /// The accepted change of column sets, in words.
    pub config_change: Option<String>,
    /// succeeded (or `dry-run`).
    pub status: String,
    /// Pipeline clock at start.
    pub started_at: Micros,
    /// Pipeline clock at the end.
    pub finished_at: Micros,
    /// Always null here: a report is of a run that did not fail. Present so that
    /// `run --json` has every key of `dimlog_runs` (spec section 3).
    pub error: Option<String>,
    /// True when nothing was committed on purpose.
    pub dry_run: bool,
}

/// A delete the run dropped (see [`RunReport::dropped_deletes`]).
#[derive(Clone, Debug, Serialize)]
pub struct DroppedDelete {
    /// The natural key, one value per key column.
    pub key: Vec<String>,
    /// The delete's stamp.
    pub at: Micros,
}

/// Open connections and the validated layout of one dimension; reused by backfill
/// chunks.
pub struct Session {
    /// The source (moved into the reader task while a window streams); none for a
    /// session of the target alone ([`Session::open_target`]).
    pub source: Option<Conn>,
    /// The target.
    pub target: Conn,
    /// Columns, kinds and target types.
    pub layout: Layout,
    /// Template context.
    pub ctx: SqlContext,
    /// A SQLite target file that does not exist yet and is created only when something is
    /// to be written ([`Session::create_target`]); until then `target` is an empty
    /// in-memory database standing in for it.
    deferred: Option<crate::config::DbUrl>,
    /// The new SQLite target file a first load builds aside, until it is put in place
    /// ([`Session::create_target_aside`]); `target` is its connection meanwhile.
    new_file: Option<crate::db::NewFile>,
    /// How the target was opened and which rights were checked, to open it again the
    /// same way when its connection is lost ([`Session::reconnect_lost`]).
    target_access: Access,
    target_need: Need,
    /// Set when the target's connection was replaced while the dimension's lock was held
    /// ([`Session::reconnect_lost`]): the lock went with the old session.
    lock_lost: bool,
    /// The interrupt of the work under way ([`Session::interruptible`] sets it), for
    /// the steps that hold their thread for a while and must look at it themselves.
    interrupt: Option<crate::interrupt::Interrupt>,
    /// Set by a run's check of the change column when the target records none yet: the
    /// run records it ([`record::record_change_column`]).
    change_column_unrecorded: bool,
}

impl Session {
    /// Connects to both sides for a load: opens the source read-only (dimlog never
    /// writes it), checks the config against the source's schema, and only then connects
    /// to the target. A SQLite target file that does not exist is not created here: an
    /// empty in-memory database stands in for it (it is what a never-loaded target holds),
    /// and [`Session::create_target`] creates the file when something is to be written —
    /// [`run`] does so after the window check and never for a dry run, so a refused run or
    /// a dry run leaves no file behind, as a config the source refutes or a source that
    /// cannot be reached does. Creates no table. Whoever writes the target through
    /// `session.target` other than by [`run`] or [`crate::backfill::run`] (e.g.
    /// [`tables::init`]) calls [`Session::create_target`] first.
    pub async fn open(plan: &Plan) -> Result<Session, Error> {
        Session::open_with(plan, Access::Create).await
    }

    /// [`Session::open_with`] for work that reads both sides and compares them in
    /// temporary tables alone (a dry run, [`RunOptions::dry_run`]; `verify` against the
    /// source): the target's rights are checked for reading and for temporary tables,
    /// not for loading.
    pub async fn open_to_compare(plan: &Plan, target: Access) -> Result<Session, Error> {
        Session::open_checked(plan, target, Need::Compare).await
    }

    /// Opens again whichever connection no longer answers (killed by an operator, a
    /// restarted server, a failover), as it was opened; a connection that answers is
    /// kept. A backfill calls it before each chunk, and a failed run before it records
    /// its failure, so that one lost connection fails one run, not every one after it.
    /// Returns whether the target's connection was replaced (its session locks are gone
    /// with the old one).
    pub async fn reconnect_lost(&mut self, plan: &Plan) -> Result<bool, Error> {
        let mut replaced = false;
        if self.deferred.is_none() && self.new_file.is_none() && !self.target.is_alive().await {
            tracing::info!("the connection to the target was lost; connecting again");
            let fresh = open_target(plan, self.target_access, self.target_need).await?;
            drop(std::mem::replace(&mut self.target, fresh));
            replaced = true;
            self.lock_lost = true;
        }
        if let Some(source) = self.source.as_mut() {
            if !source.is_alive().await {
                tracing::info!("the connection to the source was lost; connecting again");
                self.source = Some(open_source(plan).await?);
            }
        }
        Ok(replaced)
    }

    /// Closes the target's connection and opens a new one the same way, for a connection
    /// whose state is unknown (work dropped mid-statement): its transaction is rolled back
    /// and its lock released by the database.
    pub async fn replace_target(&mut self, plan: &Plan) -> Result<(), Error> {
        if let Some(file) = self.new_file.take() {
            // The new file's only writer goes first (rolling back what it did not commit),
            // or the new one would wait on its lock.
            let stand_in = match Conn::open_empty(&plan.target.url).await {
                Ok(c) => c,
                Err(e) => {
                    self.new_file = Some(file);
                    return Err(e.into());
                }
            };
            std::mem::replace(&mut self.target, stand_in).abandon().await;
            let reopened = open_new_target(plan, self.target_need, &file).await;
            self.new_file = Some(file);
            self.target = reopened?;
            self.lock_lost = true;
        } else if self.deferred.is_none() {
            let fresh = open_target(plan, self.target_access, self.target_need).await?;
            let old = std::mem::replace(&mut self.target, fresh);
            old.abandon().await;
            self.lock_lost = true;
        }
        Ok(())
    }

    /// Runs `work`, unless `interrupt` fires first: then the statement the target runs is
    /// cancelled and its connection replaced by a new one (the database rolls back what
    /// was not committed, and frees the lock with it), and the result is
    /// [`Error::Interrupted`]. Once the work has begun to commit
    /// ([`crate::interrupt::Interrupt::mark_committing`]), it finishes.
    pub async fn interruptible<T>(
        &mut self,
        plan: &Plan,
        interrupt: Option<&crate::interrupt::Interrupt>,
        work: impl AsyncFnOnce(&mut Session) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let Some(interrupt) = interrupt else {
            return work(self).await;
        };
        let _answering = interrupt.answering();
        let outer = self.interrupt.replace(interrupt.clone());
        let outcome = {
            let running = work(self);
            tokio::select! {
                outcome = running => Some(outcome),
                () = async {
                    interrupt.fired().await;
                    // From the commit on (see `Interrupt::mark_committing`), `work` finishes.
                    if interrupt.is_committing() {
                        std::future::pending::<()>().await;
                    }
                } => None,
            }
        };
        self.interrupt = outer;
        if let Some(outcome) = outcome {
            return outcome;
        }
        self.target.cancel_running(&plan.target.url).await;
        if let Err(e) = self.replace_target(plan).await {
            tracing::warn!("could not connect again after the interrupt: {e}");
        }
        Err(Error::Interrupted { committed: 0 })
    }

    /// Runs `work` holding the dimension's lock ([`state::lock`]; `wait` for it, else a
    /// lock another run holds is [`DbError::Locked`]), then releases it, unless the
    /// target's connection was replaced meanwhile and the lock went with it. Every
    /// command that writes the dimension runs under it.
    pub async fn under_lock<T>(
        &mut self,
        plan: &Plan,
        wait: bool,
        work: impl AsyncFnOnce(&mut Session) -> Result<T, Error>,
    ) -> Result<T, Error> {
        state::lock(&mut self.target, plan, wait).await?;
        self.lock_lost = false;
        // The tables' layout may have changed while this waited for the lock (a
        // `distribute` that held it): looked at again, under the lock.
        let result = match self.rescope(plan).await {
            Ok(()) => work(self).await,
            Err(e) => Err(e),
        };
        if !self.lock_lost {
            state::unlock(&mut self.target, plan).await;
        }
        result
    }

    /// Scopes a writing session's target to the dimension again ([`Conn::scope_to_dimension`]).
    async fn rescope(&mut self, plan: &Plan) -> Result<(), Error> {
        if self.target_access.is_read_only() {
            return Ok(());
        }
        let keys: Vec<String> = plan.source.key.iter().map(|k| k.quoted()).collect();
        let schema = plan.target.log.schema().map(|s| format!("\"{s}\""));
        let dims = (&plan.target.log.quoted()[..], &plan.target.dimension.quoted()[..]);
        Ok(self
            .target
            .scope_to_dimension(&plan.name, schema.as_deref(), dims, &keys)
            .await?)
    }

    /// Opens the target's write transaction; where that is the lock (SQLite), another
    /// run holding it is [`DbError::Locked`].
    pub async fn begin_write(&mut self, plan: &Plan) -> Result<(), Error> {
        self.target.begin().await.map_err(|e| state::locked_or(e, plan).into())
    }

    /// Creates the SQLite target file that [`Session::open`] left uncreated (a no-op when
    /// the file existed, or on PostgreSQL).
    pub async fn create_target(&mut self, plan: &Plan) -> Result<(), Error> {
        if self.deferred.take().is_some() {
            let real = open_target(plan, Access::Create, self.target_need).await?;
            let stand_in = std::mem::replace(&mut self.target, real);
            let _ = stand_in.close().await;
        }
        Ok(())
    }

    /// [`Session::create_target`] for a load ([`run`]): the SQLite file is built beside
    /// where it belongs, and appears under its name only when
    /// [`Session::put_new_target_in_place`] puts it there (see [`crate::db::NewFile`]).
    /// Another process building it is waited for when `wait` (else it is
    /// [`DbError::NewFileBusy`]); if it put the file in place meanwhile, that file is
    /// opened.
    pub async fn create_target_aside(&mut self, plan: &Plan, wait: bool) -> Result<(), Error> {
        if self.deferred.is_none() {
            return Ok(());
        }
        let Some(file) = crate::db::NewFile::claim(&plan.target.url, wait).await? else {
            return self.create_target(plan).await;
        };
        let building = match open_new_target(plan, self.target_need, &file).await {
            Ok(conn) => conn,
            Err(e) => {
                file.discard();
                return Err(e);
            }
        };
        self.deferred = None;
        let stand_in = std::mem::replace(&mut self.target, building);
        let _ = stand_in.close().await;
        tracing::debug!("building the new target file at {}", file.building().display());
        self.new_file = Some(file);
        Ok(())
    }

    /// Puts the file [`Session::create_target_aside`] built in place, whatever the load
    /// made of it (a failed or interrupted run is recorded in it), and connects to it
    /// there; a no-op when no file is being built.
    pub async fn put_new_target_in_place(&mut self, plan: &Plan) -> Result<(), Error> {
        let Some(file) = self.new_file.take() else {
            return Ok(());
        };
        let stand_in = Conn::open_empty(&plan.target.url).await?;
        let building = std::mem::replace(&mut self.target, stand_in);
        match building.put_in_place(file).await {
            Ok(true) => {}
            // Nothing was made in it: the target is still to be created.
            Ok(false) => {
                self.deferred = Some(plan.target.url.clone());
                return Ok(());
            }
            Err(e) => {
                self.deferred = Some(plan.target.url.clone());
                return Err(e.into());
            }
        }
        let placed = open_target(plan, self.target_access, self.target_need).await?;
        let stand_in = std::mem::replace(&mut self.target, placed);
        let _ = stand_in.close().await;
        Ok(())
    }

    /// Drops the file [`Session::create_target_aside`] built, whatever is in it, and
    /// leaves the target to be created (a no-op when no file is being built): for a
    /// first load refused after its read, as it would have been before anything was
    /// created (see [`run`]).
    async fn discard_new_target(&mut self, plan: &Plan) -> Result<(), Error> {
        let Some(file) = self.new_file.take() else {
            return Ok(());
        };
        let stand_in = Conn::open_empty(&plan.target.url).await?;
        let building = std::mem::replace(&mut self.target, stand_in);
        let _ = building.close().await;
        file.discard();
        self.deferred = Some(plan.target.url.clone());
        Ok(())
    }

    /// Refuses a SQLite change column holding times without a zone when
    /// `source.timezone` is not set ([`extract::check_zone`]): `init` and a backfill check
    /// it before they create the tables, as [`run`] does on a never-loaded target.
    pub async fn check_zone(&mut self, plan: &Plan) -> Result<(), Error> {
        match self.source.as_mut() {
            Some(source) => Ok(extract::check_zone(source, plan, &self.layout).await?),
            None => Ok(()),
        }
    }

    /// True while the SQLite target file does not exist (see [`Session::open`]).
    pub fn target_deferred(&self) -> bool {
        self.deferred.is_some()
    }

    /// [`Session::open`], connecting to the target with `target` access: with anything but
    /// [`Access::Create`], a target whose SQLite file does not exist is
    /// [`Error::NotLoaded`].
    pub async fn open_with(plan: &Plan, target: Access) -> Result<Session, Error> {
        Session::open_checked(plan, target, Need::for_access(target)).await
    }

    async fn open_checked(plan: &Plan, target: Access, need: Need) -> Result<Session, Error> {
        let access = target;
        crate::db::refuse_unwritable(&plan.target.url, target)?;
        let source_side = async {
            let mut source = open_source(plan).await?;
            let layout = async {
                let schema = SourceSchema::load(&mut source, &plan.source.relation).await?;
                let layout = schema.layout(plan, plan.target.url.backend)?;
                // Every column read may be read (the catalog shows columns to a role
                // that may read none of them, or some): refused by name, not by a later
                // read's bare "permission denied".
                extract::check_readable(&mut source, plan, &layout).await?;
                Ok::<_, Error>(layout)
            }
            .await;
            match layout {
                Ok(l) => Ok((source, l)),
                Err(e) => {
                    let _ = source.close().await;
                    Err(e)
                }
            }
        };
        let deferred = (target == Access::Create && crate::db::file_not_there_yet(&plan.target.url))
            .then(|| plan.target.url.clone());
        let deferred_url = deferred.clone();
        let target_side = async move {
            match deferred_url {
                Some(url) => Conn::open_empty(&url).await.map_err(Error::from),
                None => open_target(plan, target, need).await,
            }
        };
        // Both databases are reached at once: each connection's round trips hide behind
        // the other's. The source's error comes first, as if it had been reached alone: a
        // target still connecting is given up rather than waited for.
        let (mut source_side, mut target_side) = (std::pin::pin!(source_side), std::pin::pin!(target_side));
        let (source_side, target) = tokio::select! {
            s = &mut source_side => match s {
                Ok(s) => (s, target_side.await),
                Err(e) => return Err(e),
            },
            t = &mut target_side => match source_side.await {
                Ok(s) => (s, t),
                Err(e) => {
                    if let Ok(t) = t {
                        let _ = t.close().await;
                    }
                    return Err(e);
                }
            },
        };
        let (source, layout) = source_side;
        let target = match target {
            Ok(t) => t,
            Err(e) => {
                let _ = source.close().await;
                return Err(e);
            }
        };
        let (mut source, mut target) = (source, target);
        if let Err(e) = check_not_the_source(plan, &mut source, &mut target).await {
            let _ = source.close().await;
            let _ = target.close().await;
            return Err(e);
        }
        let ctx = SqlContext::new(plan, &layout, target.backend());
        Ok(Session {
            source: Some(source),
            target,
            layout,
            ctx,
            deferred,
            new_file: None,
            target_access: access,
            target_need: need,
            lock_lost: false,
            interrupt: None,
            change_column_unrecorded: false,
        })
    }

    /// The target alone, for commands that do not read the source (`status`, `history`,
    /// `lookup`, `verify`, with [`Access::QueryOnly`]; `assign-keys` and `rebuild`, with
    /// [`Access::ReadWrite`]): never connects to the source, and takes the layout from
    /// the dimension's record in the target ([`tables::existing_record`]) rather than from
    /// the source's schema, so a source that is down, gone or reshaped does not matter.
    /// Creates nothing: a target where the dimension was never loaded is
    /// [`Error::NotLoaded`].
    pub async fn open_target(plan: &Plan, access: Access) -> Result<Session, Error> {
        Session::open_target_as(plan, access, false).await
    }

    /// [`Session::open_target`] for `verify`, which reads the target alone and joins the
    /// log with the dimension: a half-distributed dimension on Citus is refused
    /// ([`crate::db::DbError::MixedLayout`]) where the other commands that only read warn
    /// about it and go on.
    pub async fn open_target_to_verify(plan: &Plan) -> Result<Session, Error> {
        Session::open_target_as(plan, Access::QueryOnly, true).await
    }

    async fn open_target_as(plan: &Plan, access: Access, refuse_mixed_layout: bool) -> Result<Session, Error> {
        crate::db::refuse_unwritable(&plan.target.url, access)?;
        let mut target = open_target(plan, access, Need::for_access(access)).await?;
        let layout = async {
            let record = tables::existing_record(&mut target, plan).await?;
            Ok::<_, Error>(record.layout(plan, target.backend())?)
        }
        .await;
        let layout = match layout {
            Ok(l) => l,
            Err(e) => {
                let _ = target.close().await;
                return Err(e);
            }
        };
        // A registered log that is missing, or a dimension renamed away, is named; a
        // missing dimension too, except for `rebuild` (ReadWrite), which builds it again.
        let dimension_may_be_missing = access == Access::ReadWrite;
        if let Err(e) = tables::check_tables_present(&mut target, plan, true, dimension_may_be_missing).await {
            let _ = target.close().await;
            return Err(e.into());
        }
        // A writing session checks the layout when it is scoped to the dimension.
        if access.is_read_only() {
            let keys: Vec<String> = layout.keys.iter().map(|c| c.name.clone()).collect();
            let tables = (&plan.target.log.quoted()[..], &plan.target.dimension.quoted()[..]);
            match target.check_layout(&plan.name, tables, &keys).await {
                Err(DbError::MixedLayout {
                    dimension,
                    fault,
                    way_out,
                }) if !refuse_mixed_layout => tracing::warn!(
                    "dimension {dimension}: {fault} on the Citus coordinator: what is read here is right, but loads, \
                     rebuild and verify refuse it. To make them alike: {way_out}"
                ),
                Err(e) => {
                    let _ = target.close().await;
                    return Err(e.into());
                }
                Ok(()) => {}
            }
        }
        // After the layout check, which may have found local tables to read as PostgreSQL's.
        let ctx = SqlContext::new(plan, &layout, target.backend());
        Ok(Session {
            source: None,
            target,
            layout,
            ctx,
            deferred: None,
            new_file: None,
            target_access: access,
            target_need: Need::for_access(access),
            lock_lost: false,
            interrupt: None,
            change_column_unrecorded: false,
        })
    }

    /// Closes both connections cleanly (see [`Conn::close`]): a command that read a
    /// SQLite target leaves no `-wal` or `-shm` file behind when it was the last one
    /// there. A failure to close is of no consequence to what was done, and is ignored.
    pub async fn close(self) {
        if let Some(source) = self.source {
            let _ = source.close().await;
        }
        let _ = self.target.close().await;
        if let Some(file) = self.new_file {
            file.discard();
        }
    }
}

/// Refuses a log or dimension named like the source table when the PostgreSQL servers say
/// source and target are one database although their URLs differ (a host name and its
/// address, say); the config already refused the same URLs and SQLite files.
async fn check_not_the_source(plan: &Plan, source: &mut Conn, target: &mut Conn) -> Result<(), Error> {
    let Some(collision) = crate::config::source_table_collision(&plan.source, &plan.target) else {
        return Ok(());
    };
    if source.dialect().root() != target.dialect().root() {
        return Ok(());
    }
    let (Some(a), Some(b)) = (source.database_identity().await?, target.database_identity().await?) else {
        return Ok(());
    };
    if a == b {
        return Err(Error::Config(collision));
    }
    Ok(())
}

/// Opens the source read-only ([`Access::ReadOnly`]); a SQLite file that does not exist
/// is a config error naming it (dimlog never creates a source).
pub async fn open_source(plan: &Plan) -> Result<Conn, Error> {
    Conn::open(&plan.source.url, Access::ReadOnly)
        .await
        .map_err(|e| match e {
            DbError::NoDatabase { path } => Error::Config(ConfigError::invalid(
                "source.url",
                format!(
                    "no SQLite database at {}; dimlog opens a source read-only and never creates one: check the path",
                    path.display()
                ),
            )),
            other => other.into(),
        })
}

/// Connects to the target with `access`, checking the rights `need` names; a SQLite file
/// that does not exist (and may not be created) means the dimension was never loaded
/// there.
pub async fn open_target(plan: &Plan, access: Access, need: Need) -> Result<Conn, Error> {
    let conn = Conn::open(&plan.target.url, access).await.map_err(|e| match e {
        DbError::NoDatabase { path } => Error::NotLoaded(tables::not_loaded_file(plan, path)),
        other => Error::from(other),
    })?;
    ready_target(conn, plan, access, need).await
}

/// [`open_target`] for the new file of a first load ([`Session::create_target_aside`]).
async fn open_new_target(plan: &Plan, need: Need, file: &crate::db::NewFile) -> Result<Conn, Error> {
    let conn = Conn::open_new_file(&plan.target.url, file).await?;
    ready_target(conn, plan, Access::Create, need).await
}

/// Readies a new connection to the target: the schema of dimlog's tables, the rights
/// `need` names, and a writer's settings.
async fn ready_target(mut conn: Conn, plan: &Plan, access: Access, need: Need) -> Result<Conn, Error> {
    if conn.dialect().has_state_schema() {
        match resolve_state_schema(&mut conn, plan).await {
            Ok(schema) => conn.set_state_schema(Some(quoted_schema(&schema))),
            Err(e) => {
                let _ = conn.close().await;
                return Err(e);
            }
        }
    }
    // Every right the command needs on the tables that exist, named at once with the
    // GRANTs that give them, before anything is read or written.
    if let Err(e) = crate::rights::check(&mut conn, plan, need).await {
        let _ = conn.close().await;
        return Err(e.into());
    }
    if !access.is_read_only() {
        let keys: Vec<String> = plan.source.key.iter().map(|k| k.quoted()).collect();
        let schema = plan.target.log.schema().map(|s| format!("\"{s}\""));
        if let Err(e) = conn
            .scope_to_dimension(
                &plan.name,
                schema.as_deref(),
                (&plan.target.log.quoted(), &plan.target.dimension.quoted()),
                &keys,
            )
            .await
        {
            let _ = conn.close().await;
            return Err(e.into());
        }
        if let Err(e) = conn.tune_for_loads().await {
            let _ = conn.close().await;
            return Err(e.into());
        }
    }
    Ok(conn)
}

/// The schema of dimlog's own tables for this connection: where a set of them records the
/// dimension (its counters are there); else `target.state_schema` (a new set there when
/// none is, or the one there); else, without the setting, the one set in the database
/// (shared by the dimensions that use it, or where an older dimlog's `search_path` put
/// it) or the default schema when there is none. Refused (exit 2), naming the schemas: a
/// `state_schema` other than the set that records the dimension (a new set would start
/// its counters again), or, without the setting, several sets none of which records it.
async fn resolve_state_schema(conn: &mut Conn, plan: &Plan) -> Result<String, Error> {
    let wanted = plan.target.state_schema();
    let explicit = plan.target.explicit_state_schema.is_some();
    let sql = crate::db::sql::statement(conn.backend(), "state", "state_schemas", &serde_json::json!({}))?;
    let holders: Vec<String> = conn
        .query_text("finding dimlog's tables", &sql, &[])
        .await?
        .into_iter()
        .filter_map(|r| r.into_iter().next().flatten())
        .collect();
    let recorders = recording(conn, plan, &holders).await;
    let tables = "dimlog_state, dimlog_runs, dimlog_dimensions (and dimlog_assigned and dimlog_schema, if there)";
    match (&recorders[..], explicit) {
        ([], _) if holders.is_empty() || holders.contains(&wanted) => Ok(wanted),
        // A dimension no set records may have a set of its own: its counters are nowhere
        // else. (Its tables, if they hold rows, are refused at init.)
        ([], true) => Ok(wanted),
        ([], false) => match &holders[..] {
            [only] => Ok(only.clone()),
            _ => Err(ConfigError::invalid(
                "target.state_schema",
                format!(
                    "dimlog's tables ({tables}) are in several schemas of the target ({}), and none records dimension \
                     `{}`: each set is shared by the dimensions whose target.state_schema names it; set \
                     target.state_schema to the one this dimension belongs with",
                    holders.join(", "),
                    plan.name
                ),
            )
            .into()),
        },
        ([one], _) if !explicit || *one == wanted => Ok(one.clone()),
        ([one], _) => Err(ConfigError::invalid(
            "target.state_schema",
            format!(
                "is {wanted:?}, but dimension `{}` is recorded in dimlog's tables ({tables}) in schema {one}, which hold its \
                 counters: set target.state_schema = {one:?}, or move them there once (ALTER TABLE {one}.dimlog_state SET \
                 SCHEMA {wanted}; and so on for each{})",
                plan.name,
                if holders.contains(&wanted) {
                    format!(", after moving away the set already in {wanted}")
                } else {
                    String::new()
                }
            ),
        )
        .into()),
        (several, _) => Err(ConfigError::invalid(
            "target.state_schema",
            format!(
                "dimension `{}` is recorded in dimlog's tables ({tables}) in several schemas ({}): keep one set (drop its \
                 rows from the others' dimlog_dimensions) and set target.state_schema to it",
                plan.name,
                several.join(", ")
            ),
        )
        .into()),
    }
}

/// A schema name from the catalog, quoted for SQL.
fn quoted_schema(schema: &str) -> String {
    format!("\"{}\"", schema.replace('"', "\"\""))
}

/// The schemas among `schemas` whose set of dimlog's tables records the plan's
/// dimension (a set this role may not read is taken as not recording it: a log with
/// rows that no set it reads records is refused at init all the same).
async fn recording(conn: &mut Conn, plan: &Plan, schemas: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for schema in schemas {
        let context = serde_json::json!({ "schema": quoted_schema(schema) });
        let Ok(sql) = crate::db::sql::statement(conn.backend(), "state", "state_schema_records", &context) else {
            continue;
        };
        let params = [crate::db::Param::Text(plan.name.clone())];
        if let Ok(n) = conn
            .query_count("looking for the dimension in dimlog's tables", &sql, &params)
            .await
        {
            if n > 0 {
                found.push(schema.clone());
            }
        }
    }
    found
}

/// An init that failed, as a command reports it: a lock another run holds is
/// [`DbError::Locked`].
pub(crate) fn init_failed(e: tables::InitError, plan: &Plan) -> Error {
    match e {
        tables::InitError::Db(d) => Error::Db(state::locked_or(d, plan)),
        tables::InitError::Config(c) => Error::Config(c),
    }
}

fn now() -> Micros {
    Micros::from_utc(chrono::Utc::now())
}

/// Runs one load: takes the lock, creates the tables if needed, loads, commits.
///
/// A fired [`RunOptions::interrupt`] stops it wherever it is until its commit is sent:
/// the load is dropped (mid-statement, perhaps), the statement the target runs is
/// cancelled, the transaction rolled back and the lock released, and the run is recorded
/// as `interrupted` ([`Error::Interrupted`]). From the commit on, it finishes.
pub async fn run(
    session: &mut Session,
    plan: &Plan,
    opts: &RunOptions,
    observer: &dyn Observer,
) -> Result<RunReport, Error> {
    let started = now();
    let mut bounds = RunBounds::default();
    let _commit_scope = opts.interrupt.as_ref().map(crate::interrupt::Interrupt::commit_scope);
    let observer = &CountingRows {
        inner: observer,
        rows: Default::default(),
    };
    // Set when the run is refused after its read for what the pre-pass it skipped would
    // have refused before creating anything: the file it built is dropped.
    let mut refused = false;
    let outcome = session
        .interruptible(plan, opts.interrupt.as_ref(), async |s: &mut Session| {
            run_to_the_end(s, plan, opts, observer, started, (&mut bounds, &mut refused)).await
        })
        .await;
    if outcome.is_err() {
        observer.stopped();
    }
    if let (Err(e @ Error::Interrupted { .. }), false) = (&outcome, opts.dry_run) {
        observer.phase("interrupted: recording the run");
        // On the new connection the interrupt left the session with.
        let recorded = state::record_failure(
            &mut session.target,
            plan,
            (opts.kind, &opts.role),
            bounds,
            started,
            observer.rows_read(),
            (true, &e.to_string()),
        )
        .await;
        if let Err(failed) = recorded {
            tracing::info!("could not record the interrupted run: {failed}");
        }
    }
    let placed = if refused {
        session.discard_new_target(plan).await
    } else {
        session.put_new_target_in_place(plan).await
    };
    match (outcome, placed) {
        (Ok(report), Ok(())) => Ok(report),
        (Ok(_), Err(e)) => Err(e),
        (Err(e), placed) => {
            if let Err(not_placed) = placed {
                tracing::warn!("{not_placed}");
            }
            Err(e)
        }
    }
}

/// [`run`], unless interrupted.
async fn run_to_the_end(
    session: &mut Session,
    plan: &Plan,
    opts: &RunOptions,
    observer: &CountingRows<'_>,
    started: Micros,
    (bounds, refused): (&mut RunBounds, &mut bool),
) -> Result<RunReport, Error> {
    session
        .under_lock(plan, opts.wait, async |session: &mut Session| {
            // The window is checked before anything is written, the tables included: a run
            // refused by it leaves a never-loaded target as it was (its `upper` later than the
            // source's clock needs no watermark; the check against the watermark follows in
            // `load`, on a target that has one).
            let source_clock = match opts.window {
                Some(_) => None,
                None => {
                    let clock = extract::source_now(
                        session.source.as_mut().expect("source connection"),
                        plan,
                        &session.layout,
                    )
                    .await?;
                    let window = Window {
                        low: None,
                        high: opts.upper.unwrap_or(clock.plus(-plan.source.safety_lag_micros)),
                        high_inclusive: true,
                    };
                    extract::check_window(plan, &window, clock, opts.upper.is_some(), None)
                        .map_err(extract::ExtractError::from)?;
                    Some(clock)
                }
            };
            // So is a SQLite change column without a zone, the config error PostgreSQL finds
            // in the column's type, on a target the dimension was never loaded into (whose
            // tables the run would create first); a later run finds it while reading.
            let never_loaded = session.target_deferred()
                || !matches!(tables::read_record(&mut session.target, plan).await, Ok(Some(_)));
            let zone_unchecked = never_loaded && plan.source.timezone.is_none();
            // And a first load whose upper bound is before the source's oldest row (read
            // in the same pass over the change column as the zones).
            let first_window_checked = never_loaded && source_clock.is_some();
            // That pass costs a scan of the source. Where the first load's own read makes
            // the same checks as it goes (it reads every row's change value by dimlog's
            // rule) into a file nobody sees yet, the pass is left for a read that fails or
            // reads nothing, and gives its refusal then, the file dropped.
            let first_window = source_clock.map(|clock| {
                let upper = opts.upper.unwrap_or(clock.plus(-plan.source.safety_lag_micros));
                let zones = if zone_unchecked {
                    extract::Zones::Check
                } else {
                    extract::Zones::Checked
                };
                ((upper, clock, opts.upper.is_some()), zones)
            });
            // (A first load into a new SQLite file, which nobody sees until the run ends.)
            let into_new_file = session.target_deferred() && !opts.dry_run;
            let check_after_reading = first_window_checked
                && session.target_deferred()
                && session
                    .source
                    .as_ref()
                    .is_some_and(|source| extract::first_read_checks_every_change(source, &session.layout));
            if let (true, false, Some((bounds, zones))) = (first_window_checked, check_after_reading, first_window) {
                check_first_window(session, plan, bounds, zones).await?;
            } else if zone_unchecked && !check_after_reading {
                session.check_zone(plan).await?;
            }
            // A dry run writes nothing, not even the tables or a SQLite file: it creates the
            // tables inside a transaction it rolls back, in an in-memory database standing in
            // for a file that does not exist.
            if !opts.dry_run && session.target_deferred() {
                session.create_target_aside(plan, opts.wait).await?;
                state::lock(&mut session.target, plan, opts.wait).await?;
            }
            if opts.dry_run {
                session.begin_write(plan).await?;
            }
            let prepared = async {
                let (stored, change) =
                    tables::init_allowing_change_in(&mut session.target, plan, &session.layout, !opts.dry_run)
                        .await
                        .map_err(|e| init_failed(e, plan))?;
                check_change_column(session, plan, opts).await?;
                if let Some(c) = &change {
                    // Whether the change is accepted or not: a role that may not make it
                    // is sent to the owner rather than told to accept it.
                    if c.alters_tables() {
                        crate::rights::check_may_alter(&mut session.target, plan, &c.describe(), c.alters_log())
                            .await?;
                    }
                    if !opts.accept_config_change {
                        return Err(Error::Config(c.refusal()));
                    }
                }
                Ok(change.map(|c| (stored, c)))
            }
            .await;
            let migration = match prepared {
                Ok(m) => m,
                Err(e) => {
                    if opts.dry_run {
                        session.target.rollback().await;
                    }
                    return Err(e);
                }
            };
            // Where the lock is the transaction (SQLite) the load runs in it from here on.
            // Elsewhere it reads the source first and opens its transaction only for its
            // writes (see `load`); a dry run of a loaded dimension whose columns did not
            // change ends the transaction of its checks here, having written nothing, and
            // then only reads. (One that created the tables to compare with, or changes the
            // column sets, keeps that transaction and rolls it back.)
            let lock_is_a_transaction = session.target.lock_is_a_transaction();
            let in_transaction = if opts.dry_run {
                if lock_is_a_transaction || never_loaded || migration.is_some() {
                    true
                } else {
                    session.target.rollback().await;
                    false
                }
            } else if lock_is_a_transaction {
                session.begin_write(plan).await?;
                true
            } else {
                false
            };
            let loaded = load(
                session,
                plan,
                opts,
                observer,
                (started, source_clock, first_window_checked),
                bounds,
                migration.as_ref(),
                in_transaction,
            )
            .await;
            let loaded = match (loaded, first_window) {
                (Ok(report), Some((bounds, zones))) if check_after_reading && report.counts.rows_read == 0 => {
                    refusal_after_reading(session, plan, bounds, zones, refused)
                        .await
                        .map_or(Ok(report), Err)
                }
                (Err(e), Some((bounds, zones))) if check_after_reading && !matches!(e, Error::Interrupted { .. }) => {
                    session.target.rollback().await;
                    Err(refusal_after_reading(session, plan, bounds, zones, refused)
                        .await
                        .unwrap_or(e))
                }
                (loaded, _) => loaded,
            };
            // A NULL change column (found before the read) is the column's fault too: as
            // refused, it leaves no new file.
            if into_new_file && matches!(loaded, Err(Error::Extract(extract::ExtractError::NullUpdatedAt { .. }))) {
                *refused = true;
            }
            match loaded {
                Ok(report) => Ok(report),
                Err(e) if *refused => Err(e),
                Err(e) => {
                    session.target.rollback().await;
                    // A crash simulated after commit has nothing to record: the run committed.
                    let committed = matches!(e, Error::Failpoint("after_commit"));
                    // Refusals of the config or the window (exit 2) read nothing: there is
                    // no run to record, as for config errors found before the load.
                    if !opts.dry_run
                        && !committed
                        && !matches!(e, Error::Db(DbError::Locked { .. } | DbError::TableLocked { .. }))
                        && e.exit_code() != 2
                    {
                        let failure = e.to_string();
                        // A lost connection (the usual cause of such a failure) is opened
                        // again to record it: `backfill --only-failed` finds chunks by it.
                        for attempt in 0..2 {
                            let recorded = state::record_failure(
                                &mut session.target,
                                plan,
                                (opts.kind, &opts.role),
                                *bounds,
                                started,
                                observer.rows_read(),
                                (false, &failure),
                            )
                            .await
                            .is_ok();
                            if recorded || attempt > 0 {
                                break;
                            }
                            if session.reconnect_lost(plan).await.is_err() {
                                break;
                            }
                        }
                    }
                    Err(e)
                }
            }
        })
        .await
}

/// One load, in two phases. First it reads: the source (checks, the window, the key
/// list), and the log and the dimension to compare with, into the session's temporary
/// tables. Only then does it write, in one transaction of the target: the run's record,
/// a column-set change, classification, the append, the rebuild, the watermark. Where
/// the lock is the transaction (SQLite, `in_transaction`), both phases run in it; else
/// the transaction opens between them, so it never waits on the source, and a dry run
/// opens one only to classify in temporary tables, and rolls it back.
#[allow(clippy::too_many_arguments)]
async fn load(
    session: &mut Session,
    plan: &Plan,
    opts: &RunOptions,
    observer: &dyn Observer,
    // The pipeline's clock at the start, the source's (read for the window check), and
    // whether the first-load check against the source's oldest row was already made.
    (started, source_clock, first_window_checked): (Micros, Option<Micros>, bool),
    bounds: &mut RunBounds,
    migration: Option<&(tables::DimensionRecord, tables::ConfigChange)>,
    // Whether the target's transaction is open already.
    in_transaction: bool,
) -> Result<RunReport, Error> {
    let fp = opts.failpoint.as_deref();
    let watermark_before = state::watermark(&mut session.target, plan, &opts.role).await?;
    // A backfill's chunks are fixed windows of the past; a run's window is checked against
    // the source's clock before anything is read.
    let (window, source_clock) = match (opts.window, source_clock) {
        (Some(w), _) => (w, None),
        (None, None) => return Err(Error::Internal("a run without the source's clock".into())),
        (None, Some(clock)) => {
            let upper = opts.upper.unwrap_or(clock.plus(-plan.source.safety_lag_micros));
            let low = match opts.kind {
                _ if migration.is_some() => None,
                RunKind::FullRefresh => None,
                _ => watermark_before.map(|w| w.plus(-plan.source.lookback_micros)),
            };
            let window = Window {
                low,
                high: upper,
                high_inclusive: true,
            };
            extract::check_window(plan, &window, clock, opts.upper.is_some(), watermark_before)
                .map_err(extract::ExtractError::from)?;
            // A target without a watermark that `run` did not already check before
            // creating anything (its tables exist, but no load ever committed).
            if watermark_before.is_none() && !first_window_checked {
                check_first_window(
                    session,
                    plan,
                    (upper, clock, opts.upper.is_some()),
                    extract::Zones::Checked,
                )
                .await?;
            }
            (window, Some(clock))
        }
    };
    bounds.low = window.low;
    bounds.upper = Some(window.high);

    observer.phase("checking the source");
    extract::check_null_updated_at(
        session.source.as_mut().expect("source connection"),
        plan,
        &session.layout,
    )
    .await?;
    let mut future = if source_clock.is_some() {
        let source = session.source.as_mut().expect("source connection");
        let by_index = extract::window_by_index(source, plan, &session.layout, &window).await;
        extract::future_rows(source, plan, &session.layout, &window, by_index).await?
    } else {
        extract::FutureRows::default()
    };
    // A first load fills an empty log and dimension: their secondary indexes are built
    // once at the end rather than updated row by row, and with one staged row per key
    // there is nothing to compare, so classification, the staged rows' statistics and
    // the window over the log are skipped (the rows and numbers are the general path's).
    let first_load = migration.is_none() && log::is_empty(&mut session.target, &session.ctx).await?;
    let one_row_per_key = first_load && !session.ctx.history_all;
    let copy_text = session
        .source
        .as_ref()
        .is_some_and(|source| source.passes_copy_text_to(&session.target));
    let portable = session.layout.key_order_is_portable();
    // Dropping and building indexes, and the log's load defaults, need the tables' owner:
    // a role with rights on them alone loads a first time with the indexes in place.
    let owner = first_load && rights::owns_tables(&mut session.target, &session.ctx.log, &session.ctx.dim).await?;
    // A first load of one row per key from PostgreSQL copies the source straight into
    // the log, inside the transaction: the COPY keeps it busy while the source answers.
    // (Not a key distributed by its hash: the working tables compute that.)
    let straight_into_log = !opts.dry_run
        && one_row_per_key
        && session.ctx.unique_key
        && copy_text
        && portable
        && owner
        && !session.ctx.key_hash;
    // The same from SQLite into SQLite, read in the source's key order and pumped into
    // the log inside the transaction; rows found out of the log's order go back to the
    // general path (see `first_load_pumped_into_log`).
    let pumped_into_log = !opts.dry_run
        && one_row_per_key
        && session.ctx.unique_key
        && owner
        && !session.ctx.key_hash
        && session
            .source
            .as_ref()
            .is_some_and(|source| session.target.pumps_from(source));
    let reading = Reading {
        plan,
        opts,
        window: &window,
        observer,
        first_load,
        one_row_per_key,
        migration: migration.is_some(),
    };
    let read = if straight_into_log || pumped_into_log {
        None
    } else {
        let read = read_changes(session, &reading).await?;
        bounds.rows_after_dedupe = Some(read.rows_after_dedupe);
        Some(read)
    };

    if !in_transaction {
        session.target.begin().await?;
    }
    let run_id = if opts.dry_run {
        0
    } else {
        state::start_run(&mut session.target, plan, opts.kind, &opts.role, started).await?
    };
    if let Some((stored, change)) = migration {
        observer.phase("migrating the column sets");
        let wanted = tables::DimensionRecord::from_layout(&session.layout);
        tables::apply_change(&mut session.target, plan, &session.ctx, stored, &wanted, change).await?;
    }
    let step = Step {
        plan,
        opts,
        window: &window,
        run_id,
        observer,
        read_through: watermark_before,
    };
    let loaded = match read {
        Some(read) => write_changes(session, &step, read, migration, (first_load, owner), one_row_per_key).await?,
        None if pumped_into_log => match first_load_pumped_into_log(session, &step, bounds).await? {
            Some(loaded) => loaded,
            None => {
                // Rows out of order may be keys the log stores alike (`1` and `'1'` in a
                // column without a type): the source's primary key does not keep them
                // apart here, so they are deduplicated, not adopted as read.
                let unique_key = std::mem::replace(&mut session.ctx.unique_key, false);
                let unique_as_read = std::mem::replace(&mut session.ctx.unique_as_read, false);
                let loaded = async {
                    let read = read_changes(session, &reading).await?;
                    let after_dedupe = read.rows_after_dedupe;
                    let written =
                        write_changes(session, &step, read, migration, (first_load, owner), one_row_per_key).await?;
                    Ok::<_, Error>((written, after_dedupe))
                }
                .await;
                session.ctx.unique_key = unique_key;
                session.ctx.unique_as_read = unique_as_read;
                let (loaded, after_dedupe) = loaded?;
                bounds.rows_after_dedupe = Some(after_dedupe);
                loaded
            }
        },
        None => first_load_into_log(session, &step).await?,
    };
    failpoint::check(fp, "after_rebuild").await?;
    let Loaded {
        rows_read,
        rows_after_dedupe,
        max_read,
        beyond_upper,
        changes,
        reconciled,
        rehashed,
        rehashed_earlier,
    } = loaded;
    future.add(beyond_upper);

    let high_watermark = match (watermark_before, max_read) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    bounds.high_watermark = high_watermark;
    let counts = RunCounts {
        rows_read,
        rows_after_dedupe,
        duplicates_dropped: rows_read - rows_after_dedupe,
        versions: changes.versions,
        late_versions: changes.late_versions,
        corrections: changes.corrections,
        tombstones: changes.tombstones,
        revived: changes.revived,
        future_rows: future.count,
    };
    // The run is finished when its last statement before the commit is: its log rows
    // keep the earlier load stamp, its record the time the work really ended.
    let finished_at = now();
    if !opts.dry_run {
        if let Some(wm) = high_watermark {
            if Some(wm) != watermark_before || watermark_before.is_none() {
                state::set_watermark(&mut session.target, plan, &opts.role, wm, run_id).await?;
            }
        }
        if session.change_column_unrecorded {
            record::record_change_column(&mut session.target, plan).await?;
        }
        state::finish_run(&mut session.target, run_id, *bounds, &counts, finished_at).await?;
    }
    failpoint::check(fp, "before_commit").await?;
    observer.phase("committing");
    // Until `run` returns (its commit scope) an interrupt no longer stops the run, and a
    // signal from here on is told that the run finishes.
    if let Some(interrupt) = &opts.interrupt {
        interrupt.mark_committing();
    }
    if opts.dry_run {
        session.target.rollback().await;
    } else {
        session.target.commit().await?;
    }
    failpoint::check(fp, "after_commit").await?;
    Ok(RunReport {
        run_id: (!opts.dry_run).then_some(run_id),
        dimension: plan.name.clone(),
        kind: opts.kind,
        role: opts.role.clone(),
        low_watermark: window.low,
        high_watermark,
        watermark_before,
        upper_bound: window.high,
        counts,
        newest_future_row: future.newest,
        source_clock,
        reconciled_deletes: reconciled,
        type1_updates: changes.type1_updates,
        unseen_deletes: changes.unseen_deletes,
        dropped_deletes: changes.dropped_deletes,
        dropped_delete_keys: changes
            .dropped_delete_examples
            .iter()
            .map(|(key, at)| DroppedDelete {
                key: key.clone(),
                at: *at,
            })
            .collect(),
        rehashed,
        rehashed_earlier,
        config_change: migration.map(|(_, c)| c.describe()),
        status: if opts.dry_run {
            "dry-run".into()
        } else {
            "succeeded".into()
        },
        started_at: started,
        finished_at,
        error: None,
        dry_run: opts.dry_run,
    })
}

/// What the middle of a load needs from its caller.
struct Step<'a> {
    plan: &'a Plan,
    opts: &'a RunOptions,
    window: &'a Window,
    run_id: i64,
    observer: &'a dyn Observer,
    /// The watermark before the run: rows stamped up to it were read by earlier runs.
    read_through: Option<Micros>,
}

/// What the middle of a load did, for its run record.
struct Loaded {
    rows_read: i64,
    rows_after_dedupe: i64,
    max_read: Option<Micros>,
    /// Rows a loose read returned past the upper bound and dropped.
    beyond_upper: extract::FutureRows,
    changes: detect::Changes,
    reconciled: i64,
    rehashed: i64,
    rehashed_earlier: i64,
}

/// What the reading phase of a load needs.
struct Reading<'a> {
    plan: &'a Plan,
    opts: &'a RunOptions,
    window: &'a Window,
    observer: &'a dyn Observer,
    first_load: bool,
    one_row_per_key: bool,
    /// Whether the run changes the column sets.
    migration: bool,
}

/// What the reading phase staged, for the writing phase.
struct Read {
    rows_read: i64,
    rows_after_dedupe: i64,
    max_read: Option<Micros>,
    beyond_upper: extract::FutureRows,
    reconciled: i64,
}

/// The general path's reads, before the load's transaction on PostgreSQL: stage and
/// dedupe the window, set aside a change feed's history, reconcile deletes, and read the
/// rows of keys no window read. Writes only the session's temporary tables.
async fn read_changes(session: &mut Session, r: &Reading<'_>) -> Result<Read, Error> {
    let fp = r.opts.failpoint.as_deref();
    stage::create_staging(&mut session.target, &session.ctx).await?;

    r.observer.phase("reading");
    let Staged {
        rows_read,
        max_read,
        beyond_upper,
    } = stage_window(session, r.plan, r.window, r.observer).await?;
    failpoint::check(fp, "after_extract").await?;
    session.target.suit_to_load(rows_read.max(0) as u64).await?;

    r.observer.phase("deduplicating");
    let rows_after_dedupe = dedupe::dedupe(&mut session.target, &session.ctx, rows_read, !r.one_row_per_key).await?;
    failpoint::check(fp, "after_dedupe").await?;

    // On a change feed, events read before the last accepted column change are history
    // under the column sets of their time (issue 21): no later read compares them again.
    // (An accepted change itself keeps each key's newest event read: see `write_changes`.)
    if session.ctx.history_all && !r.first_load && !r.migration {
        if let Some(through) = state::watermark(&mut session.target, r.plan, log::COLUMNS_CHANGED).await? {
            log::drop_feed_history(&mut session.target, &session.ctx, through).await?;
        }
    }
    let reconcile_now = r.opts.reconcile_deletes || r.plan.hard_deletes == HardDeletes::Reconcile;
    let reconciled = if reconcile_now {
        r.observer.phase("reconciling deletes");
        let source = session.source.take().expect("source connection present");
        let (source, result) = reconcile::stage_missing_keys(
            source,
            &mut session.target,
            r.plan,
            &session.layout,
            &session.ctx,
            r.window.high,
            r.opts.allow_mass_delete,
        )
        .await;
        session.source = Some(source);
        result?
    } else {
        reconcile::Reconciled::default()
    };
    if reconciled.unseen > 0 {
        r.observer.phase("reading the rows of keys no window read");
        stage_unseen(session, r.plan, r.window, r.observer).await?;
    }
    Ok(Read {
        rows_read,
        rows_after_dedupe,
        max_read,
        beyond_upper,
        reconciled: reconciled.missing,
    })
}

/// The general path's writes, in the load's transaction: a column-set change's carried
/// versions, classification against the log, the append, and the rebuild of the touched
/// keys (or, on a first load, filling the empty dimension and building its indexes once).
/// A dry run classifies and stops there.
async fn write_changes(
    session: &mut Session,
    step: &Step<'_>,
    read: Read,
    migration: Option<&(tables::DimensionRecord, tables::ConfigChange)>,
    // A first load, and whether the role owns the tables (and may drop their indexes).
    (first_load, owner): (bool, bool),
    one_row_per_key: bool,
) -> Result<Loaded, Error> {
    let fp = step.opts.failpoint.as_deref();
    // A config change on a change feed: the events read before it are history under the
    // old column set; only each key's newest one stays, as the key's state, and the
    // watermark is remembered as the change's.
    if let (Some(_), true, Some(read_through)) = (migration, session.ctx.history_all, step.read_through) {
        log::keep_newest_read(&mut session.target, &session.ctx, read_through).await?;
        if !step.opts.dry_run {
            state::set_watermark(
                &mut session.target,
                step.plan,
                log::COLUMNS_CHANGED,
                read_through,
                step.run_id,
            )
            .await?;
        }
    }
    let mut rehashed = 0;
    // The log rows whose hashes are over an earlier Type 2 column set: those of the loads
    // before the one that last changed the set (see `log::find_stale_versions`).
    let mut stale_before = None;
    if let Some((stored, change)) = migration.filter(|(_, c)| c.rehash_needed()) {
        step.observer
            .phase("carrying current versions over to the new column set");
        let quoted = |c: &String| crate::ident::Ident::column(c).map(|i| i.quoted()).unwrap_or_default();
        let mut ctx = session.ctx.clone();
        ctx.retained = change.retained().iter().map(quoted).collect();
        ctx.carried = untracked_log_columns(&ctx, stored);
        ctx.readded = change
            .tracked_after
            .iter()
            .filter(|c| !change.tracked_before.contains(c))
            .filter(|c| !change.new_log_columns.iter().any(|(n, _)| n == *c))
            .map(quoted)
            .collect();
        ctx.readded_observed = change
            .tracked_after
            .iter()
            .filter(|c| change.type1_before.contains(c))
            .map(quoted)
            .collect();
        rehashed = log::rehash_current_versions(
            &mut session.target,
            &ctx,
            &step.plan.name,
            step.run_id,
            now(),
            step.read_through,
        )
        .await?;
        // From now on, the rows logged before this load hold hashes over the old set. (A
        // dry run numbers its rows 0, so every row counts as older; those it carried over
        // above have their staged rows' hashes, so none of them is carried again.)
        stale_before = Some(if step.opts.dry_run { i64::MAX } else { step.run_id });
        if !step.opts.dry_run {
            state::set_watermark(
                &mut session.target,
                step.plan,
                log::TRACKED_CHANGED,
                step.window.high,
                step.run_id,
            )
            .await?;
        }
    } else if !first_load {
        stale_before = state::run_of(&mut session.target, step.plan, log::TRACKED_CHANGED).await?;
    }

    step.observer.phase("detecting changes");
    let (changes, stale) = if one_row_per_key {
        (
            detect::classify_first_load(&mut session.target, &session.ctx).await?,
            None,
        )
    } else {
        let settled = detect::settle(&mut session.target, &session.ctx, step.window.high, step.read_through).await?;
        let stale = match stale_before {
            Some(before) => find_stale(session, step, before).await?,
            None => None,
        };
        let changes = detect::compare(&mut session.target, &session.ctx, settled, stale.is_some()).await?;
        (changes, stale)
    };
    let loaded_at = now();
    if (changes.total > 0 || stale.is_some()) && !step.opts.dry_run {
        let dropped = if first_load && owner {
            Some(tables::drop_indexes_for_first_load(&mut session.target, &session.ctx).await?)
        } else if first_load {
            Some(tables::DroppedIndexes::kept())
        } else {
            None
        };
        step.observer.phase("appending to the log");
        let (name, run_id) = (&step.plan.name, step.run_id);
        if let Some((ctx, n)) = &stale {
            log::append_stale_versions(&mut session.target, ctx, name, *n, run_id, loaded_at).await?;
        }
        let rows = if one_row_per_key {
            log::Append::FirstLoad
        } else {
            log::Append::Classified
        };
        log::append(
            &mut session.target,
            &session.ctx,
            rows,
            name,
            &changes,
            run_id,
            loaded_at,
        )
        .await?;
        failpoint::check(fp, "after_append").await?;
        if let Some(dropped) = dropped {
            fill_empty_dimension(session, step.observer, dropped, one_row_per_key).await?;
        } else if migration.is_none() {
            step.observer.phase("rebuilding touched keys");
            rebuild::rebuild_touched(&mut session.target, &session.ctx, stale.is_some()).await?;
        }
    }
    if let (Some((_, change)), false) = (migration, step.opts.dry_run) {
        step.observer.phase("rebuilding the dimension for the new column sets");
        rebuild::rebuild_all(&mut session.target, &session.ctx, &change.no_longer_written()).await?;
    }
    Ok(Loaded {
        rows_read: read.rows_read,
        rows_after_dedupe: read.rows_after_dedupe,
        max_read: read.max_read,
        beyond_upper: read.beyond_upper,
        changes,
        reconciled: read.reconciled,
        rehashed,
        rehashed_earlier: stale.map_or(0, |(_, n)| n),
    })
}

/// The log columns a dimension's record names that are neither a key nor an attribute of
/// the config (removed from `[track]`: the log keeps their history), quoted. A row that
/// carries a version over to a new column set keeps the version's logged values in them.
fn untracked_log_columns(ctx: &SqlContext, record: &tables::DimensionRecord) -> Vec<String> {
    let keys: Vec<&str> = ctx.key_defs.iter().map(|c| c.bare.as_str()).collect();
    let attrs: Vec<&str> = ctx.attr_defs.iter().map(|c| c.bare.as_str()).collect();
    record
        .column_types
        .iter()
        .map(|(n, _)| n)
        .filter(|n| !keys.contains(&n.as_str()) && !attrs.contains(&n.as_str()))
        .map(|c| crate::ident::Ident::column(c).map(|i| i.quoted()).unwrap_or_default())
        .collect()
}

/// The settled staged rows' predecessors logged before `stale_before` under an earlier
/// Type 2 column set that a row equals by value (see [`log::find_stale_versions`]): the
/// context to append them with and how many, if any.
async fn find_stale(
    session: &mut Session,
    step: &Step<'_>,
    stale_before: i64,
) -> Result<Option<(SqlContext, i64)>, Error> {
    let mut ctx = session.ctx.clone();
    if let Some(record) = tables::read_record(&mut session.target, step.plan).await? {
        ctx.carried = untracked_log_columns(&ctx, &record);
    }
    let n = log::find_stale_versions(&mut session.target, &ctx, stale_before, step.run_id).await?;
    Ok((n > 0).then_some((ctx, n)))
}

/// Reads the whole source up to the run's upper bound into a fresh raw staging table and
/// adds the rows of the keys reconciliation listed in `dimlog_unseen` to the load
/// (deduplicated by the usual rule). Only runs when there are such keys: rows stamped
/// behind every window, which only a comparison of key lists can find.
async fn stage_unseen(
    session: &mut Session,
    plan: &Plan,
    window: &Window,
    observer: &dyn Observer,
) -> Result<(), Error> {
    stage::recreate_raw(&mut session.target, &session.ctx).await?;
    let whole = Window { low: None, ..*window };
    stage_window(session, plan, &whole, observer).await?;
    stage::add_unseen(&mut session.target, &session.ctx).await?;
    Ok(())
}

/// A first load from a PostgreSQL table whose primary key lies within the natural key,
/// into an empty PostgreSQL log, with keys whose order both databases agree on (numbers,
/// dates, times, UUIDs, and text compared bytewise; see [`Layout::key_order_is_portable`]):
/// the source sends its rows in key order and they go
/// through one `COPY` straight into the log, numbered as they arrive (the numbers the
/// general path's `ORDER BY key` would give), with no staging table, dedupe or
/// classification: there is one row per key and nothing to compare with. Nothing is
/// live yet, so there is nothing to reconcile either. Then the dimension is filled from
/// the log and the indexes are built once.
async fn first_load_into_log(session: &mut Session, step: &Step<'_>) -> Result<Loaded, Error> {
    let loaded_at = now();
    let (next_log_id, next_sk) = log::reserve(&mut session.target, &session.ctx, &step.plan.name).await?;
    let dropped = tables::drop_indexes_for_first_load(&mut session.target, &session.ctx).await?;
    step.observer.phase("reading into the log");
    let numbering = stage::LogNumbering::new(next_log_id, next_sk);
    tables::set_load_defaults(&mut session.target, &session.ctx, Some((step.run_id, loaded_at))).await?;
    let stager = stage::CopyStager::new(step.plan, &session.layout, *step.window).into_log(numbering);
    let table = session.ctx.log.clone();
    let columns = stage::log_columns(&session.ctx);
    let read = extract::RawRead::WindowByKey(step.window);
    let into = ("appending to the log", table.as_str(), &columns[..]);
    let stager = copy_through(session, step.plan, stager, read, into, step.observer).await?;
    tables::set_load_defaults(&mut session.target, &session.ctx, None).await?;
    logged_straight(session, step, &stager.admission, loaded_at, dropped).await
}

/// The end of a first load written straight into the log: the counters advanced past
/// the rows `admission` let in, the dimension filled and the indexes built.
async fn logged_straight(
    session: &mut Session,
    step: &Step<'_>,
    admission: &extract::Admission,
    loaded_at: Micros,
    dropped: tables::DroppedIndexes,
) -> Result<Loaded, Error> {
    let fp = step.opts.failpoint.as_deref();
    let changes = detect::Changes {
        versions: admission.rows_read - admission.deleted,
        // A first load: every delete is of a key never seen (counted apart).
        unseen_deletes: admission.deleted,
        total: admission.rows_read,
        ..detect::Changes::default()
    };
    if changes.total > 0 {
        log::advance(
            &mut session.target,
            &session.ctx,
            &step.plan.name,
            &changes,
            step.run_id,
            loaded_at,
        )
        .await?;
    }
    failpoint::check(fp, "after_extract").await?;
    failpoint::check(fp, "after_dedupe").await?;
    failpoint::check(fp, "after_append").await?;
    fill_empty_dimension(session, step.observer, dropped, true).await?;
    Ok(Loaded {
        rows_read: admission.rows_read,
        rows_after_dedupe: admission.rows_read,
        max_read: admission.max_read,
        beyond_upper: admission.beyond_upper,
        changes,
        reconciled: 0,
        rehashed: 0,
        rehashed_earlier: 0,
    })
}

/// [`first_load_into_log`] from SQLite to SQLite, for a table whose primary key lies
/// within the natural key: the source's rows, read in its key's order, are pumped
/// straight into the log ([`Conn::pump_from`]) by the rules of every row path, and
/// numbered as they arrive. Those numbers are the general path's (its `ORDER BY key`)
/// only if each row's key rises over the one before it as the log's columns compare
/// them: a row that does not (a collation of the source's, keys whose values the log
/// stores otherwise, a key twice) undoes the load back to its savepoint, and `None` sends
/// the run to the general path, which sorts and deduplicates.
async fn first_load_pumped_into_log(
    session: &mut Session,
    step: &Step<'_>,
    bounds: &mut RunBounds,
) -> Result<Option<Loaded>, Error> {
    const SAVEPOINT: &str = "dimlog_first_load";
    let loaded_at = now();
    session
        .target
        .execute_script("starting the first load", &format!("SAVEPOINT {SAVEPOINT}"))
        .await?;
    let (next_log_id, next_sk) = log::reserve(&mut session.target, &session.ctx, &step.plan.name).await?;
    let dropped = tables::drop_indexes_for_first_load(&mut session.target, &session.ctx).await?;
    // (Named as the general path's read: to the user it is the same step, in rows/s.)
    step.observer.phase("reading");
    let layout = &session.layout;
    let mut rule = RowRule::new(step.plan, layout);
    let numbering = stage::LogNumbering::new(next_log_id, next_sk);
    let mut rows = stage::LogRows::new(&session.ctx, numbering, step.run_id, loaded_at);
    let (columns, kinds) = stage::LogRows::columns(&session.ctx);
    let declared: Vec<String> = session.ctx.key_defs.iter().map(|c| c.target_type.clone()).collect();
    let rising = crate::db::RisingKey::new(stage::LogRows::KEY_AT, &declared);
    let source = session.source.as_mut().expect("source connection present");
    let read = extract::WindowRead::in_key_order(source.backend(), step.plan, layout, step.window)?;
    let mut admission = extract::Admission::new(*step.window, layout.keys.len());
    let observer = step.observer;
    let each = |row: &mut [Option<&str>], out: &mut crate::db::RowOut<'_>| -> Result<(), Error> {
        let Some(staged) = rule.admit(&mut admission, row)? else {
            return Ok(());
        };
        if admission.rows_read % PROGRESS_EVERY == 0 {
            observer.rows_read(admission.rows_read as u64);
        }
        rows.write(&staged, out);
        Ok(())
    };
    let interrupt = session.interrupt.clone();
    let stop = || interrupt.as_ref().is_some_and(crate::interrupt::Interrupt::is_fired);
    let pumped = session
        .target
        .pump_from(
            session.source.as_mut().expect("source connection present"),
            (&read.sql, &read.params),
            read.key_count(),
            crate::db::PumpInto {
                table: &session.ctx.log,
                columns: &columns,
                kinds: &kinds,
                rising: Some(&rising),
            },
            &stop,
            each,
        )
        .await;
    match pumped {
        Ok(_) => {}
        Err(crate::db::PumpError::OutOfOrder) => {
            tracing::info!("the source's rows do not arrive in the log's key order: loading them through staging");
            session
                .target
                .execute_script(
                    "going back to the start of the first load",
                    &format!("ROLLBACK TO SAVEPOINT {SAVEPOINT}; RELEASE SAVEPOINT {SAVEPOINT}"),
                )
                .await?;
            return Ok(None);
        }
        Err(crate::db::PumpError::Stream(e)) => return Err(read.fault(e).into()),
        Err(crate::db::PumpError::Write(e)) => return Err(e.into()),
        Err(crate::db::PumpError::Row(e)) => return Err(e),
        Err(crate::db::PumpError::Stopped) => {
            // Dropped from here by whoever fired the interrupt (see `Session::interruptible`).
            std::future::pending::<()>().await;
        }
    }
    step.observer.rows_read(admission.rows_read as u64);
    if let Some(e) = admission.null_key_error(layout) {
        return Err(e.into());
    }
    // Every row read is kept (one per key): known now, for a run stopped after this.
    bounds.rows_after_dedupe = Some(admission.rows_read);
    let loaded = logged_straight(session, step, &admission, loaded_at, dropped).await?;
    session
        .target
        .execute_script("finishing the first load", &format!("RELEASE SAVEPOINT {SAVEPOINT}"))
        .await?;
    Ok(Some(loaded))
}

/// Refuses a run whose `source.updated_at` names another column than the one the
/// dimension was built with (see `record::change_column_refusal`), whatever the run; and
/// for a dimension loaded before the column was recorded, one whose watermark is later
/// than every value of the configured column, kept on another one (a full refresh, which
/// reads everything, is the user's word that it was not).
async fn check_change_column(session: &mut Session, plan: &Plan, opts: &RunOptions) -> Result<(), Error> {
    let recorded = record::recorded_change_column(&mut session.target, plan).await?;
    session.change_column_unrecorded = recorded.is_none();
    match recorded.as_deref() {
        Some(recorded) if record::change_column_switched(plan, Some(recorded)) => {
            Err(record::change_column_refusal(plan, recorded).into())
        }
        None if opts.kind != RunKind::FullRefresh => {
            let Some(watermark) = state::watermark(&mut session.target, plan, state::INCREMENTAL).await? else {
                return Ok(());
            };
            let source = session.source.as_mut().expect("source connection present");
            let newest = extract::source_newest(source, plan, &session.layout).await?;
            match newest {
                Some(n) if n < watermark => {
                    Err(record::unrecorded_change_column_refusal(plan, watermark, newest).into())
                }
                _ => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// What [`stage_window`] staged.
#[derive(Clone, Copy, Debug, Default)]
pub struct Staged {
    /// Rows staged.
    pub rows_read: i64,
    /// The greatest `updated_at` among them.
    pub max_read: Option<Micros>,
    /// Rows a loose read (SQLite) returned past the upper bound and dropped.
    pub beyond_upper: extract::FutureRows,
}

/// Refuses a first load whose upper bound is before the source's oldest row (see
/// [`extract::check_first_window`]), and with [`extract::Zones::Check`] one whose change
/// column holds times without a zone (see [`extract::check_zone`]).
async fn check_first_window(
    session: &mut Session,
    plan: &Plan,
    (upper, clock, explicit_upper): (Micros, Micros, bool),
    zones: extract::Zones,
) -> Result<(), Error> {
    let source = session.source.as_mut().expect("source connection");
    let oldest = extract::source_oldest(source, plan, &session.layout, zones).await?;
    extract::check_first_window(plan, upper, clock, explicit_upper, oldest).map_err(extract::ExtractError::from)?;
    Ok(())
}

/// The refusal [`check_first_window`] gives a first load whose read failed or read
/// nothing, if any (then `refused` is set); its own failure to read is no refusal, and
/// leaves the read's outcome as it was.
async fn refusal_after_reading(
    session: &mut Session,
    plan: &Plan,
    bounds: (Micros, Micros, bool),
    zones: extract::Zones,
    refused: &mut bool,
) -> Option<Error> {
    match check_first_window(session, plan, bounds, zones).await {
        Err(e) if matches!(&e, Error::Extract(x) if !matches!(x, extract::ExtractError::Db(_))) => {
            *refused = true;
            Some(e)
        }
        _ => None,
    }
}

/// Streams the window from the source into the staging table (created by
/// [`stage::create_staging`]).
pub async fn stage_window(
    session: &mut Session,
    plan: &Plan,
    window: &Window,
    observer: &dyn Observer,
) -> Result<Staged, Error> {
    let copy_text = session
        .source
        .as_ref()
        .is_some_and(|source| source.passes_copy_text_to(&session.target));
    if copy_text {
        return stage_window_copy(session, plan, window, observer).await;
    }
    let pumps = session
        .source
        .as_ref()
        .is_some_and(|source| session.target.pumps_from(source));
    if pumps {
        return stage_window_pumped(session, plan, window, observer).await;
    }
    let layout = &session.layout;
    let mut rule = RowRule::new(plan, layout);
    let stager = stage::Stager::new(&session.ctx);
    let mut source = session.source.take().expect("source connection present");
    let by_index = reads_by_index(&mut source, plan, layout, window).await;
    let (mut batches, handle) = extract::spawn_reader(source, plan, layout, window, by_index)?;
    let mut admission = extract::Admission::new(*window, layout.keys.len());
    let mut failure: Option<Error> = session
        .target
        .copies_start("staging source rows")
        .await
        .err()
        .map(Error::from);
    while let Some(batch) = batches.recv().await.filter(|_| failure.is_none()) {
        let batch = match batch {
            Ok(b) => b,
            Err(e) => {
                failure = Some(e.into());
                break;
            }
        };
        let mut staged: Vec<StagedRow> = Vec::with_capacity(batch.len());
        for row in batch {
            match rule.stage(&mut admission, row) {
                Ok(Some(row)) => staged.push(row),
                Ok(None) => {}
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if failure.is_some() {
            break;
        }
        if let Err(e) = stager.write(&mut session.target, staged).await {
            failure = Some(e.into());
            break;
        }
        observer.rows_read(admission.rows_read as u64);
    }
    if let Err(e) = session.target.copy_ended("staging source rows").await {
        failure.get_or_insert(e.into());
    }
    drop(batches);
    let source = handle
        .await
        .map_err(|e| Error::Internal(format!("the reader task failed: {e}")))?;
    session.source = Some(source);
    if let Some(e) = failure {
        return Err(e);
    }
    if let Some(e) = admission.null_key_error(layout) {
        return Err(e.into());
    }
    Ok(Staged {
        rows_read: admission.rows_read,
        max_read: admission.max_read,
        beyond_upper: admission.beyond_upper,
    })
}

/// Whether the source reads `window` through its indexes ([`extract::window_by_index`]),
/// said in the log when it does.
async fn reads_by_index(source: &mut Conn, plan: &Plan, layout: &Layout, window: &Window) -> bool {
    let by_index = extract::window_by_index(source, plan, layout, window).await;
    if by_index {
        tracing::info!("reading the window through the source's indexes");
    }
    by_index
}

/// What a read's row becomes, by the rules of every row path of [`stage_window`]: its
/// change time parsed, its soft-delete flag read, admitted by the window and the key
/// (counted in `admission` either way), then canonicalised and hashed.
struct RowRule<'p> {
    plan: &'p Plan,
    kinds: Vec<ColumnKind>,
    /// The read columns' names and roles, for messages.
    names: Vec<String>,
    roles: Vec<&'static str>,
    key_count: usize,
    tracked_count: usize,
    hasher: RowHasher,
}

impl<'p> RowRule<'p> {
    fn new(plan: &'p Plan, layout: &Layout) -> RowRule<'p> {
        RowRule {
            plan,
            kinds: layout.read_columns().iter().map(|c| c.kind).collect(),
            names: layout.read_columns().iter().map(|c| c.bare.clone()).collect(),
            roles: layout.read_column_roles(),
            key_count: layout.keys.len(),
            tracked_count: layout.tracked.len(),
            hasher: RowHasher::default(),
        }
    }

    /// The staged row, its values borrowed from `row` (canonicalised in place), or none
    /// for a row the window or a NULL key keeps out.
    fn admit<'r, 'a>(
        &mut self,
        admission: &mut extract::Admission,
        row: &'r mut [Option<&'a str>],
    ) -> Result<Option<StagedRef<'r, 'a>>, Error> {
        let width = self.kinds.len();
        let (values, rest) = row.split_at_mut(width);
        let change = rest.first().copied().flatten();
        let deleted = if self.plan.source.deleted_flag.is_some() {
            rest.get(1).copied().flatten()
        } else {
            None
        };
        let change = match change {
            None => None,
            Some(text) => Some(extract::change_time(self.plan, text, || {
                extract::key_text(values, self.key_count)
            })?),
        };
        let flag = extract::flagged_deleted(deleted);
        let is_deleted = flag.unwrap_or(false);
        if !admission.admit(change, |i| values[i].is_none(), is_deleted) {
            return Ok(None);
        }
        // A row the load keeps: a value read as a boolean must spell one.
        if flag.is_none() {
            let value = deleted.unwrap_or_default();
            return Err(extract::not_a_flag(self.plan, value, extract::key_text(values, self.key_count)).into());
        }
        for (i, (value, kind)) in values.iter().zip(&self.kinds).enumerate() {
            if let (Some(text), ColumnKind::Bool) = (value, kind) {
                if crate::db::types::boolean(text).is_none() {
                    return Err(extract::ExtractError::NotBoolean {
                        column: self.names[i].clone(),
                        role: self.roles[i],
                        key: extract::key_text(values, self.key_count),
                        value: format!("{text:?}"),
                        fix: "Fix the value at the source, or read the column as text through source.query (its declared type makes dimlog read it as a boolean)",
                    }
                    .into());
                }
            }
        }
        let row_hash = crate::hash::canonicalise_and_hash(
            &mut self.hasher,
            &self.kinds,
            self.key_count,
            self.tracked_count,
            values,
        );
        Ok(Some(StagedRef {
            values,
            valid_from: change.expect("admitted"),
            is_deleted,
            row_hash,
        }))
    }

    /// [`RowRule::admit`] for a row of owned values.
    fn stage(
        &mut self,
        admission: &mut extract::Admission,
        mut row: crate::db::TextRow,
    ) -> Result<Option<StagedRow>, Error> {
        let mut view: Vec<Option<&str>> = row.iter().map(Option::as_deref).collect();
        let Some(staged) = self.admit(admission, &mut view)? else {
            return Ok(None);
        };
        let (valid_from, is_deleted, row_hash) = (staged.valid_from, staged.is_deleted, staged.row_hash);
        // The canonical values that differ from the text read (a boolean's spelling).
        let respelled: Vec<(usize, String)> = staged
            .values
            .iter()
            .zip(&row)
            .enumerate()
            .filter_map(|(i, (canonical, read))| match (canonical, read) {
                (Some(c), Some(r)) if *c != r.as_str() => Some((i, c.to_string())),
                _ => None,
            })
            .collect();
        drop(view);
        row.truncate(self.kinds.len());
        for (i, text) in respelled {
            row[i] = Some(text);
        }
        Ok(Some(StagedRow {
            values: row,
            valid_from,
            is_deleted,
            row_hash,
        }))
    }
}

/// [`stage_window`] from SQLite to SQLite: the rows go from the source's read into
/// `dimlog_raw` in this thread ([`Conn::pump_from`]), by the same rules as the row path.
/// An interrupt stops it within a few thousand rows, and is then answered as anywhere
/// else: the work waits here to be dropped.
async fn stage_window_pumped(
    session: &mut Session,
    plan: &Plan,
    window: &Window,
    observer: &dyn Observer,
) -> Result<Staged, Error> {
    let layout = &session.layout;
    let mut rule = RowRule::new(plan, layout);
    let stager = stage::Stager::new(&session.ctx);
    let source = session.source.as_mut().expect("source connection present");
    let by_index = reads_by_index(source, plan, layout, window).await;
    let read = extract::WindowRead::new(source.backend(), plan, layout, window, by_index)?;
    let mut admission = extract::Admission::new(*window, layout.keys.len());
    let each = |row: &mut [Option<&str>], out: &mut crate::db::RowOut<'_>| -> Result<(), Error> {
        let Some(staged) = rule.admit(&mut admission, row)? else {
            return Ok(());
        };
        if admission.rows_read % PROGRESS_EVERY == 0 {
            observer.rows_read(admission.rows_read as u64);
        }
        stage::Stager::write_row(&staged, out);
        Ok(())
    };
    let interrupt = session.interrupt.clone();
    let stop = || interrupt.as_ref().is_some_and(crate::interrupt::Interrupt::is_fired);
    let pumped = session
        .target
        .pump_from(
            session.source.as_mut().expect("source connection present"),
            (&read.sql, &read.params),
            read.key_count(),
            crate::db::PumpInto {
                table: "dimlog_raw",
                columns: stager.columns(),
                kinds: stager.kinds(),
                rising: None,
            },
            &stop,
            each,
        )
        .await;
    match pumped {
        Ok(_) => {}
        Err(crate::db::PumpError::Stream(e)) => return Err(read.fault(e).into()),
        Err(crate::db::PumpError::Write(e)) => return Err(e.into()),
        Err(crate::db::PumpError::Row(e)) => return Err(e),
        Err(crate::db::PumpError::OutOfOrder) => {
            return Err(Error::Internal("staged rows were checked for their order".into()))
        }
        Err(crate::db::PumpError::Stopped) => {
            // Dropped from here by whoever fired the interrupt (see `Session::interruptible`).
            std::future::pending::<()>().await;
        }
    }
    observer.rows_read(admission.rows_read as u64);
    if let Some(e) = admission.null_key_error(layout) {
        return Err(e.into());
    }
    Ok(Staged {
        rows_read: admission.rows_read,
        max_read: admission.max_read,
        beyond_upper: admission.beyond_upper,
    })
}

/// Rows staged between two progress reports of [`stage_window_pumped`].
const PROGRESS_EVERY: i64 = 8192;

/// After a first load's append: fills the empty dimension (without a window over the log
/// when the load held one row per key) and builds the indexes dropped for the load.
async fn fill_empty_dimension(
    session: &mut Session,
    observer: &dyn Observer,
    dropped: tables::DroppedIndexes,
    one_row_per_key: bool,
) -> Result<(), Error> {
    observer.phase("rebuilding the dimension");
    if one_row_per_key {
        rebuild::rebuild_first_load(&mut session.target, &session.ctx).await?;
    } else {
        rebuild::rebuild_in_place(&mut session.target, &session.ctx).await?;
    }
    observer.phase("building indexes");
    tables::restore_indexes(&mut session.target, &session.ctx, dropped).await?;
    Ok(())
}

/// [`stage_window`] from PostgreSQL to PostgreSQL: the source's COPY text streams into one
/// `COPY dimlog_raw FROM STDIN` through a [`stage::CopyStager`], never parsed into rows.
async fn stage_window_copy(
    session: &mut Session,
    plan: &Plan,
    window: &Window,
    observer: &dyn Observer,
) -> Result<Staged, Error> {
    let stager = stage::CopyStager::new(plan, &session.layout, *window);
    let columns = stage::Stager::new(&session.ctx).columns().to_vec();
    let read = extract::RawRead::Window(window);
    let into = ("staging source rows", "dimlog_raw", &columns[..]);
    let stager = copy_through(session, plan, stager, read, into, observer).await?;
    Ok(Staged {
        rows_read: stager.admission.rows_read,
        max_read: stager.admission.max_read,
        beyond_upper: stager.admission.beyond_upper,
    })
}

/// Streams a read of the source through `stager` into one `COPY table (columns) FROM
/// STDIN` of the target (`into` = what, table, columns); gives the source connection
/// back to the session whatever happens, and fails on rows with a NULL key.
async fn copy_through<'p>(
    session: &mut Session,
    plan: &Plan,
    mut stager: stage::CopyStager<'p>,
    read: extract::RawRead<'_>,
    (what, table, columns): (&str, &str, &[String]),
    observer: &dyn Observer,
) -> Result<stage::CopyStager<'p>, Error> {
    let source = session.source.take().expect("source connection present");
    let (mut chunks, handle) = extract::spawn_raw_reader(source, plan, &session.layout, read)?;
    let copied = stage::copy_into(
        &mut session.target,
        what,
        table,
        columns,
        &mut chunks,
        |piece, out| -> Result<(), Error> {
            stager.feed(piece, out)?;
            observer.rows_read(stager.admission.rows_read as u64);
            Ok(())
        },
    )
    .await;
    drop(chunks);
    let source = handle
        .await
        .map_err(|e| Error::Internal(format!("the reader task failed: {e}")))?;
    session.source = Some(source);
    copied?;
    stager.finish()?;
    if let Some(e) = stager.admission.null_key_error(&session.layout) {
        return Err(e.into());
    }
    Ok(stager)
}

/// Rebuilds the whole dimension from the log (`dimlog rebuild`), under the lock, in one
/// transaction, in place ([`rebuild::rebuild_all`]): readers see the old rows until it
/// commits, and what users added to the dimension stays.
/// Turns the dimension's local tables on a Citus coordinator into distributed,
/// colocated ones ([`tables::distribute`]), holding its lock, in one transaction: a
/// refusal or a failure changes nothing. A target without Citus is refused.
pub async fn distribute(session: &mut Session, plan: &Plan, wait: bool) -> Result<tables::Distribution, Error> {
    if !session.target.speak_citus() {
        return Err(Error::NotDistributable(tables::NotDistributable {
            dimension: plan.name.clone(),
            reason: format!(
                "target {} is not a Citus coordinator (its database has no citus extension)",
                plan.target.url.redacted()
            ),
        }));
    }
    tables::check_log_complete(&mut session.target, plan, true).await?;
    let ctx = SqlContext::new(plan, &session.layout, session.target.backend());
    session
        .under_lock(plan, wait, async |session: &mut Session| {
            // (Taking the lock looked at the tables again, as a local dimension's.)
            session.target.speak_citus();
            session.begin_write(plan).await?;
            let result = tables::distribute(&mut session.target, plan, &ctx)
                .await
                .map_err(Error::from);
            session.target.finish(result).await
        })
        .await
}

/// What [`migrate_column`] did.
#[derive(Clone, Debug, Serialize)]
pub struct Migration {
    /// The column.
    pub column: String,
    /// The type the dimension was built with.
    pub from: String,
    /// The source's type now, recorded (and the log's column's, where the engine can
    /// change it).
    pub to: String,
    /// Whether the log's column was altered (false where the engine cannot).
    pub log_altered: bool,
}

/// Takes a source column's new type into the dimension's log, its dimension (and a Type 6
/// twin) and its record, in one transaction under the dimension's lock: the migration a
/// retyped column's refusal prints. The dimension is rebuilt from the log, and the
/// current versions re-hashed by a full refresh, after it. Refuses a column whose type
/// did not change.
pub async fn migrate_column(session: &mut Session, plan: &Plan, column: &str, wait: bool) -> Result<Migration, Error> {
    let wanted = tables::DimensionRecord::from_layout(&session.layout);
    session
        .under_lock(plan, wait, async |session: &mut Session| {
            let stored = tables::existing_record(&mut session.target, plan).await?;
            let type_of = |r: &tables::DimensionRecord| {
                r.column_types.iter().find(|(n, _)| n == column).map(|(_, t)| t.clone())
            };
            let (Some(from), Some(to)) = (type_of(&stored), type_of(&wanted)) else {
                return Err(Error::Usage(format!(
                    "column `{column}` is not a column dimension `{}` was built with and the source still has; its columns: {}",
                    plan.name,
                    stored.column_types.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
                )));
            };
            if from.eq_ignore_ascii_case(&to) {
                return Err(Error::Usage(format!(
                    "column `{column}` has the type the dimension was built with ({from}): nothing to migrate"
                )));
            }
            session.begin_write(plan).await?;
            let result = tables::retype_column(&mut session.target, plan, &stored, column, &to)
                .await
                .map_err(|e| {
                    // SQLSTATE class 22 (a value the cast refuses), 42804 (no cast).
                    let refused_value = e
                        .database_code()
                        .is_some_and(|c| c.starts_with("22") || c == "42804");
                    if refused_value {
                        Error::NotConvertible(Box::new(crate::NotConvertible {
                            column: column.to_string(),
                            from: from.clone(),
                            to: to.clone(),
                            keep: crate::record::keep_old_type(plan, column, &from),
                            source: e,
                        }))
                    } else {
                        Error::from(e)
                    }
                });
            let log_altered = session.target.finish(result).await?;
            Ok(Migration {
                column: column.to_string(),
                from,
                to,
                log_altered,
            })
        })
        .await
}

pub async fn rebuild_all(session: &mut Session, plan: &Plan, wait: bool) -> Result<(), Error> {
    crate::rights::check(&mut session.target, plan, crate::rights::Need::Rebuild).await?;
    tables::check_log_complete(&mut session.target, plan, true).await?;
    session.under_lock(plan, wait, async |session: &mut Session| {
        match tables::init_for_rebuild(&mut session.target, plan, &session.layout).await {
            // A dimension edited by hand (a key or valid_from column dropped, duplicate
            // rows) refuses its index; the rebuild repairs the table, index included.
            Err(tables::InitError::Db(crate::db::DbError::Query { what, .. })) if what == "tables/dimension_index" => {}
            other => {
                other.map_err(|e| init_failed(e, plan))?;
            }
        }
        // On PostgreSQL the first attempt waits at most a few seconds for a lock (a
        // session holding one on the dimension that conflicts with writing it); then
        // the rebuild says whose lock it waits for, and waits on.
        let mut bounded = session.target.dialect().names_lock_holders();
        loop {
            session.begin_write(plan).await?;
            if bounded {
                // With --no-wait, a lock another session holds on the tables fails the
                // rebuild at once, as the dimension's own lock does.
                let limit = if wait { "lock_wait" } else { "lock_no_wait" };
                tables::run_named(&mut session.target, "state", &[limit], &session.ctx).await?;
            }
            match rebuild::rebuild_all(&mut session.target, &session.ctx, &[]).await {
                Ok(()) => break session.target.commit().await.map_err(Error::from),
                Err(e) => {
                    session.target.rollback().await;
                    if bounded && is_lock_timeout(&e) {
                        let holders = lock_holders(&mut session.target, &session.ctx).await;
                        let dim = session.ctx.dim.replace("\".\"", ".").trim_matches('"').to_string();
                        if !wait {
                            let holders = if holders.is_empty() {
                                String::new()
                            } else {
                                format!(" (held by {})", holders.join(", "))
                            };
                            break Err(Error::Db(DbError::TableLocked { table: dim, holders }));
                        }
                        if holders.is_empty() {
                            tracing::warn!("the rebuild of {dim} has waited 5 s for a lock (it was released meanwhile); trying again");
                        } else {
                            tracing::warn!(
                                "the rebuild of {dim} is waiting for a lock held by {}; it goes on as soon as that is released \
                                 (the session's COMMIT or ROLLBACK, or pg_terminate_backend(pid))",
                                holders.join(", ")
                            );
                        }
                        bounded = false;
                        continue;
                    }
                    break Err(e);
                }
            }
        }
    })
    .await
}

/// True for PostgreSQL's `lock_timeout` (SQLSTATE 55P03).
fn is_lock_timeout(e: &Error) -> bool {
    matches!(e, Error::Db(DbError::Query { source: sqlx::Error::Database(d), .. }) if d.code().as_deref() == Some("55P03"))
}

/// Says (a warning on stderr) who holds the locks a rebuild waits for: session, lock
/// mode, table, application, user and state; never a query's text.
/// The sessions holding a lock the rebuild waits for, each as `session PID (MODE on
/// TABLE; application …, user …, STATE)`.
async fn lock_holders(conn: &mut Conn, ctx: &SqlContext) -> Vec<String> {
    let holders = match crate::db::sql::statement(conn.backend(), "state", "lock_holders", ctx) {
        Ok(sql) => conn
            .query_text("finding who holds the dimension's locks", &sql, &[])
            .await
            .unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    holders
        .iter()
        .map(|r| {
            let state = text(&r[5]);
            format!(
                "session {} ({} on {}; application {:?}, user {:?}{})",
                text(&r[0]),
                text(&r[1]),
                text(&r[2]),
                text(&r[3]),
                text(&r[4]),
                if state.is_empty() {
                    String::new()
                } else {
                    format!(", {state}")
                }
            )
        })
        .collect()
}

/// The lookup index's way in for a program that has only the config: opening the target
/// is the orchestrator's business (the lookup stage only reads a connection it is given).
impl crate::lookup::Index {
    /// Loads the index of the dimension `plan` configures from its target alone: it
    /// never connects to the source (which a lookup-only program need not reach), reads
    /// with read rights only and writes nothing. Fails when the dimension was never
    /// loaded.
    pub async fn open(plan: &Plan) -> Result<crate::lookup::Index, Error> {
        let mut session = Session::open_target(plan, Access::QueryOnly).await?;
        let index = crate::lookup::Index::load(&mut session.target, &session.ctx).await;
        session.close().await;
        Ok(index?)
    }
}
