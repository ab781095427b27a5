//! PostgreSQL → PostgreSQL carries column types faithfully: the log and the dimension get
//! the source's declared types, and values round-trip unchanged. A change column without
//! a time zone is read in `source.timezone`.

use crate::support::fixture::{ts, Fixture};

const SOURCE: &str = "
CREATE TABLE src_typed (
    id         bigint PRIMARY KEY,
    amount     numeric(10,2),
    ref        uuid,
    doc        jsonb,
    born       date,
    seen_at    timestamp without time zone,
    active     boolean,
    updated_at timestamp without time zone NOT NULL
);
INSERT INTO src_typed VALUES
    (1, 12345678.90, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"b\": [1, 2.50, null], \"a\": \"x\"}',
     '1999-12-31', '2026-03-29 02:30:00.123456', true, '2026-07-01 12:00:00'),
    (2, 0.10, NULL, 'null', NULL, NULL, false, '2026-07-01 12:30:00'),
    (3, NULL, '00000000-0000-0000-0000-000000000000', '[]', '2026-02-28', '1970-01-01 00:00:00', NULL,
     '2026-07-01 13:00:00')";

const CONFIG: &str = r#"name = "typed"

[source]
url = "{url}"
table = "src_typed"
key = ["id"]
updated_at = "updated_at"
timezone = "Europe/Paris"

[target]
url = "{url}"
log = "typed_versions"
dimension = "dim_typed"
surrogate_key = "typed_sk"

[track]
columns = ["amount", "ref", "doc", "born", "seen_at", "active"]
"#;

/// `column -> formatted type` of a target table, from the catalog.
async fn column_types(fx: &mut Fixture, table: &str) -> Vec<(String, String)> {
    fx.target_query(&format!(
        "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod)
         FROM pg_attribute a
         WHERE a.attrelid = '{table}'::regclass AND a.attnum > 0 AND NOT a.attisdropped
         ORDER BY a.attnum"
    ))
    .await
    .into_iter()
    .map(|r| (r[0].clone().unwrap_or_default(), r[1].clone().unwrap_or_default()))
    .collect()
}

/// `information_schema` says the same, in its own words.
async fn information_schema(fx: &mut Fixture, table: &str) -> Vec<String> {
    fx.target_query(&format!(
        "SELECT column_name::text || ' ' || data_type::text
                || coalesce(' ' || numeric_precision::text || ',' || numeric_scale::text, '')
         FROM information_schema.columns
         WHERE table_schema = 'public' AND table_name = '{table}'
           AND column_name IN ('amount', 'ref', 'doc', 'born', 'seen_at', 'active', 'id')
         ORDER BY ordinal_position"
    ))
    .await
    .into_iter()
    .map(|r| r[0].clone().unwrap_or_default())
    .collect()
}

#[tokio::test]
async fn postgres_to_postgres_keeps_column_types() {
    let mut fx = Fixture::postgres().await;
    fx.exec(SOURCE).await;
    let url = fx.target_url.clone();
    fx.set_config(CONFIG.replace("{url}", &url));
    let r = fx.run("2026-07-01T12:00:00Z").await;
    assert_eq!(r.counts.versions, 3);
    assert_eq!(
        r.high_watermark.map(|t| t.to_text()).as_deref(),
        Some("2026-07-01T11:00:00.000000Z"),
        "13:00 in Paris (CEST) is 11:00 UTC"
    );

    let expected = [
        ("id", "bigint"),
        ("amount", "numeric(10,2)"),
        ("ref", "uuid"),
        ("doc", "jsonb"),
        ("born", "date"),
        ("seen_at", "timestamp without time zone"),
        ("active", "boolean"),
    ];
    for table in ["typed_versions", "dim_typed"] {
        let types = column_types(&mut fx, table).await;
        for (column, ty) in expected {
            let found = types.iter().find(|(c, _)| c == column).map(|(_, t)| t.as_str());
            assert_eq!(found, Some(ty), "{table}.{column}: {types:?}");
        }
        let found = types.iter().find(|(c, _)| c == "valid_from").map(|(_, t)| t.as_str());
        assert_eq!(found, Some("timestamp with time zone"), "{table}.valid_from");
        assert_eq!(
            information_schema(&mut fx, table).await,
            [
                "id bigint 64,0",
                "amount numeric 10,2",
                "ref uuid",
                "doc jsonb",
                "born date",
                "seen_at timestamp without time zone",
                "active boolean"
            ],
            "{table}"
        );
    }

    // Every value round-trips: the dimension's rows equal the source's, NULLs included,
    // and valid_from is updated_at read in Europe/Paris.
    let same = "SELECT count(*)::text FROM src_typed s JOIN {t} d ON d.id = s.id
                WHERE d.amount IS NOT DISTINCT FROM s.amount AND d.ref IS NOT DISTINCT FROM s.ref
                  AND d.doc IS NOT DISTINCT FROM s.doc AND d.born IS NOT DISTINCT FROM s.born
                  AND d.seen_at IS NOT DISTINCT FROM s.seen_at AND d.active IS NOT DISTINCT FROM s.active
                  AND d.valid_from = s.updated_at AT TIME ZONE 'Europe/Paris'";
    for table in ["typed_versions", "dim_typed"] {
        let rows = fx.target_query(&same.replace("{t}", table)).await;
        assert_eq!(rows[0][0].as_deref(), Some("3"), "{table} lost or changed a value");
    }
    let text = fx
        .target_query("SELECT amount::text, doc::text, seen_at::text FROM dim_typed WHERE id = 1")
        .await;
    assert_eq!(
        text[0],
        [
            Some("12345678.90".to_string()),
            Some(r#"{"a": "x", "b": [1, 2.50, null]}"#.to_string()),
            Some("2026-03-29 02:30:00.123456".to_string())
        ]
    );

    // Rereading changes nothing (the canonical text of every type is stable), and a real
    // change of a typed value is one version.
    let r = fx.run("2026-07-01T12:00:00Z").await;
    assert_eq!(r.counts.versions + r.counts.corrections, 0);
    fx.exec("UPDATE src_typed SET amount = 0.20, updated_at = '2026-07-01 13:30:00' WHERE id = 2")
        .await;
    let r = fx.run("2026-07-01T12:00:00Z").await;
    assert_eq!((r.counts.versions, r.counts.rows_read), (1, 2));
    let amounts = fx
        .target_query("SELECT amount::text FROM dim_typed WHERE id = 2 ORDER BY valid_from")
        .await;
    assert_eq!(amounts, [[Some("0.10".to_string())], [Some("0.20".to_string())]]);

    // Without source.timezone the zone-less change column is refused, naming the setting.
    let no_zone = fx.config().replace("timezone = \"Europe/Paris\"\n", "");
    fx.set_config(no_zone);
    let err = fx
        .try_run_with(dimlog::pipeline::RunOptions {
            upper: Some(ts("2026-07-01T12:00:00Z")),
            ..dimlog::pipeline::RunOptions::incremental()
        })
        .await
        .expect_err("a timestamp without time zone needs source.timezone");
    assert_eq!(err.exit_code(), 2, "{err}");
    assert!(err.to_string().contains("source.timezone"), "{err}");
}
