//! `dimlog demo`: a few simulated nights on an embedded SQLite database.

use super::{GlobalArgs, Output};
use crate::config::{Overrides, Plan};
use crate::db::Conn;
use crate::pipeline::{self, Quiet, RunOptions, Session};
use crate::Error;
use std::path::PathBuf;

/// Run a self-contained demonstration: creates a SQLite source (a change feed of
/// customers), loads four simulated nights — updates, a NULL transition, a late-arriving
/// version, a soft delete and a return, a correction at the same timestamp — and prints
/// the history of each key. No server needed.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Folder for the demo's files (source.db, warehouse.db, dimlog.toml): recreated when
    /// it is the demo's own, refused when it holds such files of anyone else's.
    #[arg(long, default_value = "dimlog-demo")]
    pub dir: PathBuf,
}

const CONFIG: &str = r#"# The demo's config: a change feed (one row per change) loaded into an SCD2 dimension.
name = "customer"

[source]
url = "sqlite://source.db"
table = "src_customer_changes"
key = ["customer_id"]
updated_at = "updated_at"
deleted_flag = "is_deleted"
lookback = "3d"
history = "all"

[target]
url = "sqlite://warehouse.db"
log = "customer_versions"
dimension = "dim_customer"
surrogate_key = "customer_sk"

[track]
columns = ["email", "tier", "country"]
"#;

/// (night's upper bound, what happened, statements on the source).
fn nights() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    vec![
        (
            "2026-10-01T00:00:00Z",
            "three customers sign up",
            vec![
                "INSERT INTO src_customer_changes VALUES (1, 'ann@example.com', 'silver', 'NL', 0, '2026-09-30T10:00:00Z')",
                "INSERT INTO src_customer_changes VALUES (2, 'bob@example.com', 'gold', 'NL', 0, '2026-09-30T11:00:00Z')",
                "INSERT INTO src_customer_changes VALUES (3, 'cy@example.com', 'pro', 'DE', 0, '2026-09-30T12:00:00Z')",
            ],
        ),
        (
            "2026-10-02T00:00:00Z",
            "ann moves to gold; bob's country becomes unknown (NULL)",
            vec![
                "INSERT INTO src_customer_changes VALUES (1, 'ann@example.com', 'gold', 'NL', 0, '2026-10-01T09:00:00Z')",
                "INSERT INTO src_customer_changes VALUES (2, 'bob@example.com', 'gold', NULL, 0, '2026-10-01T12:00:00Z')",
            ],
        ),
        (
            "2026-10-03T00:00:00Z",
            "a late row arrives for ann (stamped before her gold version); cy is deleted; bob's country is known again",
            vec![
                "INSERT INTO src_customer_changes VALUES (1, 'ann@work.example', 'silver', 'NL', 0, '2026-10-01T06:00:00Z')",
                "INSERT INTO src_customer_changes VALUES (3, 'cy@example.com', 'pro', 'DE', 1, '2026-10-02T08:00:00Z')",
                "INSERT INTO src_customer_changes VALUES (2, 'bob@example.com', 'gold', 'BE', 0, '2026-10-02T10:00:00Z')",
            ],
        ),
        (
            "2026-10-04T00:00:00Z",
            "cy comes back; bob's last row is corrected in place (LU, same updated_at)",
            vec![
                "INSERT INTO src_customer_changes VALUES (3, 'cy@example.com', 'basic', 'DE', 0, '2026-10-03T09:00:00Z')",
                "UPDATE src_customer_changes SET country = 'LU' WHERE customer_id = 2 AND updated_at = '2026-10-02T10:00:00Z'",
            ],
        ),
    ]
}

/// Runs `demo`.
pub async fn run(_global: &GlobalArgs, args: DemoArgs, out: &Output) -> Result<i32, Error> {
    let io = |e: std::io::Error| Error::Usage(format!("cannot prepare demo folder {}: {e}", args.dir.display()));
    std::fs::create_dir_all(&args.dir).map_err(io)?;
    // The demo remakes its own folder only: one whose dimlog.toml is the demo's, or that
    // holds none of its files (their names are `dimlog new`'s too).
    let config_path = args.dir.join("dimlog.toml");
    let own = std::fs::read_to_string(&config_path).is_ok_and(|text| text == CONFIG);
    let theirs: Vec<&str> = ["dimlog.toml", "source.db", "warehouse.db"]
        .into_iter()
        .filter(|f| args.dir.join(f).exists())
        .collect();
    if !own && !theirs.is_empty() {
        return Err(Error::Usage(format!(
            "{} holds {} that the demo did not make, and the demo would replace: give it a folder of its own with --dir",
            args.dir.display(),
            theirs.join(", ")
        )));
    }
    for f in [
        "source.db",
        "source.db-wal",
        "source.db-shm",
        "warehouse.db",
        "warehouse.db-wal",
        "warehouse.db-shm",
    ] {
        let _ = std::fs::remove_file(args.dir.join(f));
    }
    std::fs::write(&config_path, CONFIG).map_err(io)?;
    let plan = Plan::load(&config_path, &Overrides::default())?;
    let mut source = Conn::connect(&plan.source.url).await?;
    source
        .execute_script(
            "creating the demo source",
            "CREATE TABLE src_customer_changes (customer_id INTEGER NOT NULL, email TEXT, tier TEXT, country TEXT, is_deleted BOOLEAN NOT NULL DEFAULT 0, updated_at TEXT NOT NULL)",
        )
        .await?;
    let mut session = Session::open(&plan).await?;
    let mut reports = Vec::new();
    for (i, (upper, story, statements)) in nights().into_iter().enumerate() {
        for s in statements {
            source.execute("changing the demo source", s, &[]).await?;
        }
        let opts = RunOptions {
            upper: Some(super::parse_ts("--upper", upper)?),
            ..RunOptions::incremental()
        };
        let report = pipeline::run(&mut session, &plan, &opts, &Quiet).await?;
        out.line(format!(
            "night {} ({story}):\n  {}",
            i + 1,
            super::run::summary(&report)
        ));
        reports.push(report);
    }
    let mut histories = Vec::new();
    for key in ["1", "2", "3"] {
        let rows =
            crate::inspect::history(&mut session.target, &session.ctx, &session.layout, &[key.to_string()]).await?;
        out.line(format!(
            "\nhistory of customer {key}:\n{}",
            super::history::render(&rows)
        ));
        histories.push(serde_json::json!({"key": key, "versions": rows}));
    }
    // Closed cleanly, SQLite folds its WAL files into the two databases.
    session.close().await;
    let _ = source.close().await;
    out.line(format!(
        "\nthe files are in {}: run `dimlog --config {config} status` or `dimlog --config {config} history --key 1` to explore",
        args.dir.display(),
        config = shell_word(&config_path.display().to_string())
    ));
    if out.json {
        out.print_json(&serde_json::json!({"runs": reports, "histories": histories, "dir": args.dir}));
    }
    Ok(0)
}

/// A path as one shell word, so the hint can be pasted: as it is when it holds only
/// characters no shell reads specially, else in single quotes.
fn shell_word(path: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c);
    if !path.is_empty() && path.chars().all(plain) {
        path.to_string()
    } else {
        format!("'{}'", path.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    #[test]
    fn a_path_is_one_shell_word() {
        assert_eq!(shell_word("dimlog-demo/dimlog.toml"), "dimlog-demo/dimlog.toml");
        assert_eq!(shell_word("odd dir/x/dimlog.toml"), "'odd dir/x/dimlog.toml'");
        assert_eq!(shell_word("it's/d.toml"), "'it'\\''s/d.toml'");
    }
}
