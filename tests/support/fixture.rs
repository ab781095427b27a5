//! One dimension on one backend, ready to load: a source table, a config file in a temp
//! dir, library runs with fixed upper bounds, and dumps of what dimlog wrote.
//!
//! Every dump renders a table the same way on SQLite and PostgreSQL (NULL as `NULL`,
//! booleans as `true`/`false`, timestamps in dimlog's fixed-width UTC text, `row_hash` as
//! lowercase hex), so a scenario written once asserts against one insta snapshot on both
//! backends. Write scenarios as `async fn name(fx: Fixture)` and instantiate them with
//! [`on_both_backends!`], which makes the tests `name::sqlite` and `name::postgres`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use dimlog::config::{Backend, DbUrl, Overrides, Plan};
use dimlog::db::{Conn, TextRow};
use dimlog::pipeline::{self, Quiet, RunOptions, RunReport, Session};
use dimlog::ts::{Micros, FAR_FUTURE};

/// Instantiates each `async fn scenario(fx: Fixture)` of the calling module as two tests,
/// `scenario::sqlite` and `scenario::postgres`, with the same body.
macro_rules! on_both_backends {
    ($($scenario:ident),* $(,)?) => {
        $(
            mod $scenario {
                #[tokio::test]
                async fn sqlite() {
                    super::$scenario($crate::support::fixture::Fixture::sqlite().await).await;
                }

                #[tokio::test]
                async fn postgres() {
                    super::$scenario($crate::support::fixture::Fixture::postgres().await).await;
                }
            }
        )*
    };
}
pub(crate) use on_both_backends;

/// Like [`on_both_backends!`], and on Citus too (`scenario::citus`, feature
/// `citus-tests`): the scenario suite (`tests/scenarios/`, the name sweep aside), crashes,
/// kills, backfills and reconciliation run on every engine against the same snapshots.
/// (Every other `on_both_backends!` scenario passed on Citus when this was written; they
/// stay off the Citus group to keep CI within its time.)
macro_rules! on_every_engine {
    ($($scenario:ident),* $(,)?) => {
        $(
            mod $scenario {
                #[tokio::test]
                async fn sqlite() {
                    super::$scenario($crate::support::fixture::Fixture::sqlite().await).await;
                }

                #[tokio::test]
                async fn postgres() {
                    super::$scenario($crate::support::fixture::Fixture::postgres().await).await;
                }

                #[cfg(feature = "citus-tests")]
                #[tokio::test]
                async fn citus() {
                    super::$scenario($crate::support::fixture::Fixture::citus().await).await;
                }
            }
        )*
    };
}
pub(crate) use on_every_engine;

/// The far-future `valid_to` of open versions, as dumps print it.
pub const SENTINEL: &str = "9999-12-31T00:00:00.000000Z";

/// The default config; `{source_url}` and `{target_url}` are filled in.
const CONFIG: &str = r#"name = "customer"

[source]
url = "{source_url}"
table = "src_customers"
key = ["customer_id"]
updated_at = "updated_at"
deleted_flag = "is_deleted"
lookback = "15m"
safety_lag = "0s"
history = "latest"

[target]
url = "{target_url}"
log = "customer_versions"
dimension = "dim_customer"
surrogate_key = "customer_sk"

[track]
columns = ["email", "tier", "country"]

[deletes]
hard = "ignore"
max_fraction = 0.10
"#;

/// A dimension under test: its source, its config and its target.
pub struct Fixture {
    /// Which backend both sides use.
    pub backend: Backend,
    dir: tempfile::TempDir,
    /// The source URL (PostgreSQL: the same database as the target).
    pub source_url: String,
    /// The target URL.
    pub target_url: String,
    config: String,
    source: Conn,
    target: Conn,
    /// On Citus, the database leased for the test (given back on drop).
    #[cfg(feature = "citus-tests")]
    _lease: Option<crate::support::citus::Lease>,
    /// Whether the target is a Citus coordinator (`backend` is then PostgreSQL: the
    /// tests' own SQL is PostgreSQL's).
    pub citus: bool,
    /// The PostgreSQL database made for this fixture, dropped with it. Last, so the
    /// connections above close first.
    _database: Option<crate::support::pg::OwnedDatabase>,
}

