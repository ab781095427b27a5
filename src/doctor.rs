//! `dimlog doctor`: checks a dimension's setup without writing anything, as `dbt debug`
//! does, so that a first run (or a run that stopped working) fails here, named, instead
//! of half-way through a load.
//!
//! Each check reads only: the source through a read-only session, the target through a
//! session the database keeps from writing. A check whose inputs failed (no source, say)
//! is skipped rather than failed again.

use crate::config::Plan;
use crate::db::dialect::ChangeTime;
use crate::db::{Access, Conn};
use crate::extract::{self, Layout, SourceSchema};
use crate::pipeline;
use crate::record;
use crate::rights::{self, Need};
use crate::tables;
use crate::ts::Micros;
use crate::Error;
use serde::Serialize;

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// As it should be.
    Ok,
    /// Worth knowing, not wrong (a run holds the lock now; nothing loaded yet).
    Note,
    /// Wrong: a command would fail, or load wrongly.
    Fail,
    /// Not checked, because a check it needs failed.
    Skipped,
}

/// One check.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// Its name, e.g. `source table`.
    pub name: &'static str,
    /// How it came out.
    pub outcome: Outcome,
    /// What was found, or what is wrong.
    pub detail: String,
    /// The error a failed check found, for a caller that words what to do about it.
    #[serde(skip)]
    pub error: Option<std::sync::Arc<Error>>,
    /// What repairs a failed check's finding, where it is one of `verify`'s.
    pub fix: Option<crate::verify::Fix>,
}

/// Every check, in order.
#[derive(Clone, Debug, Serialize)]
pub struct DoctorReport {
    /// The dimension.
    pub dimension: String,
    /// True when no check failed.
    pub ok: bool,
    /// The checks.
    pub checks: Vec<Check>,
}

struct Checks(Vec<Check>);

impl Checks {
    fn push(&mut self, name: &'static str, outcome: Outcome, detail: impl Into<String>) {
        self.0.push(Check {
            name,
            outcome,
            detail: detail.into(),
            error: None,
            fix: None,
        });
    }

    fn fail(&mut self, name: &'static str, e: Error) {
        self.0.push(Check {
            name,
            outcome: Outcome::Fail,
            detail: e.to_string(),
            error: Some(std::sync::Arc::new(e)),
            fix: None,
        });
    }

    fn result<T>(&mut self, name: &'static str, result: Result<T, Error>, ok: impl FnOnce(&T) -> String) -> Option<T> {
        match result {
            Ok(v) => {
                self.push(name, Outcome::Ok, ok(&v));
                Some(v)
            }
            Err(e) => {
                self.fail(name, e);
                None
            }
        }
    }

    fn skip(&mut self, name: &'static str, because: &str) {
        self.push(name, Outcome::Skipped, format!("needs {because}"));
    }
}

/// Runs every check of `plan`'s setup, writing nothing.
pub async fn doctor(plan: &Plan) -> DoctorReport {
    let mut checks = Checks(Vec::new());
    let source = checks.result("source", pipeline::open_source(plan).await, |_| {
        format!("reachable: {}", plan.source.url.redacted())
    });
    let mut source_clock = None;
    let mut layout: Option<Layout> = None;
    match source {
        Some(mut source) => {
            layout = check_source(&mut checks, plan, &mut source).await;
            let mut source = Some(source);
            if let (Some(layout), Some(conn)) = (&layout, source.as_mut()) {
                source_clock = checks
                    .result(
                        "source clock",
                        extract::source_now(conn, plan, layout).await.map_err(Error::from),
                        |t| format!("{t}"),
                    )
                    .map(Reading::now);
                if let Some(conn) = source.as_mut() {
                    checks.result(
                        "NULL change values",
                        extract::check_null_updated_at(conn, plan, layout)
                            .await
                            .map_err(Error::from),
                        |()| "no source row has a NULL change column".to_string(),
                    );
                }
                if let (Some(Reading { clock, .. }), Some(conn)) = (source_clock, source.take()) {
                    source = check_future_rows(&mut checks, plan, conn, layout, clock).await;
                    if let (Some(advice), Some(conn)) = (extract::index_advice(plan, layout), source.as_mut()) {
                        check_window_read(&mut checks, plan, conn, layout, clock, &advice).await;
                    }
                }
            } else {
                checks.skip("source clock", "the source table");
            }
            if let Some(source) = source {
                let _ = source.close().await;
            }
        }
        None => {
            for name in ["source table", "time zone", "source clock"] {
                checks.skip(name, "the source");
            }
        }
    }
    check_target(&mut checks, plan, layout.as_ref(), source_clock).await;
    let ok = !checks.0.iter().any(|c| c.outcome == Outcome::Fail);
    DoctorReport {
        dimension: plan.name.clone(),
        ok,
        checks: checks.0,
    }
}

