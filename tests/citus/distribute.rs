//! `dimlog distribute` (issue 16): a dimension whose tables are local on a Citus
//! coordinator (loaded there before dimlog distributed tables, or before Citus) gets them
//! distributed and colocated by the key in place, and loads on as a distributed one;
//! what Citus or dimlog cannot distribute is refused, naming it, and nothing changes.

use crate::cli::{assert_code, json, text};
use crate::support::fixture::Fixture;

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";

/// (table, distribution column, colocation group) of the log and the dimension, where
/// distributed.
async fn distributed(fx: &mut Fixture) -> Vec<(String, String, String)> {
    super::distributed(fx)
        .await
        .into_iter()
        .filter(|(t, _, _)| t == "customer_versions" || t == "dim_customer")
        .collect()
}

/// Whether a load made its stage a distributed working table (it loaded as a Citus
/// dimension).
async fn stage_distributed(fx: &mut Fixture) -> bool {
    let n = fx
        .target_query("SELECT count(*)::text FROM pg_dist_partition WHERE logicalrelid::text LIKE 'dimlog\\_stage\\_%'")
        .await;
    n[0][0].as_deref() == Some("1")
}

/// Distributes `tables` of a local dimension by hand, as `distribute` would: primary
/// keys with the key, then `create_distributed_table`, the dimension colocated.
async fn distribute_by_hand(fx: &mut Fixture, tables: &[&str]) {
    for table in tables {
        let (pk, column, colocate) = match *table {
            "customer_versions" => ("customer_versions_pkey", "log_id", ""),
            _ => (
                "dim_customer_pkey",
                "customer_sk",
                ", colocate_with => 'customer_versions'",
            ),
        };
        fx.target_exec(&format!("ALTER TABLE {table} DROP CONSTRAINT {pk}"))
            .await;
        fx.target_exec(&format!(
            "ALTER TABLE {table} ADD CONSTRAINT {pk} PRIMARY KEY ({column}, customer_id)"
        ))
        .await;
        fx.target_exec(&format!(
            "SELECT create_distributed_table('{table}', 'customer_id'{colocate})"
        ))
        .await;
    }
}

