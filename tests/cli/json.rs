//! `--json` prints one JSON object on every command, and its fields agree with the tables
//! dimlog wrote (run, status, history, lookup, verify) on both backends.

use super::{assert_code, dimlog, json};
use crate::support::fixture::{on_both_backends, Fixture};
use serde_json::{json as j, Value};

on_both_backends!(json_fields_agree_with_the_tables);

const U1: &str = "2026-03-02T12:00:00Z";
const U2: &str = "2026-03-03T12:00:00Z";

fn cli(fx: &Fixture, args: &[&str]) -> std::process::Output {
    let config = fx.config_path();
    let mut all = vec!["--config", config.to_str().expect("utf-8 path"), "--json"];
    all.extend_from_slice(args);
    dimlog(fx.dir(), &all)
}

fn ok(fx: &Fixture, args: &[&str]) -> Value {
    let out = cli(fx, args);
    assert_code(&out, 0, &args.join(" "));
    json(&out, &args.join(" "))
}

fn int(v: &Option<String>) -> i64 {
    v.as_deref().expect("a value").parse().expect("an integer")
}

/// Loads two nights: keys 1 and 2, then a change of 1 and a soft delete of 2.
async fn load(fx: &mut Fixture) -> (Value, Value) {
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'silver', 'NL', '2026-03-02T09:00:00Z'),
             (2, 'bob@example.com', 'gold', NULL, '2026-03-02T10:00:00Z')",
    )
    .await;
    let first = ok(fx, &["run", "--upper", U1]);
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-03T08:00:00Z' WHERE customer_id = 1")
        .await;
    fx.exec("UPDATE src_customers SET is_deleted = true, updated_at = '2026-03-03T09:00:00Z' WHERE customer_id = 2")
        .await;
    let second = ok(fx, &["run", "--upper", U2]);
    (first, second)
}