/// Source rows stamped after the source's own clock: a run reads them only once its
/// upper bound passes their stamps, so they wait (a writer whose clock is ahead, or
/// times written in another zone than they say). Read as a run reads a window, every
/// value parsed as a run parses it, so the count is the run's (SQLite's own time
/// functions miss spellings dimlog reads, such as `+0530` or ` UTC`), and a value that
/// names no instant fails here as it fails a run.
async fn check_future_rows(
    checks: &mut Checks,
    plan: &Plan,
    source: Conn,
    layout: &Layout,
    clock: Micros,
) -> Option<Conn> {
    let window = extract::Window {
        low: Some(clock.plus(1)),
        high: crate::ts::FAR_FUTURE.plus(-1),
        high_inclusive: true,
    };
    let at = layout.read_columns().len();
    let (mut batches, handle) = match extract::spawn_reader(source, plan, layout, &window, false) {
        Ok(reader) => reader,
        Err(e) => {
            checks.fail("future rows", Error::from(e));
            return None;
        }
    };
    // A read that fails is this check's; a value that names no instant is the change
    // values' (a run fails on it wherever it lies).
    let (mut count, mut latest, mut failure, mut bad_value) = (0_i64, None::<Micros>, None::<Error>, None::<Error>);
    while let Some(batch) = batches.recv().await {
        let rows = match batch {
            Ok(rows) => rows,
            Err(e) => {
                failure = Some(e.into());
                break;
            }
        };
        for row in rows {
            let text = row.get(at).cloned().flatten().unwrap_or_default();
            match extract::parse_with_key(plan, &text, &row[..layout.keys.len()]) {
                Ok(t) if t > clock => {
                    count += 1;
                    latest = latest.max(Some(t));
                }
                Ok(_) => {}
                Err(e) => {
                    bad_value.get_or_insert(e.into());
                }
            }
        }
    }
    drop(batches);
    let source = handle.await.ok();
    match (failure, bad_value) {
        (Some(e), _) => {
            checks.skip("change values", "the source's rows");
            checks.fail("future rows", e);
        }
        (None, Some(e)) => {
            checks.fail("change values", e);
            checks.skip("future rows", "the change values");
        }
        (None, None) => {
            // Where the engine keeps times as values of any form (SQLite), the read above
            // parsed every value that names no instant, wherever it lies; elsewhere the
            // column's type vouches for its values.
            let by_value = plan.source.url.backend.dialect().change_time(layout.updated_at_kind) == ChangeTime::ByValue;
            if by_value {
                checks.push(
                    "change values",
                    Outcome::Ok,
                    "every source row's change column names an instant",
                );
            }
            future_rows(checks, count, latest, clock);
        }
    }
    source
}

/// The "future rows" line: `count` source rows stamped after the source's `clock`.
fn future_rows(checks: &mut Checks, count: i64, latest: Option<Micros>, clock: Micros) {
    match count {
        0 => checks.push("future rows", Outcome::Ok, "no source row is stamped after the source's clock"),
        _ => checks.push(
            "future rows",
            Outcome::Note,
            format!(
                "{count} source row(s) are stamped after the source's clock ({clock}), the latest {}: a run reads each only \
                 once its upper bound passes the stamp. Is the writer's clock ahead, or its times in another zone than \
                 they say (source.timezone)?",
                latest.map_or_else(|| "?".to_string(), |t| t.to_string()),
            ),
        ),
    }
}

/// How an incremental run reads its window, where the engine can read it either way
/// (SQLite: a scan of every change-column value, or a range of an index): a note with the
/// indexes to create when it scans.
async fn check_window_read(
    checks: &mut Checks,
    plan: &Plan,
    source: &mut Conn,
    layout: &Layout,
    clock: Micros,
    advice: &str,
) {
    let window = extract::Window {
        low: Some(clock.plus(-plan.source.lookback_micros - 3_600_000_000)),
        high: clock,
        high_inclusive: true,
    };
    if extract::window_by_index(source, plan, layout, &window).await {
        checks.push(
            "window read",
            Outcome::Ok,
            "an incremental run reads its window through the change column's indexes",
        );
    } else {
        checks.push(
            "window read",
            Outcome::Note,
            format!(
                "an incremental run reads every row's change column to find its window (about 0.4 s per million \
                 rows); these two indexes let it read the window alone, and change nothing else:\n{advice}"
            ),
        );
    }
}

