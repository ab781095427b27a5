//! `dimlog doctor` (issue 17): one line per check of the setup, nothing written; exit 0
//! when nothing failed, 1 when something did, naming it.

use super::{dimlog, json, text};
use crate::reliability::cli;
use crate::support::fixture::{on_both_backends, Fixture};
use dimlog::config::Backend;

on_both_backends!(doctor_checks_the_setup_and_writes_nothing);
on_both_backends!(doctor_fails_what_would_fail_a_first_load);

/// The clocks are compared as of one moment: the source's is read before the source's
/// checks, which read every row and take seconds on a large table, and the others after.
/// (A trial's `doctor` failed on a 1M-row SQLite source, whose clock is this machine's:
/// "the source's clock and this machine's are 1s apart".)
#[tokio::test]
async fn doctor_compares_the_clocks_as_of_one_moment_after_slow_checks() {
    let mut fx = Fixture::sqlite().await;
    fx.insert_customers(600_000).await;
    fx.run("2026-03-02T10:00:00Z").await;
    let config = fx.config_path();
    // The checks must take seconds for the test to mean anything, and how many rows that
    // takes depends on the machine: the source doubles until they do.
    let mut rows: u64 = 600_000;
    loop {
        let started = std::time::Instant::now();
        let out = dimlog(fx.dir(), &["--config", config.to_str().unwrap(), "doctor", "--json"]);
        let took = started.elapsed();
        let report = json(&out, "doctor --json");
        if took > std::time::Duration::from_millis(1500) {
            assert_eq!(outcome(&outcomes(&report), "clocks"), "ok", "{report}");
            assert_eq!(out.status.code(), Some(0), "{report}");
            return;
        }
        assert!(
            rows < 4_800_000,
            "the checks took only {took:?} over {rows} rows: too few to show clocks read seconds apart"
        );
        fx.exec(&format!(
            "WITH RECURSIVE n(i) AS (SELECT {first} UNION ALL SELECT i + 1 FROM n WHERE i < {last})
             INSERT INTO src_customers (customer_id, email, tier, country, updated_at)
             SELECT i, 'user' || i || '@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z' FROM n",
            first = rows + 1,
            last = rows * 2,
        ))
        .await;
        rows *= 2;
    }
}

/// The outcome of each check, by name, from `doctor --json`.
fn outcomes(report: &serde_json::Value) -> Vec<(String, String)> {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_string(),
                c["outcome"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn outcome<'a>(all: &'a [(String, String)], name: &str) -> &'a str {
    all.iter()
        .find(|(n, _)| n == name)
        .map(|(_, o)| o.as_str())
        .unwrap_or_else(|| panic!("no check {name:?} in {all:?}"))
}

