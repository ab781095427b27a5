//! `dimlog lookup` at the edges of the half-open intervals `[valid_from, valid_to)`.

use dimlog::lookup::{lookup_one, Index, LookupError, UNKNOWN};
use dimlog::pipeline::Session;

use crate::cli::{assert_code, json, text};
use crate::support::fixture::{on_both_backends, ts, Fixture};

on_both_backends!(lookup_at_the_boundaries, unknown_error_exits_1_naming_the_key);

/// Key 1: free from 2026-03-01T09:00, pro from 2026-03-02T12:30:00.25 (open). Key 2: pro
/// from 2026-03-01T10:00, deleted at 2026-03-03T08:00. Surrogate keys 1, 2 and 3.
pub(super) async fn two_keys(fx: &mut Fixture) {
    fx.use_feed().await;
    fx.exec(
        "INSERT INTO src_feed (customer_id, email, tier, country, is_deleted, updated_at) VALUES
             (1, 'ann@example.com', 'free', 'FR', false, '2026-03-01T09:00:00Z'),
             (1, 'ann@example.com', 'pro', 'FR', false, '2026-03-02T12:30:00.25Z'),
             (2, 'bob@example.com', 'pro', 'DE', false, '2026-03-01T10:00:00Z'),
             (2, NULL, NULL, NULL, true, '2026-03-03T08:00:00Z')",
    )
    .await;
    fx.run("2026-03-04T00:00:00Z").await;
    let dim = fx.dimension().await;
    assert_eq!(
        dim.values("customer_sk"),
        ["1", "2", "3"].map(|k| Some(k.to_string())),
        "{dim:?}"
    );
    assert_eq!(
        dim.values("valid_to")[2].as_deref(),
        Some("2026-03-03T08:00:00.000000Z"),
        "the tombstone closes key 2: {dim:?}"
    );
}

/// (key, fact timestamp, the surrogate key it must get) for [`two_keys`].
pub(super) const CASES: &[(&str, &str, i64)] = &[
    // Before the key's first version.
    ("1", "2026-03-01T08:59:59.999999Z", UNKNOWN),
    // The same, spelled with a shorter fraction and with an offset.
    ("1", "2026-03-01T08:59:59.99999Z", UNKNOWN),
    ("1", "2026-03-01T10:59:59.99999+02:00", UNKNOWN),
    // Exactly at valid_from: the version that starts there.
    ("1", "2026-03-01T09:00:00Z", 1),
    // A microsecond before the next version: still the old one.
    ("1", "2026-03-02T12:30:00.249999Z", 1),
    ("1", "2026-03-02T12:30:00.25Z", 2),
    // The same instant written with another offset.
    ("1", "2026-03-02T13:30:00.250000+01:00", 2),
    ("1", "2026-03-02T12:30:00.250001Z", 2),
    // Near the far-future sentinel: the current version, until the sentinel itself.
    ("1", "9999-12-30T00:00:00Z", 2),
    ("1", "9999-12-30T23:59:59.999999Z", 2),
    ("1", "9999-12-31T00:00:00Z", UNKNOWN),
    ("2", "2026-03-01T10:00:00Z", 3),
    // A microsecond before the tombstone, at it, and long after it.
    ("2", "2026-03-03T07:59:59.999999Z", 3),
    ("2", "2026-03-03T08:00:00Z", UNKNOWN),
    ("2", "2030-01-01T00:00:00Z", UNKNOWN),
    // A key the dimension never had.
    ("42", "2026-03-02T00:00:00Z", UNKNOWN),
];

/// `dimlog lookup` prints the surrogate key in effect (or -1) for every case; `--json`
/// prints `{"surrogate_key": N}`; the library's `lookup_one` and in-memory `Index` agree.
async fn lookup_at_the_boundaries(mut fx: Fixture) {
    two_keys(&mut fx).await;
    let plan = fx.plan();
    let mut session = Session::open(&plan).await.expect("a session");
    let index = Index::load(&mut session.target, &session.ctx)
        .await
        .expect("load the index");
    assert_eq!(index.len(), 3);
    for &(key, at, expected) in CASES {
        let what = format!("lookup --key {key} --at {at}");
        let out = fx.cli(&["lookup", "--key", key, "--at", at]);
        assert_code(&out, 0, &what);
        assert_eq!(text(&out.stdout), format!("{expected}\n"), "{what}");

        let out = fx.cli(&["lookup", "--json", "--key", key, "--at", at]);
        assert_code(&out, 0, &format!("{what} --json"));
        assert_eq!(
            json(&out, &what),
            serde_json::json!({ "surrogate_key": expected }),
            "{what} --json"
        );

        let one = lookup_one(&mut session.target, &session.ctx, &[key.to_string()], ts(at))
            .await
            .expect("lookup_one");
        assert_eq!(one.unwrap_or(UNKNOWN), expected, "lookup_one {key} {at}");
        assert_eq!(index.lookup(&[key], ts(at)), Ok(expected), "Index::lookup {key} {at}");
    }
    // Issue 21: a wrong number of key parts is an error, not the unknown member.
    let at = ts("2026-03-01T09:00:00Z");
    for parts in [&[][..], &["1", "FR"][..]] {
        let err = index
            .lookup(parts, at)
            .expect_err("a key of the wrong number of parts is an error");
        assert_eq!(
            err,
            LookupError::KeyParts {
                expected: 1,
                given: parts.len()
            }
        );
        let message = err.to_string();
        assert!(message.contains("source.key"), "{message}");
    }
    // COLUMN=VALUE works for a one-column key too.
    let out = fx.cli(&["lookup", "--key", "customer_id=1", "--at", "2026-03-01T09:00:00Z"]);
    assert_code(&out, 0, "lookup --key customer_id=1");
    assert_eq!(text(&out.stdout), "1\n");
}