/// The source table, its columns and the time-zone rule; the layout a load would read.
async fn check_source(checks: &mut Checks, plan: &Plan, source: &mut Conn) -> Option<Layout> {
    let layout = async {
        let schema = SourceSchema::load(source, &plan.source.relation).await?;
        let layout = schema.layout(plan, plan.target.url.backend)?;
        extract::check_readable(source, plan, &layout).await?;
        Ok::<_, Error>(layout)
    }
    .await;
    let layout = checks.result("source table", layout, |l: &Layout| {
        let read = match &plan.source.relation {
            crate::config::Relation::Table(t) => format!("table {t}"),
            crate::config::Relation::Query(_) => "source.query".to_string(),
        };
        let names =
            |ids: &[crate::ident::Ident]| ids.iter().map(|k| k.name().to_string()).collect::<Vec<_>>().join(", ");
        format!(
            "{read}: key {}, change column {}, {} tracked column(s)",
            names(&plan.source.key),
            plan.source.updated_at.name(),
            l.tracked.len()
        )
    });
    let Some(layout) = layout else {
        checks.skip("time zone", "the source table");
        return None;
    };
    checks.result(
        "time zone",
        extract::check_zone(source, plan, &layout).await.map_err(Error::from),
        |_| match &plan.source.timezone {
            Some(zone) => format!("change times without an offset are read in {zone}"),
            None => "change times carry their offset, or are read as UTC where the column says so".to_string(),
        },
    );
    Some(layout)
}

