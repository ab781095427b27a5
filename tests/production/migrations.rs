//! dimlog's own tables carry a schema version (`dimlog_schema`), and dimlog upgrades them
//! by an ordered list of migrations, inside the transaction of `init` (which `run`,
//! `backfill` and `rebuild` begin with): a fresh target is stamped at the current
//! version; a target made by an older dimlog (no `dimlog_schema`, `dimlog_runs` without
//! its newer counters) is brought to it by the next run, its data kept; a target at a
//! version newer than this dimlog knows is refused by every command that writes, naming
//! the target and both versions, and still read by those that only read. On PostgreSQL a
//! loading role that owns nothing keeps loading with the recipe's GRANTs, and is sent to
//! the tables' owner when an upgrade needs DDL.

use super::{cli_exits, database, loaded, text};
use crate::support::fixture::{on_both_backends, Fixture};
use dimlog::config::Backend;
use dimlog::db::migrate::CURRENT_VERSION;

on_both_backends!(
    a_fresh_target_is_at_the_current_version,
    an_older_dimlogs_target_is_upgraded_by_the_next_run,
    a_newer_schema_is_refused_by_writers_and_read_by_readers,
    init_makes_again_what_was_dropped_at_the_current_version,
);

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";

/// The rows of `dimlog_schema` (`table`: its name as the target's session finds it):
/// (version, applied_at, applied_by).
async fn schema_rows(fx: &mut Fixture, table: &str) -> Vec<(i64, String, String)> {
    fx.target_query(&format!(
        "SELECT CAST(version AS TEXT), CAST(applied_at AS TEXT), applied_by FROM {table}"
    ))
    .await
    .into_iter()
    .map(|r| {
        (
            r[0].as_deref().expect("a version").parse().expect("an integer"),
            r[1].clone().expect("applied_at"),
            r[2].clone().expect("applied_by"),
        )
    })
    .collect()
}

/// The column names of `dimlog_runs`.
async fn runs_columns(fx: &mut Fixture, table: &str) -> Vec<String> {
    let sql = match fx.backend {
        Backend::Sqlite => format!("SELECT name FROM pragma_table_info('{table}')"),
        Backend::Postgres | Backend::Citus => format!(
            "SELECT attname::text FROM pg_attribute WHERE attrelid = '{table}'::regclass AND attnum > 0 AND NOT attisdropped"
        ),
    };
    fx.target_query(&sql)
        .await
        .into_iter()
        .filter_map(|r| r[0].clone())
        .collect()
}

/// A first `run` leaves `dimlog_schema` with one row at the version this dimlog knows,
/// saying which dimlog applied it; later runs and `init` leave it as it is.
async fn a_fresh_target_is_at_the_current_version(mut fx: Fixture) {
    assert!(!fx.target_has_table("dimlog_schema").await);
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 0);
    let rows = schema_rows(&mut fx, "dimlog_schema").await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].0, CURRENT_VERSION);
    assert!(rows[0].2.starts_with("dimlog "), "{rows:?}");
    assert!(rows[0].2.contains(env!("CARGO_PKG_VERSION")), "{rows:?}");
    let columns = runs_columns(&mut fx, "dimlog_runs").await;
    for counter in ["revived", "future_rows"] {
        assert!(columns.iter().any(|c| c == counter), "{counter}: {columns:?}");
    }

    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T10:30:00Z' WHERE customer_id = 1")
        .await;
    cli_exits(&fx, &["run", "--upper", "2026-03-02T11:00:00Z"], 0);
    cli_exits(&fx, &["init"], 0);
    assert_eq!(schema_rows(&mut fx, "dimlog_schema").await, rows, "left as it was");
    assert_eq!(fx.count("dim_customer").await, 2);
}

