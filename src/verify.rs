//! Verify: prove the dimension is what the log says, and (optionally) what the source
//! says.
//!
//! The invariant checks (half-open ordered intervals, no overlap, gaps only at
//! tombstones, one open current row per live key, the log's own rules, surrogate keys
//! never shared, and the dimension equal to a fresh rebuild from the log in every column
//! of every row and in its set of columns) and the source comparison (keys missing,
//! extra, with different tracked values, or stamped after the last run's upper bound)
//! are set-based statements in `sql/<backend>/verify.sql`, run inside a transaction that
//! is always rolled back: `verify` never writes. Without the source comparison it only
//! reads: the fresh rebuild it compares the dimension with is a common table expression
//! of the check (`rebuild.sql`'s `rebuilt`), not a table, so it runs on a read-only
//! connection and takes no lock a run would wait for.
//!
//! A table edited by hand is what `verify` exists for, so bad data never makes it fail:
//! the fresh rebuild has no constraints (two versions sharing a surrogate key still
//! rebuild), a check whose columns were dropped reports them instead of running, and a
//! check the database refuses to run on the data it finds (inside a savepoint) is
//! reported as a finding.

use crate::config::{Backend, Plan};
use crate::db::{sql, Conn, DbError, Param, TextRow};
use crate::extract::{self, Window};
use crate::ident::Ident;
use crate::lookup::same_column;
use crate::pipeline::{Observer, Session};
use crate::ts::{Micros, FAR_FUTURE};
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
    /// What repairs them.
    pub fix: Fix,
    /// Whether what it finds is a discrepancy (which fails `verify`), or a notice: rows
    /// the source has that no run has read yet are the next run's work, not a fault.
    pub fault: bool,
}

/// Checks whose findings are notices, not discrepancies.
const NOTICES: [&str; 1] = ["source_ahead"];

/// The result of `verify`.
#[derive(Clone, Debug, Serialize)]
pub struct VerifyReport {
    /// The dimension.
    pub dimension: String,
    /// True when no check found a discrepancy (notices aside).
    pub ok: bool,
    /// Every check run.
    pub checks: Vec<Check>,
}

/// A check: its name (also its statement in `verify.sql`), description and fix.
type Spec = (&'static str, &'static str, Fix);

/// What repairs what a check found, for a front end to say in its own terms (the CLI
/// names its commands): the library only classifies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Fix {
    /// Derive the dimension from the log again.
    Rebuild,
    /// The log was edited by hand: restore it from a backup.
    RestoreLog,
    /// A dimension fault while the log is broken too: restore the log, then rebuild
    /// (a rebuild now would derive from, or fail on, the broken log).
    RestoreLogThenRebuild,
    /// Versions without a dimension row: rebuild, or give the facts that hold their
    /// surrogate keys the key in effect again.
    RebuildOrReassignFacts,
    /// Source rows no run has read yet: the next run's work.
    NextRun,
    /// Live source keys missing from the dimension: a longer lookback or a full refresh.
    ReadAgain,
    /// Current keys gone from the source: reconcile hard deletes.
    ReconcileDeletes,
    /// Values that differ from the source: the next run, or a full refresh.
    FullRefresh,
    /// A source row stamped before its current version: correct it at the source.
    FixAtSource,
}

const INVARIANTS: &[Spec] = &[
    ("bad_interval", "valid_from < valid_to on every row", Fix::Rebuild),
    (
        "overlap_or_gap",
        "intervals of a key are ordered, without overlap, with gaps only at tombstones",
        Fix::Rebuild,
    ),
    (
        "current",
        "at most one current row per key, and it is the open one",
        Fix::Rebuild,
    ),
    (
        "log_rules",
        "the log has its columns, and every row the values a rebuild needs",
        Fix::RestoreLog,
    ),
    (
        "sk_reused",
        "a surrogate key belongs to one version only",
        Fix::RestoreLog,
    ),
    (
        "sk_missing",
        "every surrogate key of the log's versions has a row in the dimension (facts may hold it)",
        Fix::RebuildOrReassignFacts,
    ),
    (
        "rebuild_diff",
        "the dimension equals a fresh rebuild from the log (every column of every row)",
        Fix::Rebuild,
    ),
];

