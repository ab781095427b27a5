//! `history --json` gives values typed by their column (issue 17): numbers as numbers,
//! booleans as `true`/`false` (SQLite stores 1/0), NULL as null, times and text as
//! strings; a table shows booleans as `true`/`false` too.

use super::{assert_code, dimlog, json, text};
use crate::support::fixture::{on_both_backends, Fixture};
use dimlog::config::Backend;
use serde_json::json as j;

on_both_backends!(history_values_are_typed);

async fn history_values_are_typed(mut fx: Fixture) {
    let ddl = match fx.backend {
        Backend::Sqlite => {
            "CREATE TABLE src_typed (id INTEGER PRIMARY KEY, qty INTEGER, price REAL, active BOOLEAN, exact NUMERIC, \
             seen TEXT, note TEXT, updated_at TEXT NOT NULL)"
        }
        _ => {
            "CREATE TABLE src_typed (id bigint PRIMARY KEY, qty bigint, price double precision, active boolean, \
             exact numeric(10,2), seen timestamptz, note text, updated_at timestamptz NOT NULL)"
        }
    };
    fx.exec(ddl).await;
    let (yes, no) = if fx.backend == Backend::Sqlite {
        ("1", "0")
    } else {
        ("true", "false")
    };
    fx.exec(&format!(
        "INSERT INTO src_typed VALUES
             (1, 42, 2.5, {yes}, 12.30, '2026-03-01T08:00:00Z', '007', '2026-03-02T09:00:00Z'),
             (2, NULL, NULL, {no}, NULL, NULL, NULL, '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.set_setting("table", "\"src_typed\"");
    fx.set_setting("key", "[\"id\"]");
    fx.edit_config("deleted_flag = \"is_deleted\"\n", "");
    fx.set_setting(
        "columns",
        "[\"qty\", \"price\", \"active\", \"exact\", \"seen\", \"note\"]",
    );
    let config = fx.config_path();
    let config = config.to_str().unwrap();
    let run = dimlog(
        fx.dir(),
        &["--config", config, "run", "--upper", "2026-03-02T10:00:00Z"],
    );
    assert_code(&run, 0, "run");

    let out = dimlog(fx.dir(), &["--config", config, "--json", "history", "--key", "1"]);
    assert_code(&out, 0, "history --json");
    let v = json(&out, "history --json");
    let values = &v["versions"][0]["values"];
    assert_eq!(v["key"], j!([1]), "an integer key is a number: {v}");
    assert_eq!(values["qty"], j!(42), "{v}");
    assert_eq!(values["price"], j!(2.5), "{v}");
    assert_eq!(values["active"], j!(true), "{v}");
    assert!(values["exact"].is_string(), "exact decimals stay exact, as text: {v}");
    // An instant as dimlog prints every time, RFC 3339 in UTC (PostgreSQL's own text
    // was `2026-03-01 08:00:00+00`: found by an outside trial); SQLite's text as it is.
    let seen = if fx.backend == Backend::Sqlite {
        "2026-03-01T08:00:00Z"
    } else {
        "2026-03-01T08:00:00.000000Z"
    };
    assert_eq!(values["seen"], j!(seen), "{v}");
    assert_eq!(
        values["note"],
        j!("007"),
        "text that reads like a number stays text: {v}"
    );

    let out = dimlog(fx.dir(), &["--config", config, "--json", "history", "--key", "2"]);
    let v = json(&out, "history --json");
    let values = &v["versions"][0]["values"];
    assert_eq!(values["qty"], j!(null), "{v}");
    assert_eq!(values["active"], j!(false), "{v}");

    let out = dimlog(fx.dir(), &["--config", config, "history", "--key", "2"]);
    assert_code(&out, 0, "history");
    let table = text(&out.stdout);
    assert!(table.lines().nth(2).is_some_and(|l| l.contains(" false ")), "{table}");
    // `current` too, not `yes` and blank (found by an outside trial).
    assert!(table.lines().nth(2).is_some_and(|l| l.contains(" true ")), "{table}");

    // What a user sees, whole: the table and the JSON of both keys, per engine (SQLite
    // keeps a text column's time as written).
    let mut seen = String::new();
    for key in ["1", "2"] {
        for json in [false, true] {
            let mut args = vec!["--config", config];
            if json {
                args.push("--json");
            }
            args.extend(["history", "--key", key]);
            let out = dimlog(fx.dir(), &args);
            assert_code(&out, 0, "history");
            seen.push_str(&format!("$ dimlog {}\n{}\n", args[2..].join(" "), text(&out.stdout)));
        }
    }
    let engine = if fx.backend == Backend::Sqlite {
        "sqlite"
    } else {
        "postgres"
    };
    crate::support::fixture::assert_snapshot(
        &format!("history__typed__{engine}"),
        "history of typed columns, as a table and as JSON",
        &seen,
    );
}