/// At the current version, `init` still makes what is missing (as it always did): a
/// dimlog table or index dropped by hand is made again, and the next run records itself.
async fn init_makes_again_what_was_dropped_at_the_current_version(mut fx: Fixture) {
    loaded(&mut fx).await;
    let stamped = schema_rows(&mut fx, "dimlog_schema").await;
    fx.target_exec("DROP TABLE dimlog_runs").await;
    if fx.backend == Backend::Postgres {
        fx.target_exec("DROP TABLE dimlog_assigned").await;
    }
    cli_exits(&fx, &["init"], 0);
    assert!(fx.target_has_table("dimlog_runs").await, "dimlog_runs made again");
    if fx.backend == Backend::Postgres {
        assert!(
            fx.target_has_table("dimlog_assigned").await,
            "dimlog_assigned made again"
        );
    }
    let index = match fx.backend {
        Backend::Sqlite => {
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'dimlog_runs_dimension_idx'"
        }
        Backend::Postgres | Backend::Citus => {
            "SELECT count(*)::text FROM pg_indexes WHERE indexname = 'dimlog_runs_dimension_idx'"
        }
    };
    assert_eq!(
        fx.target_query(index).await[0][0].as_deref(),
        Some("1"),
        "its index too"
    );
    assert_eq!(
        schema_rows(&mut fx, "dimlog_schema").await,
        stamped,
        "the stamp is left as it was"
    );
    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T10:30:00Z' WHERE customer_id = 1")
        .await;
    cli_exits(&fx, &["run", "--upper", "2026-03-02T11:00:00Z"], 0);
    assert_eq!(fx.count("dimlog_runs").await, 1, "the run recorded itself");
}

/// Replaces the target's `dimlog_runs` with the one an older dimlog made (its DDL without
/// the `revived` and `future_rows` counters and without the index on (dimension, run_id)),
/// keeping its rows, and drops `dimlog_schema` (and, on PostgreSQL, `dimlog_assigned`,
/// which older dimlogs did not make): the target as an older dimlog left it.
async fn as_an_older_dimlog_left_it(fx: &mut Fixture) {
    let old_columns = "run_id, dimension, kind, role, low_watermark, high_watermark, upper_bound, rows_read, \
                       rows_after_dedupe, duplicates_dropped, versions, late_versions, corrections, tombstones, \
                       status, started_at, finished_at, error";
    let sql = match fx.backend {
        Backend::Sqlite => format!(
            "DROP TABLE dimlog_schema;
             ALTER TABLE dimlog_runs RENAME TO dimlog_runs_current;
             CREATE TABLE dimlog_runs (
                 run_id             INTEGER PRIMARY KEY AUTOINCREMENT,
                 dimension          TEXT    NOT NULL,
                 kind               TEXT    NOT NULL,
                 role               TEXT,
                 low_watermark      TEXT,
                 high_watermark     TEXT,
                 upper_bound        TEXT,
                 rows_read          INTEGER NOT NULL DEFAULT 0,
                 rows_after_dedupe  INTEGER NOT NULL DEFAULT 0,
                 duplicates_dropped INTEGER NOT NULL DEFAULT 0,
                 versions           INTEGER NOT NULL DEFAULT 0,
                 late_versions      INTEGER NOT NULL DEFAULT 0,
                 corrections        INTEGER NOT NULL DEFAULT 0,
                 tombstones         INTEGER NOT NULL DEFAULT 0,
                 status             TEXT    NOT NULL,
                 started_at         TEXT    NOT NULL,
                 finished_at        TEXT,
                 error              TEXT
             );
             INSERT INTO dimlog_runs ({old_columns}) SELECT {old_columns} FROM dimlog_runs_current;
             DROP TABLE dimlog_runs_current"
        ),
        Backend::Postgres | Backend::Citus => format!(
            "DROP TABLE dimlog_schema; DROP TABLE dimlog_assigned;
             ALTER TABLE dimlog_runs RENAME TO dimlog_runs_current;
             ALTER INDEX dimlog_runs_pkey RENAME TO dimlog_runs_current_pkey;
             CREATE TABLE dimlog_runs (
                 run_id             bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                 dimension          text        NOT NULL,
                 kind               text        NOT NULL,
                 role               text,
                 low_watermark      timestamptz,
                 high_watermark     timestamptz,
                 upper_bound        timestamptz,
                 rows_read          bigint NOT NULL DEFAULT 0,
                 rows_after_dedupe  bigint NOT NULL DEFAULT 0,
                 duplicates_dropped bigint NOT NULL DEFAULT 0,
                 versions           bigint NOT NULL DEFAULT 0,
                 late_versions      bigint NOT NULL DEFAULT 0,
                 corrections        bigint NOT NULL DEFAULT 0,
                 tombstones         bigint NOT NULL DEFAULT 0,
                 status             text        NOT NULL,
                 started_at         timestamptz NOT NULL,
                 finished_at        timestamptz,
                 error              text
             );
             INSERT INTO dimlog_runs ({old_columns}) SELECT {old_columns} FROM dimlog_runs_current;
             SELECT setval(pg_get_serial_sequence('dimlog_runs', 'run_id'), (SELECT max(run_id) FROM dimlog_runs));
             DROP TABLE dimlog_runs_current"
        ),
    };
    fx.target_exec(&sql).await;
}