const SOURCE_CHECKS: &[Spec] = &[
    (
        "source_ahead",
        "keys whose source row is stamped after the last run's upper bound (not read yet)",
        Fix::NextRun,
    ),
    (
        "source_missing",
        "keys live in the source but not current in the dimension",
        Fix::ReadAgain,
    ),
    (
        "source_extra",
        "keys current in the dimension but gone from the source",
        Fix::ReconcileDeletes,
    ),
    (
        "source_different",
        "keys whose tracked values differ between source and dimension",
        Fix::FullRefresh,
    ),
    (
        "source_behind",
        "keys whose source row is stamped before their current version, with other values",
        Fix::FixAtSource,
    ),
];

/// Whether a dimension column declared `found` is one dimlog would declare `made`: the
/// same name where declared types are enforced; on an engine whose columns hold any
/// type (SQLite), the same kind of value (`INT` and `BIGINT` hold the same), so a
/// source column widened without a migration is no finding.
fn same_declared_type(backend: crate::config::Backend, found: &str, made: &str) -> bool {
    let dialect = backend.dialect();
    found.eq_ignore_ascii_case(made)
        || (!dialect.alters_tables() && dialect.kind_of_type(found) == dialect.kind_of_type(made))
}

/// A column as the catalog lists it.
#[derive(Clone, Debug)]
struct Column {
    name: String,
    type_name: String,
}

/// The columns of `table` (or of a temporary table), in order; empty when it does not
/// exist.
async fn table_columns(
    conn: &mut Conn,
    table: &str,
    schema: Option<&str>,
    quoted: &str,
) -> Result<Vec<Column>, DbError> {
    let backend = conn.backend();
    let sql = sql::statement(backend, "verify", "table_columns", &serde_json::json!({}))?;
    let params = backend.dialect().table_params(table, schema, quoted);
    let rows = conn.query_text("reading a table's columns", &sql, &params).await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            Some(Column {
                name: r.first().cloned().flatten()?,
                type_name: r.get(1).cloned().flatten().unwrap_or_default(),
            })
        })
        .collect())
}

/// What became of one statement run on data that may have been edited by hand.
enum Attempt {
    /// It ran.
    Rows(Vec<TextRow>),
    /// The database refused it on this data (the message).
    Refused(String),
}

/// Runs one statement inside a savepoint: an error the database reports about the data
/// (a constraint, a type, a missing column) is returned as [`Attempt::Refused`] and the
/// transaction goes on; a connection failure is an error.
async fn attempt(conn: &mut Conn, what: &str, sql: &str, params: &[Param]) -> Result<Attempt, DbError> {
    conn.execute_script("verify/savepoint", "SAVEPOINT dimlog_verify")
        .await?;
    match conn.query_text(what, sql, params).await {
        Ok(rows) => {
            conn.execute_script("verify/release", "RELEASE SAVEPOINT dimlog_verify")
                .await?;
            Ok(Attempt::Rows(rows))
        }
        Err(DbError::Query {
            source: sqlx::Error::Database(e),
            ..
        }) => {
            conn.execute_script(
                "verify/rollback",
                "ROLLBACK TO SAVEPOINT dimlog_verify; RELEASE SAVEPOINT dimlog_verify",
            )
            .await?;
            Ok(Attempt::Refused(e.to_string()))
        }
        Err(e) => Err(e),
    }
}

/// The findings of a check's rows: (count, examples).
fn findings(rows: &[TextRow]) -> (usize, Vec<String>) {
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
    (count, examples)
}

/// The tables a check reads, and which of their columns are gone.
struct Tables<'a> {
    backend: Backend,
    dim: &'a str,
    dim_columns: &'a [Column],
    log: &'a str,
    log_columns: &'a [Column],
}

impl Tables<'_> {
    fn has(&self, columns: &[Column], name: &str) -> bool {
        columns.iter().any(|c| same_column(self.backend, &c.name, name))
    }

    /// "column X: missing from T" for each of `dim` and `log` columns a check reads that
    /// the table no longer has.
    fn missing(&self, dim: &[&str], log: &[&str]) -> Vec<String> {
        let gone = |table: &str, columns: &[Column], wanted: &[&str]| -> Vec<String> {
            wanted
                .iter()
                .filter(|c| !self.has(columns, c))
                .map(|c| format!("column {c}: missing from {table}, so this was not checked"))
                .collect()
        };
        let mut out = gone(self.dim, self.dim_columns, dim);
        out.extend(gone(self.log, self.log_columns, log));
        out
    }
}

