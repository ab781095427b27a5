//! `dimlog assign-keys` on staged fact tables in the target database.

use dimlog::config::Backend;
use dimlog::lookup::UNKNOWN;

use super::boundaries::{two_keys, CASES};
use super::{create_facts, facts, ints, FactCol};
use crate::cli::{assert_code, json, text};
use crate::support::fixture::{assert_snapshot, on_both_backends, Fixture};

on_both_backends!(
    assign_keys_fills_the_fact_table,
    unknown_error_writes_nothing,
    composite_natural_keys,
    a_late_version_gives_the_rewritten_interval_its_key,
    a_query_source_assigns_facts_keyed_by_the_key_type,
);

const FACTS: [FactCol; 4] = [
    FactCol::Int("order_id"),
    FactCol::Int("customer_id"),
    FactCol::At("ordered_at"),
    FactCol::Int("customer_sk"),
];

fn assign_args<'a>(table: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "assign-keys",
        "--facts",
        table,
        "--key-column",
        "customer_id",
        "--at-column",
        "ordered_at",
        "--sk-column",
        "customer_sk",
    ];
    args.extend_from_slice(extra);
    args
}

/// Stages `(order_id, customer_id, ordered_at)` rows.
async fn stage(fx: &mut Fixture, table: &str, rows: &[(i64, &str, &str)]) {
    let values: Vec<String> = rows
        .iter()
        .map(|(id, key, at)| format!("({id}, {key}, '{at}')"))
        .collect();
    fx.target_exec(&format!(
        "INSERT INTO {table} (order_id, customer_id, ordered_at) VALUES {}",
        values.join(", ")
    ))
    .await;
}

/// The facts of [`CASES`]: order `i + 1` is case `i`.
fn case_facts() -> Vec<(i64, &'static str, &'static str)> {
    CASES
        .iter()
        .enumerate()
        .map(|(i, (key, at, _))| (i as i64 + 1, *key, *at))
        .collect()
}

/// Every boundary case of `lookup`, staged as facts, gets the same key from
/// `assign-keys`; `--json` counts matched and unknown facts; a rerun changes nothing; a
/// missing surrogate-key column is created; an empty fact table is fine.
async fn assign_keys_fills_the_fact_table(mut fx: Fixture) {
    two_keys(&mut fx).await;
    let expected: Vec<Option<i64>> = CASES.iter().map(|c| Some(c.2)).collect();
    let matched = CASES.iter().filter(|c| c.2 != UNKNOWN).count() as i64;
    let unknown = CASES.len() as i64 - matched;

    // The surrogate-key column exists and is NULL.
    create_facts(&mut fx, "facts", &FACTS).await;
    stage(&mut fx, "facts", &case_facts()).await;
    let out = fx.cli(&assign_args("facts", &["--json"]));
    assert_code(&out, 0, "assign-keys");
    let v = json(&out, "assign-keys --json");
    assert_eq!(
        (&v["facts_matched"], &v["facts_unknown"]),
        (&matched.into(), &unknown.into()),
        "{v}"
    );
    let assigned = facts(&mut fx, "facts", &FACTS).await;
    assert_eq!(ints(&assigned, "customer_sk"), expected, "{assigned:?}");

    // A rerun gives the same answer and the same table.
    let out = fx.cli(&assign_args("facts", &["--json"]));
    assert_code(&out, 0, "assign-keys rerun");
    let again = json(&out, "assign-keys rerun");
    assert_eq!(
        (&again["facts_matched"], &again["facts_unknown"]),
        (&v["facts_matched"], &v["facts_unknown"])
    );
    assert_eq!(facts(&mut fx, "facts", &FACTS).await, assigned);

    // Without the surrogate-key column: it is created.
    create_facts(&mut fx, "facts_bare", &FACTS[..3]).await;
    stage(&mut fx, "facts_bare", &case_facts()).await;
    let out = fx.cli(&assign_args("facts_bare", &[]));
    assert_code(&out, 0, "assign-keys creating the column");
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "{matched} facts got a surrogate key, {unknown} got the unknown member -1"
        )),
        "{stdout}"
    );
    assert_eq!(facts(&mut fx, "facts_bare", &FACTS).await, assigned);

    // Nothing staged: nothing to do, still a success.
    create_facts(&mut fx, "facts_empty", &FACTS).await;
    let out = fx.cli(&assign_args("facts_empty", &["--json"]));
    assert_code(&out, 0, "assign-keys on an empty table");
    let v = json(&out, "assign-keys on an empty table");
    assert_eq!(
        (&v["facts_matched"], &v["facts_unknown"]),
        (&0.into(), &0.into()),
        "{v}"
    );
}

