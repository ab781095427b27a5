//! Issue 20, item 3: dimlog knows the tables it owns (`dimlog_dimensions`). A registered
//! log or dimension that is missing is an error naming it (exit 2), never silently created
//! again empty; a missing dimension is rebuilt whole from the log by `dimlog rebuild`,
//! never in part by `run`; a table renamed away is named as the cause.

use super::{cli_exits, loaded};
use crate::support::fixture::{on_both_backends, Fixture};

on_both_backends!(
    a_missing_log_is_an_error_naming_it,
    a_dropped_dimension_is_rebuilt_whole_never_in_part,
    a_dimension_renamed_away_is_named_as_the_cause,
    an_emptied_or_cut_log_is_refused_by_every_command,
    edited_counters_are_refused,
);

/// With the log renamed away, `run`, `rebuild` and `verify` exit 2 naming the log and
/// the table it became; no new empty log is created.
async fn a_missing_log_is_an_error_naming_it(mut fx: Fixture) {
    loaded(&mut fx).await;
    fx.target_exec("ALTER TABLE customer_versions RENAME TO customer_versions_old")
        .await;
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T11:30:00Z' WHERE customer_id = 2")
        .await;
    for args in [
        &["run", "--upper", "2026-03-02T12:00:00Z"][..],
        &["rebuild"],
        &["verify"],
    ] {
        let stderr = cli_exits(&fx, args, 2);
        for needle in ["customer_versions", "customer_versions_old", "customer"] {
            assert!(stderr.contains(needle), "{args:?}: {needle:?} not in: {stderr}");
        }
    }
    assert!(!fx.target_has_table("customer_versions").await, "no new log");
    assert_eq!(fx.count("dim_customer").await, 3, "the dimension is as it was");
}

/// With the dimension dropped, `run` exits 2 naming it and `dimlog rebuild`, creating
/// nothing; `rebuild` builds it again whole, and the next run goes on.
async fn a_dropped_dimension_is_rebuilt_whole_never_in_part(mut fx: Fixture) {
    loaded(&mut fx).await;
    let good = fx.dimension().await;
    fx.target_exec("DROP TABLE dim_customer").await;
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T11:30:00Z' WHERE customer_id = 2")
        .await;
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T12:00:00Z"], 2);
    for needle in ["dim_customer", "dimlog rebuild"] {
        assert!(stderr.contains(needle), "{needle:?} not in: {stderr}");
    }
    assert!(!fx.target_has_table("dim_customer").await, "no partial dimension");
    cli_exits(&fx, &["rebuild"], 0);
    assert_eq!(fx.dimension().await, good, "rebuilt whole from the log");
    fx.run("2026-03-02T12:00:00Z").await;
    assert_eq!(fx.count("dim_customer").await, 4);
    fx.assert_dimension_derives_from_log().await;
}

/// With the dimension renamed to another name, every command names the table it became
/// (not "relation … _pkey already exists"), and renaming it back makes everything work.
async fn a_dimension_renamed_away_is_named_as_the_cause(mut fx: Fixture) {
    loaded(&mut fx).await;
    fx.target_exec("ALTER TABLE dim_customer RENAME TO dim_customer_2025")
        .await;
    for args in [&["run", "--upper", "2026-03-02T12:00:00Z"][..], &["rebuild"]] {
        let stderr = cli_exits(&fx, args, 2);
        assert!(!stderr.contains("already exists"), "{args:?}: {stderr}");
        for needle in ["dim_customer", "dim_customer_2025", "renamed"] {
            assert!(stderr.contains(needle), "{args:?}: {needle:?} not in: {stderr}");
        }
    }
    assert!(!fx.target_has_table("dim_customer").await);
    fx.target_exec("ALTER TABLE dim_customer_2025 RENAME TO dim_customer")
        .await;
    fx.run("2026-03-02T12:00:00Z").await;
    fx.assert_dimension_derives_from_log().await;
}

