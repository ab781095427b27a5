//! Issue 20, item 4: dimlog's own tables (`dimlog_state`, `dimlog_runs`,
//! `dimlog_dimensions`) live in one explicit schema on PostgreSQL — `target.state_schema`,
//! by default the schema of `target.log` (`public` when it is unqualified) — never
//! wherever the session's `search_path` points; a target made by an older dimlog, with
//! them elsewhere, keeps working.

use super::{cli_exits, database};
use crate::support::fixture::Fixture;

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";

/// The schemas holding a table named `name`.
async fn schemas_of(fx: &mut Fixture, name: &str) -> Vec<String> {
    fx.target_query(&format!(
        "SELECT n.nspname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relname = '{name}' ORDER BY 1"
    ))
    .await
    .into_iter()
    .filter_map(|r| r[0].clone())
    .collect()
}

/// A superuser login role whose sessions start with `search_path`; returns its URL.
async fn role_with_search_path(fx: &mut Fixture, suffix: &str, search_path: &str) -> String {
    let role = format!("{}_{suffix}", database(fx));
    fx.target_exec(&format!(
        "CREATE ROLE \"{role}\" LOGIN SUPERUSER; ALTER ROLE \"{role}\" SET search_path = {search_path}"
    ))
    .await;
    let mut url = url::Url::parse(&fx.target_url).expect("url");
    url.set_username(&role).expect("user");
    url.set_password(None).expect("password");
    url.into()
}

/// Points the config's target (not its source) at `url`.
fn target_url(fx: &mut Fixture, url: &str) {
    let old = fx
        .config()
        .split("[target]\n")
        .nth(1)
        .and_then(|t| t.lines().next())
        .expect("a target url line")
        .to_string();
    fx.edit_config(&format!("[target]\n{old}"), &format!("[target]\nurl = \"{url}\""));
}

/// Two roles with different `search_path`s load one dimension in turn: one set of
/// dimlog's tables, in the log's schema, and the second run continues the first.
#[tokio::test]
async fn one_set_of_state_tables_whatever_the_search_path() {
    let mut fx = Fixture::postgres().await;
    fx.target_exec("CREATE SCHEMA warehouse; CREATE SCHEMA sa; CREATE SCHEMA sb")
        .await;
    let a = role_with_search_path(&mut fx, "a", "sa, public").await;
    let b = role_with_search_path(&mut fx, "b", "sb, public").await;
    fx.set_setting("log", "\"warehouse.customer_versions\"");
    fx.set_setting("dimension", "\"warehouse.dim_customer\"");
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    target_url(&mut fx, &a);
    cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 0);
    fx.exec(&format!(
        "{INSERT} (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T10:30:00Z')"
    ))
    .await;
    target_url(&mut fx, &b);
    cli_exits(&fx, &["run", "--upper", "2026-03-02T11:00:00Z"], 0);
    cli_exits(&fx, &["status"], 0);
    for table in ["dimlog_state", "dimlog_runs", "dimlog_dimensions"] {
        assert_eq!(schemas_of(&mut fx, table).await, ["warehouse"], "{table}");
    }
    assert_eq!(fx.count("warehouse.dimlog_runs").await, 2);
    assert_eq!(fx.count("warehouse.dim_customer").await, 2);
}