/// How a dumped column is rendered, identically on both backends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Render {
    /// Its text form (numbers, text).
    Plain,
    /// `true` / `false`.
    Bool,
    /// Fixed-width UTC text.
    Ts,
    /// Lowercase hex.
    Hex,
}

/// A whole table, read with a stable order; NULL is `None`.
#[derive(Clone, PartialEq, Eq)]
pub struct Dump {
    /// Column names.
    pub headers: Vec<String>,
    /// Rows, in the dump's order.
    pub rows: Vec<TextRow>,
}

impl Dump {
    fn column(&self, name: &str) -> usize {
        self.headers
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name} in {:?}", self.headers))
    }

    /// The same dump with every non-NULL value of `column` replaced by `<redacted>` (for
    /// wall-clock columns, or ids that legitimately differ between two runs).
    pub fn redact(mut self, column: &str) -> Dump {
        let i = self.column(column);
        for row in &mut self.rows {
            if row[i].is_some() {
                row[i] = Some("<redacted>".into());
            }
        }
        self
    }

    /// The values of one column, top to bottom.
    pub fn values(&self, column: &str) -> Vec<Option<String>> {
        let i = self.column(column);
        self.rows.iter().map(|r| r[i].clone()).collect()
    }

    /// The rows as maps from column name to value.
    pub fn records(&self) -> Vec<BTreeMap<String, Option<String>>> {
        self.rows
            .iter()
            .map(|r| self.headers.iter().cloned().zip(r.iter().cloned()).collect())
            .collect()
    }
}

fn cell(v: &Option<String>) -> String {
    match v.as_deref() {
        None => "NULL".into(),
        // Values that would read like something else are quoted.
        Some(s) if s.is_empty() || s == "NULL" || s.trim() != s || s.contains('|') => format!("{s:?}"),
        Some(s) => s.to_string(),
    }
}

impl fmt::Display for Dump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cells: Vec<Vec<String>> = self.rows.iter().map(|r| r.iter().map(cell).collect()).collect();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &cells {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |values: &[String]| -> String {
            values
                .iter()
                .zip(&widths)
                .map(|(v, w)| format!("{v:<w$}"))
                .collect::<Vec<_>>()
                .join(" | ")
                .trim_end()
                .to_string()
        };
        writeln!(f, "{}", line(&self.headers))?;
        writeln!(
            f,
            "{}",
            widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("-|-")
        )?;
        for r in &cells {
            writeln!(f, "{}", line(r))?;
        }
        if cells.is_empty() {
            writeln!(f, "(no rows)")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Dump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\n{self}")
    }
}

/// Parses a fixed `--upper` value.
pub fn ts(text: &str) -> Micros {
    Micros::parse(text, None).unwrap_or_else(|e| panic!("bad timestamp {text:?}: {e}"))
}

/// A run's counts and bounds on one line, for snapshots (no ids, no wall-clock times).
pub fn summary(r: &RunReport) -> String {
    let c = &r.counts;
    let opt = |t: Option<Micros>| t.map_or_else(|| "-".to_string(), |t| t.to_text());
    format!(
        "read={} after_dedupe={} dropped={} versions={} late={} corrections={} tombstones={} window=[{} .. {}] watermark {} -> {}",
        c.rows_read,
        c.rows_after_dedupe,
        c.duplicates_dropped,
        c.versions,
        c.late_versions,
        c.corrections,
        c.tombstones,
        opt(r.low_watermark),
        r.upper_bound.to_text(),
        opt(r.watermark_before),
        opt(r.high_watermark),
    )
}

/// Asserts `text` against `snapshots/<name>.snap`, shared by both backends.
pub fn assert_snapshot(name: &str, description: &str, text: &str) {
    insta::with_settings!({
        snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"),
        prepend_module_to_snapshot => false,
        description => description,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, text);
    });
}

pub async fn connect(setting: &str, url: &str) -> Conn {
    let parsed = DbUrl::parse(setting, url, None).unwrap_or_else(|e| panic!("{url}: {e}"));
    Conn::connect(&parsed)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}