/// A check's statement, counted in the database (`counted` in `verify.sql`); a check
/// that compares with a fresh rebuild gets it as a common table expression.
fn counted(backend: Backend, name: &str, context: &serde_json::Value) -> Result<String, DbError> {
    let check = sql::statement(backend, "verify", name, context)?;
    let rebuilt = if check.contains(REBUILT) {
        Some(sql::statement(backend, "rebuild", "rebuilt", context)?)
    } else {
        None
    };
    let counted = serde_json::json!({ "check": check, "examples": EXAMPLES, "rebuilt": rebuilt });
    sql::statement(backend, "verify", "counted", &counted)
}

/// Runs one check: not at all when columns it reads are gone (each is a finding), else
/// its statement, counted in the database.
async fn run_check(
    conn: &mut Conn,
    context: &serde_json::Value,
    (name, description, fix): Spec,
    missing: Vec<String>,
    params: &[Param],
) -> Result<Check, DbError> {
    let (count, examples) = if !missing.is_empty() {
        (missing.len(), missing)
    } else {
        let sql = counted(conn.backend(), name, context)?;
        match attempt(conn, &format!("verify/{name}"), &sql, params).await? {
            Attempt::Rows(rows) => findings(&rows),
            Attempt::Refused(e) => (1, vec![format!("{name}: could not be checked on this data: {e}")]),
        }
    };
    Ok(Check {
        name,
        description,
        count,
        examples,
        fix,
        fault: !NOTICES.contains(&name),
    })
}

/// Runs the checks; with `against_source`, also reads the whole source and compares
/// current rows. Writes nothing, creates nothing: a dimension that was never loaded is
/// [`Error::NotLoaded`]. Without `against_source` the session needs no source
/// ([`Session::open_target`]) and only reads the target, in one read-only snapshot.
pub async fn verify(
    session: &mut Session,
    plan: &Plan,
    against_source: bool,
    observer: &dyn Observer,
) -> Result<VerifyReport, Error> {
    crate::tables::check_registered(&mut session.target, plan, &session.layout).await?;
    // A log that lost rows would make every dimension row it no longer holds look wrong,
    // and the advice would be a rebuild that drops them: refused, naming the log.
    crate::tables::check_log_complete(&mut session.target, plan, true).await?;
    if against_source {
        // The source's rows are staged in temporary tables, which need no lock on the
        // target's own.
        session.target.begin_scratch().await?;
    } else {
        session.target.begin_read().await?;
    }
    let result = checks(session, plan, against_source, observer).await;
    session.target.rollback().await;
    let checks = result?;
    Ok(VerifyReport {
        dimension: plan.name.clone(),
        ok: checks.iter().all(|c| c.count == 0 || !c.fault),
        checks,
    })
}

fn columns_of(ident: &Ident) -> (String, Option<String>, String) {
    (
        ident.name().to_string(),
        ident.schema().map(str::to_string),
        ident.quoted(),
    )
}

/// The columns dimlog made that the log and the dimension lack (dropped or renamed by
/// hand), each named with its table and with what repairs it: the dimension is derived
/// again by a rebuild; a log column holds history only a backup has. Empty for a table
/// that does not exist (that is [`crate::tables::check_tables_present`]'s to say).
pub async fn missing_columns(
    conn: &mut Conn,
    plan: &Plan,
    ctx: &crate::context::SqlContext,
) -> Result<Vec<(String, Fix)>, DbError> {
    let backend = conn.backend();
    let sk = plan.target.surrogate_key.name();
    let keys = ctx.key_defs.iter().map(|c| c.bare.as_str());
    let attrs = ctx.attr_defs.iter().map(|c| c.bare.as_str());
    let mut log: Vec<&str> = vec!["log_id", sk];
    log.extend(keys.clone().chain(attrs.clone()));
    log.extend(["valid_from", "is_deleted", "row_hash", "load_id", "loaded_at"]);
    let mut dim: Vec<&str> = vec![sk];
    dim.extend(
        keys.chain(attrs)
            .chain(ctx.current_defs.iter().map(|c| c.bare.as_str())),
    );
    dim.extend(["valid_from", "valid_to", "is_current", "row_hash", "load_id"]);
    let mut out = Vec::new();
    for (table, wanted, fix) in [
        (&plan.target.log, log, Fix::RestoreLog),
        (&plan.target.dimension, dim, Fix::Rebuild),
    ] {
        let (name, schema, quoted) = columns_of(table);
        let columns = table_columns(conn, &name, schema.as_deref(), &quoted).await?;
        if columns.is_empty() {
            continue;
        }
        for c in wanted {
            if !columns.iter().any(|have| same_column(backend, &have.name, c)) {
                out.push((format!("{table} has no column {c} (dropped or renamed by hand?)"), fix));
            }
        }
    }
    Ok(out)
}