/// `target.state_schema` puts them where it says; a target made by an older dimlog, with
/// them in the schema its `search_path` pointed at, keeps working from a session whose
/// `search_path` points elsewhere; a `state_schema` that is not where they are is refused
/// naming both schemas.
#[tokio::test]
async fn explicit_state_schema_and_older_targets() {
    let mut fx = Fixture::postgres().await;
    fx.target_exec("CREATE SCHEMA ops; CREATE SCHEMA etl").await;
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.edit_config(
        "surrogate_key = \"customer_sk\"",
        "surrogate_key = \"customer_sk\"\nstate_schema = \"ops\"",
    );
    cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 0);
    assert_eq!(schemas_of(&mut fx, "dimlog_runs").await, ["ops"]);

    // An older dimlog's target: its tables where that session's search_path pointed.
    for table in ["dimlog_state", "dimlog_runs", "dimlog_dimensions"] {
        fx.target_exec(&format!("ALTER TABLE ops.{table} SET SCHEMA etl")).await;
    }
    fx.edit_config("\nstate_schema = \"ops\"", "");
    fx.exec(&format!(
        "{INSERT} (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T10:30:00Z')"
    ))
    .await;
    cli_exits(&fx, &["run", "--upper", "2026-03-02T11:00:00Z"], 0);
    cli_exits(&fx, &["status"], 0);
    assert_eq!(
        schemas_of(&mut fx, "dimlog_runs").await,
        ["etl"],
        "found, not made again"
    );
    assert_eq!(fx.count("etl.dimlog_runs").await, 2);
    assert_eq!(fx.count("dim_customer").await, 2);

    fx.edit_config(
        "surrogate_key = \"customer_sk\"",
        "surrogate_key = \"customer_sk\"\nstate_schema = \"ops\"",
    );
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T12:00:00Z"], 2);
    for needle in ["state_schema", "ops", "etl"] {
        assert!(stderr.contains(needle), "{needle:?} not in: {stderr}");
    }

    // A second set, of another dimension's config that names its own schema: a config
    // that names none uses the set that records its dimension; one whose dimension no set
    // records is told to choose, without a guess at how they came to be (a trial was told
    // of "sessions with different search_paths").
    for table in ["dimlog_state", "dimlog_runs", "dimlog_dimensions"] {
        fx.target_exec(&format!("CREATE TABLE ops.{table} (LIKE etl.{table})"))
            .await;
    }
    fx.edit_config("\nstate_schema = \"ops\"", "");
    cli_exits(&fx, &["run", "--upper", "2026-03-02T12:00:00Z"], 0);
    assert_eq!(
        fx.count("etl.dimlog_runs").await,
        3,
        "recorded in the set that records it"
    );
    assert_eq!(fx.count("ops.dimlog_runs").await, 0);
    fx.set_setting("name", "\"customer_new\"");
    fx.set_setting("log", "\"new_versions\"");
    fx.set_setting("dimension", "\"dim_new\"");
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T12:00:00Z"], 2);
    for needle in [
        "several schemas",
        "ops",
        "etl",
        "target.state_schema",
        "dimension `customer_new`",
    ] {
        assert!(stderr.contains(needle), "{needle:?} not in: {stderr}");
    }
    assert!(!stderr.contains("search_paths"), "{stderr}");
}

/// Two teams in one database: a second dimension may keep a set of dimlog's tables of its
/// own (`state_schema` naming a schema without them) when no existing set records it, so
/// one team's runs are not recorded in the other's tables (a trial could not opt out).
/// A dimension recorded in another set is still refused, naming the move: its counters
/// are there, and a new set would start them again.
#[tokio::test]
async fn a_dimension_no_set_records_may_keep_a_set_of_its_own() {
    let mut fx = Fixture::postgres().await;
    fx.target_exec("CREATE SCHEMA team_a; CREATE SCHEMA team_b").await;
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.set_setting("log", "\"team_a.customer_versions\"");
    fx.set_setting("dimension", "\"team_a.dim_customer\"");
    cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 0);
    assert_eq!(schemas_of(&mut fx, "dimlog_runs").await, ["team_a"]);

    // Team B's dimension, with its own set.
    fx.set_setting("name", "\"customer_b\"");
    fx.set_setting("log", "\"team_b.customer_versions\"");
    fx.set_setting("dimension", "\"team_b.dim_customer\"");
    fx.edit_config(
        "surrogate_key = \"customer_sk\"",
        "surrogate_key = \"customer_sk\"\nstate_schema = \"team_b\"",
    );
    cli_exits(&fx, &["run", "--upper", "2026-03-02T10:00:00Z"], 0);
    assert_eq!(schemas_of(&mut fx, "dimlog_runs").await, ["team_a", "team_b"]);
    assert_eq!(fx.count("team_a.dimlog_runs").await, 1, "team A's runs only");
    assert_eq!(fx.count("team_b.dimlog_runs").await, 1, "team B's runs only");
    cli_exits(&fx, &["status"], 0);
    cli_exits(&fx, &["verify"], 0);

    // Team A's dimension pointed at team B's set: refused, it is recorded in team A's.
    fx.set_setting("name", "\"customer\"");
    fx.set_setting("log", "\"team_a.customer_versions\"");
    fx.set_setting("dimension", "\"team_a.dim_customer\"");
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T11:00:00Z"], 2);
    for needle in ["target.state_schema", "team_a", "team_b", "SET SCHEMA"] {
        assert!(stderr.contains(needle), "{needle:?} not in: {stderr}");
    }
    assert_eq!(
        fx.count("team_b.dimlog_runs").await,
        1,
        "nothing written to team B's set"
    );
}