/// With `--unknown error`, a fact without a version exits 1 and the message names the key
/// (an unknown key, and a key after its tombstone); a fact with one still prints its key.
async fn unknown_error_exits_1_naming_the_key(mut fx: Fixture) {
    two_keys(&mut fx).await;
    for (key, at) in [("42", "2026-03-02T00:00:00Z"), ("2", "2026-03-03T08:00:00Z")] {
        let what = format!("lookup --key {key} --at {at} --unknown error");
        let out = fx.cli(&["lookup", "--key", key, "--at", at, "--unknown", "error"]);
        assert_code(&out, 1, &what);
        assert_eq!(text(&out.stdout), "", "{what}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&format!("\"{key}\"")),
            "{what}: the message must name the key: {stderr}"
        );

        let out = fx.cli(&["lookup", "--json", "--key", key, "--at", at, "--unknown", "error"]);
        assert_code(&out, 1, &format!("{what} --json"));
        let v = json(&out, &what);
        assert_eq!(v["error"]["kind"], "unknown-member", "{v}");
        assert!(v["error"]["message"].as_str().unwrap_or("").contains(key), "{v}");
    }
    let out = fx.cli(&[
        "lookup",
        "--key",
        "2",
        "--at",
        "2026-03-03T07:59:59.999999Z",
        "--unknown",
        "error",
    ]);
    assert_code(&out, 0, "a known fact with --unknown error");
    assert_eq!(text(&out.stdout), "3\n");
}

/// A one-column text key whose values hold `=`: `--key V` is the value itself unless it
/// starts with the column's name and `=`; `--key COLUMN=V` is always exact.
#[tokio::test]
async fn key_values_holding_an_equals_sign_are_looked_up_exactly() {
    let mut fx = Fixture::sqlite().await;
    fx.exec(
        "CREATE TABLE src_codes (code TEXT PRIMARY KEY, label TEXT, updated_at TEXT NOT NULL);
         INSERT INTO src_codes VALUES
             ('a=b', 'x', '2026-03-01T09:00:00Z'),
             ('code=7', 'y', '2026-03-01T09:00:00Z'),
             ('7', 'z', '2026-03-01T09:00:00Z'),
             ('=', 'w', '2026-03-01T09:00:00Z')",
    )
    .await;
    let config = fx
        .config()
        .replace("table = \"src_customers\"", "table = \"src_codes\"")
        .replace("key = [\"customer_id\"]", "key = [\"code\"]")
        .replace("deleted_flag = \"is_deleted\"\n", "")
        .replace("columns = [\"email\", \"tier\", \"country\"]", "columns = [\"label\"]");
    fx.set_config(config);
    fx.run("2026-03-02T00:00:00Z").await;
    let sk_of = |fx: &Fixture, key: &str| -> String {
        let out = fx.cli(&["lookup", "--key", key, "--at", "2026-03-01T12:00:00Z"]);
        assert_code(&out, 0, key);
        text(&out.stdout).trim().to_string()
    };
    let dim = fx.dimension().await;
    let sk = |code: &str| -> String {
        dim.records()
            .into_iter()
            .find(|r| r["code"].as_deref() == Some(code))
            .and_then(|r| r["customer_sk"].clone())
            .unwrap_or_else(|| panic!("no row for {code:?}: {dim:?}"))
    };
    for (arg, code) in [
        ("a=b", "a=b"),
        ("code=a=b", "a=b"),
        ("code=code=7", "code=7"),
        ("code=7", "7"),
        ("7", "7"),
        ("=", "="),
        ("code==", "="),
    ] {
        assert_eq!(sk_of(&fx, arg), sk(code), "--key {arg:?} must look up {code:?}");
    }
}