impl Fixture {
    /// Source and target in SQLite files of a new temp dir.
    pub async fn sqlite() -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let source_url = format!("sqlite://{}", dir.path().join("source.db").display());
        let target_url = format!("sqlite://{}", dir.path().join("warehouse.db").display());
        Fixture::build(Backend::Sqlite, dir, source_url, target_url).await
    }

    /// Source and target in one brand-new PostgreSQL database.
    pub async fn postgres() -> Fixture {
        let dir = tempfile::tempdir().expect("temp dir");
        let database = crate::support::pg::owned_database().await;
        let url = database.url.clone();
        let mut fx = Fixture::build(Backend::Postgres, dir, url.clone(), url).await;
        fx._database = Some(database);
        fx
    }

    /// Source and target in an existing PostgreSQL database whose `public` schema is
    /// emptied first (for tests that run many short cases in one database).
    pub async fn postgres_reset(url: String) -> Fixture {
        #[cfg(feature = "citus-tests")]
        if url.contains("/dimlog_citus_") {
            // A database of the Citus group: `public` holds some of the extension.
            let mut c = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
                .await
                .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"));
            if let Err(e) = crate::support::citus::empty(&mut c).await {
                panic!("cannot empty {url}: {e}");
            }
            let dir = tempfile::tempdir().expect("temp dir");
            let mut fx = Fixture::build(Backend::Postgres, dir, url.clone(), url).await;
            fx.citus = true;
            return fx;
        }
        let mut admin = connect("source.url", &url).await;
        if let Err(e) = admin
            .execute_script("fixture", "DROP SCHEMA public CASCADE; CREATE SCHEMA public")
            .await
        {
            panic!("cannot empty the public schema of {url}: {e}");
        }
        drop(admin);
        let dir = tempfile::tempdir().expect("temp dir");
        Fixture::build(Backend::Postgres, dir, url.clone(), url).await
    }

    /// Source and target in a database of the Citus cluster of `DIMLOG_TEST_CITUS_URL`,
    /// of the test's own (see `support::citus`).
    #[cfg(feature = "citus-tests")]
    pub async fn citus() -> Fixture {
        let lease = crate::support::citus::lease().await;
        let dir = tempfile::tempdir().expect("temp dir");
        let url = lease.url.clone();
        let mut fx = Fixture::build(Backend::Postgres, dir, url.clone(), url).await;
        fx._lease = Some(lease);
        fx.citus = true;
        fx
    }

    /// A fresh fixture on the given backend.
    pub async fn on(backend: Backend) -> Fixture {
        match backend {
            Backend::Sqlite => Fixture::sqlite().await,
            Backend::Postgres | Backend::Citus => Fixture::postgres().await,
        }
    }

    async fn build(backend: Backend, dir: tempfile::TempDir, source_url: String, target_url: String) -> Fixture {
        let source = connect("source.url", &source_url).await;
        let target = connect("target.url", &target_url).await;
        let config = CONFIG
            .replace("{source_url}", &source_url)
            .replace("{target_url}", &target_url);
        let mut fx = Fixture {
            backend,
            dir,
            source_url,
            target_url,
            config: String::new(),
            source,
            target,
            #[cfg(feature = "citus-tests")]
            _lease: None,
            _database: None,
            citus: false,
        };
        fx.set_config(config);
        fx.create_source_table("src_customers", true, true).await;
        fx
    }

    /// Creates a source table with the fixture's columns: `customer_id` (the primary key
    /// when `primary_key`), `email`, `tier`, `country`, `is_deleted`, `updated_at` (NOT NULL
    /// when `updated_at_not_null`).
    pub async fn create_source_table(&mut self, name: &str, primary_key: bool, updated_at_not_null: bool) {
        let pk = if primary_key { " PRIMARY KEY" } else { "" };
        let nn = if updated_at_not_null { " NOT NULL" } else { "" };
        let ddl = match self.backend {
            Backend::Postgres | Backend::Citus => format!(
                "CREATE TABLE {name} (customer_id bigint{pk}, email text, tier text, country text, \
                 is_deleted boolean NOT NULL DEFAULT false, updated_at timestamptz{nn})"
            ),
            Backend::Sqlite => format!(
                "CREATE TABLE {name} (customer_id INTEGER{pk}, email TEXT, tier TEXT, country TEXT, \
                 is_deleted BOOLEAN NOT NULL DEFAULT false, updated_at TEXT{nn})"
            ),
        };
        self.exec(&ddl).await;
    }

    /// Inserts `rows` customers (keys 1 to `rows`, all stamped 2026-03-02T09:00:00Z) into
    /// `src_customers`: a table large enough that reading it takes seconds.
    pub async fn insert_customers(&mut self, rows: u64) {
        self.exec(&format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
             INSERT INTO src_customers (customer_id, email, tier, country, updated_at)
             SELECT i, 'user' || i || '@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z' FROM n"
        ))
        .await;
    }

    /// Switches the config to a change feed: a landing table `src_feed` without a primary
    /// key (created here), read with `history = "all"`.
    pub async fn use_feed(&mut self) {
        self.create_source_table("src_feed", false, true).await;
        self.set_setting("table", "\"src_feed\"");
        self.set_setting("history", "\"all\"");
    }

    /// The config file's path.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("dimlog.toml")
    }

    /// The temp dir holding the config (and the SQLite files).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// The current config text.
    pub fn config(&self) -> &str {
        &self.config
    }

    /// Replaces the config text (and rewrites the file).
    pub fn set_config(&mut self, text: String) {
        std::fs::write(self.config_path(), &text).expect("write config");
        self.config = text;
    }

    /// Replaces `from` (which must occur) with `to` in the config.
    pub fn edit_config(&mut self, from: &str, to: &str) {
        assert!(
            self.config.contains(from),
            "{from:?} is not in the config:\n{}",
            self.config
        );
        let text = self.config.replacen(from, to, 1);
        self.set_config(text);
    }

    /// Sets the first `key = …` line of the config to `key = value` (value as TOML).
    pub fn set_setting(&mut self, key: &str, value: &str) {
        let prefix = format!("{key} = ");
        let old = self
            .config
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no `{key}` line in the config:\n{}", self.config))
            .to_string();
        self.edit_config(&old, &format!("{prefix}{value}"));
    }

    /// The config resolved into a plan.
    pub fn plan(&self) -> Plan {
        Plan::from_toml(
            &self.config,
            &self.config_path(),
            self.dir.path(),
            &Overrides::default(),
        )
        .unwrap_or_else(|e| panic!("the fixture's config does not resolve: {e}\n{}", self.config))
    }

    /// Runs statements (`;`-separated, no parameters) on the source; panics on failure.
    pub async fn exec(&mut self, sql: &str) {
        if let Err(e) = self.source.execute_script("fixture", sql).await {
            panic!("source statement failed: {e}\n{sql}");
        }
    }

    /// Runs statements on the target; panics on failure.
    pub async fn target_exec(&mut self, sql: &str) {
        if let Err(e) = self.target.execute_script("fixture", sql).await {
            panic!("target statement failed: {e}\n{sql}");
        }
    }

    /// Runs a query on the target whose columns are all text.
    pub async fn target_query(&mut self, sql: &str) -> Vec<TextRow> {
        self.target
            .query_text("fixture", sql, &[])
            .await
            .unwrap_or_else(|e| panic!("target query failed: {e}\n{sql}"))
    }

    /// Runs a query on the source whose columns are all text.
    pub async fn source_query(&mut self, sql: &str) -> Vec<TextRow> {
        self.source
            .query_text("fixture", sql, &[])
            .await
            .unwrap_or_else(|e| panic!("source query failed: {e}\n{sql}"))
    }

    /// `SELECT count(*)` of a target table.
    pub async fn count(&mut self, table: &str) -> i64 {
        let sql = match self.backend {
            Backend::Postgres | Backend::Citus => format!("SELECT count(*)::text FROM {table}"),
            Backend::Sqlite => format!("SELECT CAST(count(*) AS TEXT) FROM {table}"),
        };
        let rows = self.target_query(&sql).await;
        rows[0][0].as_deref().expect("a count").parse().expect("an integer")
    }

    /// Whether a table exists in the target.
    pub async fn target_has_table(&mut self, table: &str) -> bool {
        let sql = match self.backend {
            Backend::Postgres | Backend::Citus => format!("SELECT to_regclass('{table}')::text"),
            Backend::Sqlite => format!("SELECT name FROM sqlite_master WHERE type = 'table' AND name = '{table}'"),
        };
        let rows = self.target_query(&sql).await;
        rows.first().and_then(|r| r[0].as_ref()).is_some()
    }

    /// One incremental run with a fixed upper bound (RFC 3339); panics on failure.
    pub async fn run(&mut self, upper: &str) -> RunReport {
        self.run_with(RunOptions {
            upper: Some(ts(upper)),
            ..RunOptions::incremental()
        })
        .await
    }

    /// One run with the given options; panics on failure.
    pub async fn run_with(&mut self, opts: RunOptions) -> RunReport {
        match self.try_run_with(opts).await {
            Ok(r) => r,
            Err(e) => panic!("the run failed: {e}"),
        }
    }

    /// One run with the given options, as the library returns it.
    pub async fn try_run_with(&mut self, opts: RunOptions) -> Result<RunReport, dimlog::Error> {
        let plan = self.plan();
        let mut session = Session::open(&plan).await?;
        pipeline::run(&mut session, &plan, &opts, &Quiet).await
    }

    /// Runs with a fixed upper bound and returns the report and a snapshot section: the
    /// run's summary, then the whole dimension and log. Checks first that the dimension is
    /// the one derived from the log.
    pub async fn step(&mut self, upper: &str) -> (RunReport, String) {
        let report = self.run(upper).await;
        self.assert_dimension_derives_from_log().await;
        let section = format!(
            "== run --upper {upper}\n{}\n\n{}\n{}\n",
            summary(&report),
            self.dump_dimension().await,
            self.dump_log().await
        );
        (report, section)
    }

    fn select(&self, table: &str, columns: &[(String, Render)], order_by: &str) -> String {
        let exprs: Vec<String> = columns
            .iter()
            .map(|(c, r)| match (self.backend, r) {
                (Backend::Postgres | Backend::Citus, Render::Plain) => format!("{c}::text"),
                (Backend::Sqlite, Render::Plain) => format!("CAST({c} AS TEXT)"),
                (_, Render::Bool) => format!("CASE WHEN {c} IS NULL THEN NULL WHEN {c} THEN 'true' ELSE 'false' END"),
                (Backend::Postgres | Backend::Citus, Render::Ts) => {
                    format!("to_char({c} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')")
                }
                (Backend::Sqlite, Render::Ts) => format!("CAST({c} AS TEXT)"),
                (Backend::Postgres | Backend::Citus, Render::Hex) => format!("encode({c}, 'hex')"),
                (Backend::Sqlite, Render::Hex) => format!("CASE WHEN {c} IS NULL THEN NULL ELSE lower(hex({c})) END"),
            })
            .collect();
        // Output columns get neutral aliases, so ORDER BY names the table's own columns
        // (PostgreSQL would otherwise sort `log_id::text` as text: 1, 10, 2).
        let exprs: Vec<String> = exprs
            .iter()
            .enumerate()
            .map(|(i, e)| format!("{e} AS dimlog_c{i}"))
            .collect();
        format!("SELECT {} FROM {table} ORDER BY {order_by}", exprs.join(", "))
    }

    async fn dump(&mut self, table: &str, columns: Vec<(String, Render)>, order_by: &str) -> Dump {
        let sql = self.select(table, &columns, order_by);
        let rows = self.target_query(&sql).await;
        Dump {
            headers: columns
                .into_iter()
                .map(|(c, _)| c.trim_matches('"').to_string())
                .collect(),
            rows,
        }
    }

    /// Keys and attributes of the current plan, quoted.
    fn plan_columns(&self) -> (Plan, Vec<String>, Vec<String>) {
        let plan = self.plan();
        let keys = plan.source.key.iter().map(|k| k.quoted()).collect();
        let attrs = plan.tracked.iter().chain(&plan.type1).map(|c| c.quoted()).collect();
        (plan, keys, attrs)
    }

    /// The whole dimension, by key and valid_from, unredacted.
    pub async fn dimension(&mut self) -> Dump {
        let (plan, keys, attrs) = self.plan_columns();
        let mut cols = vec![(plan.target.surrogate_key.quoted(), Render::Plain)];
        cols.extend(keys.iter().map(|k| (k.clone(), Render::Plain)));
        cols.extend(attrs.iter().map(|a| (a.clone(), Render::Plain)));
        cols.extend([
            ("valid_from".to_string(), Render::Ts),
            ("valid_to".to_string(), Render::Ts),
            ("is_current".to_string(), Render::Bool),
            ("row_hash".to_string(), Render::Hex),
            ("load_id".to_string(), Render::Plain),
        ]);
        let order = format!("{}, valid_from", keys.join(", "));
        self.dump(&plan.target.dimension.quoted(), cols, &order).await
    }

    /// The whole log, by log_id, unredacted (loaded_at included).
    pub async fn log(&mut self) -> Dump {
        let (plan, keys, attrs) = self.plan_columns();
        let mut cols = vec![
            ("log_id".to_string(), Render::Plain),
            (plan.target.surrogate_key.quoted(), Render::Plain),
        ];
        cols.extend(keys.iter().map(|k| (k.clone(), Render::Plain)));
        cols.extend(attrs.iter().map(|a| (a.clone(), Render::Plain)));
        cols.extend([
            ("valid_from".to_string(), Render::Ts),
            ("is_deleted".to_string(), Render::Bool),
            ("row_hash".to_string(), Render::Hex),
            ("load_id".to_string(), Render::Plain),
            ("loaded_at".to_string(), Render::Ts),
        ]);
        self.dump(&plan.target.log.quoted(), cols, "log_id").await
    }

    /// The dimension as snapshots show it.
    pub async fn dump_dimension(&mut self) -> String {
        self.dimension().await.to_string()
    }

    /// The log as snapshots show it (loaded_at is wall-clock, so redacted).
    pub async fn dump_log(&mut self) -> String {
        self.log().await.redact("loaded_at").to_string()
    }

    /// `dimlog_state`, unredacted.
    pub async fn state(&mut self) -> Dump {
        let cols = vec![
            ("dimension".to_string(), Render::Plain),
            ("role".to_string(), Render::Plain),
            ("high_watermark".to_string(), Render::Ts),
            ("run_id".to_string(), Render::Plain),
            ("updated_at".to_string(), Render::Ts),
        ];
        self.dump("dimlog_state", cols, "dimension, role").await
    }

    /// `dimlog_runs`, unredacted.
    pub async fn runs(&mut self) -> Dump {
        let mut cols: Vec<(String, Render)> = ["run_id", "dimension", "kind", "role"]
            .iter()
            .map(|c| (c.to_string(), Render::Plain))
            .collect();
        cols.extend(
            ["low_watermark", "high_watermark", "upper_bound"]
                .iter()
                .map(|c| (c.to_string(), Render::Ts)),
        );
        cols.extend(
            [
                "rows_read",
                "rows_after_dedupe",
                "duplicates_dropped",
                "versions",
                "late_versions",
                "corrections",
                "tombstones",
                "revived",
                "future_rows",
                "status",
            ]
            .iter()
            .map(|c| (c.to_string(), Render::Plain)),
        );
        cols.extend(
            ["started_at", "finished_at"]
                .iter()
                .map(|c| (c.to_string(), Render::Ts)),
        );
        cols.push(("error".to_string(), Render::Plain));
        self.dump("dimlog_runs", cols, "run_id").await
    }

    /// The incremental watermark in fixed-width text, if there is one.
    pub async fn watermark(&mut self) -> Option<String> {
        let name = self.plan().name;
        let state = self.state().await;
        state
            .records()
            .into_iter()
            .find(|r| r["dimension"].as_deref() == Some(&name) && r["role"].as_deref() == Some("incremental"))
            .and_then(|r| r["high_watermark"].clone())
    }

    /// Re-derives the dimension from the log in Rust (spec 1.5: per key the latest log row
    /// of each valid_from, `valid_to` = the next valid_from or the sentinel, tombstones
    /// close the version before them and are no rows, `is_current` for the open row) and
    /// asserts the table equals it.
    pub async fn assert_dimension_derives_from_log(&mut self) {
        let (plan, keys, attrs) = self.plan_columns();
        let sk = plan.target.surrogate_key.name().to_string();
        let keys: Vec<String> = keys.iter().map(|k| k.trim_matches('"').to_string()).collect();
        let attrs: Vec<String> = attrs.iter().map(|a| a.trim_matches('"').to_string()).collect();
        let type1: Vec<String> = plan.type1.iter().map(|c| c.name().to_string()).collect();
        let log = self.log().await.records();
        let dim = self.dimension().await;

        // key -> valid_from -> latest log row (the log is read in log_id order).
        type Rec = BTreeMap<String, Option<String>>;
        let mut by_key: BTreeMap<Vec<Option<String>>, BTreeMap<String, Rec>> = BTreeMap::new();
        for r in log {
            let key: Vec<Option<String>> = keys.iter().map(|k| r[k].clone()).collect();
            let from = r["valid_from"].clone().expect("valid_from is never NULL");
            by_key.entry(key).or_default().insert(from, r);
        }
        let mut expected: Vec<TextRow> = Vec::new();
        for versions in by_key.values() {
            let entries: Vec<(&String, &Rec)> = versions.iter().collect();
            let latest_live = entries
                .iter()
                .rev()
                .find(|(_, r)| r["is_deleted"].as_deref() == Some("false"))
                .map(|(_, r)| *r);
            for (i, (from, r)) in entries.iter().enumerate() {
                if r["is_deleted"].as_deref() == Some("true") {
                    continue;
                }
                let to = entries.get(i + 1).map_or(SENTINEL.to_string(), |(f, _)| f.to_string());
                let mut row = vec![r[&sk].clone()];
                row.extend(keys.iter().map(|k| r[k].clone()));
                for a in &attrs {
                    let source = if type1.contains(a) { latest_live.unwrap_or(r) } else { r };
                    row.push(source[a].clone());
                }
                row.extend([
                    Some(from.to_string()),
                    Some(to.clone()),
                    Some((i + 1 == entries.len()).to_string()),
                    r["row_hash"].clone(),
                    r["load_id"].clone(),
                ]);
                expected.push(row);
            }
        }
        let mut actual = dim.rows.clone();
        actual.sort();
        expected.sort();
        let expected = Dump {
            headers: dim.headers.clone(),
            rows: expected,
        };
        let actual = Dump {
            headers: dim.headers,
            rows: actual,
        };
        assert_eq!(actual, expected, "the dimension is not the one derived from the log");
        assert_eq!(Micros::parse(SENTINEL, None).ok(), Some(FAR_FUTURE));
    }
}

