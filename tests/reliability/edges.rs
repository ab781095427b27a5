//! Issue 14, items 4 and 5: a log or dimension table belongs to one dimension name, and
//! text that is not UTF-8 is refused, never rewritten.

use dimlog::config::Backend;

use super::cli;
use crate::support::fixture::{on_both_backends, Fixture};

on_both_backends!(a_second_name_on_the_same_tables_is_refused,);

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";

/// Every way to point a second dimension name at tables the first one owns: the same
/// names, another spelling of them (schema-qualified; other case where the backend folds
/// case), and the other's log as this one's dimension. Each is refused with exit 2 by
/// `init` and `run`, naming the owner, and changes nothing.
async fn a_second_name_on_the_same_tables_is_refused(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    let original = fx.config().to_string();
    let (log, dimension, runs) = (fx.log().await, fx.dimension().await, fx.runs().await);
    let schema = match fx.backend {
        Backend::Postgres | Backend::Citus => "public",
        Backend::Sqlite => "main",
    };
    let mut spellings = vec![
        ("customer_versions".to_string(), "dim_customer".to_string()),
        (format!("{schema}.customer_versions"), "dim_other".to_string()),
        ("other_versions".to_string(), format!("{schema}.dim_customer")),
        ("dim_customer".to_string(), "dim_other".to_string()),
        ("other_versions".to_string(), "customer_versions".to_string()),
    ];
    if fx.backend == Backend::Sqlite {
        spellings.push(("CUSTOMER_VERSIONS".to_string(), "dim_other".to_string()));
    }
    for (log_table, dim_table) in spellings {
        fx.set_config(original.replace("name = \"customer\"", "name = \"products\""));
        fx.set_setting("log", &format!("\"{log_table}\""));
        fx.set_setting("dimension", &format!("\"{dim_table}\""));
        for command in [&["init"][..], &["run", "--upper", "2026-03-02T11:00:00Z"][..]] {
            let out = cli::run(&fx.config_path(), command);
            assert_eq!(out.code, Some(2), "{log_table} / {dim_table}: {out:?}");
            for part in ["customer", "products", "target."] {
                assert!(out.stderr.contains(part), "{part:?} missing: {out:?}");
            }
        }
        fx.set_config(original.clone());
        assert_eq!(fx.log().await, log, "{log_table} / {dim_table}");
        assert_eq!(fx.dimension().await, dimension);
        assert_eq!(fx.runs().await, runs);
        for t in ["other_versions", "dim_other"] {
            assert!(!fx.target_has_table(t).await, "{t} was created");
        }
    }
}

/// SQLite stores whatever bytes it is given as TEXT. A value that is not UTF-8 cannot be
/// loaded as text unchanged, so the run fails naming the column and the key, and commits
/// nothing; a BLOB column keeps its bytes exactly, and a later value whose text spells
/// those bytes in hex is a change.
#[tokio::test]
async fn text_that_is_not_utf8_is_refused_and_blobs_load_as_bytes() {
    let mut fx = Fixture::sqlite().await;
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    let (log, runs_before) = (fx.log().await, fx.runs().await.rows.len());
    fx.exec(&format!(
        "{INSERT} (42, CAST(X'66ff6f' AS TEXT), 'free', 'FR', '2026-03-02T10:30:00Z')"
    ))
    .await;
    let out = cli::run(&fx.config_path(), &["run", "--upper", "2026-03-02T11:00:00Z"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    for part in ["email", "42", "UTF-8"] {
        assert!(out.stderr.contains(part), "{part:?} missing: {out:?}");
    }
    assert_eq!(fx.log().await, log);
    assert_eq!(fx.runs().await.rows.len(), runs_before + 1, "one failed run record");

    // A BLOB column, tracked: bytes in, the same bytes in the log.
    let mut fx = Fixture::sqlite().await;
    fx.exec(
        "CREATE TABLE src_files (file_id INTEGER PRIMARY KEY, content BLOB, updated_at TEXT NOT NULL);
         INSERT INTO src_files VALUES (1, X'66ff6f', '2026-03-02T09:00:00Z'), (2, X'616263', '2026-03-02T09:00:00Z')",
    )
    .await;
    let config = fx
        .config()
        .replace("table = \"src_customers\"", "table = \"src_files\"")
        .replace("key = [\"customer_id\"]", "key = [\"file_id\"]")
        .replace("deleted_flag = \"is_deleted\"\n", "")
        .replace(
            "columns = [\"email\", \"tier\", \"country\"]",
            "columns = [\"content\"]",
        );
    fx.set_config(config);
    fx.run("2026-03-02T10:00:00Z").await;
    let stored = fx
        .target_query("SELECT lower(hex(content)), typeof(content) FROM customer_versions ORDER BY file_id")
        .await;
    let expect = |h: &str| vec![Some(h.to_string()), Some("blob".to_string())];
    assert_eq!(stored, vec![expect("66ff6f"), expect("616263")]);
    // The text `\x66ff6f` is other bytes than 66 ff 6f: a change.
    fx.exec("UPDATE src_files SET content = '\\x66ff6f', updated_at = '2026-03-02T10:30:00Z' WHERE file_id = 1")
        .await;
    let r = fx.run("2026-03-02T11:00:00Z").await;
    assert_eq!(r.counts.versions, 1, "{r:?}");
}
