//! After a change of the Type 2 column set, a row compared with a version logged before
//! the change is compared by the values the target holds, for every column kind, on
//! both engines and across them (PostgreSQL → SQLite, SQLite → PostgreSQL): a row with a
//! version's values opens no version, a row that differs in any one column does. The
//! values include those the other engine spells differently (a double's digits, a
//! decimal's scale, an upper-case UUID, JSON with its own spacing and key order, bytes).

use dimlog::config::Backend;
use dimlog::pipeline::{RunOptions, RunReport};

use super::assert_verified;
use crate::support::fixture::{ts, Fixture};

/// A column of every kind: name, PostgreSQL type, SQLite type, and three values as SQL
/// literals of each engine: the first version's, the second's, and a change of the first.
struct Kind {
    column: &'static str,
    postgres: (&'static str, [&'static str; 3]),
    sqlite: (&'static str, [&'static str; 3]),
}

const KINDS: &[Kind] = &[
    Kind {
        column: "c_int",
        postgres: ("bigint", ["42", "43", "-42"]),
        sqlite: ("INTEGER", ["42", "43", "-42"]),
    },
    Kind {
        column: "c_float",
        postgres: ("double precision", ["0.30000000000000004", "1e20", "0.3"]),
        sqlite: ("REAL", ["0.30000000000000004", "1e20", "0.3"]),
    },
    Kind {
        column: "c_numeric",
        postgres: ("numeric(12,3)", ["1.500", "2.25", "1.501"]),
        sqlite: ("NUMERIC", ["1.5", "2.25", "1.501"]),
    },
    Kind {
        column: "c_bool",
        postgres: ("boolean", ["true", "false", "false"]),
        sqlite: ("BOOLEAN", ["1", "0", "0"]),
    },
    Kind {
        column: "c_date",
        postgres: ("date", ["'2026-01-31'", "'1999-12-31'", "'2000-02-29'"]),
        sqlite: ("DATE", ["'2026-01-31'", "'1999-12-31'", "'2000-02-29'"]),
    },
    Kind {
        column: "c_ts",
        postgres: (
            "timestamp",
            [
                "'2026-03-29 02:30:00.123456'",
                "'1970-01-01 00:00:00'",
                "'2026-03-29 02:30:00.123457'",
            ],
        ),
        sqlite: (
            "TIMESTAMP",
            [
                "'2026-03-29 02:30:00.123456'",
                "'1970-01-01 00:00:00'",
                "'2026-03-29 02:30:00.123457'",
            ],
        ),
    },
    Kind {
        column: "c_tstz",
        postgres: (
            "timestamptz",
            [
                "'2026-03-02 09:30:00.5+01'",
                "'2026-03-02 09:30:00Z'",
                "'2026-03-02 09:30:00.500001+01'",
            ],
        ),
        // SQLite has no zoned kind: its timestamps are text.
        sqlite: (
            "TIMESTAMP",
            [
                "'2026-03-02T09:30:00.5+01:00'",
                "'2026-03-02T09:30:00Z'",
                "'2026-03-02T09:30:00.500001+01:00'",
            ],
        ),
    },
    Kind {
        column: "c_uuid",
        postgres: (
            "uuid",
            [
                "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'",
                "'00000000-0000-0000-0000-000000000000'",
                "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12'",
            ],
        ),
        sqlite: (
            "UUID",
            [
                "'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'",
                "'00000000-0000-0000-0000-000000000000'",
                "'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A12'",
            ],
        ),
    },
    Kind {
        column: "c_json",
        postgres: (
            "jsonb",
            [
                r#"'{"b": [1, 2.50, null], "a": "x"}'"#,
                "'[]'",
                r#"'{"b": [1, 2.50, null], "a": "y"}'"#,
            ],
        ),
        sqlite: (
            "JSON",
            [
                r#"'{"b":[1,2.50,null],"a":"x"}'"#,
                "'[]'",
                r#"'{"b":[1,2.50,null],"a":"y"}'"#,
            ],
        ),
    },
    Kind {
        column: "c_bytes",
        postgres: ("bytea", [r"'\x00ff10'", r"'\x'", r"'\x00ff11'"]),
        sqlite: ("BLOB", ["X'00FF10'", "X''", "X'00FF11'"]),
    },
    Kind {
        column: "c_text",
        postgres: ("text", ["'Ann'", "''", "'ann'"]),
        sqlite: ("TEXT", ["'Ann'", "''", "'ann'"]),
    },
];