/// A log emptied (`TRUNCATE`), replaced by an empty copy, or cut short (its newest rows
/// deleted) holds fewer rows than dimlog appended (`dimlog_dimensions` records the next
/// log id). `run`, `rebuild`, `verify`, `status` and `init` exit 2 naming the log and
/// how many rows it lacks (rows deleted from the middle: `rebuild` and `verify`, which
/// read the whole log), and never advise a rebuild from it: a rebuild would empty the
/// dimension, the only copy left of the history. Nothing is written.
async fn an_emptied_or_cut_log_is_refused_by_every_command(mut fx: Fixture) {
    loaded(&mut fx).await;
    let dimension = fx.dump_dimension().await;
    let emptied = match fx.backend {
        dimlog::config::Backend::Postgres | dimlog::config::Backend::Citus => "TRUNCATE customer_versions",
        dimlog::config::Backend::Sqlite => "DELETE FROM customer_versions",
    };
    let newest = "DELETE FROM customer_versions WHERE log_id = (SELECT max(log_id) FROM customer_versions)";
    let oldest = "DELETE FROM customer_versions WHERE log_id = 1";
    for damage in [emptied, newest, oldest] {
        let log = fx.dump_log().await;
        let backup = "CREATE TABLE log_backup AS SELECT * FROM customer_versions";
        fx.target_exec(backup).await;
        fx.target_exec(damage).await;
        // Rows deleted from the middle are found by the commands that read the whole
        // log: verify, and rebuild, the one that would lose them.
        let commands: &[&[&str]] = if damage == oldest {
            // A run finds it when it touches the key whose version is gone.
            fx.exec(
                "UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T11:30:00Z' WHERE customer_id = 1",
            )
            .await;
            &[&["rebuild"], &["verify"], &["run", "--upper", "2026-03-02T12:00:00Z"]]
        } else {
            &[
                &["run", "--upper", "2026-03-02T12:00:00Z"],
                &["rebuild"],
                &["verify"],
                &["status"],
                &["init"],
            ]
        };
        for args in commands.iter().copied() {
            let stderr = cli_exits(&fx, args, 2);
            let needles: &[&str] = if damage == oldest && args[0] == "run" {
                &["customer_versions", "surrogate key 1", "backup"]
            } else {
                &["customer_versions", "missing", "backup"]
            };
            for needle in needles.iter().copied() {
                assert!(
                    stderr.contains(needle),
                    "{damage}: {args:?}: {needle:?} not in: {stderr}"
                );
            }
            assert!(!stderr.contains("run `dimlog rebuild`"), "{damage}: {args:?}: {stderr}");
        }
        assert_eq!(
            fx.dump_dimension().await,
            dimension,
            "{damage}: the dimension is as it was"
        );
        fx.target_exec("DELETE FROM customer_versions; INSERT INTO customer_versions SELECT * FROM log_backup; DROP TABLE log_backup")
            .await;
        assert_eq!(fx.dump_log().await, log);
        cli_exits(&fx, &["verify"], 0);
    }
}

/// A log moved to another schema (or found only through another role's `search_path`)
/// is named with the schema that holds it; a `target.log` changed to a name the
/// dimension was not built with names the log it was built with. Nothing is created.
#[tokio::test]
async fn a_log_elsewhere_or_renamed_in_the_config_is_named() {
    let mut fx = Fixture::postgres().await;
    loaded(&mut fx).await;
    fx.target_exec("CREATE SCHEMA w4; ALTER TABLE customer_versions SET SCHEMA w4")
        .await;
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T12:00:00Z"], 2);
    assert!(stderr.contains("w4.customer_versions"), "{stderr}");
    assert!(stderr.contains("search_path"), "{stderr}");
    assert!(!stderr.contains("delete its rows"), "no advice to start over: {stderr}");
    fx.target_exec("ALTER TABLE w4.customer_versions SET SCHEMA public")
        .await;
    fx.set_setting("log", "\"brand_new_log\"");
    let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T12:00:00Z"], 2);
    assert!(
        stderr.contains("brand_new_log") && stderr.contains("built with") && stderr.contains("customer_versions"),
        "{stderr}"
    );
    assert!(!fx.target_has_table("brand_new_log").await, "no new log");
}

/// `dimlog_dimensions`' counters edited by hand: a `next_surrogate_key` at or below a key
/// the log gave (a surrogate key only the dimension holds is a hand edit of the dimension,
/// and `dimlog rebuild` is named), or a `next_log_id` behind the log, would make the next load reuse
/// keys or log ids; a `next_log_id` raised past the log reads as rows deleted. Each is
/// refused (exit 2) naming the counter and the value to set; nothing is written.
async fn edited_counters_are_refused(mut fx: Fixture) {
    loaded(&mut fx).await;
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T11:30:00Z' WHERE customer_id = 2")
        .await;
    let log = fx.dump_log().await;
    for (edit, needles) in [
        (
            "UPDATE dimlog_dimensions SET next_surrogate_key = 2",
            &["next_surrogate_key = 4", "dim_customer"][..],
        ),
        (
            "UPDATE dimlog_dimensions SET next_log_id = 2",
            &["next_log_id = 4", "customer_versions"][..],
        ),
        (
            "UPDATE dimlog_dimensions SET next_log_id = 9",
            &["raised by hand", "customer_versions"][..],
        ),
        // The dimension edited instead: the log says so, and a rebuild repairs it.
        (
            "UPDATE dim_customer SET customer_sk = 70 WHERE customer_sk = 3",
            &["surrogate key 70", "dimlog rebuild"][..],
        ),
    ] {
        fx.target_exec(&format!(
            "{edit}; CREATE TABLE saved AS SELECT * FROM dimlog_dimensions"
        ))
        .await;
        let stderr = cli_exits(&fx, &["run", "--upper", "2026-03-02T12:00:00Z"], 2);
        for needle in needles {
            assert!(stderr.contains(needle), "{edit}: {needle:?} not in: {stderr}");
        }
        assert_eq!(fx.dump_log().await, log, "{edit}: nothing written");
        fx.target_exec(
            "UPDATE dimlog_dimensions SET next_surrogate_key = 4, next_log_id = 4; DROP TABLE saved;
             UPDATE dim_customer SET customer_sk = 3 WHERE customer_sk = 70",
        )
        .await;
    }
    cli_exits(&fx, &["run", "--upper", "2026-03-02T12:00:00Z"], 0);
}