/// With `--unknown error`, one unknown fact makes `assign-keys` write nothing (not even
/// the surrogate-key column), exit 1 and name the first such fact's key: the earliest.
async fn unknown_error_writes_nothing(mut fx: Fixture) {
    two_keys(&mut fx).await;
    let staged = [
        (1, "1", "2026-03-01T09:00:00Z"),
        (2, "77", "2026-03-05T00:00:00Z"),
        (3, "1", "2026-03-02T12:30:00.25Z"),
        (4, "42", "2026-03-02T00:00:00Z"),
        (5, "2", "2026-03-04T00:00:00Z"),
    ];
    for (table, columns) in [("facts", &FACTS[..]), ("facts_bare", &FACTS[..3])] {
        create_facts(&mut fx, table, columns).await;
        stage(&mut fx, table, &staged).await;
        let before = facts(&mut fx, table, columns).await;

        let out = fx.cli(&assign_args(table, &["--unknown", "error"]));
        assert_code(&out, 1, "assign-keys --unknown error");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("3 facts have no version") && stderr.contains("first: key (customer_id=42) at 2026-03-02"),
            "the message must count the unknown facts and name the earliest one's key: {stderr}"
        );
        assert_eq!(
            facts(&mut fx, table, columns).await,
            before,
            "{table}: something was written"
        );
        assert_eq!(
            columns_of(&mut fx, table).await,
            columns.iter().map(|c| c.name()).collect::<Vec<_>>(),
            "{table}: the failed assignment changed the table's columns"
        );
    }
    let out = fx.cli(&assign_args("facts_bare", &["--unknown", "error", "--json"]));
    assert_code(&out, 1, "assign-keys --unknown error --json");
    assert_eq!(json(&out, "--json")["error"]["kind"], "unknown-member");

    // With the default, the same facts get their keys and -1.
    for table in ["facts", "facts_bare"] {
        let out = fx.cli(&assign_args(table, &["--unknown", "-1", "--json"]));
        assert_code(&out, 0, "assign-keys --unknown -1");
    }
    let assigned = facts(&mut fx, "facts", &FACTS).await;
    assert_eq!(
        ints(&assigned, "customer_sk"),
        [1, UNKNOWN, 2, UNKNOWN, UNKNOWN].map(Some)
    );
    assert_eq!(facts(&mut fx, "facts_bare", &FACTS).await, assigned);
}

/// The column names of a target table, in order.
async fn columns_of(fx: &mut Fixture, table: &str) -> Vec<String> {
    let sql = match fx.backend {
        Backend::Postgres | Backend::Citus => format!(
            "SELECT column_name::text FROM information_schema.columns WHERE table_name = '{table}' ORDER BY ordinal_position"
        ),
        Backend::Sqlite => format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid"),
    };
    fx.target_query(&sql)
        .await
        .into_iter()
        .map(|r| r[0].clone().expect("a column name"))
        .collect()
}