async fn checks(
    session: &mut Session,
    plan: &Plan,
    against_source: bool,
    observer: &dyn Observer,
) -> Result<Vec<Check>, Error> {
    let ctx = session.ctx.clone();
    let conn = &mut session.target;
    let backend = conn.backend();
    let dim_name = plan.target.dimension.to_string();
    let log_name = plan.target.log.to_string();
    let (d, ds, dq) = columns_of(&plan.target.dimension);
    let dim_columns = table_columns(conn, &d, ds.as_deref(), &dq).await?;
    let (l, ls, lq) = columns_of(&plan.target.log);
    let log_columns = table_columns(conn, &l, ls.as_deref(), &lq).await?;

    // The dimension's columns as the config says, with their types: where the engine
    // never alters a table (SQLite) the declared types dimlog writes (a retyped source
    // column keeps the log's old declared type), else (PostgreSQL) those of the log
    // columns each one is made like, as the catalog spells them.
    let sk_name = plan.target.surrogate_key.name().to_string();
    let mut expected: Vec<(String, String, String)> = vec![(sk_name.clone(), sk_name.clone(), "INTEGER".into())];
    if ctx.key_hash {
        let hash = crate::context::KEY_HASH.to_string();
        expected.push((hash.clone(), hash, "INTEGER".into()));
    }
    for c in ctx.key_defs.iter().chain(&ctx.attr_defs) {
        expected.push((c.bare.clone(), c.bare.clone(), c.target_type.clone()));
    }
    for c in &ctx.current_defs {
        expected.push((
            c.bare.clone(),
            c.source.trim_matches('"').to_string(),
            c.target_type.clone(),
        ));
    }
    for (c, like, declared) in [
        ("valid_from", "valid_from", "TEXT"),
        ("valid_to", "valid_from", "TEXT"),
        ("is_current", "is_deleted", "BOOLEAN"),
        ("row_hash", "row_hash", "BLOB"),
        ("load_id", "load_id", "INTEGER"),
    ] {
        expected.push((c.to_string(), like.to_string(), declared.to_string()));
    }
    let rebuilt_columns: Vec<Column> = expected
        .into_iter()
        .map(|(name, like, declared)| Column {
            type_name: if backend.dialect().alters_tables() {
                log_columns
                    .iter()
                    .find(|l| same_column(backend, &l.name, &like))
                    .map(|l| l.type_name.clone())
                    .unwrap_or_default()
            } else {
                declared
            },
            name,
        })
        .collect();
    let mut ctx = ctx;
    ctx.dim_new = REBUILT.into();

    let tables = Tables {
        backend,
        dim: &dim_name,
        dim_columns: &dim_columns,
        log: &log_name,
        log_columns: &log_columns,
    };
    let sk = plan.target.surrogate_key.name();
    let keys: Vec<&str> = ctx.key_defs.iter().map(|c| c.bare.as_str()).collect();
    fn with<'a>(keys: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        keys.iter().chain(extra).copied().collect()
    }

    // Every column the rebuild has, present in the dimension too.
    let common: Vec<serde_json::Value> = rebuilt_columns
        .iter()
        .filter(|c| tables.has(&dim_columns, &c.name))
        .map(|c| {
            serde_json::json!({
                "bare": c.name,
                "q": Ident::column(&c.name).map(|i| i.quoted()).unwrap_or_else(|_| format!("\"{}\"", c.name)),
            })
        })
        .collect();
    let has_common = |name: &str| {
        common
            .iter()
            .any(|c| c["bare"].as_str().is_some_and(|b| same_column(backend, b, name)))
    };
    let by_sk = has_common(sk);
    let by_key = keys.iter().all(|k| has_common(k)) && has_common("valid_from");
    let mut context = serde_json::to_value(&ctx).map_err(|e| Error::Internal(e.to_string()))?;
    context["sk_bare"] = sk.into();
    context["common"] = common.clone().into();
    context["by_sk"] = by_sk.into();
    context["by_key"] = by_key.into();

    // The log's columns: what a rebuild reads.
    let mut log_expected: Vec<&str> = vec!["log_id", sk];
    log_expected.extend(keys.iter().copied());
    log_expected.extend(ctx.attr_defs.iter().map(|c| c.bare.as_str()));
    log_expected.extend(["valid_from", "is_deleted", "row_hash", "load_id", "loaded_at"]);
    let log_gone: Vec<String> = log_expected
        .iter()
        .filter(|c| !tables.has(&log_columns, c))
        .map(|c| format!("column {c}: missing from {log_name}"))
        .collect();

    let mut out = Vec::new();
    for spec in INVARIANTS {
        observer.phase(spec.0);
        let check = match spec.0 {
            "bad_interval" => {
                let missing = tables.missing(&with(&keys, &["valid_from", "valid_to"]), &[]);
                run_check(conn, &context, *spec, missing, &[]).await?
            }
            "overlap_or_gap" => {
                let missing = tables.missing(
                    &with(&keys, &["valid_from", "valid_to"]),
                    &with(&keys, &["valid_from", "is_deleted"]),
                );
                run_check(conn, &context, *spec, missing, &[]).await?
            }
            "current" => {
                let missing = tables.missing(&with(&keys, &["valid_to", "is_current"]), &[]);
                run_check(conn, &context, *spec, missing, &[]).await?
            }
            "log_rules" => {
                let core = ["log_id", sk, "valid_from", "is_deleted", "row_hash", "load_id"];
                let runnable = core.iter().chain(&keys).all(|c| tables.has(&log_columns, c));
                let mut check = if runnable {
                    run_check(conn, &context, *spec, Vec::new(), &[]).await?
                } else {
                    Check {
                        name: spec.0,
                        description: spec.1,
                        count: 0,
                        examples: Vec::new(),
                        fix: spec.2,
                        fault: true,
                    }
                };
                check.count += log_gone.len();
                let mut examples = log_gone.clone();
                examples.append(&mut check.examples);
                examples.truncate(EXAMPLES);
                check.examples = examples;
                check
            }
            "sk_missing" => {
                let missing = tables.missing(&[sk], &with(&keys, &[sk, "valid_from", "is_deleted", "log_id"]));
                run_check(conn, &context, *spec, missing, &[]).await?
            }
            "sk_reused" => {
                let missing = tables.missing(&[], &with(&keys, &[sk, "valid_from"]));
                run_check(conn, &context, *spec, missing, &[]).await?
            }
            _ => rebuild_diff(conn, &context, *spec, &tables, &rebuilt_columns, by_sk || by_key).await?,
        };
        out.push(check);
    }
    let log_broken = out
        .iter()
        .any(|c| matches!(c.name, "log_rules" | "sk_reused") && c.count > 0);
    if log_broken {
        for c in out.iter_mut().filter(|c| c.fix == Fix::Rebuild) {
            c.fix = Fix::RestoreLogThenRebuild;
        }
    }
    if against_source {
        observer.phase("reading the source");
        let mut latest = ctx.clone();
        latest.history_all = false;
        crate::stage::create_staging(&mut session.target, &latest).await?;
        let clock = {
            let source = session.source.as_mut().expect("source connection");
            extract::source_now(source, plan, &session.layout).await?
        };
        let last_upper = last_upper(&mut session.target, plan).await?;
        // The whole source, rows stamped after the last upper bound and after the
        // source's clock included, so each key is compared with its newest row and a
        // row not read yet is named as such.
        let window = Window {
            low: None,
            high: FAR_FUTURE,
            high_inclusive: true,
        };
        let staged = crate::pipeline::stage_window(session, plan, &window, observer)
            .await?
            .rows_read;
        crate::dedupe::dedupe(&mut session.target, &latest, staged, true).await?;
        let conn = &mut session.target;
        crate::tables::run_named(conn, "verify", &["stage_index"], &ctx).await?;
        let bound = last_upper.unwrap_or(FAR_FUTURE);
        let tables = Tables {
            backend,
            dim: &dim_name,
            dim_columns: &dim_columns,
            log: &log_name,
            log_columns: &log_columns,
        };
        let t1: Vec<&str> = ctx
            .attr_defs
            .iter()
            .filter(|c| ctx.t1.contains(&c.name))
            .map(|c| c.bare.as_str())
            .collect();
        for spec in SOURCE_CHECKS {
            observer.phase(spec.0);
            let mut reads = with(&keys, &["is_current"]);
            if spec.0 != "source_missing" && spec.0 != "source_extra" {
                reads.extend(["row_hash", "valid_from"]);
                reads.extend(t1.iter().copied());
            }
            let missing = tables.missing(&reads, &[]);
            let params = if spec.0 == "source_ahead" {
                vec![Param::Ts(bound), Param::Ts(clock)]
            } else {
                vec![Param::Ts(bound)]
            };
            out.push(run_check(conn, &context, *spec, missing, &params).await?);
        }
    }
    Ok(out)
}