/// A loaded dimension whose tables are local, as dimlog makes them on PostgreSQL:
/// loaded on Citus, then its working tables dropped and the two tables undistributed,
/// with PostgreSQL's primary keys.
async fn local_dimension() -> Fixture {
    let mut fx = Fixture::citus().await;
    fx.exec(&format!(
        "{INSERT} (1, 'a@x', 'free', 'DE', '2026-03-01T09:00:00Z'), (2, 'b@x', 'pro', 'FR', '2026-03-01T09:00:00Z'), \
         (3, 'c@x', 'free', 'NL', '2026-03-01T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-01T10:00:00Z").await;
    let working = fx
        .target_query("SELECT relname::text FROM pg_class WHERE relname LIKE 'dimlog\\_%\\_%' AND relkind = 'r' AND relname ~ '_[0-9a-f]{8}$'")
        .await;
    for row in working {
        fx.target_exec(&format!("DROP TABLE {}", row[0].as_deref().unwrap()))
            .await;
    }
    fx.target_exec("SELECT undistribute_table('dim_customer')").await;
    fx.target_exec("SELECT undistribute_table('customer_versions')").await;
    for (table, pk, column) in [
        ("customer_versions", "customer_versions_pkey", "log_id"),
        ("dim_customer", "dim_customer_pkey", "customer_sk"),
    ] {
        let name = fx
            .target_query(&format!(
                "SELECT conname::text FROM pg_constraint WHERE conrelid = '{table}'::regclass AND contype = 'p'"
            ))
            .await[0][0]
            .clone()
            .unwrap();
        fx.target_exec(&format!("ALTER TABLE {table} DROP CONSTRAINT {name}"))
            .await;
        fx.target_exec(&format!(
            "ALTER TABLE {table} ADD CONSTRAINT {pk} PRIMARY KEY ({column})"
        ))
        .await;
    }
    assert!(distributed(&mut fx).await.is_empty());
    fx
}

/// A local dimension on a coordinator loads as on PostgreSQL; `distribute` makes its two
/// tables distributed by the key and colocated, keeps every row, and says so; a second
/// `distribute` has nothing to do; the next loads are Citus ones (working tables
/// distributed) and give the dimension a local one would have.
#[tokio::test]
async fn a_local_dimension_is_distributed_in_place() {
    let mut fx = local_dimension().await;
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-01T11:00:00Z' WHERE customer_id = 2")
        .await;
    assert_eq!(fx.run("2026-03-01T12:00:00Z").await.counts.versions, 1);
    let (log, dim) = (fx.log().await, fx.dimension().await);

    let out = fx.cli(&["distribute", "--json", "-v"]);
    assert_code(&out, 0, "distribute");
    // Said once at most, though the layout is looked at again under the lock.
    let said = text(&out.stderr).matches("stays in local tables").count();
    assert!(said <= 1, "{}", text(&out.stderr));
    let v = json(&out, "distribute --json");
    assert_eq!(
        (&v["converted"], &v["distribution_column"]),
        (&true.into(), &"customer_id".into()),
        "{v}"
    );
    let tables = distributed(&mut fx).await;
    assert_eq!(tables.len(), 2, "{tables:?}");
    assert!(
        tables.iter().all(|(_, column, _)| column == "customer_id"),
        "{tables:?}"
    );
    assert_eq!(tables[0].2, tables[1].2, "not colocated: {tables:?}");
    assert_eq!(fx.log().await, log, "the log changed");
    assert_eq!(fx.dimension().await, dim, "the dimension changed");

    let out = fx.cli(&["distribute"]);
    assert_code(&out, 0, "distribute again");
    assert!(
        text(&out.stdout).contains("distributed already"),
        "{}",
        text(&out.stdout)
    );

    fx.exec("UPDATE src_customers SET tier = 'silver', updated_at = '2026-03-01T10:50:00Z' WHERE customer_id = 2")
        .await;
    fx.exec(&format!("{INSERT} (4, 'd@x', 'free', 'DE', '2026-03-01T12:30:00Z')"))
        .await;
    let report = fx.run("2026-03-01T13:00:00Z").await;
    assert_eq!(
        (report.counts.versions, report.counts.late_versions),
        (2, 1),
        "{report:?}"
    );
    assert!(
        stage_distributed(&mut fx).await,
        "the load did not use distributed working tables"
    );
    fx.assert_dimension_derives_from_log().await;
    assert_eq!(fx.count("dim_customer").await, 6);
}

/// What stands in the way is refused with exit 2, naming it, and nothing changes: a
/// foreign key of a fact table to the dimension, a unique index without the key, a
/// target that is not a Citus coordinator.
#[tokio::test]
async fn what_cannot_be_distributed_is_refused_and_nothing_changes() {
    let mut fx = local_dimension().await;
    fx.target_exec(
        "CREATE TABLE orders_fact (order_id bigint, customer_sk bigint REFERENCES dim_customer (customer_sk))",
    )
    .await;
    let out = fx.cli(&["distribute"]);
    assert_code(&out, 2, "distribute with a foreign key");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("orders_fact_customer_sk_fkey") && stderr.contains("orders_fact"),
        "{stderr}"
    );
    assert!(distributed(&mut fx).await.is_empty());
    fx.target_exec("DROP TABLE orders_fact").await;

    fx.target_exec("CREATE UNIQUE INDEX dim_email ON dim_customer (email, valid_from)")
        .await;
    let out = fx.cli(&["distribute", "--json"]);
    assert_code(&out, 2, "distribute with a unique index");
    let v = json(&out, "distribute --json refused");
    assert_eq!(v["error"]["kind"], "not-distributable", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap_or_default().contains("dim_email"),
        "{v}"
    );
    assert!(distributed(&mut fx).await.is_empty());
    let pk = fx
        .target_query("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'customer_versions'::regclass AND contype = 'p'")
        .await;
    assert_eq!(
        pk[0][0].as_deref(),
        Some("PRIMARY KEY (log_id)"),
        "the refusal changed the log's primary key"
    );
    fx.target_exec("DROP INDEX dim_email").await;

    let out = fx.cli(&["distribute"]);
    assert_code(&out, 0, "distribute once nothing stands in the way");
}