/// The customer whose late row has its first version's values.
const UNCHANGED: usize = 0;
/// The customer whose source row, when the change is accepted, is a late row with its
/// first version's values.
const PENDING: usize = 98;
/// The customer whose source row, when the change is accepted, is a late row with a
/// change: its current version is not carried over.
const CHANGED_PENDING: usize = 99;

fn values(backend: Backend, i: usize) -> Vec<(&'static str, &'static str)> {
    KINDS
        .iter()
        .map(|k| {
            let (_, v) = match backend {
                Backend::Postgres | Backend::Citus => k.postgres,
                Backend::Sqlite => k.sqlite,
            };
            (k.column, v[i])
        })
        .collect()
}

/// `SET c = v, …, updated_at = at` with the values of version `i`, column `changed` (an
/// index of [`KINDS`]) taking its changed value.
fn set(backend: Backend, i: usize, changed: Option<usize>, at: &str) -> String {
    let changed_values = values(backend, 2);
    let mut parts: Vec<String> = values(backend, i)
        .into_iter()
        .enumerate()
        .map(|(j, (c, v))| {
            let v = if changed == Some(j) { changed_values[j].1 } else { v };
            format!("{c} = {v}")
        })
        .collect();
    parts.push(format!("updated_at = '{at}'"));
    parts.join(", ")
}

fn update(backend: Backend, ids: &[usize], i: usize, changed: Option<usize>, at: &str) -> String {
    let ids: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
    format!(
        "UPDATE src_kinds SET {} WHERE id IN ({})",
        set(backend, i, changed, at),
        ids.join(", ")
    )
}

fn upper(text: &str) -> RunOptions {
    RunOptions {
        upper: Some(ts(text)),
        ..RunOptions::incremental()
    }
}

/// `(versions, late, corrections, tombstones)`.
fn appended(r: &RunReport) -> (i64, i64, i64, i64) {
    (
        r.counts.versions,
        r.counts.late_versions,
        r.counts.corrections,
        r.counts.tombstones,
    )
}

fn config(source: &str, target: &str, tracked: &[&str]) -> String {
    let tracked: Vec<String> = tracked.iter().map(|c| format!("\"{c}\"")).collect();
    format!(
        r#"name = "kinds"

[source]
url = "{source}"
table = "src_kinds"
key = ["id"]
updated_at = "updated_at"
lookback = "2h"

[target]
url = "{target}"
log = "kinds_versions"
dimension = "dim_kinds"
surrogate_key = "kinds_sk"

[track]
columns = [{}]
"#,
        tracked.join(", ")
    )
}

