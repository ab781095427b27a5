//! A value's text does not depend on the settings of the sessions dimlog reads and
//! writes through. PostgreSQL prints some types by session settings (`bytea_output`,
//! `IntervalStyle`, `DateStyle`, `TimeZone`, `extra_float_digits`, `lc_monetary`; and
//! `quote_all_identifiers` the catalog's type names), which a database, a
//! role or the URL's `options` may set: a load hashes and stores the text it reads, so a
//! setting that changed it would turn every row read into a correction (or a new version
//! where the change time had moved), and a value stored in a text column would be kept
//! in two spellings (a new-user trial found `bytea_output` and `IntervalStyle` did).

use dimlog::pipeline::RunOptions;

use super::assert_verified;
use crate::support::fixture::{ts, Fixture};

/// Every setting that changes how a type prints, with each value that prints it otherwise.
const SETTINGS: &[(&str, &[&str])] = &[
    ("bytea_output", &["escape"]),
    ("IntervalStyle", &["postgres_verbose", "sql_standard", "iso_8601"]),
    ("DateStyle", &["SQL, DMY", "German", "Postgres, MDY"]),
    ("TimeZone", &["Asia/Kathmandu", "America/St_Johns"]),
    ("extra_float_digits", &["0", "-15", "3"]),
    ("quote_all_identifiers", &["on"]),
    ("lc_monetary", &["C.UTF-8", "POSIX"]),
];

/// A key loaded with columns of every type whose text a session setting changes; then,
/// with each setting set on the database (so every new session gets it), a full refresh
/// finds nothing to correct, the stored values are the ones stored before, and `verify
/// --against-source` agrees; the same with the setting in the URL's `options`.
#[tokio::test]
async fn session_settings_change_no_hash_and_no_stored_value() {
    let mut fx = Fixture::postgres().await;
    let db = crate::production::database(&fx);
    fx.exec(
        "CREATE TABLE src_kinds (id bigint PRIMARY KEY, b bytea, iv interval, d date, t time, tz timetz, \
             ts timestamptz, f double precision, r real, m money, updated_at timestamptz NOT NULL);
         INSERT INTO src_kinds VALUES
           (1, '\\x3847b34e52ff00'::bytea, '1 year 2 mons 3 days 04:05:06.5', '2026-02-03', '04:05:06.789',
            '04:05:06+05:30', '2026-02-03 04:05:06.789+01', 0.30000000000000004, 0.1, 1234.56, '2026-03-01T09:00:00Z'),
           (2, '\\x'::bytea, '-10.5 seconds', '1999-12-31', '23:59:59', '00:00:00-03:30', '1970-01-01 00:00:00+00',
            1e300, 3.4e38, -0.5, '2026-03-01T09:00:00Z')",
    )
    .await;
    let columns = ["b", "iv", "d", "t", "tz", "ts", "f", "r", "m"];
    let config = fx
        .config()
        .replace("table = \"src_customers\"", "table = \"src_kinds\"")
        .replace("key = [\"customer_id\"]", "key = [\"id\"]")
        .replace("deleted_flag = \"is_deleted\"\n", "")
        .replace(
            "columns = [\"email\", \"tier\", \"country\"]",
            &format!("columns = {columns:?}"),
        );
    fx.set_config(config.clone());
    fx.run("2026-03-01T10:00:00Z").await;
    let before = stored(&mut fx, &columns).await;
    let mut minute = 0;
    for (setting, values) in SETTINGS {
        for value in *values {
            fx.target_exec(&format!("ALTER DATABASE \"{db}\" SET \"{setting}\" = '{value}'"))
                .await;
            minute += 1;
            let what = format!("database {setting} = {value}");
            check(&mut fx, minute, &columns, &before, &what).await;
            fx.target_exec(&format!("ALTER DATABASE \"{db}\" RESET \"{setting}\""))
                .await;
            // The same in the URL (libpq's `options`), for the source and the target.
            let option = format!("-c {}={}", setting.to_lowercase(), value.replace(' ', ""));
            let mut url = url::Url::parse(&fx.target_url).expect("url");
            url.query_pairs_mut().append_pair("options", &option);
            fx.set_config(config.replace(&fx.target_url, url.as_str()));
            minute += 1;
            check(&mut fx, minute, &columns, &before, &format!("URL options {option}")).await;
            fx.set_config(config.clone());
        }
    }
}

/// The stored values of `columns`, a JSON object per dimension row.
async fn stored(fx: &mut Fixture, columns: &[&str]) -> Vec<dimlog::db::TextRow> {
    let sql = format!("SELECT id, {} FROM dim_customer ORDER BY id", columns.join(", "));
    fx.target_query(&format!("SELECT row_to_json(s)::text FROM ({sql}) s"))
        .await
}

/// A full refresh at 11:`minute` finds nothing to change, the stored values are
/// `before`, and verify agrees with the source.
async fn check(fx: &mut Fixture, minute: i64, columns: &[&str], before: &[dimlog::db::TextRow], what: &str) {
    let r = fx
        .run_with(RunOptions {
            upper: Some(dimlog::ts::Micros(ts("2026-03-01T11:00:00Z").0 + minute * 60_000_000)),
            kind: dimlog::state::RunKind::FullRefresh,
            ..RunOptions::incremental()
        })
        .await;
    assert_eq!(
        (r.counts.versions, r.counts.corrections),
        (0, 0),
        "{what}: a full refresh found changes: {r:?}"
    );
    assert_eq!(stored(fx, columns).await, before, "{what}: stored values changed");
    assert_verified(fx, true).await;
}