/// The runs as `status` shows them, without the counters older dimlogs did not write.
async fn old_runs(fx: &mut Fixture) -> Vec<Vec<Option<String>>> {
    fx.target_query(
        "SELECT CAST(run_id AS TEXT), dimension, kind, CAST(high_watermark AS TEXT), CAST(rows_read AS TEXT),
                CAST(versions AS TEXT), status, CAST(started_at AS TEXT)
         FROM dimlog_runs ORDER BY run_id",
    )
    .await
}

/// A target made by an older dimlog: its dimension loaded twice, `dimlog_runs` without
/// the counters, no `dimlog_schema`. The next run brings dimlog's tables to the current
/// version (counters added, 0 on the old runs; the missing index made; `dimlog_schema`
/// stamped) in its own transaction, and loads on from the old watermark; the dimension,
/// the log and the old runs are kept.
async fn an_older_dimlogs_target_is_upgraded_by_the_next_run(mut fx: Fixture) {
    loaded(&mut fx).await;
    as_an_older_dimlog_left_it(&mut fx).await;
    assert!(!fx.target_has_table("dimlog_schema").await);
    assert!(!runs_columns(&mut fx, "dimlog_runs")
        .await
        .iter()
        .any(|c| c == "revived"));
    let runs_before = old_runs(&mut fx).await;
    assert_eq!(runs_before.len(), 2);
    let log_before = fx.log().await;
    let watermark_before = fx.watermark().await;

    fx.exec(&format!(
        "{INSERT} (3, 'cy@example.com', 'pro', 'IT', '2026-03-02T11:30:00Z')"
    ))
    .await;
    cli_exits(&fx, &["run", "--upper", "2026-03-02T12:00:00Z"], 0);

    let rows = schema_rows(&mut fx, "dimlog_schema").await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].0, CURRENT_VERSION);
    let columns = runs_columns(&mut fx, "dimlog_runs").await;
    for counter in ["revived", "future_rows"] {
        assert!(columns.iter().any(|c| c == counter), "{counter}: {columns:?}");
    }
    let counters = fx
        .target_query("SELECT CAST(revived AS TEXT), CAST(future_rows AS TEXT) FROM dimlog_runs ORDER BY run_id")
        .await;
    assert_eq!(counters.len(), 3);
    for row in &counters {
        assert_eq!(row, &[Some("0".to_string()), Some("0".to_string())]);
    }
    let runs_after = old_runs(&mut fx).await;
    assert_eq!(runs_after[..2], runs_before[..], "the old runs are kept");
    assert_eq!(runs_after[2][0].as_deref(), Some("3"), "run ids go on");
    assert_eq!(
        runs_after[2][5].as_deref(),
        Some("1"),
        "one new version: {runs_after:?}"
    );
    assert_ne!(fx.watermark().await, watermark_before);
    let log_after = fx.log().await;
    assert_eq!(
        log_after.records()[..log_before.records().len()],
        log_before.records()[..]
    );
    assert_eq!(fx.count("dim_customer").await, 4);
    fx.assert_dimension_derives_from_log().await;
    if fx.backend == Backend::Postgres {
        assert!(fx.target_has_table("dimlog_assigned").await, "made as init makes it");
    }
    let index = match fx.backend {
        Backend::Sqlite => "SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'dimlog_runs_dimension_idx'",
        Backend::Postgres | Backend::Citus => "SELECT to_regclass('dimlog_runs_dimension_idx')::text",
    };
    assert!(
        fx.target_query(index).await.first().is_some_and(|r| r[0].is_some()),
        "the index is made"
    );
    cli_exits(&fx, &["status"], 0);
    cli_exits(&fx, &["verify"], 0);
}