/// The target: reachable, the rights each command needs, the clock, the recorded
/// columns, the lock.
async fn check_target(checks: &mut Checks, plan: &Plan, layout: Option<&Layout>, source_clock: Option<Reading>) {
    let shown = plan.target.url.redacted();
    let opened = match crate::db::refuse_unwritable(&plan.target.url, Access::QueryOnly) {
        Err(e) => Err(Error::from(e)),
        Ok(()) => pipeline::open_target(plan, Access::QueryOnly, Need::Read).await,
    };
    let mut target = match opened {
        Ok(t) => {
            checks.push("target", Outcome::Ok, format!("reachable, readable: {shown}"));
            t
        }
        Err(Error::NotLoaded(_)) => {
            checks.push(
                "target",
                Outcome::Note,
                format!("{shown}: nothing loaded there yet (the first run creates its tables)"),
            );
            if let Some((building, size, in_use)) = crate::db::NewFile::look(&plan.target.url) {
                let mb = size as f64 / 1_048_576.0;
                let what = if in_use {
                    format!("a first load is creating it now, in {} ({mb:.1} MB so far); the file appears when that run ends", building.display())
                } else {
                    format!("{} ({mb:.1} MB) was left by a first load that was stopped outright (killed); the next run removes it and starts over, or remove it yourself", building.display())
                };
                checks.push("first load", Outcome::Note, what);
            }
            // A SQLite file to create: whether this user may create it there (its folder
            // exists and takes new files, its name leaves room for SQLite's own files).
            if crate::db::file_not_there_yet(&plan.target.url) {
                checks.result(
                    "rights to load",
                    crate::db::refuse_unwritable(&plan.target.url, Access::Create).map_err(Error::from),
                    |_| "the first run may create the file".to_string(),
                );
            } else {
                checks.skip("rights to load", "a loaded target");
            }
            for name in ["target clock", "recorded columns", "lock"] {
                checks.skip(name, "a loaded target");
            }
            return;
        }
        Err(e) => {
            checks.fail("target", e);
            for name in ["rights to load", "target clock", "recorded columns", "lock"] {
                checks.skip(name, "the target");
            }
            return;
        }
    };
    let load_rights = match rights::check(&mut target, plan, Need::Load).await {
        Ok(()) => match crate::tables::check_may_create_missing(&mut target, plan).await {
            Ok(()) => crate::db::refuse_unwritable(&plan.target.url, Access::ReadWrite),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    // Tables at an older schema version: the next run upgrades them (DDL), which a role
    // that may not alter them is refused on PostgreSQL.
    let older = match &load_rights {
        Ok(()) => crate::db::migrate::read_version(&mut target)
            .await
            .ok()
            .flatten()
            .filter(|v| *v < crate::db::migrate::CURRENT_VERSION),
        Err(_) => None,
    };
    match older {
        Some(version) => checks.push(
            "rights to load",
            Outcome::Note,
            format!(
                "dimlog's tables are at schema version {version}: the next init, run, backfill or rebuild brings them \
                 to version {} first (DDL); on PostgreSQL a role that may not alter them is refused until the \
                 tables' owner runs `dimlog init`",
                crate::db::migrate::CURRENT_VERSION
            ),
        ),
        None => {
            checks.result("rights to load", load_rights.map_err(Error::from), |_| {
                "run, backfill and rebuild may write the target".to_string()
            });
        }
    }
    check_clocks(checks, plan, &mut target, layout, source_clock).await;
    match layout {
        None => checks.skip("recorded columns", "the source table"),
        Some(layout) => match record::check_registered(&mut target, plan, layout).await {
            Ok(_) => {
                // (A target whose tables predate the recorded change column has none.)
                let switched = record::change_column_if_recorded(&mut target, plan)
                    .await
                    .filter(|recorded| record::change_column_switched(plan, Some(recorded)));
                if let Some(recorded) = switched {
                    let refusal = record::change_column_refusal(plan, &recorded);
                    checks.fail("recorded columns", Error::from(refusal));
                } else {
                    check_tables(checks, plan, &mut target, layout).await;
                    checks.push(
                        "recorded columns",
                        Outcome::Ok,
                        "the config's columns are the ones the dimension was built with",
                    );
                }
            }
            Err(tables::RecordError::NotLoaded(_)) => checks.push(
                "recorded columns",
                Outcome::Note,
                "the dimension is not registered yet: its first run records its columns",
            ),
            Err(e) => checks.fail("recorded columns", Error::from(e)),
        },
    }
    match target.lock_holder(&plan.name).await {
        Some(holder) => checks.push(
            "lock",
            Outcome::Note,
            format!("a run holds the lock of dimension {} now{holder}", plan.name),
        ),
        None if target.lock_is_a_transaction() => match crate::db::writer_active(&plan.target.url).await {
            Some(true) => checks.push(
                "lock",
                Outcome::Note,
                format!(
                    "a run holds the lock of dimension {} now (SQLite: a write transaction is open on {shown}; \
                     a run waits for it)",
                    plan.name
                ),
            ),
            Some(false) => checks.push("lock", Outcome::Ok, "no run holds the lock"),
            None => checks.push(
                "lock",
                Outcome::Ok,
                "SQLite: the lock is a run's write transaction, which only a user who may write the file can see; \
                 a run waits for another's",
            ),
        },
        None => checks.push("lock", Outcome::Ok, "no run holds the lock"),
    }
    let _ = target.close().await;
}

/// The log and the dimension are there, with the columns dimlog made: a table renamed
/// or a column dropped by hand fails the next run (or, for the log, loses history).
async fn check_tables(checks: &mut Checks, plan: &Plan, target: &mut Conn, layout: &Layout) {
    if let Err(e) = tables::check_tables_present(target, plan, true, false).await {
        checks.fail("tables", pipeline::init_failed(e, plan));
        return;
    }
    let keys: Vec<String> = layout.keys.iter().map(|c| c.name.clone()).collect();
    let tables = (&plan.target.log.quoted()[..], &plan.target.dimension.quoted()[..]);
    if let Err(e) = target.check_layout(&plan.name, tables, &keys).await {
        checks.fail("tables", Error::from(e));
        return;
    }
    let ctx = crate::context::SqlContext::new(plan, layout, target.backend());
    match crate::verify::missing_columns(target, plan, &ctx).await {
        Ok(missing) if missing.is_empty() => checks.push(
            "tables",
            Outcome::Ok,
            format!(
                "{} and {} have the columns dimlog made",
                plan.target.log, plan.target.dimension
            ),
        ),
        Ok(missing) => {
            // The log's loss first: its repair comes before the dimension's.
            use crate::verify::Fix;
            let has = |fix: Fix| missing.iter().any(|(_, f)| *f == fix);
            let fix = match (has(Fix::RestoreLog), has(Fix::Rebuild)) {
                (true, true) => Fix::RestoreLogThenRebuild,
                (true, false) => Fix::RestoreLog,
                _ => Fix::Rebuild,
            };
            let detail: Vec<String> = missing.into_iter().map(|(m, _)| m).collect();
            checks.0.push(Check {
                name: "tables",
                outcome: Outcome::Fail,
                detail: detail.join("; "),
                error: None,
                fix: Some(fix),
            });
        }
        Err(e) => checks.fail("tables", Error::from(e)),
    }
}

/// A database's clock as read, and this machine's when it was read.
#[derive(Clone, Copy, Debug)]
struct Reading {
    clock: Micros,
    here: Micros,
}

impl Reading {
    fn now(clock: Micros) -> Reading {
        Reading {
            clock,
            here: Micros::from_utc(chrono::Utc::now()),
        }
    }

    /// The clock as it would read at `here` (this machine's time, later).
    fn at(self, here: Micros) -> Micros {
        self.clock.plus(here.0 - self.here.0)
    }
}

/// This machine's clock, the source's and the target's agree within `source.safety_lag`:
/// a source clock behind the others hides rows a run should read; one ahead reads rows
/// before they settle.
async fn check_clocks(
    checks: &mut Checks,
    plan: &Plan,
    target: &mut Conn,
    layout: Option<&Layout>,
    source_clock: Option<Reading>,
) {
    let Some(layout) = layout else {
        checks.skip(
            "target clock",
            "the source table (its change column says how to read a clock)",
        );
        return;
    };
    let Some(target_clock) = checks.result(
        "target clock",
        extract::source_now(target, plan, layout).await.map_err(Error::from),
        |t| format!("{t}"),
    ) else {
        return;
    };
    let target_clock = Reading::now(target_clock);
    // Each clock as it reads now: the source's was read before the source's checks, which
    // take seconds on a large table.
    let here = Micros::from_utc(chrono::Utc::now());
    let (source_clock, target_clock) = (source_clock.map(|r| r.at(here)), target_clock.at(here));
    // At least a second: the clocks are read by queries made one after another.
    let limit = plan.source.safety_lag_micros.max(1_000_000);
    let tolerance = if plan.source.safety_lag_micros >= 1_000_000 {
        format!(
            "source.safety_lag ({})",
            crate::ts::seconds_for_people(limit as f64 / 1e6)
        )
    } else {
        "a second (source.safety_lag is less)".to_string()
    };
    let mut clocks = vec![("this machine's", here), ("the target's", target_clock)];
    clocks.extend(source_clock.map(|c| ("the source's", c)));
    let apart = |a: Micros, b: Micros| (a.0 - b.0).abs();
    let worst = clocks
        .iter()
        .flat_map(|a| clocks.iter().map(move |b| (a, b)))
        .max_by_key(|(a, b)| apart(a.1, b.1))
        .filter(|(a, b)| apart(a.1, b.1) > limit);
    // A watermark later than the source's clock: every run is refused until the clock
    // passes it (the source's clock went back, or the source is older than what was read).
    let watermark = crate::state::watermark(target, plan, crate::state::INCREMENTAL)
        .await
        .ok()
        .flatten();
    // Only when a run is refused for it: the window check a run makes, on the window it
    // would read.
    let refusal = source_clock
        .zip(watermark)
        .filter(|(clock, mark)| mark > clock)
        .and_then(|(clock, mark)| {
            let window = extract::Window {
                low: Some(mark.plus(-plan.source.lookback_micros)),
                high: clock.plus(-plan.source.safety_lag_micros),
                high_inclusive: true,
            };
            extract::check_window(plan, &window, clock, false, Some(mark)).err()
        });
    match (worst, refusal) {
        (None, Some(refusal)) => checks.push("clocks", Outcome::Fail, refusal.to_string()),
        (None, None) => checks.push(
            "clocks",
            Outcome::Ok,
            format!("this machine, the source and the target agree within {tolerance}"),
        ),
        (Some(((a, at), (b, bt))), _) => checks.push(
            "clocks",
            Outcome::Fail,
            format!(
                "{a} clock ({at}) and {b} ({bt}) are {} apart, more than {tolerance}: a run's upper bound comes from the source's clock, \
                 so rows may be read before they settle or missed; set the clocks right (NTP), or raise source.safety_lag",
                crate::ts::seconds_for_people(apart(*at, *bt) as f64 / 1e6),
            ),
        ),
    }
}