/// A PostgreSQL target is no Citus coordinator: refused, exit 2, naming the target.
#[tokio::test]
async fn a_postgres_target_is_refused() {
    let mut fx = Fixture::postgres().await;
    fx.exec(&format!("{INSERT} (1, 'a@x', 'free', 'DE', '2026-03-01T09:00:00Z')"))
        .await;
    fx.run("2026-03-01T10:00:00Z").await;
    let out = fx.cli(&["distribute"]);
    assert_code(&out, 2, "distribute on PostgreSQL");
    assert!(
        text(&out.stderr).contains("not a Citus coordinator"),
        "{}",
        text(&out.stderr)
    );
}

/// A run that waited for the dimension's lock looks at the tables again once it has it:
/// distributed meanwhile (by whoever held the lock, as `dimlog distribute` does), it
/// loads them as distributed tables (it failed with Citus's refusal of a MERGE from a
/// local table, found by an outside trial).
#[tokio::test]
async fn a_run_that_waited_for_the_lock_loads_tables_distributed_meanwhile() {
    use dimlog::pipeline::{self, RunOptions, Session};
    use std::time::Duration;
    let mut fx = local_dimension().await;
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-01T11:00:00Z' WHERE customer_id = 2")
        .await;
    let upper = "2026-03-01T12:00:00Z";
    // Holds the lock, before its transaction (no table locks).
    let held = crate::reliability::cli::hold(&fx.config_path(), &["run", "--upper", upper], "after_extract").await;
    let plan = fx.plan();
    let waiting = tokio::spawn(async move {
        let mut session = Session::open(&plan).await?;
        let opts = RunOptions {
            upper: Some(crate::support::fixture::ts(upper)),
            ..RunOptions::incremental()
        };
        pipeline::run(&mut session, &plan, &opts, &pipeline::Quiet).await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "the run did not wait for the lock");
    distribute_by_hand(&mut fx, &["customer_versions", "dim_customer"]).await;
    assert!(!held.kill().success());
    let report = tokio::time::timeout(Duration::from_secs(60), waiting)
        .await
        .expect("the run still waits")
        .expect("task")
        .unwrap_or_else(|e| panic!("the waiting run failed: {e}"));
    assert_eq!(report.counts.versions, 1, "{report:?}");
    assert!(
        stage_distributed(&mut fx).await,
        "the run did not load as a distributed dimension"
    );
    fx.assert_dimension_derives_from_log().await;
}

/// One of the two tables distributed and the other not: every writing command refuses
/// it, exit 2, naming both and the way out; nothing is written.
#[tokio::test]
async fn a_dimension_half_distributed_is_refused_by_every_writing_command() {
    let mut fx = local_dimension().await;
    distribute_by_hand(&mut fx, &["customer_versions"]).await;
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-01T11:00:00Z' WHERE customer_id = 2")
        .await;
    let log = fx.log().await;
    for args in [
        vec!["run", "--upper", "2026-03-01T12:00:00Z"],
        vec!["rebuild"],
        vec!["distribute"],
    ] {
        let out = fx.cli(&args);
        assert_code(&out, 2, &args.join(" "));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("customer_versions")
                && stderr.contains("dim_customer")
                && stderr.contains("undistribute_table"),
            "{args:?}: {stderr}"
        );
    }
    assert_eq!(fx.log().await, log);
}