/// A target whose `dimlog_schema` says a version newer than this dimlog knows (a newer
/// dimlog upgraded it): `run`, `init`, `backfill`, `rebuild` and `assign-keys` exit 1,
/// naming the target, the version found and the one this dimlog knows, and saying to
/// upgrade dimlog; nothing is written. `status`, `history`, `lookup` and `verify` still
/// read it.
async fn a_newer_schema_is_refused_by_writers_and_read_by_readers(mut fx: Fixture) {
    loaded(&mut fx).await;
    let newer = CURRENT_VERSION + 1;
    fx.target_exec(&format!("UPDATE dimlog_schema SET version = {newer}"))
        .await;
    let facts = match fx.backend {
        Backend::Sqlite => {
            "CREATE TABLE facts (customer_id INTEGER, sold_at TEXT, customer_sk INTEGER);
                            INSERT INTO facts VALUES (1, '2026-03-02T09:30:00Z', NULL)"
        }
        Backend::Postgres | Backend::Citus => {
            "CREATE TABLE facts (customer_id bigint, sold_at timestamptz, customer_sk bigint);
                              INSERT INTO facts VALUES (1, '2026-03-02T09:30:00Z', NULL)"
        }
    };
    fx.target_exec(facts).await;
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T11:30:00Z' WHERE customer_id = 2")
        .await;
    let (dimension, log, state) = (fx.dimension().await, fx.log().await, fx.state().await);
    let runs = old_runs(&mut fx).await;
    let schema = schema_rows(&mut fx, "dimlog_schema").await;
    let target = match fx.backend {
        Backend::Sqlite => "warehouse.db".to_string(),
        Backend::Postgres | Backend::Citus => database(&fx),
    };

    for args in [
        &["run", "--upper", "2026-03-02T12:00:00Z"][..],
        &["run", "--upper", "2026-03-02T12:00:00Z", "--dry-run"],
        &["init"],
        &[
            "backfill",
            "--from",
            "2026-03-02T00:00:00Z",
            "--to",
            "2026-03-02T12:00:00Z",
        ],
        &["rebuild"],
        &[
            "assign-keys",
            "--facts",
            "facts",
            "--key-column",
            "customer_id",
            "--at-column",
            "sold_at",
            "--sk-column",
            "customer_sk",
        ],
    ] {
        let stderr = cli_exits(&fx, args, 1);
        for needle in [
            target.clone(),
            format!("schema version {newer}"),
            format!("up to {CURRENT_VERSION}"),
            "upgrade dimlog".to_string(),
        ] {
            assert!(stderr.contains(&needle), "{args:?}: {needle:?} not in: {stderr}");
        }
        let mut with_json = args.to_vec();
        with_json.push("--json");
        let out = fx.cli(&with_json);
        assert_eq!(out.status.code(), Some(1), "{args:?} --json: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(v["error"]["kind"], "database", "{v}");
    }
    assert_eq!(fx.dimension().await, dimension, "the dimension is as it was");
    assert_eq!(fx.log().await, log, "the log is as it was");
    assert_eq!(fx.state().await, state, "the watermarks are as they were");
    assert_eq!(old_runs(&mut fx).await, runs, "no run recorded");
    assert_eq!(schema_rows(&mut fx, "dimlog_schema").await, schema);
    let sk = fx.target_query("SELECT CAST(customer_sk AS TEXT) FROM facts").await;
    assert_eq!(sk, [[None]], "the facts are as they were");

    cli_exits(&fx, &["status"], 0);
    cli_exits(&fx, &["history", "--key", "1"], 0);
    cli_exits(&fx, &["verify"], 0);
    let out = fx.cli(&["lookup", "--key", "1", "--at", "2026-03-02T10:45:00Z"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "3");
}

// ----- PostgreSQL: an owner runs `init`, a loader that owns nothing loads -----

/// `fx`'s URL with `role` as its user (the test cluster trusts local roles).
fn url_as(fx: &Fixture, role: &str) -> String {
    let mut url = url::Url::parse(&fx.target_url).expect("url");
    url.set_username(role).expect("user");
    url.set_password(None).expect("password");
    url.into()
}

/// Points both the source and the target of the config at `url`.
fn connect_as(fx: &mut Fixture, url: &str) {
    let text = fx.config().to_string();
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with("url = ") {
                format!("url = \"{url}\"")
            } else {
                l.to_string()
            }
        })
        .collect();
    fx.set_config(lines.join("\n") + "\n");
}