/// A dimension keyed by `(region, customer_id)`: `--key-column` is given once per key
/// column, in order; the same customer id in two regions is two keys.
async fn composite_natural_keys(mut fx: Fixture) {
    let ddl = match fx.backend {
        Backend::Postgres | Backend::Citus => {
            "CREATE TABLE src_regional (region text, customer_id bigint, email text, tier text, country text,
                 is_deleted boolean NOT NULL DEFAULT false, updated_at timestamptz NOT NULL,
                 PRIMARY KEY (region, customer_id))"
        }
        Backend::Sqlite => {
            "CREATE TABLE src_regional (region TEXT, customer_id INTEGER, email TEXT, tier TEXT, country TEXT,
                 is_deleted BOOLEAN NOT NULL DEFAULT false, updated_at TEXT NOT NULL,
                 PRIMARY KEY (region, customer_id))"
        }
    };
    fx.exec(ddl).await;
    fx.set_setting("table", "\"src_regional\"");
    fx.set_setting("key", "[\"region\", \"customer_id\"]");
    fx.exec(
        "INSERT INTO src_regional (region, customer_id, email, tier, country, updated_at) VALUES
             ('EU', 1, 'ann@example.com', 'free', 'FR', '2026-03-01T09:00:00Z'),
             ('US', 1, 'al@example.com', 'pro', 'US', '2026-03-01T10:00:00Z'),
             ('EU', 2, 'bob@example.com', 'pro', 'DE', '2026-03-01T11:00:00Z')",
    )
    .await;
    fx.run("2026-03-01T12:00:00Z").await;
    fx.exec("UPDATE src_regional SET tier = 'gold', updated_at = '2026-03-02T09:00:00Z' WHERE region = 'EU' AND customer_id = 1")
        .await;
    fx.run("2026-03-02T12:00:00Z").await;
    let dim = fx.dimension().await;
    // Surrogate keys: (EU, 1) free 1, (EU, 2) 2, (US, 1) 3, (EU, 1) gold 4.
    assert_eq!(
        dim.values("customer_sk"),
        ["1", "4", "2", "3"].map(|k| Some(k.to_string())),
        "{dim:?}"
    );

    let columns = [
        FactCol::Int("order_id"),
        FactCol::Text("region"),
        FactCol::Int("customer_id"),
        FactCol::At("ordered_at"),
    ];
    create_facts(&mut fx, "regional_facts", &columns).await;
    fx.target_exec(
        "INSERT INTO regional_facts (order_id, region, customer_id, ordered_at) VALUES
             (1, 'EU', 1, '2026-03-01T12:00:00Z'),
             (2, 'US', 1, '2026-03-01T12:00:00Z'),
             (3, 'EU', 1, '2026-03-02T09:00:00Z'),
             (4, 'EU', 1, '2026-03-02T08:59:59.999999Z'),
             (5, 'US', 2, '2026-03-01T12:00:00Z'),
             (6, 'EU', 2, '2026-03-01T10:59:59Z'),
             (7, 'EU', 2, '2026-03-01T11:00:00Z')",
    )
    .await;
    let args = |extra: &[&'static str]| {
        let mut a = vec![
            "assign-keys",
            "--facts",
            "regional_facts",
            "--key-column",
            "region",
            "--key-column",
            "customer_id",
            "--at-column",
            "ordered_at",
            "--sk-column",
            "customer_sk",
        ];
        a.extend_from_slice(extra);
        a
    };
    let out = fx.cli(&args(&["--json"]));
    assert_code(&out, 0, "assign-keys with a composite key");
    let v = json(&out, "assign-keys with a composite key");
    assert_eq!(
        (&v["facts_matched"], &v["facts_unknown"]),
        (&5.into(), &2.into()),
        "{v}"
    );
    let mut with_sk = columns.to_vec();
    with_sk.push(FactCol::Int("customer_sk"));
    let assigned = facts(&mut fx, "regional_facts", &with_sk).await;
    assert_eq!(
        ints(&assigned, "customer_sk"),
        [1, 3, 4, 1, UNKNOWN, UNKNOWN, 2].map(Some),
        "{assigned:?}"
    );
    // Rerun: the same.
    assert_code(&fx.cli(&args(&[])), 0, "rerun");
    assert_eq!(facts(&mut fx, "regional_facts", &with_sk).await, assigned);

    // lookup takes COLUMN=VALUE per key column.
    let out = fx.cli(&[
        "lookup",
        "--key",
        "region=US",
        "--key",
        "customer_id=1",
        "--at",
        "2026-03-01T12:00:00Z",
    ]);
    assert_code(&out, 0, "lookup with a composite key");
    assert_eq!(text(&out.stdout), "3\n");

    // One --key-column for a two-column key is a usage error naming both columns.
    let out = fx.cli(&assign_args("regional_facts", &[]));
    assert_code(&out, 2, "one --key-column for a two-column key");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("region, customer_id"), "{stderr}");
}

