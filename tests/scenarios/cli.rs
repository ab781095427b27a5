//! End to end through the `dimlog` binary: config errors exit 2 naming the setting and
//! write nothing; `run --json` prints the counts that `dimlog_runs` records.

use std::process::{Command, Output};

use crate::support::fixture::{on_every_engine, Fixture};

on_every_engine!(
    bad_configs_exit_2_naming_the_setting,
    json_run_output_matches_dimlog_runs
);

const INJECTION: &str = r#"'x"; DROP TABLE y; --'"#;

fn dimlog(fx: &Fixture, config: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dimlog"))
        .arg("--config")
        .arg(config)
        .args(args)
        .current_dir(fx.dir())
        .env_remove("DIMLOG_SOURCE_URL")
        .env_remove("DIMLOG_TARGET_URL")
        .env_remove("DIMLOG_FAILPOINT")
        .env_remove("RUST_LOG")
        .output()
        .expect("run the dimlog binary")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

async fn bad_configs_exit_2_naming_the_setting(mut fx: Fixture) {
    fx.exec("CREATE TABLE y (id integer); INSERT INTO y VALUES (1)").await;
    fx.target_exec("CREATE TABLE IF NOT EXISTS y (id integer); DELETE FROM y; INSERT INTO y VALUES (1)")
        .await;
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z')",
    )
    .await;
    let good = fx.config().to_string();
    let source_url = fx.source_url.clone();
    let target_url = fx.target_url.clone();
    // (the line to replace, its replacement, the setting the message must name)
    let mut cases: Vec<(String, String, &str)> = vec![
        (
            r#"columns = ["email", "tier", "country"]"#.into(),
            r#"columns = ["email", "tier", "nope"]"#.into(),
            "track.columns",
        ),
        (
            r#"key = ["customer_id"]"#.into(),
            r#"key = ["nope"]"#.into(),
            "source.key",
        ),
        (
            r#"updated_at = "updated_at""#.into(),
            r#"updated_at = "nope""#.into(),
            "source.updated_at",
        ),
        (
            r#"deleted_flag = "is_deleted""#.into(),
            r#"deleted_flag = "nope""#.into(),
            "source.deleted_flag",
        ),
        (
            r#"table = "src_customers""#.into(),
            r#"table = "no_such_table""#.into(),
            "source.table",
        ),
        (
            r#"columns = ["email", "tier", "country"]"#.into(),
            r#"columns = ["customer_id", "email", "tier"]"#.into(),
            "track.columns",
        ),
        (
            r#"lookback = "15m""#.into(),
            r#"lookback = "fifteen""#.into(),
            "source.lookback",
        ),
        (
            r#"safety_lag = "0s""#.into(),
            r#"safety_lag = "-5s""#.into(),
            "source.safety_lag",
        ),
        (
            format!(r#"url = "{source_url}""#),
            r#"url = "mysql://me:hunter2@db.example.com/shop""#.into(),
            "source.url",
        ),
        (
            format!("[target]\nurl = \"{target_url}\""),
            "[target]\nurl = \"warehouse.db\"".into(),
            "target.url",
        ),
        (
            r#"table = "src_customers""#.into(),
            format!("table = {INJECTION}"),
            "source.table",
        ),
        (
            r#"key = ["customer_id"]"#.into(),
            format!("key = [{INJECTION}]"),
            "source.key",
        ),
        (
            r#"updated_at = "updated_at""#.into(),
            format!("updated_at = {INJECTION}"),
            "source.updated_at",
        ),
        (
            r#"log = "customer_versions""#.into(),
            format!("log = {INJECTION}"),
            "target.log",
        ),
        (
            r#"dimension = "dim_customer""#.into(),
            format!("dimension = {INJECTION}"),
            "target.dimension",
        ),
        (
            r#"surrogate_key = "customer_sk""#.into(),
            format!("surrogate_key = {INJECTION}"),
            "target.surrogate_key",
        ),
        (
            r#"columns = ["email", "tier", "country"]"#.into(),
            format!(r#"columns = ["email", {INJECTION}]"#),
            "track.columns",
        ),
        // A schema the target does not have (an outside trial got a database error).
        (
            r#"log = "customer_versions""#.into(),
            r#"log = "no_such_schema.customer_versions""#.into(),
            "target.log",
        ),
        (
            r#"dimension = "dim_customer""#.into(),
            r#"dimension = "no_such_schema.dim_customer""#.into(),
            "target.dimension",
        ),
    ];
    // (SQLite has no state_schema setting: it refuses it, naming it, too.)
    cases.push((
        r#"surrogate_key = "customer_sk""#.into(),
        "surrogate_key = \"customer_sk\"\nstate_schema = \"no_such_schema\"".into(),
        "target.state_schema",
    ));
    for (i, (from, to, setting)) in cases.iter().enumerate() {
        assert!(good.contains(from.as_str()), "{from:?} is not in the config");
        let path = fx.dir().join(format!("bad{i}.toml"));
        std::fs::write(&path, good.replacen(from.as_str(), to, 1)).expect("write config");

        let out = dimlog(&fx, &path, &["run", "--upper", "2026-03-02T10:00:00Z"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{to}: {stderr}");
        assert!(
            stderr.contains(&format!("`{setting}`")),
            "{to}: the message must name {setting}: {stderr}"
        );
        assert!(!stderr.contains("hunter2"), "a password was printed: {stderr}");

        let out = dimlog(&fx, &path, &["run", "--json", "--upper", "2026-03-02T10:00:00Z"]);
        assert_eq!(out.status.code(), Some(2), "{to} --json");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{to} --json: not JSON ({e}): {}", text(&out.stdout)));
        assert_eq!(json["error"]["kind"], "config", "{json}");
        let message = json["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(setting), "{to} --json: {message}");
    }

    // Nothing was written, and table y survived every injection attempt.
    for table in ["dimlog_runs", "dimlog_state", "customer_versions", "dim_customer"] {
        assert!(!fx.target_has_table(table).await, "a refused config created {table}");
    }
    assert_eq!(
        fx.source_query("SELECT CAST(count(*) AS TEXT) FROM y").await[0][0].as_deref(),
        Some("1")
    );
    assert_eq!(fx.count("y").await, 1);

    // The good config still works from the same directory.
    let out = dimlog(&fx, &fx.config_path(), &["run", "--upper", "2026-03-02T10:00:00Z"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// The `dimlog_runs` row of a run, as JSON values (the spec gives `run --json` the same
/// keys).
async fn run_record(fx: &mut Fixture, run_id: i64) -> serde_json::Map<String, serde_json::Value> {
    let runs = fx.runs().await;
    let record = runs
        .records()
        .into_iter()
        .find(|r| r["run_id"].as_deref() == Some(run_id.to_string().as_str()))
        .unwrap_or_else(|| panic!("no dimlog_runs row {run_id}: {runs:?}"));
    record
        .into_iter()
        .map(|(k, v)| {
            let value = match v {
                None => serde_json::Value::Null,
                Some(s) => match s.parse::<i64>() {
                    Ok(n) => serde_json::Value::from(n),
                    Err(_) => serde_json::Value::from(s),
                },
            };
            (k, value)
        })
        .collect()
}

async fn json_run_output_matches_dimlog_runs(mut fx: Fixture) {
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
             (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T09:10:00Z')",
    )
    .await;
    let config = fx.config_path();
    let run = |fx: &Fixture, upper: &str, extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["run", "--json", "--upper", upper];
        args.extend_from_slice(extra);
        let out = dimlog(fx, &config, &args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        assert_eq!(stdout.lines().count(), 1, "one JSON object on one line: {stdout}");
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
    };

    // A dry run prints its counts and records nothing.
    let dry = run(&fx, "2026-03-02T10:00:00Z", &["--dry-run"]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["versions"], 2);
    assert!(dry["run_id"].is_null());

    let first = run(&fx, "2026-03-02T10:00:00Z", &[]);
    fx.exec(
        "UPDATE src_customers SET tier = 'free', updated_at = '2026-03-02T10:05:00Z' WHERE customer_id = 1;
         UPDATE src_customers SET email = 'bob@example.org' WHERE customer_id = 2;
         UPDATE src_customers SET is_deleted = true, updated_at = '2026-03-02T10:06:00Z' WHERE customer_id = 2",
    )
    .await;
    let second = run(&fx, "2026-03-02T10:30:00Z", &[]);
    let log_rows = fx.count("customer_versions").await;
    // `dimlog run` twice on an unchanged source appends nothing.
    let third = run(&fx, "2026-03-02T10:30:00Z", &[]);
    assert_eq!(fx.count("customer_versions").await, log_rows);

    assert_eq!(
        (&first["versions"], &first["low_watermark"], &first["high_watermark"]),
        (
            &serde_json::json!(2),
            &serde_json::Value::Null,
            &serde_json::json!("2026-03-02T09:10:00.000000Z")
        )
    );
    assert_eq!(
        (&second["versions"], &second["tombstones"]),
        (&serde_json::json!(1), &serde_json::json!(1))
    );
    for key in ["versions", "late_versions", "corrections", "tombstones"] {
        assert_eq!(third[key], 0, "the rerun appended {key}: {third}");
    }
    assert_eq!(fx.count("dimlog_runs").await, 3, "the dry run left a record");

    for printed in [&first, &second, &third] {
        let run_id = printed["run_id"].as_i64().expect("a run id");
        let record = run_record(&mut fx, run_id).await;
        for (key, value) in &record {
            assert!(
                printed.get(key).is_some(),
                "run {run_id}: `run --json` has no `{key}`: {printed}"
            );
            assert_eq!(
                &printed[key], value,
                "run {run_id}: `{key}` differs from dimlog_runs: {printed}"
            );
        }
        assert_eq!(record.len(), 20, "{record:?}");
        assert_eq!(printed["status"], "succeeded");
        assert_eq!(printed["kind"], "incremental");
    }
}