/// The upper bound of the dimension's last committed run (`dimlog run`, a full refresh
/// included), if there is one.
async fn last_upper(conn: &mut Conn, plan: &Plan) -> Result<Option<Micros>, DbError> {
    let sql = sql::statement(conn.backend(), "verify", "last_upper", &serde_json::json!({}))?;
    Ok(
        match attempt(
            conn,
            "reading the last run's upper bound",
            &sql,
            &[Param::Text(plan.name.clone())],
        )
        .await?
        {
            Attempt::Rows(rows) => rows
                .first()
                .and_then(|r| r.first().cloned().flatten())
                .and_then(|t| Micros::parse(&t, None).ok()),
            Attempt::Refused(_) => None,
        },
    )
}

/// The dimension against the fresh rebuild: its set of columns (and their types), then
/// every column of every row.
async fn rebuild_diff(
    conn: &mut Conn,
    context: &serde_json::Value,
    (name, description, fix): Spec,
    tables: &Tables<'_>,
    rebuilt: &[Column],
    rows_comparable: bool,
) -> Result<Check, DbError> {
    let dim = tables.dim;
    let mut examples = Vec::new();
    if tables.dim_columns.is_empty() {
        examples.push(format!("table {dim}: does not exist"));
    }
    for c in rebuilt {
        match tables
            .dim_columns
            .iter()
            .find(|d| same_column(tables.backend, &d.name, &c.name))
        {
            None if !tables.dim_columns.is_empty() => examples.push(format!(
                "column {}: missing from {dim} (a fresh rebuild has it)",
                c.name
            )),
            Some(d) if !c.type_name.is_empty() && !same_declared_type(tables.backend, &d.type_name, &c.type_name) => {
                examples.push(format!(
                    "column {}: {} in {dim}, but {} as dimlog makes it",
                    c.name,
                    if d.type_name.is_empty() {
                        "no type"
                    } else {
                        &d.type_name
                    },
                    c.type_name
                ))
            }
            _ => {}
        }
    }
    for d in tables.dim_columns {
        if rebuilt.iter().any(|c| same_column(tables.backend, &c.name, &d.name)) {
            continue;
        }
        // A column the user added (not one of the log's, nor a `current_` twin of one)
        // is theirs: a rebuild keeps it, and it is no fault. A column of the log's that
        // dimlog no longer writes is.
        let of_the_log = |name: &str| tables.has(tables.log_columns, name);
        let dimlogs = of_the_log(&d.name) || d.name.strip_prefix("current_").is_some_and(of_the_log);
        if dimlogs {
            examples.push(format!("column {}: in {dim}, not in a fresh rebuild", d.name));
        }
    }
    let mut count = examples.len();
    if rows_comparable && !tables.dim_columns.is_empty() {
        let sql = counted(conn.backend(), name, context)?;
        match attempt(conn, "verify/rebuild_diff", &sql, &[]).await? {
            Attempt::Rows(rows) => {
                let (n, mut rows) = findings(&rows);
                count += n;
                examples.append(&mut rows);
            }
            Attempt::Refused(e) => {
                count += 1;
                examples.push(format!(
                    "{}: a fresh rebuild from the log could not be compared: {e}",
                    tables.log
                ));
            }
        }
    }
    examples.truncate(EXAMPLES);
    Ok(Check {
        name,
        description,
        count,
        examples,
        fix,
        fault: !NOTICES.contains(&name),
    })
}