/// Facts assigned before a late version arrives keep the key of the version that was in
/// effect; after the late version is slotted into history, a rerun of `assign-keys`
/// gives the facts inside its interval the late version's key, and no other fact changes.
async fn a_late_version_gives_the_rewritten_interval_its_key(mut fx: Fixture) {
    fx.use_feed().await;
    fx.set_setting("lookback", "\"1h\"");
    let feed = "INSERT INTO src_feed (customer_id, email, tier, country, updated_at) VALUES";
    fx.exec(&format!(
        "{feed} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
                (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T10:00:00Z'),
                (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T10:30:00Z").await;

    create_facts(&mut fx, "facts", &FACTS[..3]).await;
    stage(
        &mut fx,
        "facts",
        &[
            (1, "1", "2026-03-02T08:59:59Z"),
            (2, "1", "2026-03-02T09:10:00Z"),
            (3, "1", "2026-03-02T09:19:59.999999Z"),
            (4, "1", "2026-03-02T09:20:00Z"),
            (5, "1", "2026-03-02T09:59:59.999999Z"),
            (6, "1", "2026-03-02T10:00:00Z"),
            (7, "2", "2026-03-02T09:30:00Z"),
        ],
    )
    .await;
    assert_code(&fx.cli(&assign_args("facts", &[])), 0, "assign-keys before");
    let before = facts(&mut fx, "facts", &FACTS).await;
    assert_eq!(ints(&before, "customer_sk"), [UNKNOWN, 1, 1, 1, 1, 2, 3].map(Some));

    // Happened at 09:20, lands now, within the lookback.
    fx.exec(&format!(
        "{feed} (1, 'ann@example.com', 'basic', 'FR', '2026-03-02T09:20:00Z')"
    ))
    .await;
    let r = fx.run("2026-03-02T10:40:00Z").await;
    assert_eq!((r.counts.versions, r.counts.late_versions), (1, 1));

    let out = fx.cli(&assign_args("facts", &["--json"]));
    assert_code(&out, 0, "assign-keys after");
    let v = json(&out, "assign-keys after");
    assert_eq!(
        (&v["facts_matched"], &v["facts_unknown"]),
        (&6.into(), &1.into()),
        "{v}"
    );
    let after = facts(&mut fx, "facts", &FACTS).await;
    assert_eq!(ints(&after, "customer_sk"), [UNKNOWN, 1, 1, 4, 4, 2, 3].map(Some));
    let dimension = fx.dump_dimension().await;
    assert_snapshot(
        "assign_keys_after_a_late_version",
        "facts of customer 1 (free@09:00, pro@10:00) assigned, then basic@09:20 arrives late and assign-keys reruns",
        &format!(
            "== facts before\n{before}\n== dimension after the late version\n{dimension}\n== facts after\n{after}"
        ),
    );
}

/// A dimension read through `source.query` records its key's type as the driver names it
/// (`INT8` on PostgreSQL): facts keyed by a `bigint` column are of that type, and
/// assign-keys takes them (it refused them as another type, found by an outside trial).
async fn a_query_source_assigns_facts_keyed_by_the_key_type(mut fx: Fixture) {
    fx.edit_config(r#"table = "src_customers""#, r#"query = "SELECT * FROM src_customers""#);
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES \
         (1, 'a@x', 'free', 'DE', '2026-03-01T09:00:00Z'), (2, 'b@x', 'pro', 'FR', '2026-03-01T09:00:00Z')",
    )
    .await;
    fx.run("2026-03-01T10:00:00Z").await;
    create_facts(&mut fx, "facts", &FACTS).await;
    stage(
        &mut fx,
        "facts",
        &[
            (1, "1", "2026-03-01T09:30:00Z"),
            (2, "2", "2026-03-01T09:30:00Z"),
            (3, "3", "2026-03-01T09:30:00Z"),
        ],
    )
    .await;
    let out = fx.cli(&assign_args("facts", &["--json"]));
    assert_code(&out, 0, "assign-keys on a query source");
    let v = json(&out, "assign-keys --json");
    assert_eq!(
        (&v["facts_matched"], &v["facts_unknown"]),
        (&2.into(), &1.into()),
        "{v}"
    );
}