/// The loader's GRANTs of docs/recipes/postgres-to-postgres.md, as before dimlog_schema.
fn documented_grants(loader: &str) -> String {
    format!(
        "GRANT USAGE ON SCHEMA dimlog, marts TO \"{loader}\";
         GRANT SELECT ON public.src_customers TO \"{loader}\";
         GRANT SELECT, INSERT ON dimlog.customer_versions TO \"{loader}\";
         GRANT SELECT, INSERT, UPDATE, DELETE ON marts.dim_customer TO \"{loader}\";
         GRANT SELECT, INSERT, UPDATE ON dimlog.dimlog_state, dimlog.dimlog_runs TO \"{loader}\";
         GRANT SELECT, UPDATE ON dimlog.dimlog_dimensions TO \"{loader}\";
         GRANT SELECT, INSERT, UPDATE ON dimlog.dimlog_assigned TO \"{loader}\""
    )
}

/// An owner (owning the schemas `dimlog` and `marts`) that has run `init`, and a loader
/// that owns nothing, with the recipe's GRANTs; the config connects as the loader.
/// Returns (owner URL, loader URL, loader).
async fn owner_and_loader(fx: &mut Fixture) -> (String, String, String) {
    let db = database(fx);
    let (owner, loader) = (format!("{db}_owner"), format!("{db}_loader"));
    fx.target_exec(&format!(
        "CREATE ROLE \"{owner}\" LOGIN; CREATE ROLE \"{loader}\" LOGIN;
         CREATE SCHEMA dimlog AUTHORIZATION \"{owner}\"; CREATE SCHEMA marts AUTHORIZATION \"{owner}\";
         GRANT SELECT ON src_customers TO \"{owner}\""
    ))
    .await;
    fx.set_setting("log", "\"dimlog.customer_versions\"");
    fx.set_setting("dimension", "\"marts.dim_customer\"");
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let (owner_url, loader_url) = (url_as(fx, &owner), url_as(fx, &loader));
    connect_as(fx, &owner_url);
    cli_exits(fx, &["init"], 0);
    fx.target_exec(&documented_grants(&loader)).await;
    connect_as(fx, &loader_url);
    (owner_url, loader_url, loader)
}

/// Adds a change to the source at `at` (key 1's tier).
async fn change(fx: &mut Fixture, tier: &str, at: &str) {
    fx.exec(&format!(
        "UPDATE src_customers SET tier = '{tier}', updated_at = '{at}' WHERE customer_id = 1"
    ))
    .await;
}

