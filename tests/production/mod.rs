//! Production use (issue 20): a rebuild that keeps what users added to the dimension,
//! readers that never see an empty dimension, dimlog's registry of the tables it owns,
//! and dimlog's own tables in an explicit schema whatever the `search_path`.

mod change_column;
mod commands;
mod dry_run;
pub(crate) mod least_privilege;
mod migrations;
mod rebuild_in_place;
mod registry;
mod slow_source;
mod state_schema;

use crate::support::fixture::Fixture;

/// Lossy UTF-8.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs a `dimlog` command through the binary and asserts it exits `code`; returns stderr.
pub fn cli_exits(fx: &Fixture, args: &[&str], code: i32) -> String {
    let out = fx.cli(args);
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(code),
        "dimlog {args:?}: stdout: {}\nstderr: {stderr}",
        text(&out.stdout)
    );
    stderr
}

/// The database name of a PostgreSQL fixture (unique: roles are named after it).
pub fn database(fx: &Fixture) -> String {
    let url = url::Url::parse(&fx.target_url).expect("url");
    url.path().trim_start_matches('/').to_string()
}

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";

/// Keys 1 and 2 loaded; key 1 has a second version.
pub async fn loaded(fx: &mut Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'free', 'DE', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T10:30:00Z' WHERE customer_id = 1")
        .await;
    fx.run("2026-03-02T11:00:00Z").await;
}
