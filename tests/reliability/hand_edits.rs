//! A log or a dimension edited by hand so that a column dimlog uses is gone (issue 17):
//! a run fails, commits nothing, and says so in the user's terms: which step failed in
//! words (the statement only as `step` in `--json`, and in `-v`), no internal table
//! aliases, and a hint that names the commands that find and repair it.

use super::cli;
use crate::support::fixture::{on_both_backends, Fixture};

on_both_backends!(a_column_renamed_by_hand_fails_the_run_in_user_terms);

/// Each edit, on its own freshly loaded dimension.
const EDITS: &[(&str, &str)] = &[
    (
        "a tracked column of the dimension",
        "ALTER TABLE dim_customer RENAME COLUMN tier TO tier_old",
    ),
    (
        "a tracked column of the log",
        "ALTER TABLE customer_versions RENAME COLUMN tier TO tier_old",
    ),
    (
        "the dimension's valid_to",
        "ALTER TABLE dim_customer RENAME COLUMN valid_to TO vt",
    ),
    (
        "the log's row_hash",
        "ALTER TABLE customer_versions RENAME COLUMN row_hash TO rh",
    ),
];

/// Whether `message` names a statement as `family/name failed`.
fn names_a_statement(message: &str) -> bool {
    message.split_whitespace().collect::<Vec<_>>().windows(2).any(|w| {
        w[1].starts_with("failed")
            && w[0]
                .split_once('/')
                .is_some_and(|(f, n)| !f.is_empty() && n.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
    })
}

/// Whether `message` holds one of dimlog's table aliases (`dimlog_l.email`).
fn holds_an_alias(message: &str) -> bool {
    message.match_indices("dimlog_").any(|(i, _)| {
        let tail = &message[i + "dimlog_".len()..];
        let n = tail.chars().take_while(|c| c.is_ascii_lowercase()).count();
        n > 0 && n <= 3 && tail[n..].starts_with('.')
    })
}

async fn a_column_renamed_by_hand_fails_the_run_in_user_terms(fx: Fixture) {
    let backend = fx.backend;
    drop(fx);
    for (what, edit) in EDITS {
        let mut fx = Fixture::on(backend).await;
        fx.exec(
            "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
                 (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'),
                 (2, 'bob@example.com', 'pro', 'DE', '2026-03-02T09:00:00Z')",
        )
        .await;
        fx.run("2026-03-02T10:00:00Z").await;
        fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-02T11:00:00Z' WHERE customer_id = 1")
            .await;
        fx.target_exec(edit).await;
        let runs = fx.runs().await.rows.len();
        let config = fx.config_path();
        let args = ["run", "--json", "--upper", "2026-03-02T12:00:00Z"];

        let out = cli::run(&config, &args);
        assert_eq!(out.code, Some(1), "{what}: {out:?}");
        let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("one JSON object");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(!names_a_statement(message), "{what}: {message}");
        assert!(!holds_an_alias(message), "{what}: {message}");
        let step = v["error"]["step"].as_str().unwrap_or_default();
        assert!(step.contains('/'), "{what}: the statement that failed, apart: {out:?}");
        let hint = v["error"]["hint"].as_str().unwrap_or_default();
        assert!(
            hint.contains("`dimlog verify`") && hint.contains("`dimlog rebuild`"),
            "{what}: {out:?}"
        );

        // In text: the message and the hint; with -v, the statement too.
        let out = cli::run(&config, &["-v", "run", "--upper", "2026-03-02T12:00:00Z"]);
        assert_eq!(out.code, Some(1), "{what}: {out:?}");
        assert!(
            out.stderr.contains("hint: a column dimlog reads or writes is missing"),
            "{what}: {out:?}"
        );
        assert!(out.stderr.contains(step), "{what}: -v names the statement: {out:?}");

        // Nothing committed: the failed runs are recorded, nothing else.
        assert_eq!(fx.count("customer_versions").await, 2, "{what}");
        assert_eq!(fx.runs().await.rows.len(), runs + 2, "{what}");
    }
}

#[test]
fn the_checks_find_what_they_look_for() {
    assert!(names_a_statement("rebuild/merge_touched failed: x"));
    assert!(!names_a_statement("rebuilding the dimension failed: x"));
    assert!(holds_an_alias("column dimlog_l.email does not exist"));
    assert!(!holds_an_alias("relation dimlog_runs does not exist"));
}