/// Loads two versions of each customer under the columns of every kind, adds `extra` (NULL
/// everywhere) to the Type 2 columns, and compares late rows with the first versions.
async fn every_kind_compares_by_value(mut fx: Fixture, target: String) {
    let backend = fx.backend;
    let ddl: Vec<String> = KINDS
        .iter()
        .map(|k| {
            let ty = match backend {
                Backend::Postgres | Backend::Citus => k.postgres.0,
                Backend::Sqlite => k.sqlite.0,
            };
            format!("{} {ty}", k.column)
        })
        .collect();
    let (id, updated_at) = match backend {
        Backend::Postgres | Backend::Citus => ("bigint PRIMARY KEY", "timestamptz NOT NULL"),
        Backend::Sqlite => ("INTEGER PRIMARY KEY", "TEXT NOT NULL"),
    };
    fx.exec(&format!(
        "CREATE TABLE src_kinds (id {id}, {}, extra text, updated_at {updated_at})",
        ddl.join(", ")
    ))
    .await;
    let mut customers: Vec<usize> = (0..=KINDS.len()).collect();
    customers.extend([PENDING, CHANGED_PENDING]);
    for id in &customers {
        fx.exec(&format!(
            "INSERT INTO src_kinds (id, updated_at) VALUES ({id}, '2026-03-02T09:00:00Z')"
        ))
        .await;
    }
    fx.exec(&update(backend, &customers, 0, None, "2026-03-02T09:00:00Z"))
        .await;
    let columns: Vec<&str> = KINDS.iter().map(|k| k.column).collect();
    let source = fx.source_url.clone();
    fx.set_config(config(&source, &target, &columns));
    let n = customers.len() as i64;
    assert_eq!(appended(&fx.run("2026-03-02T10:00:00Z").await), (n, 0, 0, 0));
    fx.exec(&update(backend, &customers, 1, None, "2026-03-02T11:00:00Z"))
        .await;
    assert_eq!(appended(&fx.run("2026-03-02T11:30:00Z").await), (n, 0, 0, 0));

    // Accepting `extra`: one late row has the first version's values, one a change.
    fx.exec(&update(backend, &[PENDING], 0, None, "2026-03-02T10:00:00Z"))
        .await;
    fx.exec(&update(backend, &[CHANGED_PENDING], 0, Some(0), "2026-03-02T10:00:00Z"))
        .await;
    let mut tracked = columns.clone();
    tracked.push("extra");
    fx.set_config(config(&source, &target, &tracked));
    let r = fx
        .run_with(RunOptions {
            accept_config_change: true,
            ..upper("2026-03-02T11:45:00Z")
        })
        .await;
    assert_eq!(
        appended(&r),
        (1, 1, 0, 0),
        "only the changed late row opens a version: {r:?}"
    );
    assert_eq!(
        (r.rehashed, r.rehashed_earlier),
        (n - 2, 1),
        "the unchanged late row's first version is carried over: {r:?}"
    );

    // After it: one late row per kind that changes that column, one that changes nothing.
    fx.exec(&update(backend, &[UNCHANGED], 0, None, "2026-03-02T10:00:00Z"))
        .await;
    for j in 0..KINDS.len() {
        fx.exec(&update(backend, &[j + 1], 0, Some(j), "2026-03-02T10:00:00Z"))
            .await;
    }
    let r = fx.run("2026-03-02T11:50:00Z").await;
    let kinds = KINDS.len() as i64;
    assert_eq!(
        appended(&r),
        (kinds, kinds, 0, 0),
        "a late version for each changed kind, none for the unchanged row: {r:?}"
    );
    assert_eq!(r.rehashed_earlier, 1, "{r:?}");

    // Back on the current versions' values, the two whose current version was not
    // carried over (their source row was late when the change was accepted) included.
    fx.exec(&update(
        backend,
        &[PENDING, CHANGED_PENDING],
        1,
        None,
        "2026-03-02T12:00:00Z",
    ))
    .await;
    let r = fx.run("2026-03-02T12:10:00Z").await;
    assert_eq!((appended(&r), r.rehashed_earlier), ((0, 0, 0, 0), 2), "{r:?}");
    let r = fx.run("2026-03-02T12:20:00Z").await;
    assert_eq!(
        (appended(&r), r.rehashed_earlier),
        ((0, 0, 0, 0), 0),
        "a reread changes nothing: {r:?}"
    );
    assert_verified(&fx, false).await;
}

#[tokio::test]
async fn every_kind_compares_by_value_sqlite() {
    let fx = Fixture::sqlite().await;
    let target = fx.target_url.clone();
    every_kind_compares_by_value(fx, target).await;
}

#[tokio::test]
async fn every_kind_compares_by_value_postgres() {
    let fx = Fixture::postgres().await;
    let target = fx.target_url.clone();
    every_kind_compares_by_value(fx, target).await;
}

#[tokio::test]
async fn every_kind_compares_by_value_postgres_to_sqlite() {
    let fx = Fixture::postgres().await;
    let target = format!("sqlite://{}", fx.dir().join("warehouse.db").display());
    every_kind_compares_by_value(fx, target).await;
}

#[tokio::test]
async fn every_kind_compares_by_value_sqlite_to_postgres() {
    let fx = Fixture::sqlite().await;
    let target = crate::support::pg::fresh_database().await;
    every_kind_compares_by_value(fx, target).await;
}

/// From a SQLite source the rows reach a Citus target batch by batch (not one COPY of
/// the source's text): its distributed working tables take them as PostgreSQL's do.
#[cfg(feature = "citus-tests")]
#[tokio::test]
async fn every_kind_compares_by_value_sqlite_to_citus() {
    let fx = Fixture::sqlite().await;
    let lease = crate::support::citus::lease().await;
    every_kind_compares_by_value(fx, lease.url.clone()).await;
    let mut target = crate::support::fixture::connect("target.url", &lease.url).await;
    let distributed = target
        .query_text(
            "test",
            "SELECT logicalrelid::regclass::text FROM pg_dist_partition WHERE logicalrelid::text LIKE 'dimlog_raw%'",
            &[],
        )
        .await
        .expect("pg_dist_partition");
    assert_eq!(
        distributed.len(),
        1,
        "the rows were staged in a distributed table: {distributed:?}"
    );
}