async fn doctor_checks_the_setup_and_writes_nothing(mut fx: Fixture) {
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')",
    )
    .await;
    let config = fx.config_path();
    let config = config.to_str().unwrap();
    let doctor = |fx: &Fixture, args: &[&str]| {
        let mut all = vec!["--config", config, "doctor"];
        all.extend_from_slice(args);
        dimlog(fx.dir(), &all)
    };

    // Nothing loaded yet: a note, not a failure, and still nothing written.
    let out = doctor(&fx, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
    let report = json(&out, "doctor --json");
    let all = outcomes(&report);
    for ok in ["config", "source", "source table", "time zone", "source clock"] {
        assert_eq!(outcome(&all, ok), "ok", "{report}");
    }
    // Every change value parsed where the engine keeps times as values of any form.
    if fx.backend == Backend::Sqlite {
        assert_eq!(outcome(&all, "change values"), "ok", "{report}");
    } else {
        assert!(!all.iter().any(|(n, _)| n == "change values"), "{report}");
    }
    // (The fixture's target database exists, without dimlog's tables.)
    assert_eq!(outcome(&all, "target"), "ok", "{report}");
    assert_eq!(outcome(&all, "recorded columns"), "note", "{report}");
    if fx.backend == Backend::Sqlite {
        let tables = fx
            .target_query("SELECT count(*) FROM sqlite_master WHERE name LIKE 'dimlog%'")
            .await;
        assert_eq!(tables[0][0].as_deref(), Some("0"), "doctor created dimlog's tables");
    } else {
        assert_eq!(
            fx.target_query("SELECT count(*)::text FROM pg_tables WHERE tablename LIKE 'dimlog%'")
                .await[0][0]
                .as_deref(),
            Some("0")
        );
    }

    // Loaded: every check passes, one line each.
    fx.run("2026-03-02T10:00:00Z").await;
    let before = (fx.log().await, fx.dimension().await, fx.state().await, fx.runs().await);
    let out = doctor(&fx, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for name in [
        "config",
        "source",
        "source table",
        "source clock",
        "target",
        "rights to load",
        "target clock",
        "clocks",
        "recorded columns",
        "tables",
        "future rows",
        "lock",
    ] {
        assert!(stdout.contains(&format!("ok    {name}: ")), "{name}:\n{stdout}");
    }
    assert_eq!(
        (fx.log().await, fx.dimension().await, fx.state().await, fx.runs().await),
        before,
        "doctor wrote something"
    );

    // SQLite: how a run reads its window, and the indexes that spare it the scan;
    // created as advised, they serve it. (PostgreSQL reads it through its own plans.)
    if fx.backend == Backend::Sqlite {
        let stdout = text(&out.stdout);
        let advice: String = stdout
            .lines()
            .skip_while(|l| !l.starts_with("note  window read: "))
            .skip(1)
            .take_while(|l| l.starts_with("CREATE INDEX"))
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(advice.matches("CREATE INDEX").count(), 2, "{stdout}");
        fx.exec(&advice).await;
        let stdout = text(&doctor(&fx, &[]).stdout);
        assert!(stdout.contains("ok    window read: "), "{stdout}");
    } else {
        assert!(!text(&out.stdout).contains("window read"));
    }

    // A run holding the lock is a note, on SQLite (its write transaction) too;
    // PostgreSQL can say whose.
    {
        let held = cli::hold(
            &fx.config_path(),
            &["run", "--upper", "2026-03-02T10:00:00Z"],
            "after_extract",
        )
        .await;
        let out = doctor(&fx, &["--json"]);
        let report = json(&out, "doctor --json");
        assert_eq!(outcome(&outcomes(&report), "lock"), "note", "{report}");
        assert!(report.to_string().contains("a run holds the lock"), "{report}");
        if fx.backend == Backend::Postgres {
            assert!(report.to_string().contains("session "), "{report}");
        }
        held.kill();
    }

    // Tables changed by hand fail here as they would fail a run, with the repair:
    // a dimension column dropped (rebuild), the dimension renamed away (rename it back).
    fx.target_exec("ALTER TABLE dim_customer DROP COLUMN tier").await;
    let out = doctor(&fx, &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL  tables: ") && stdout.contains("no column tier") && stdout.contains("dimlog rebuild"),
        "{stdout}"
    );
    // Commands that read the dropped column say the same (history failed with the
    // database's bare "no such column" on SQLite, found by an outside trial).
    let history = fx.cli(&["history", "--key", "1"]);
    assert!(
        text(&history.stderr).contains("`dimlog rebuild`"),
        "{}",
        text(&history.stderr)
    );
    let rebuilt = fx.cli(&["rebuild"]);
    assert!(rebuilt.status.success(), "{}", text(&rebuilt.stderr));
    assert_eq!(doctor(&fx, &[]).status.code(), Some(0));
    fx.target_exec("ALTER TABLE dim_customer RENAME TO dim_customer_old")
        .await;
    let stdout = text(&doctor(&fx, &[]).stdout);
    assert!(
        stdout.contains("FAIL  tables: ")
            && stdout.contains("looks renamed to")
            && stdout.contains("or set target.dimension to"),
        "{stdout}"
    );
    // A new name the config cannot take is not offered as one to set.
    fx.target_exec("ALTER TABLE dim_customer_old RENAME TO \"Dim Customer Old\"")
        .await;
    let stdout = text(&doctor(&fx, &[]).stdout);
    assert!(
        stdout.contains("looks renamed to") && !stdout.contains("or set target.dimension to"),
        "{stdout}"
    );
    fx.target_exec("ALTER TABLE \"Dim Customer Old\" RENAME TO dim_customer")
        .await;
    fx.target_exec("ALTER TABLE customer_versions DROP COLUMN country")
        .await;
    let stdout = text(&doctor(&fx, &[]).stdout);
    assert!(
        stdout.contains("no column country") && stdout.contains("restore it from a backup"),
        "{stdout}"
    );
    fx.target_exec("ALTER TABLE customer_versions ADD COLUMN country text")
        .await;

    // A row stamped after the source's clock waits for an upper bound past it: a note
    // (a run warns of it; doctor said nothing: found by an outside trial).
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) \
         VALUES (77, 'f@example.com', 'free', 'FR', '2099-01-01T00:00:00Z')",
    )
    .await;
    // SQLite: in every spelling a run reads (its own time functions miss `+0530` and
    // ` UTC`: doctor counted fewer than the run, found by an outside trial).
    let expected = if fx.backend == Backend::Sqlite {
        fx.exec(
            "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES \
             (78, 'g@example.com', 'free', 'FR', '2099-01-01t10:00:00+0530'), \
             (79, 'h@example.com', 'free', 'FR', '2099-01-02 10:00:00 UTC')",
        )
        .await;
        3
    } else {
        1
    };
    let out = doctor(&fx, &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "note  future rows: {expected} source row(s) are stamped after the source's clock"
        )) && stdout.contains("2099-01-0"),
        "{stdout}"
    );
    fx.exec("DELETE FROM src_customers WHERE customer_id >= 77").await;
    // A value that names no instant fails a run wherever it lies, and doctor with it.
    if fx.backend == Backend::Sqlite {
        fx.exec(
            "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) \
             VALUES (80, 'i@example.com', 'free', 'FR', '2020-04-01T24:30:00Z')",
        )
        .await;
        let out = doctor(&fx, &[]);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{stdout}");
        // Named as what it is, not as a row stamped in the future (an outside trial).
        assert!(
            stdout.contains("FAIL  change values: ") && stdout.contains("(80)"),
            "{stdout}"
        );
        assert!(!stdout.contains("FAIL  future rows"), "{stdout}");
        fx.exec("DELETE FROM src_customers WHERE customer_id = 80").await;
    }

    // The tracked columns changed since the dimension was built: named, exit 1.
    fx.set_setting("columns", r#"["email", "tier"]"#);
    let out = doctor(&fx, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("FAIL  recorded columns: ") && stdout.contains("country"),
        "{stdout}"
    );
    // With what to do, in commands, as every command's error says it.
    assert!(
        stdout.contains("hint: ") && stdout.contains("--accept-config-change"),
        "{stdout}"
    );
    let report = json(&doctor(&fx, &["--json"]), "doctor --json");
    let recorded = report["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "recorded columns"))
        .cloned()
        .unwrap_or_default();
    assert!(
        recorded["hint"]
            .as_str()
            .is_some_and(|h| h.contains("--accept-config-change")),
        "{report}"
    );
    // With -q, the failures alone, on stderr.
    let quiet = doctor(&fx, &["-q"]);
    assert_eq!(quiet.status.code(), Some(1));
    assert!(text(&quiet.stdout).is_empty(), "{}", text(&quiet.stdout));
    assert!(
        text(&quiet.stderr).contains("FAIL  recorded columns: "),
        "{}",
        text(&quiet.stderr)
    );
    fx.set_setting("columns", r#"["email", "tier", "country"]"#);

    // A source table that is gone: named, and what needs it is skipped.
    fx.exec("ALTER TABLE src_customers RENAME TO src_gone").await;
    let out = doctor(&fx, &["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report = json(&out, "doctor --json");
    let all = outcomes(&report);
    assert_eq!(outcome(&all, "source table"), "fail", "{report}");
    assert_eq!(outcome(&all, "recorded columns"), "skipped", "{report}");
    assert_eq!(report["ok"], false);
    fx.exec("ALTER TABLE src_gone RENAME TO src_customers").await;

    // A config that does not parse is the first check's failure.
    let bad = fx.dir().join("bad.toml");
    std::fs::write(&bad, "name = \n").expect("write");
    let out = dimlog(fx.dir(), &["--config", bad.to_str().unwrap(), "doctor"]);
    assert_eq!(out.status.code(), Some(2), "as every command's config error");
    assert!(text(&out.stdout).contains("FAIL  config: "), "{}", text(&out.stdout));
}

/// What makes a first load fail is a failed check before it runs (a trial's `doctor`
/// passed each): a SQLite target file to create in a folder that does not exist
/// ("rights to load", naming the folder), and a source row with a NULL change column
/// ("NULL change values", naming its key), on both backends' sources. With each fixed,
/// the check passes and the first load runs.
async fn doctor_fails_what_would_fail_a_first_load(mut fx: Fixture) {
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')",
    )
    .await;
    let config = fx.config_path();
    let args = ["--config", config.to_str().unwrap(), "doctor", "--json"];
    if fx.backend == Backend::Sqlite {
        let target = fx.target_url.clone();
        let missing = fx.dir().join("nosuch");
        fx.edit_config(&target, &format!("sqlite://{}/w.db", missing.display()));
        let out = dimlog(fx.dir(), &args);
        let report = json(&out, "doctor --json");
        assert_eq!(out.status.code(), Some(1), "{report}");
        assert_eq!(outcome(&outcomes(&report), "rights to load"), "fail", "{report}");
        assert!(
            report
                .to_string()
                .contains(&format!("{} does not exist", missing.display())),
            "{report}"
        );
        let checks = report["checks"].as_array().expect("checks");
        assert!(
            checks.iter().all(|c| c.get("hint").is_some()),
            "a check without a hint key: {report}"
        );
        // A target that keeps nothing (in memory), or a `?` meant in a name: the setting's
        // error (exit 2), for `run` as for `doctor`.
        let mut previous = format!("sqlite://{}/w.db", missing.display());
        for (url, words) in [
            ("sqlite::memory:", "in-memory"),
            ("sqlite://w.db?mode=memory", "in-memory"),
            ("sqlite://x?y.db", "unknown SQLite URL parameter `y.db`"),
        ] {
            fx.edit_config(&previous, url);
            previous = url.to_string();
            for command in [&["run", "--json"][..], &["doctor", "--json"][..]] {
                let out = cli::run(&config, command);
                assert_eq!(out.code, Some(2), "{url}: {command:?}: {out:?}");
                assert!(
                    out.stdout.contains("target.url") && out.stdout.contains(words),
                    "{url}: {out:?}"
                );
            }
        }
        fx.edit_config(&previous, &format!("sqlite://{}/w.db", missing.display()));
        std::fs::create_dir(&missing).unwrap();
        let out = dimlog(fx.dir(), &args);
        let report = json(&out, "doctor --json");
        assert_eq!(outcome(&outcomes(&report), "rights to load"), "ok", "{report}");
    }
    if fx.backend == Backend::Postgres {
        // A role that may read the source but not create the tables a first run makes
        // (no `dimlog init` by an owner, no CREATE on the schema): run fails, so doctor does.
        use crate::production::least_privilege::{connect_as, url_as};
        let owner_url = fx.target_url.clone();
        let reader = format!("{}_reader", crate::production::database(&fx));
        fx.target_exec(&format!(
            "CREATE ROLE \"{reader}\" LOGIN; GRANT SELECT ON src_customers TO \"{reader}\";
             REVOKE CREATE ON SCHEMA public FROM PUBLIC"
        ))
        .await;
        let reader_url = url_as(&fx, &reader);
        connect_as(&mut fx, &reader_url);
        let grant = format!("GRANT CREATE ON SCHEMA public TO {reader}");
        let out = dimlog(fx.dir(), &args);
        let report = json(&out, "doctor --json");
        assert_eq!(out.status.code(), Some(1), "{report}");
        assert_eq!(outcome(&outcomes(&report), "rights to load"), "fail", "{report}");
        assert!(report.to_string().contains(&grant), "{report}");
        let run = cli::run(&config, &["run", "--upper", "2026-03-02T10:00:00Z"]);
        assert_eq!(run.code, Some(1), "{run:?}");
        assert!(run.stderr.contains(&grant), "{run:?}");
        fx.target_exec(&format!("GRANT CREATE ON SCHEMA public TO \"{reader}\""))
            .await;
        let out = dimlog(fx.dir(), &args);
        let report = json(&out, "doctor --json");
        assert_eq!(outcome(&outcomes(&report), "rights to load"), "ok", "{report}");
        // Read-only transactions for the role (doctor's own session is read-only anyway):
        // the run fails, so doctor does.
        let db = crate::production::database(&fx);
        for (set, reset) in [
            (
                format!("ALTER ROLE \"{reader}\" SET default_transaction_read_only = on"),
                format!("ALTER ROLE \"{reader}\" RESET default_transaction_read_only"),
            ),
            (
                format!("ALTER DATABASE \"{db}\" SET default_transaction_read_only = true"),
                format!("ALTER DATABASE \"{db}\" RESET default_transaction_read_only"),
            ),
        ] {
            fx.target_exec(&set).await;
            let out = dimlog(fx.dir(), &args);
            let report = json(&out, "doctor --json");
            assert_eq!(outcome(&outcomes(&report), "rights to load"), "fail", "{set}: {report}");
            assert!(report.to_string().contains("read-only transactions"), "{set}: {report}");
            fx.target_exec(&reset).await;
        }
        let out = dimlog(fx.dir(), &args);
        let report = json(&out, "doctor --json");
        assert_eq!(outcome(&outcomes(&report), "rights to load"), "ok", "{report}");
        fx.target_exec(&format!("REVOKE CREATE ON SCHEMA public FROM \"{reader}\""))
            .await;
        connect_as(&mut fx, &owner_url);
    }
    fx.set_setting("table", "\"src_nullable\"");
    fx.create_source_table("src_nullable", true, false).await;
    fx.exec(
        "INSERT INTO src_nullable (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z'), (7, 'n@example.com', 'free', 'FR', NULL)",
    )
    .await;
    let out = dimlog(fx.dir(), &args);
    let report = json(&out, "doctor --json");
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert_eq!(outcome(&outcomes(&report), "NULL change values"), "fail", "{report}");
    assert!(report.to_string().contains("key (7)"), "{report}");
    fx.exec("DELETE FROM src_nullable WHERE customer_id = 7").await;
    let out = dimlog(fx.dir(), &args);
    let report = json(&out, "doctor --json");
    assert_eq!(outcome(&outcomes(&report), "NULL change values"), "ok", "{report}");
    let run = cli::run(&config, &["run", "--upper", "2026-03-02T10:00:00Z"]);
    assert_eq!(run.code, Some(0), "{run:?}");
}
