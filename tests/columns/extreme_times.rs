//! Tracked PostgreSQL `timestamptz` values outside the common era, and the infinities,
//! keep their meaning on a PostgreSQL and on a SQLite target. They were read as the AD
//! instant of the same digits and as NULL: stored wrong, with `verify` agreeing (it read
//! the source the same way), and a change from one to its look-alike (BC to AD,
//! `-infinity` to NULL) opened no version: lost (a new-user trial).

use dimlog::pipeline::RunOptions;

use super::assert_verified;
use crate::support::fixture::{ts, Fixture};

const VALUES: [(i64, &str); 6] = [
    (1, "'0044-03-15 12:00:00+00 BC'"),
    (2, "'-infinity'"),
    (3, "'infinity'"),
    (4, "'0001-01-01 00:00:00+00'"),
    (5, "'9999-12-31 23:59:59.999999+00'"),
    (6, "NULL"),
];

async fn extreme_times_keep_their_meaning(mut fx: Fixture, sqlite_target: bool) {
    let rows: Vec<String> = VALUES
        .iter()
        .map(|(id, t)| format!("({id}, {t}, '2026-03-01T09:00:00Z')"))
        .collect();
    fx.exec(&format!(
        "CREATE TABLE src_times (id bigint PRIMARY KEY, t timestamptz, updated_at timestamptz NOT NULL);
         INSERT INTO src_times VALUES {}",
        rows.join(", ")
    ))
    .await;
    let mut config = fx
        .config()
        .replace("table = \"src_customers\"", "table = \"src_times\"")
        .replace("key = [\"customer_id\"]", "key = [\"id\"]")
        .replace("deleted_flag = \"is_deleted\"\n", "")
        .replace("columns = [\"email\", \"tier\", \"country\"]", "columns = [\"t\"]");
    let target = if sqlite_target {
        let url = format!("sqlite://{}", fx.dir().join("warehouse.db").display());
        config = config.replace(
            &format!("[target]\nurl = \"{}\"", fx.target_url),
            &format!("[target]\nurl = \"{url}\""),
        );
        url
    } else {
        fx.target_url.clone()
    };
    fx.set_config(config);
    fx.run("2026-03-01T10:00:00Z").await;

    // Stored as the source holds them: PostgreSQL's own text of the value it stores, or
    // the text a SQLite target keeps.
    let mut conn = crate::support::fixture::connect("target.url", &target).await;
    let cast = if sqlite_target { "t" } else { "t::text" };
    let stored = conn
        .query_text("test", &format!("SELECT {cast} FROM dim_customer ORDER BY id"), &[])
        .await
        .expect("the dimension");
    let stored: Vec<Option<String>> = stored.into_iter().map(|r| r[0].clone()).collect();
    let expected: Vec<Option<String>> = if sqlite_target {
        vec![
            Some("0044-03-15T12:00:00.000000Z BC".into()),
            Some("-infinity".into()),
            Some("infinity".into()),
            Some("0001-01-01T00:00:00.000000Z".into()),
            Some("9999-12-31T23:59:59.999999Z".into()),
            None,
        ]
    } else {
        fx.source_query("SELECT t::text FROM src_times ORDER BY id")
            .await
            .into_iter()
            .map(|r| r[0].clone())
            .collect()
    };
    assert_eq!(stored, expected);
    assert_verified(&fx, true).await;

    // Each into its look-alike: a version each.
    fx.exec(
        "UPDATE src_times SET updated_at = '2026-03-01T10:30:00Z', t = CASE id
             WHEN 1 THEN '0044-03-15 12:00:00+00'::timestamptz WHEN 2 THEN NULL WHEN 3 THEN '-infinity' END
         WHERE id IN (1, 2, 3)",
    )
    .await;
    let r = fx.run("2026-03-01T11:00:00Z").await;
    assert_eq!(r.counts.versions, 3, "{r:?}");
    // Read again whole: nothing to correct.
    let r = fx
        .run_with(RunOptions {
            upper: Some(ts("2026-03-01T11:30:00Z")),
            kind: dimlog::state::RunKind::FullRefresh,
            ..RunOptions::incremental()
        })
        .await;
    assert_eq!((r.counts.versions, r.counts.corrections), (0, 0), "{r:?}");
    assert_verified(&fx, true).await;
}

#[tokio::test]
async fn extreme_times_keep_their_meaning_postgres() {
    extreme_times_keep_their_meaning(Fixture::postgres().await, false).await;
}

#[tokio::test]
async fn extreme_times_keep_their_meaning_postgres_to_sqlite() {
    extreme_times_keep_their_meaning(Fixture::postgres().await, true).await;
}