async fn json_fields_agree_with_the_tables(mut fx: Fixture) {
    let (first, second) = load(&mut fx).await;

    // run: the keys of its dimlog_runs row, with the same values.
    let runs = fx.runs().await.records();
    assert_eq!(runs.len(), 2);
    for (report, row) in [(&first, &runs[0]), (&second, &runs[1])] {
        for (column, value) in row {
            let expected = match value {
                None => Value::Null,
                Some(s) => s
                    .parse::<i64>()
                    .map(Value::from)
                    .unwrap_or_else(|_| Value::from(s.clone())),
            };
            assert_eq!(
                report[column], expected,
                "run --json `{column}` differs from dimlog_runs: {report}"
            );
        }
    }
    assert_eq!(second["versions"], 1);
    assert_eq!(second["tombstones"], 1);

    // status: the watermark and the runs, newest first.
    let status = ok(&fx, &["status"]);
    assert_eq!(status["dimension"], "customer");
    let watermark = fx.watermark().await;
    assert_eq!(status["watermarks"][0]["role"], "incremental", "{status}");
    assert_eq!(status["watermarks"][0]["high_watermark"], j!(watermark), "{status}");
    assert_eq!(status["runs"].as_array().map(Vec::len), Some(2), "{status}");
    assert_eq!(status["runs"][0]["run_id"], j!(int(&runs[1]["run_id"])), "{status}");
    // It reads the target only: the source's side is null unless asked for.
    assert_eq!(status["source_newest"], Value::Null, "{status}");
    assert_eq!(status["lag_seconds"], Value::Null, "{status}");
    let status = ok(&fx, &["status", "--against-source"]);
    assert_eq!(status["source_newest"], "2026-03-03T09:00:00.000000Z");
    assert_eq!(status["lag_seconds"], 0.0);

    // history: one entry per log row of the key (versions and the tombstone), with the
    // dimension's surrogate keys and values.
    let dim = fx.dimension().await.records();
    let h1 = ok(&fx, &["history", "--key", "1"]);
    assert_eq!(h1["key"], j!([1]));
    let versions = h1["versions"].as_array().expect("versions");
    let rows1: Vec<_> = dim
        .iter()
        .filter(|r| r["customer_id"].as_deref() == Some("1"))
        .collect();
    assert_eq!(versions.len(), rows1.len(), "{h1}");
    for (v, r) in versions.iter().zip(&rows1) {
        assert_eq!(v["surrogate_key"], j!(int(&r["customer_sk"])), "{h1}");
        assert_eq!(v["values"]["email"], j!(r["email"]), "{h1}");
        assert_eq!(v["values"]["tier"], j!(r["tier"]), "{h1}");
        assert_eq!(v["values"]["country"], j!(r["country"]), "{h1}");
        assert_eq!(v["valid_from"], j!(r["valid_from"]), "{h1}");
        assert_eq!(v["valid_to"], j!(r["valid_to"]), "{h1}");
        assert_eq!(v["is_current"], j!(r["is_current"].as_deref() == Some("true")), "{h1}");
        assert_eq!(v["is_deleted"], false);
    }
    let h2 = ok(&fx, &["history", "--key", "customer_id=2"]);
    let versions = h2["versions"].as_array().expect("versions");
    assert_eq!(versions.len(), 2, "{h2}");
    assert_eq!(versions[0]["values"]["country"], Value::Null, "NULL stays null: {h2}");
    assert_eq!(versions[1]["is_deleted"], true, "{h2}");
    assert_eq!(versions[1]["surrogate_key"], Value::Null, "{h2}");
    assert_eq!(versions[1]["valid_from"], "2026-03-03T09:00:00.000000Z", "{h2}");

    // lookup: the dimension row in effect, -1 outside every version.
    for (key, at) in [
        ("1", "2026-03-02T12:00:00Z"),
        ("1", "2026-03-03T08:00:00Z"),
        ("2", "2026-03-02T10:30:00Z"),
    ] {
        let expected = dim
            .iter()
            .find(|r| {
                r["customer_id"].as_deref() == Some(key)
                    && r["valid_from"].as_deref().unwrap() <= &at.replace('Z', ".000000Z")[..]
                    && &at.replace('Z', ".000000Z")[..] < r["valid_to"].as_deref().unwrap()
            })
            .map(|r| int(&r["customer_sk"]))
            .expect("a version in effect");
        let lookup = ok(&fx, &["lookup", "--key", key, "--at", at]);
        assert_eq!(lookup, j!({"surrogate_key": expected}), "lookup {key} at {at}");
    }
    let deleted = ok(&fx, &["lookup", "--key", "2", "--at", "2026-03-03T10:00:00Z"]);
    assert_eq!(deleted, j!({"surrogate_key": -1}));
    let unknown = cli(
        &fx,
        &[
            "lookup",
            "--key",
            "2",
            "--at",
            "2026-03-03T10:00:00Z",
            "--unknown",
            "error",
        ],
    );
    assert_code(&unknown, 1, "lookup --unknown error");
    assert!(json(&unknown, "lookup error")["error"]["kind"].is_string());

    // verify: every check passes; a broken dimension is reported with exit 3.
    let verify = ok(&fx, &["verify", "--against-source"]);
    assert_eq!(verify["ok"], true, "{verify}");
    let checks: Vec<&str> = verify["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| c["name"].as_str().expect("a name"))
        .collect();
    assert!(
        checks.contains(&"rebuild_diff") && checks.contains(&"source_different"),
        "{checks:?}"
    );
    assert!(verify["checks"].as_array().unwrap().iter().all(|c| c["count"] == 0));
    fx.target_exec("UPDATE dim_customer SET is_current = true").await;
    let broken = cli(&fx, &["verify"]);
    assert_code(&broken, 3, "verify on a broken dimension");
    let broken = json(&broken, "verify");
    assert_eq!(broken["ok"], false, "{broken}");

    // The other commands print one object too.
    let rebuilt = ok(&fx, &["rebuild"]);
    assert_eq!(rebuilt["rebuilt"], true);
    let init = ok(&fx, &["init"]);
    assert_eq!(init["tracked_columns"], j!(["email", "tier", "country"]));
    let plan = ok(
        &fx,
        &[
            "backfill",
            "--from",
            "2026-03-01T00:00:00Z",
            "--to",
            "2026-03-03T00:00:00Z",
            "--dry-run",
        ],
    );
    assert_eq!(plan["chunks"].as_array().map(Vec::len), Some(2), "{plan}");
    let sk = ok(&fx, &["run", "--dry-run", "--upper", U2]);
    assert_eq!(sk["dry_run"], true);
}

#[test]
fn commands_without_a_dimension_print_one_object() {
    let dir = tempfile::tempdir().expect("temp dir");
    let completions = dimlog(dir.path(), &["--json", "completions", "bash"]);
    assert_code(&completions, 0, "completions --json");
    let completions = json(&completions, "completions --json");
    assert_eq!(completions["shell"], "bash");
    assert!(completions["script"].as_str().unwrap_or_default().contains("dimlog"));

    let man = dimlog(dir.path(), &["--json", "man"]);
    assert_code(&man, 0, "man --json");
    assert!(json(&man, "man --json")["man"]
        .as_str()
        .unwrap_or_default()
        .starts_with(".ie"));

    let demo = dimlog(dir.path(), &["--json", "demo", "--dir", "demo"]);
    assert_code(&demo, 0, "demo --json");
    let demo = json(&demo, "demo --json");
    assert_eq!(demo["runs"].as_array().map(Vec::len), Some(4), "{demo}");
    // Its own folder it makes again; a folder holding someone else's files of those
    // names (`dimlog new`'s too) it refuses, touching nothing (a trial lost a database).
    let again = dimlog(dir.path(), &["--json", "demo", "--dir", "demo"]);
    assert_code(&again, 0, "demo again in its own folder");
    let theirs = dir.path().join("theirs");
    std::fs::create_dir_all(&theirs).expect("a folder");
    for (file, text) in [("dimlog.toml", "name = \"mine\"\n"), ("warehouse.db", "precious")] {
        std::fs::write(theirs.join(file), text).expect("write");
        let refused = dimlog(dir.path(), &["--json", "demo", "--dir", "theirs"]);
        assert_code(&refused, 2, "demo into a folder with someone else's files");
        let message = json(&refused, "demo refused")["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(message.contains(file) && message.contains("--dir"), "{message}");
        assert_eq!(std::fs::read_to_string(theirs.join(file)).expect("kept"), text);
        assert!(!theirs.join("source.db").exists());
    }

    // A usage error is a JSON error too, exit 2.
    let bad = dimlog(dir.path(), &["--json", "run", "--no-such-flag"]);
    assert_code(&bad, 2, "a usage error with --json");
    let bad = json(&bad, "usage error");
    assert_eq!(bad["error"]["kind"], "usage", "{bad}");
    assert!(bad["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .contains("--no-such-flag"));

    // A missing config names the file.
    let missing = dimlog(dir.path(), &["--json", "status"]);
    assert_code(&missing, 2, "status without a config");
    assert_eq!(json(&missing, "missing config")["error"]["kind"], "config");
}

#[test]
fn man_pages_are_written_per_command() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dimlog(dir.path(), &["man", "--out", "man"]);
    assert_code(&out, 0, "man --out");
    for page in [
        "dimlog.1",
        "dimlog-run.1",
        "dimlog-new.1",
        "dimlog-history.1",
        "dimlog-man.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join("man").join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.contains(".TH"), "{page} is not a man page");
    }
    let run = dimlog(dir.path(), &["man", "run"]);
    assert_code(&run, 0, "man run");
    assert!(super::text(&run.stdout).contains("full\\-refresh"));
}