/// The owner's `init` makes `dimlog_schema` (the owner's) at the current version, readable
/// by every role that may use the schema; the loader, with the recipe's GRANTs alone (none
/// on `dimlog_schema`), loads, and owns nothing. If `SELECT` on it is revoked from
/// `PUBLIC`, the loader is told the GRANT to run, before anything is written.
#[tokio::test]
async fn a_loader_keeps_loading_when_the_schema_is_current() {
    let mut fx = Fixture::postgres().await;
    let (_, _, loader) = owner_and_loader(&mut fx).await;
    let rows = schema_rows(&mut fx, "dimlog.dimlog_schema").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0, CURRENT_VERSION);
    let owner = fx
        .target_query(
            "SELECT pg_get_userbyid(relowner)::text FROM pg_class WHERE oid = 'dimlog.dimlog_schema'::regclass",
        )
        .await;
    assert_eq!(
        owner[0][0].as_deref(),
        Some(format!("{}_owner", database(&fx)).as_str())
    );

    cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 0);
    change(&mut fx, "pro", "2026-03-02T10:30:00Z").await;
    cli_exits(&fx, &["run", "--upper", "2026-03-02T11:00:00Z"], 0);
    cli_exits(
        &fx,
        &[
            "backfill",
            "--from",
            "2026-03-02T00:00:00Z",
            "--to",
            "2026-03-02T11:00:00Z",
        ],
        0,
    );
    cli_exits(&fx, &["rebuild"], 0);
    cli_exits(&fx, &["status"], 0);
    cli_exits(&fx, &["verify"], 0);
    assert_eq!(fx.count("marts.dim_customer").await, 3);
    assert_eq!(
        schema_rows(&mut fx, "dimlog.dimlog_schema").await,
        rows,
        "left as it was"
    );
    let owned = fx
        .target_query(&format!(
            "SELECT count(*)::text FROM pg_class WHERE relowner = (SELECT oid FROM pg_roles WHERE rolname = '{loader}')"
        ))
        .await;
    assert_eq!(owned[0][0].as_deref(), Some("0"), "the loader owns nothing");

    fx.target_exec("REVOKE SELECT ON dimlog.dimlog_schema FROM PUBLIC")
        .await;
    change(&mut fx, "gold", "2026-03-02T11:30:00Z").await;
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T12:00:00Z"], 1);
    assert!(
        stderr.contains(&format!("GRANT SELECT ON dimlog.dimlog_schema TO {loader}")),
        "{stderr}"
    );
    assert_eq!(fx.count("dimlog.dimlog_runs").await, 3, "nothing written");
    fx.target_exec(&format!("GRANT SELECT ON dimlog.dimlog_schema TO \"{loader}\""))
        .await;
    cli_exits(&fx, &["run", "--upper", "2026-03-02T12:00:00Z"], 0);
}

/// A target an older dimlog made (no `dimlog_schema`): while its tables are as the
/// baseline has them, the loader keeps loading (it may not create `dimlog_schema`; the
/// target stays unstamped), and the owner's next `init` stamps it. When they need DDL (the
/// counters missing), the loader is told to have the owner run `dimlog init`, and nothing
/// is written; after the owner's `init` it loads on.
#[tokio::test]
async fn a_loader_on_an_older_dimlogs_target() {
    let mut fx = Fixture::postgres().await;
    let (owner_url, loader_url, _) = owner_and_loader(&mut fx).await;
    cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 0);
    fx.target_exec("DROP TABLE dimlog.dimlog_schema").await;
    change(&mut fx, "pro", "2026-03-02T10:30:00Z").await;
    cli_exits(&fx, &["run", "--upper", "2026-03-02T11:00:00Z"], 0);
    assert!(
        !fx.target_has_table("dimlog.dimlog_schema").await,
        "the loader creates nothing"
    );
    connect_as(&mut fx, &owner_url);
    cli_exits(&fx, &["init"], 0);
    assert_eq!(schema_rows(&mut fx, "dimlog.dimlog_schema").await[0].0, CURRENT_VERSION);
    connect_as(&mut fx, &loader_url);
    change(&mut fx, "gold", "2026-03-02T11:30:00Z").await;
    cli_exits(&fx, &["run", "--upper", "2026-03-02T12:00:00Z"], 0);

    // Older still: dimlog_runs without the counters.
    fx.target_exec(
        "DROP TABLE dimlog.dimlog_schema; ALTER TABLE dimlog.dimlog_runs DROP COLUMN revived, DROP COLUMN future_rows",
    )
    .await;
    change(&mut fx, "free", "2026-03-02T12:30:00Z").await;
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T13:00:00Z"], 1);
    for needle in [
        "dimlog init",
        "owner",
        "older dimlog",
        &format!("version {CURRENT_VERSION}"),
    ] {
        assert!(stderr.contains(needle), "{needle:?} not in: {stderr}");
    }
    assert!(!stderr.contains("must be owner"), "{stderr}");
    assert_eq!(fx.count("dimlog.dimlog_runs").await, 3, "nothing written");
    assert!(!fx.target_has_table("dimlog.dimlog_schema").await);
    connect_as(&mut fx, &owner_url);
    cli_exits(&fx, &["init"], 0);
    connect_as(&mut fx, &loader_url);
    cli_exits(&fx, &["run", "--upper", "2026-03-02T13:00:00Z"], 0);
    assert_eq!(fx.count("dimlog.dimlog_runs").await, 4);
    assert_eq!(fx.count("marts.dim_customer").await, 5);
}