/// The `dimlog` binary, run against the fixture's config.
impl Fixture {
    /// `dimlog --config <the fixture's config> <args>`, run in the fixture's dir with none
    /// of dimlog's environment variables, so results do not depend on the caller's shell.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        self.cli_with(args, &[])
    }

    /// [`Fixture::cli`] with `env` set for the binary.
    pub fn cli_with(&self, args: &[&str], env: &[(&str, &std::path::Path)]) -> std::process::Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_dimlog"))
            .arg("--config")
            .arg(self.config_path())
            .args(args)
            .current_dir(self.dir())
            .env_remove("DIMLOG_SOURCE_URL")
            .env_remove("DIMLOG_TARGET_URL")
            .env_remove("DIMLOG_FAILPOINT")
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run the dimlog binary")
    }
}

/// Variants for Type 1 columns and Type 6 twins.
impl Fixture {
    /// Adds a `name` column to `src_customers` and tracks it as Type 1
    /// (`[track] type1 = ["name"]`).
    pub async fn with_type1_name(&mut self) {
        self.exec("ALTER TABLE src_customers ADD COLUMN name text").await;
        self.edit_config(
            r#"columns = ["email", "tier", "country"]"#,
            "columns = [\"email\", \"tier\", \"country\"]\ntype1 = [\"name\"]",
        );
    }

    /// The whole dimension like [`Fixture::dimension`], with the `current_<col>` twins of
    /// `[track] current_columns` after the attributes.
    pub async fn dimension_with_current(&mut self) -> Dump {
        let (plan, keys, attrs) = self.plan_columns();
        let mut cols = vec![(plan.target.surrogate_key.quoted(), Render::Plain)];
        cols.extend(keys.iter().map(|k| (k.clone(), Render::Plain)));
        cols.extend(attrs.iter().map(|a| (a.clone(), Render::Plain)));
        cols.extend(
            plan.current
                .iter()
                .map(|c| (format!("\"current_{}\"", c.name()), Render::Plain)),
        );
        cols.extend([
            ("valid_from".to_string(), Render::Ts),
            ("valid_to".to_string(), Render::Ts),
            ("is_current".to_string(), Render::Bool),
            ("load_id".to_string(), Render::Plain),
        ]);
        let order = format!("{}, valid_from", keys.join(", "));
        self.dump(&plan.target.dimension.quoted(), cols, &order).await
    }
}