/// The log and the dimension not laid out alike (either half distributed alone, or both
/// distributed but not colocated), as every command sees it: those that write and
/// `verify` refuse it (exit 2) and `doctor` fails its tables check, naming both tables
/// and the way out (in `--json` as the hint), instead of Citus's own errors or "nothing
/// to do"; `status`, `history` and `lookup` still answer, and warn about it. The way out
/// works.
#[tokio::test]
async fn a_dimension_laid_out_unlike_is_named_by_every_command() {
    for layout in ["log alone", "dimension alone", "not colocated"] {
        let mut fx = if layout == "log alone" {
            let mut fx = local_dimension().await;
            distribute_by_hand(&mut fx, &["customer_versions"]).await;
            fx
        } else {
            let mut fx = Fixture::citus().await;
            super::load_two_customers(&mut fx).await;
            if layout == "dimension alone" {
                fx.target_exec("SELECT undistribute_table('customer_versions')").await;
            } else {
                fx.target_exec("SELECT undistribute_table('dim_customer')").await;
                fx.target_exec(
                    "SELECT create_distributed_table('dim_customer', 'customer_id', colocate_with => 'none', shard_count => 3)",
                )
                .await;
            }
            fx
        };
        let names_it = |shown: &str| {
            shown.contains("customer_versions")
                && shown.contains("dim_customer")
                && shown.contains("undistribute_table")
        };
        let log = fx.log().await;
        for (args, code) in [
            (vec!["verify"], 2),
            (vec!["doctor"], 1),
            (vec!["run", "--upper", "2026-03-01T12:00:00Z"], 2),
            (vec!["rebuild"], 2),
            (vec!["distribute"], 2),
        ] {
            let out = fx.cli(&args);
            assert_code(&out, code, &args.join(" "));
            let shown = format!("{}{}", text(&out.stdout), text(&out.stderr));
            assert!(names_it(&shown), "{layout}, {args:?}: {shown}");
        }
        let out = fx.cli(&["verify", "--json"]);
        let error = json(&out, "verify --json")["error"].clone();
        assert!(
            error["hint"].as_str().is_some_and(|h| h.contains("undistribute_table"))
                && error["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("customer_versions") && m.contains("dim_customer"))
                && error["kind"] == "not-distributable",
            "{layout}: {error}"
        );
        for args in [
            vec!["status"],
            vec!["history", "--key", "customer_id=2"],
            vec!["lookup", "--key", "customer_id=2", "--at", "2026-03-01T09:30:00Z"],
        ] {
            let out = fx.cli(&args);
            assert_code(&out, 0, &args.join(" "));
            let stderr = text(&out.stderr);
            assert!(names_it(&stderr), "{layout}, {args:?} warns: {stderr}");
        }
        assert_eq!(fx.log().await, log, "{layout}: something was written");
        if layout == "not colocated" {
            fx.target_exec("SELECT undistribute_table('dim_customer')").await;
            fx.target_exec("SELECT undistribute_table('customer_versions')").await;
            let out = fx.cli(&["distribute"]);
            assert_code(&out, 0, "distribute");
            let out = fx.cli(&["verify"]);
            assert_code(&out, 0, "verify");
        }
    }
}

/// A dimension keyed by (customer_id, email) in local tables, as dimlog makes them on
/// PostgreSQL (no key hash, PostgreSQL's primary keys and key indexes).
async fn local_composite_dimension() -> Fixture {
    let mut fx = Fixture::citus().await;
    fx.edit_config(r#"key = ["customer_id"]"#, r#"key = ["customer_id", "email"]"#);
    fx.set_setting("columns", r#"["tier", "country"]"#);
    fx.exec("ALTER TABLE src_customers DROP CONSTRAINT src_customers_pkey, ADD PRIMARY KEY (customer_id, email)")
        .await;
    fx.exec(&format!(
        "{INSERT} (1, 'a@x', 'free', 'DE', '2026-03-01T09:00:00Z'), (1, 'b@x', 'pro', 'FR', '2026-03-01T09:00:00Z'), \
         (2, 'a@x', 'free', 'NL', '2026-03-01T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-01T10:00:00Z").await;
    let working = fx
        .target_query("SELECT relname::text FROM pg_class WHERE relname LIKE 'dimlog\\_%\\_%' AND relkind = 'r' AND relname ~ '_[0-9a-f]{8}$'")
        .await;
    for row in working {
        fx.target_exec(&format!("DROP TABLE {}", row[0].as_deref().unwrap()))
            .await;
    }
    fx.target_exec("SELECT undistribute_table('dim_customer')").await;
    fx.target_exec("SELECT undistribute_table('customer_versions')").await;
    // Dropping the hash drops the primary keys and key indexes that hold it.
    for sql in [
        "ALTER TABLE customer_versions DROP COLUMN dimlog_key_hash",
        "ALTER TABLE dim_customer DROP COLUMN dimlog_key_hash",
        "ALTER TABLE customer_versions ADD CONSTRAINT customer_versions_pkey PRIMARY KEY (log_id)",
        "ALTER TABLE dim_customer ADD CONSTRAINT dim_customer_pkey PRIMARY KEY (customer_sk)",
        "CREATE INDEX customer_versions_key_idx ON customer_versions (customer_id, email, valid_from, log_id)",
        "CREATE UNIQUE INDEX dim_customer_key_idx ON dim_customer (customer_id, email, valid_from)",
    ] {
        fx.target_exec(sql).await;
    }
    assert!(distributed(&mut fx).await.is_empty());
    fx
}

/// A local dimension keyed by several columns loads as on PostgreSQL; `distribute` gives
/// both tables the key's hash, computed from each row's key, and distributes them by it,
/// colocated, with dimlog's key indexes made again with it; every row stays, and the
/// next loads are Citus ones.
#[tokio::test]
async fn a_local_dimension_with_a_composite_key_is_distributed_by_its_hash() {
    let mut fx = local_composite_dimension().await;
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-01T11:00:00Z' WHERE customer_id = 2")
        .await;
    assert_eq!(fx.run("2026-03-01T12:00:00Z").await.counts.versions, 1);
    assert!(
        !stage_distributed(&mut fx).await,
        "a local dimension used distributed working tables"
    );
    let (log, dim) = (fx.log().await, fx.dimension().await);
    // Commands that only read it read its local tables (which have no key hash).
    for args in [
        &["history", "--key", "customer_id=2", "--key", "email=a@x"][..],
        &["verify"],
        &[
            "lookup",
            "--key",
            "customer_id=2",
            "--key",
            "email=a@x",
            "--at",
            "2026-03-01T11:30:00Z",
        ],
    ] {
        let out = fx.cli(args);
        assert_code(&out, 0, args[0]);
    }

    let out = fx.cli(&["distribute", "--json"]);
    assert_code(&out, 0, "distribute");
    let v = json(&out, "distribute --json");
    assert_eq!(
        (&v["converted"], &v["distribution_column"]),
        (&true.into(), &"dimlog_key_hash".into()),
        "{v}"
    );
    let tables = distributed(&mut fx).await;
    assert_eq!(tables.len(), 2, "{tables:?}");
    assert!(
        tables.iter().all(|(_, column, _)| column == "dimlog_key_hash"),
        "{tables:?}"
    );
    assert_eq!(tables[0].2, tables[1].2, "not colocated: {tables:?}");
    assert_eq!(fx.log().await, log, "the log changed");
    assert_eq!(fx.dimension().await, dim, "the dimension changed");
    super::assert_every_row_has_its_keys_hash(&mut fx).await;
    let indexes = fx
        .target_query(
            "SELECT indexrelid::regclass::text FROM pg_index \
             WHERE indrelid IN ('customer_versions'::regclass, 'dim_customer'::regclass) AND NOT indisprimary ORDER BY 1",
        )
        .await;
    let indexes: Vec<String> = indexes.into_iter().map(|r| r[0].clone().unwrap()).collect();
    for wanted in ["customer_versions_key_idx", "dim_customer_key_idx"] {
        assert!(indexes.iter().any(|i| i == wanted), "no {wanted}: {indexes:?}");
    }

    fx.exec("UPDATE src_customers SET tier = 'silver', updated_at = '2026-03-01T10:50:00Z' WHERE customer_id = 2")
        .await;
    fx.exec(&format!("{INSERT} (1, 'd@x', 'free', 'DE', '2026-03-01T12:30:00Z')"))
        .await;
    let report = fx.run("2026-03-01T13:00:00Z").await;
    assert_eq!(
        (report.counts.versions, report.counts.late_versions),
        (2, 1),
        "{report:?}"
    );
    assert!(
        stage_distributed(&mut fx).await,
        "the load did not use distributed working tables"
    );
    fx.assert_dimension_derives_from_log().await;
    assert_eq!(fx.count("dim_customer").await, 6);
    let out = fx.cli(&["verify"]);
    assert_code(&out, 0, "verify");
}