/// `dimlog_schema` at a version older than this dimlog's: the loader, which may not
/// upgrade dimlog's tables, is told which versions and to have the owner run `dimlog init`
/// once; nothing is written. The owner's `init` upgrades them and the loader loads on.
#[tokio::test]
async fn an_older_version_sends_the_loader_to_the_owner() {
    let mut fx = Fixture::postgres().await;
    let (owner_url, loader_url, _) = owner_and_loader(&mut fx).await;
    let older = CURRENT_VERSION - 1;
    fx.target_exec(&format!("UPDATE dimlog.dimlog_schema SET version = {older}"))
        .await;
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 1);
    for needle in [
        "dimlog init".to_string(),
        "Have the tables' owner run".to_string(),
        format!("schema version {older}"),
        format!("version {CURRENT_VERSION}"),
    ] {
        assert!(stderr.contains(&needle), "{needle:?} not in: {stderr}");
    }
    assert_eq!(fx.count("dimlog.dimlog_runs").await, 0, "nothing written");
    assert_eq!(fx.count("marts.dim_customer").await, 0);
    connect_as(&mut fx, &owner_url);
    cli_exits(&fx, &["init"], 0);
    assert_eq!(schema_rows(&mut fx, "dimlog.dimlog_schema").await[0].0, CURRENT_VERSION);
    connect_as(&mut fx, &loader_url);
    cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 0);
    assert_eq!(fx.count("marts.dim_customer").await, 2);
}

/// A migration that fails part-way (here an event trigger refuses the ALTER TABLE that
/// adds the counters, after `dimlog_assigned` was created) commits nothing: no
/// `dimlog_assigned`, no `dimlog_schema`, no counters, no run; once it can, the next run
/// upgrades and loads.
#[tokio::test]
async fn a_failed_migration_commits_nothing() {
    let mut fx = Fixture::postgres().await;
    loaded(&mut fx).await;
    as_an_older_dimlog_left_it(&mut fx).await;
    fx.target_exec(
        "CREATE FUNCTION dimlog_test_no_alter() RETURNS event_trigger LANGUAGE plpgsql AS
           $$ BEGIN RAISE EXCEPTION 'no ALTER TABLE today'; END $$;
         CREATE EVENT TRIGGER dimlog_test_no_alter ON ddl_command_end WHEN TAG IN ('ALTER TABLE')
           EXECUTE FUNCTION dimlog_test_no_alter()",
    )
    .await;
    let runs = old_runs(&mut fx).await;
    fx.exec(&format!(
        "{INSERT} (3, 'cy@example.com', 'pro', 'IT', '2026-03-02T11:30:00Z')"
    ))
    .await;
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T12:00:00Z"], 1);
    assert!(stderr.contains("no ALTER TABLE today"), "{stderr}");
    assert!(!fx.target_has_table("dimlog_schema").await);
    assert!(!fx.target_has_table("dimlog_assigned").await);
    assert!(!runs_columns(&mut fx, "dimlog_runs")
        .await
        .iter()
        .any(|c| c == "revived"));
    assert_eq!(old_runs(&mut fx).await, runs, "no run recorded");
    assert_eq!(fx.count("dim_customer").await, 3);

    fx.target_exec("DROP EVENT TRIGGER dimlog_test_no_alter").await;
    cli_exits(&fx, &["run", "--upper", "2026-03-02T12:00:00Z"], 0);
    assert_eq!(schema_rows(&mut fx, "dimlog_schema").await[0].0, CURRENT_VERSION);
    assert_eq!(fx.count("dim_customer").await, 4);
}
