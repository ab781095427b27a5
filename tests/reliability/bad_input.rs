//! Bad input, through the binary: each fails with a clear message and the exit code of
//! spec section 4, and commits nothing (measured against a dimension loaded before).

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use dimlog::config::Backend;

use super::cli::{self, CliOutput};
use crate::support::fixture::{on_both_backends, Dump, Fixture};

on_both_backends!(
    null_natural_key_fails_the_run,
    null_composite_key_names_every_null_column,
    null_updated_at_fails_the_run,
    duplicate_key_and_timestamp_is_deterministic_and_counted,
    unknown_table_is_a_config_error,
    unknown_column_is_a_config_error,
    injected_identifiers_are_refused,
    a_dropped_tracked_column_is_named,
    a_retyped_tracked_column_names_the_migration,
    a_table_no_dimension_is_recorded_with_is_not_taken_over,
    a_renamed_surrogate_key_setting_is_refused_by_every_command,
);

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES";
const FIRST: &str = "2026-03-02T09:30:00Z";
const NEXT: &str = "2026-03-02T10:00:00Z";

/// The target as a loaded dimension left it, and the config that loaded it.
struct Before {
    config: String,
    log: Dump,
    dimension: Dump,
    state: Dump,
    runs: usize,
}

/// Loads one row of `table` with the binary, and returns the target as it is then.
async fn loaded(fx: &mut Fixture, table: &str) -> Before {
    fx.exec(&format!(
        "INSERT INTO {table} (customer_id, email, tier, country, updated_at) \
         VALUES (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let out = cli::run(&fx.config_path(), &["run", "--upper", FIRST]);
    assert_eq!(out.code, Some(0), "{out:?}");
    Before {
        config: fx.config().to_string(),
        log: fx.log().await,
        dimension: fx.dimension().await,
        state: fx.state().await,
        runs: fx.runs().await.rows.len(),
    }
}

/// The message of `error: …` on stderr.
fn message(out: &CliOutput) -> &str {
    out.stderr
        .trim()
        .strip_prefix("error: ")
        .unwrap_or_else(|| panic!("no `error: ` line: {out:?}"))
}

/// The error message says each of `parts` (the setting, the column, the count, the fix),
/// and nothing else went to stdout.
fn assert_says(out: &CliOutput, parts: &[&str]) {
    let text = message(out);
    for part in parts {
        assert!(text.contains(part), "the message does not say {part:?}: {out:?}");
    }
    assert_eq!(out.stdout, "", "{out:?}");
}

/// Log, dimension and state are unchanged; a run record added since is `failed`, with the
/// message the user saw. Restores the config that loaded the dimension, to read them.
/// Runs the next load through the CLI and asserts it is refused: exit `code`, a message
/// saying each of `parts`, and nothing committed.
async fn assert_run_refused(fx: &mut Fixture, before: &Before, code: i32, parts: &[&str]) {
    let out = cli::run(&fx.config_path(), &["run", "--upper", NEXT]);
    assert_eq!(out.code, Some(code), "{out:?}");
    assert_says(&out, parts);
    assert_nothing_committed(fx, before, &out).await;
}

async fn assert_nothing_committed(fx: &mut Fixture, before: &Before, out: &CliOutput) {
    fx.set_config(before.config.clone());
    assert_eq!(fx.log().await, before.log, "the log changed");
    assert_eq!(fx.dimension().await, before.dimension, "the dimension changed");
    assert_eq!(fx.state().await, before.state, "the watermark changed");
    let runs = fx.runs().await;
    for r in &runs.records()[before.runs..] {
        assert_eq!(r["status"].as_deref(), Some("failed"), "{runs:?}");
        assert_eq!(r["error"].as_deref(), Some(message(out)), "{runs:?}");
    }
}

/// A change of key 1 that must not be committed along with the bad rows.
async fn change_key_1(fx: &mut Fixture, table: &str) {
    fx.exec(&format!(
        "INSERT INTO {table} (customer_id, email, tier, country, updated_at) \
         VALUES (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:40:00Z')"
    ))
    .await;
}

async fn null_natural_key_fails_the_run(mut fx: Fixture) {
    fx.use_feed().await;
    let before = loaded(&mut fx, "src_feed").await;
    change_key_1(&mut fx, "src_feed").await;
    fx.exec(
        "INSERT INTO src_feed (customer_id, email, tier, country, updated_at) VALUES
             (NULL, 'x@example.com', 'pro', 'FR', '2026-03-02T09:41:00Z'),
             (NULL, 'y@example.com', 'pro', 'FR', '2026-03-02T09:42:00Z')",
    )
    .await;
    assert_run_refused(
        &mut fx,
        &before,
        1,
        &[
            "2 source rows",
            "NULL natural key `customer_id`",
            "source.key",
            "source.query",
        ],
    )
    .await;
}

/// Issue 21: a composite key whose rows hold NULLs in both columns: the error names both,
/// with how many rows each, and counts the rows once.
async fn null_composite_key_names_every_null_column(mut fx: Fixture) {
    fx.use_feed().await;
    fx.set_setting("key", r#"["customer_id", "email"]"#);
    fx.set_setting("columns", r#"["tier", "country"]"#);
    let before = loaded(&mut fx, "src_feed").await;
    change_key_1(&mut fx, "src_feed").await;
    fx.exec(
        "INSERT INTO src_feed (customer_id, email, tier, country, updated_at) VALUES
             (NULL, NULL, 'pro', 'FR', '2026-03-02T09:41:00Z'),
             (NULL, 'y@example.com', 'pro', 'FR', '2026-03-02T09:42:00Z'),
             (2, NULL, 'pro', 'FR', '2026-03-02T09:43:00Z')",
    )
    .await;
    assert_run_refused(
        &mut fx,
        &before,
        1,
        &[
            "3 source rows",
            "NULL natural key (`customer_id` in 2, `email` in 2 of them)",
            "source.key",
            "source.query",
        ],
    )
    .await;
}

async fn null_updated_at_fails_the_run(mut fx: Fixture) {
    fx.create_source_table("src_nullable", true, false).await;
    fx.set_setting("table", "\"src_nullable\"");
    let before = loaded(&mut fx, "src_nullable").await;
    fx.exec(
        "UPDATE src_nullable SET tier = 'pro', updated_at = '2026-03-02T09:40:00Z' WHERE customer_id = 1;
         INSERT INTO src_nullable (customer_id, email, tier, country, updated_at) VALUES
             (2, 'bob@example.com', 'pro', 'DE', NULL),
             (3, 'cyd@example.com', 'pro', 'NL', NULL)",
    )
    .await;
    assert_run_refused(
        &mut fx,
        &before,
        1,
        &[
            "2 source rows",
            "NULL `updated_at`",
            "source.updated_at",
            "never be loaded",
        ],
    )
    .await;
}

on_both_backends!(the_null_updated_at_error_names_a_row_by_its_key);

/// The refusal of NULL change columns names the key of one such row, so it can be found
/// (a trial found only a count), also for a key of several columns.
async fn the_null_updated_at_error_names_a_row_by_its_key(mut fx: Fixture) {
    fx.create_source_table("src_nullable", false, false).await;
    fx.exec(
        "INSERT INTO src_nullable (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'pro', 'FR', '2026-03-02T09:00:00Z'),
             (41, 'zed@example.com', 'pro', 'DE', NULL)",
    )
    .await;
    fx.set_setting("table", "\"src_nullable\"");
    fx.set_setting("key", "[\"customer_id\", \"country\"]");
    fx.set_setting("columns", "[\"email\", \"tier\"]");
    let out = cli::run(&fx.config_path(), &["run", "--upper", NEXT]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_says(&out, &["1 source rows", "NULL `updated_at`", "key (41, DE)"]);
}

/// A PostgreSQL `timestamp` (no time zone) change column is refused before anything is
/// written, naming source.timezone; setting it fixes the run.
#[tokio::test]
async fn a_naive_timestamp_column_needs_source_timezone_on_postgres() {
    let mut fx = Fixture::postgres().await;
    fx.exec(
        "CREATE TABLE src_naive (customer_id bigint PRIMARY KEY, email text, tier text, country text, \
         is_deleted boolean NOT NULL DEFAULT false, updated_at timestamp NOT NULL);
         INSERT INTO src_naive (customer_id, email, tier, country, updated_at)
         VALUES (1, 'ann@example.com', 'free', 'FR', '2026-03-02 09:00:00')",
    )
    .await;
    fx.set_setting("table", "\"src_naive\"");
    let out = cli::run(&fx.config_path(), &["run", "--upper", FIRST]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert_says(
        &out,
        &[
            "setting `source.timezone`",
            "`updated_at`",
            "timestamp without time zone",
            "\"UTC\"",
        ],
    );
    assert!(!fx.target_has_table("dimlog_runs").await, "something was written");

    fx.edit_config(
        "safety_lag = \"0s\"",
        "safety_lag = \"0s\"\ntimezone = \"Europe/Paris\"",
    );
    let out = cli::run(&fx.config_path(), &["run", "--upper", FIRST]);
    assert_eq!(out.code, Some(0), "{out:?}");
    // 09:00 in Paris is 08:00 UTC.
    assert_eq!(
        fx.dimension().await.values("valid_from"),
        [Some("2026-03-02T08:00:00.000000Z".to_string())]
    );
}

/// SQLite text without an offset is the config error a PostgreSQL `timestamp` column is
/// (exit 2, naming source.timezone), and nothing is committed.
#[tokio::test]
async fn a_timestamp_without_offset_is_a_config_error_on_sqlite() {
    let mut fx = Fixture::sqlite().await;
    let before = loaded(&mut fx, "src_customers").await;
    fx.exec(&format!(
        "{INSERT} (2, 'bob@example.com', 'pro', 'DE', '2026-03-02 09:40:00')"
    ))
    .await;
    assert_run_refused(
        &mut fx,
        &before,
        2,
        &[
            "setting `source.timezone`",
            "`updated_at`",
            "\"2026-03-02 09:40:00\"",
            "has no time zone",
        ],
    )
    .await;

    fx.edit_config("safety_lag = \"0s\"", "safety_lag = \"0s\"\ntimezone = \"UTC\"");
    let out = cli::run(&fx.config_path(), &["run", "--upper", NEXT]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(fx.count("dim_customer").await, 2);
}

/// Every SQLite change-column value needs exactly one instant: a row whose value is not
/// a timestamp (garbage, empty, an impossible date, bytes, a number SQLite would read as a
/// Julian day, an epoch integer, text that is not UTF-8) fails the run (exit 1) naming the
/// column and the row's key, wherever the value is, never skipped as outside the window.
/// Surrounding spaces are not an error: the value is read as its instant.
#[tokio::test]
async fn an_unreadable_change_column_fails_the_run_on_sqlite() {
    // (declared type of updated_at, the value's SQL literal)
    let bad = [
        ("TEXT", "'garbage'"),
        ("TEXT", "''"),
        ("TEXT", "'   '"),
        ("TEXT", "'2026-02-30T10:00:00Z'"),
        ("TEXT", "'2025-13-01T10:00:00Z'"),
        ("TEXT", "'now'"),
        ("TEXT", "X'00'"),
        ("TEXT", "X'FF'"),
        ("TEXT", "'2461100.5'"),
        ("TEXT", "'1772442000'"),
        ("INTEGER", "1772442000"),
        ("INTEGER", "2461100"),
        ("", "2461100.5"),
    ];
    for (declared, literal) in bad {
        let case = format!("updated_at {declared} = {literal}");
        let mut fx = Fixture::sqlite().await;
        fx.exec(&format!(
            "CREATE TABLE src_typed (customer_id INTEGER PRIMARY KEY, email TEXT, tier TEXT, country TEXT, \
             is_deleted BOOLEAN NOT NULL DEFAULT false, updated_at {declared} NOT NULL)"
        ))
        .await;
        fx.set_setting("table", "\"src_typed\"");
        let before = loaded(&mut fx, "src_typed").await;
        fx.exec("UPDATE src_typed SET tier = 'pro', updated_at = '2026-03-02T09:40:00Z' WHERE customer_id = 1")
            .await;
        fx.exec(&format!(
            "INSERT INTO src_typed (customer_id, email, tier, country, updated_at) \
             VALUES (2, 'bob@example.com', 'pro', 'DE', {literal})"
        ))
        .await;
        let out = cli::run(&fx.config_path(), &["run", "--upper", NEXT]);
        assert_eq!(out.code, Some(1), "{case}: {out:?}");
        let text = message(&out);
        for part in ["`updated_at`", "key (2)"] {
            assert!(
                text.contains(part),
                "{case}: the message does not say {part:?}: {out:?}"
            );
        }
        assert_nothing_committed(&mut fx, &before, &out).await;

        // On a first load too, with every value before or after the bad one.
        for good in ["2026-03-02T08:00:00Z", "2026-03-02T09:20:00Z"] {
            let mut fx = Fixture::sqlite().await;
            fx.exec(&format!(
                "CREATE TABLE src_typed (customer_id INTEGER PRIMARY KEY, email TEXT, tier TEXT, country TEXT, \
                 is_deleted BOOLEAN NOT NULL DEFAULT false, updated_at {declared} NOT NULL);
                 INSERT INTO src_typed (customer_id, email, tier, country, updated_at) VALUES
                     (1, 'ann@example.com', 'pro', 'FR', '{good}'),
                     (2, 'bob@example.com', 'pro', 'DE', {literal})"
            ))
            .await;
            fx.set_setting("table", "\"src_typed\"");
            let out = cli::run(&fx.config_path(), &["run", "--upper", NEXT]);
            assert_eq!(out.code, Some(1), "{case}, first load: {out:?}");
            let text = message(&out);
            for part in ["`updated_at`", "key (2)"] {
                assert!(
                    text.contains(part),
                    "{case}, first load: the message does not say {part:?}: {out:?}"
                );
            }
        }
    }

    let mut fx = Fixture::sqlite().await;
    loaded(&mut fx, "src_customers").await;
    fx.exec(&format!(
        "{INSERT} (2, 'bob@example.com', 'pro', 'DE', ' 2026-03-02T09:40:00Z ')"
    ))
    .await;
    let out = cli::run(&fx.config_path(), &["run", "--upper", NEXT]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        fx.dimension()
            .await
            .values("valid_from")
            .contains(&Some("2026-03-02T09:40:00.000000Z".to_string())),
        "{}",
        fx.dump_dimension().await
    );
}

/// Two rows of one key with one timestamp and different values: the same one wins
/// whatever order they were written in, and the other is counted as dropped.
async fn duplicate_key_and_timestamp_is_deterministic_and_counted(mut fx: Fixture) {
    let rows = [
        "(1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')",
        "(1, 'ann@example.org', 'pro', 'FR', '2026-03-02T09:00:00Z')",
    ];
    let mut twin = Fixture::on(fx.backend).await;
    let mut results = Vec::new();
    for (fx, order) in [(&mut fx, [0, 1]), (&mut twin, [1, 0])] {
        fx.create_source_table("src_dups", false, true).await;
        fx.set_setting("table", "\"src_dups\"");
        for i in order {
            fx.exec(&format!(
                "INSERT INTO src_dups (customer_id, email, tier, country, updated_at) VALUES {}",
                rows[i]
            ))
            .await;
        }
        let out = cli::run(&fx.config_path(), &["run", "--json", "--upper", FIRST]);
        assert_eq!(out.code, Some(0), "{out:?}");
        let report: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("one JSON object");
        assert_eq!(
            [
                &report["rows_read"],
                &report["rows_after_dedupe"],
                &report["duplicates_dropped"],
                &report["versions"]
            ],
            [2, 1, 1, 1],
            "{out:?}"
        );
        // Reading the tie again picks the same row: nothing new.
        let again = cli::run(&fx.config_path(), &["run", "--json", "--upper", FIRST]);
        let again: serde_json::Value = serde_json::from_str(again.stdout.trim()).expect("one JSON object");
        assert_eq!([&again["duplicates_dropped"], &again["versions"]], [1, 0]);
        results.push(fx.dimension().await);
    }
    assert_eq!(
        results[0], results[1],
        "the winner depends on the order the rows were written in"
    );
}

async fn unknown_table_is_a_config_error(mut fx: Fixture) {
    let before = loaded(&mut fx, "src_customers").await;
    fx.set_setting("table", "\"no_such_table\"");
    assert_run_refused(
        &mut fx,
        &before,
        2,
        &["setting `source.table`", "no_such_table", "does not exist"],
    )
    .await;
}

async fn unknown_column_is_a_config_error(mut fx: Fixture) {
    let before = loaded(&mut fx, "src_customers").await;
    fx.set_setting("columns", "[\"email\", \"tier\", \"no_such_column\"]");
    assert_run_refused(
        &mut fx,
        &before,
        2,
        &[
            "setting `track.columns`",
            "`no_such_column` is not in the source",
            "customer_id, email, tier, country, is_deleted, updated_at",
        ],
    )
    .await;
}

/// `x"; DROP TABLE y; --` as a table, a column and a key: refused as a config error
/// naming the setting, and y survives on both sides.
async fn injected_identifiers_are_refused(mut fx: Fixture) {
    const EVIL: &str = r#"'x"; DROP TABLE y; --'"#;
    fx.exec("CREATE TABLE y (id integer); INSERT INTO y VALUES (1)").await;
    if fx.backend == Backend::Sqlite {
        fx.target_exec("CREATE TABLE y (id integer); INSERT INTO y VALUES (1)")
            .await;
    }
    let before = loaded(&mut fx, "src_customers").await;
    for (setting, line) in [
        ("source.table", format!("table = {EVIL}")),
        ("track.columns", format!("columns = [\"email\", {EVIL}]")),
        ("source.key", format!("key = [{EVIL}]")),
    ] {
        let key = line.split(" = ").next().expect("a key");
        fx.set_setting(key, line.split_once(" = ").expect("a value").1);
        assert_run_refused(
            &mut fx,
            &before,
            2,
            &[
                &format!("setting `{setting}`"),
                r#""x\"; DROP TABLE y; --""#,
                "not a valid name",
            ],
        )
        .await;
        assert_eq!(
            fx.source_query("SELECT CAST(count(*) AS TEXT) FROM y").await,
            [[Some("1".to_string())]]
        );
        assert_eq!(
            fx.target_query("SELECT CAST(count(*) AS TEXT) FROM y").await,
            [[Some("1".to_string())]]
        );
    }
}

async fn a_dropped_tracked_column_is_named(mut fx: Fixture) {
    let before = loaded(&mut fx, "src_customers").await;
    fx.exec("ALTER TABLE src_customers DROP COLUMN tier").await;
    assert_run_refused(
        &mut fx,
        &before,
        2,
        &[
            "setting `track.columns`",
            "`tier` is not in the source",
            "customer_id, email, country, is_deleted, updated_at",
            // What to do (found by an outside trial: the message said only what was wrong).
            "hint: ",
            "remove it from track.columns and rerun with `dimlog run --accept-config-change`",
        ],
    )
    .await;
    // As the hint says.
    fx.set_setting("columns", "[\"email\", \"country\"]");
    let out = fx.cli(&["run", "--accept-config-change", "--upper", "2026-03-03T00:00:00Z"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

async fn a_retyped_tracked_column_names_the_migration(mut fx: Fixture) {
    let before = loaded(&mut fx, "src_customers").await;
    let (from, to) = match fx.backend {
        Backend::Postgres | Backend::Citus => {
            fx.exec("ALTER TABLE src_customers ALTER COLUMN tier TYPE integer USING length(tier)")
                .await;
            ("text", "integer")
        }
        Backend::Sqlite => {
            // SQLite cannot change a column's type in place: rebuild the table.
            fx.exec(
                "ALTER TABLE src_customers RENAME TO src_old;
                 CREATE TABLE src_customers (customer_id INTEGER PRIMARY KEY, email TEXT, tier INTEGER, \
                     country TEXT, is_deleted BOOLEAN NOT NULL DEFAULT false, updated_at TEXT NOT NULL);
                 INSERT INTO src_customers SELECT customer_id, email, length(tier), country, is_deleted, updated_at \
                     FROM src_old;
                 DROP TABLE src_old",
            )
            .await;
            ("TEXT", "INTEGER")
        }
    };
    let out = cli::run(&fx.config_path(), &["run", "--upper", NEXT]);
    assert_eq!(out.code, Some(2), "{out:?}");
    // It names the column, both types, and the migration of the target's metadata (and,
    // on PostgreSQL, of the log's column).
    assert_says(
        &out,
        &[
            "setting `track.columns`",
            &format!("`tier` changed type from {from} to {to}"),
            "dimlog_dimensions",
        ],
    );
    if fx.backend == Backend::Postgres {
        assert_says(&out, &["ALTER TABLE", "customer_versions"]);
    }
    assert_nothing_committed(&mut fx, &before, &out).await;
}

const SECRET: &str = "hunter2secret";

/// Runs `dimlog run` (plain, `--json`, and `-vv`) and checks each exits 1 with a
/// connection error that shows the URL redacted, says `cause`, and never shows the
/// password.
fn assert_connect_error_hides_password(config: &std::path::Path, redacted_url: &str, cause: &str) {
    for extra in [&[][..], &["--json"][..], &["-vv"][..]] {
        let mut args = vec!["run", "--upper", NEXT];
        args.extend_from_slice(extra);
        let out = cli::run(config, &args);
        assert_eq!(out.code, Some(1), "{out:?}");
        assert!(!out.all().contains(SECRET), "the password was printed: {out:?}");
        let text = if extra == ["--json"] {
            let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).expect("one JSON object");
            assert_eq!(v["error"]["kind"], "connect", "{out:?}");
            v["error"]["message"].as_str().expect("a message").to_string()
        } else {
            let line = out.stderr.lines().last().unwrap_or_default();
            line.strip_prefix("error: ").unwrap_or(line).to_string()
        };
        assert!(
            text.starts_with(&format!("cannot connect to {redacted_url}: ")),
            "{text}"
        );
        assert!(text.contains(cause), "{text}");
    }
}

/// A stand-in PostgreSQL server that asks for an MD5 password and refuses it, as a real
/// server does for a wrong password (28P01). Returns its port and a count of the
/// password messages it received.
pub(super) fn refusing_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let attempts = Arc::new(AtomicUsize::new(0));
    let seen = attempts.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = refuse(stream, &seen);
        }
    });
    (port, attempts)
}

/// Answers one connection; counts its password message in `seen` before the refusal is
/// sent (counted after, the count could trail the client's exit).
fn refuse(mut s: TcpStream, seen: &AtomicUsize) -> std::io::Result<()> {
    let read_i32 = |s: &mut TcpStream| -> std::io::Result<i32> {
        let mut b = [0u8; 4];
        s.read_exact(&mut b)?;
        Ok(i32::from_be_bytes(b))
    };
    loop {
        let len = read_i32(&mut s)?;
        let code = read_i32(&mut s)?;
        let mut rest = vec![0u8; usize::try_from(len - 8).unwrap_or(0)];
        s.read_exact(&mut rest)?;
        // SSLRequest and GSSENCRequest: not supported here.
        if code == 80_877_103 || code == 80_877_104 {
            s.write_all(b"N")?;
            continue;
        }
        break;
    }
    // AuthenticationMD5Password with a salt.
    s.write_all(&[b'R', 0, 0, 0, 12, 0, 0, 0, 5, 1, 2, 3, 4])?;
    let mut tag = [0u8; 1];
    s.read_exact(&mut tag)?;
    let len = read_i32(&mut s)?;
    let mut password = vec![0u8; usize::try_from(len - 4).unwrap_or(0)];
    s.read_exact(&mut password)?;
    if tag[0] != b'p' {
        return Err(std::io::Error::other("no password message"));
    }
    seen.fetch_add(1, Ordering::SeqCst);
    let mut fields = Vec::new();
    for (t, v) in [
        (b'S', "FATAL"),
        (b'V', "FATAL"),
        (b'C', "28P01"),
        (b'M', "password authentication failed for user \"dimlog\""),
    ] {
        fields.push(t);
        fields.extend_from_slice(v.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let mut msg = vec![b'E'];
    msg.extend_from_slice(&(fields.len() as i32 + 4).to_be_bytes());
    msg.extend_from_slice(&fields);
    s.write_all(&msg)?;
    s.flush()
}

/// A wrong password, in source.url and in target.url: exit 1, the server's refusal, the
/// URL with `***`, and the password nowhere in the output.
#[tokio::test]
async fn a_wrong_password_is_never_printed() {
    let (port, attempts) = refusing_server();
    let url = format!("postgres://dimlog:{SECRET}@127.0.0.1:{port}/warehouse");
    let redacted = format!("postgres://dimlog:***@127.0.0.1:{port}/warehouse");
    let mut fx = Fixture::sqlite().await;
    let before = loaded(&mut fx, "src_customers").await;
    let good = fx.config().to_string();

    let source_url = fx.source_url.clone();
    fx.edit_config(&format!("url = \"{source_url}\""), &format!("url = \"{url}\""));
    assert_connect_error_hides_password(
        &fx.config_path(),
        &redacted,
        "password authentication failed for user \"dimlog\"",
    );
    fx.set_config(good.clone());
    let target_url = fx.target_url.clone();
    fx.edit_config(&format!("url = \"{target_url}\""), &format!("url = \"{url}\""));
    assert_connect_error_hides_password(
        &fx.config_path(),
        &redacted,
        "password authentication failed for user \"dimlog\"",
    );
    // From the environment, too.
    fx.set_config(good);
    let mut cmd = cli::command(&fx.config_path());
    cmd.env("DIMLOG_SOURCE_URL", &url);
    let out = cli::run_with(cmd, &["run", "--upper", NEXT]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(!out.all().contains(SECRET), "{out:?}");
    assert!(out.stderr.contains(&redacted), "{out:?}");
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        7,
        "every run reached the password exchange"
    );

    assert_eq!(fx.log().await, before.log);
    assert_eq!(fx.dimension().await, before.dimension);
    assert_eq!(fx.state().await, before.state);
}

/// A real server refusing a role that does not exist, with a password in the URL.
#[tokio::test]
async fn a_refused_role_is_never_printed_with_its_password() {
    let database = crate::support::pg::fresh_database().await;
    let mut url = url::Url::parse(&database).expect("url");
    url.set_username("dimlog_no_such_role").expect("user");
    url.set_password(Some(SECRET)).expect("password");
    let mut redacted = url.clone();
    redacted.set_password(Some("***")).expect("password");
    let mut fx = Fixture::sqlite().await;
    loaded(&mut fx, "src_customers").await;
    let source_url = fx.source_url.clone();
    fx.edit_config(&format!("url = \"{source_url}\""), &format!("url = \"{url}\""));
    assert_connect_error_hides_password(&fx.config_path(), redacted.as_str(), "dimlog_no_such_role");
}

/// Nothing listens at the host and port: exit 1 at once, the URL redacted.
#[tokio::test]
async fn an_unreachable_host_is_never_printed_with_its_password() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let url = format!("postgres://dimlog:{SECRET}@127.0.0.1:{port}/warehouse");
    let redacted = format!("postgres://dimlog:***@127.0.0.1:{port}/warehouse");
    let mut fx = Fixture::sqlite().await;
    loaded(&mut fx, "src_customers").await;
    let target_url = fx.target_url.clone();
    fx.edit_config(&format!("url = \"{target_url}\""), &format!("url = \"{url}\""));
    assert_connect_error_hides_password(&fx.config_path(), &redacted, "Connection refused");
}

/// PostgreSQL's times that no version can start at (its infinities, and years before
/// year 1, printed with ` BC`) are named as such by a first load, which reads every row,
/// with the key and the fix that fits, and nothing is loaded (a trial's `BC` value was
/// told to "store RFC 3339 timestamps", advice for SQLite text).
#[tokio::test]
async fn a_postgresql_time_beyond_the_years_is_named_as_such() {
    for value in [
        "0044-03-15 12:00:00+00 BC",
        "0001-12-31 23:59:59+00 BC",
        "infinity",
        "-infinity",
    ] {
        let mut fx = Fixture::postgres().await;
        fx.exec(&format!(
            "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
                 (1, 'ann@example.com', 'free', 'FR', '{value}'),
                 (2, 'bob@example.com', 'free', 'FR', '2026-03-01T09:00:00Z')"
        ))
        .await;
        let out = cli::run(&fx.config_path(), &["run", "--upper", "2026-03-01T10:00:00Z"]);
        assert_eq!(out.code, Some(1), "{value}: {out:?}");
        let named: &[&str] = if value.contains("infinity") {
            &["is no instant in time", "of key (1)", "fix them at the source"]
        } else {
            &[
                "outside the times a version can start at",
                "of key (1)",
                "set that row's updated_at at the source",
            ]
        };
        for words in named {
            assert!(out.stderr.contains(words), "{value}: {words}: {out:?}");
        }
        assert!(!out.stderr.contains("store RFC 3339"), "{value}: {out:?}");
    }
}

/// A `source.query` that the source's database fails on a row's value (a division by
/// zero): the run fails as the source's read (kind `source`, exit 1), says so, points at
/// `source.query`, and writes nothing (a trial got kind `database` and no word of it).
#[tokio::test]
async fn a_source_query_failing_on_a_value_is_the_sources_fault() {
    let mut fx = Fixture::postgres().await;
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'free', 'FR', '2026-03-01T09:00:00Z'),
             (2, 'bob@example.com', 'free', 'FR', '2026-03-01T09:00:00Z')",
    )
    .await;
    fx.run("2026-03-01T10:00:00Z").await;
    fx.edit_config(
        "table = \"src_customers\"\n",
        "query = \"SELECT customer_id, email, tier, country, is_deleted, updated_at FROM src_customers WHERE 10 / (customer_id - 2) <> 0\"\n",
    );
    fx.exec("UPDATE src_customers SET tier = 'pro', updated_at = '2026-03-01T10:30:00Z'")
        .await;
    let out = cli::run(&fx.config_path(), &["run", "--json", "--upper", "2026-03-01T11:00:00Z"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    let report: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(report["error"]["kind"], "source", "{report}");
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("division by zero"),
        "{report}"
    );
    assert!(
        report["error"]["hint"]
            .as_str()
            .unwrap_or_default()
            .contains("source.query"),
        "{report}"
    );
    assert_eq!(fx.count("customer_versions").await, 2, "nothing written");
}

/// Each kind of bad change time gets the fix that fits it (found by an outside trial: an
/// impossible date was told to "store RFC 3339", which it already was).
#[tokio::test]
async fn a_bad_change_time_gets_the_fix_that_fits() {
    for (value, fix) in [
        (
            "2025-02-30T00:00:00Z",
            "that date does not exist: fix that row's updated_at at the source",
        ),
        (
            "9999-12-31T10:00:00Z",
            "set that row's updated_at at the source to when it really changed",
        ),
        ("yesterday", "store RFC 3339 timestamps"),
    ] {
        let mut fx = Fixture::sqlite().await;
        fx.exec(&format!(
            "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
                 (1, 'ann@example.com', 'free', 'FR', '{value}'),
                 (2, 'bob@example.com', 'free', 'FR', '2025-01-01T00:00:00Z')"
        ))
        .await;
        let out = cli::run(&fx.config_path(), &["run", "--upper", "2026-03-01T10:00:00Z"]);
        assert_eq!(out.code, Some(1), "{value}: {out:?}");
        assert!(out.stderr.contains(fix), "{value}: {out:?}");
        assert!(out.stderr.contains("of key (1)"), "{value}: {out:?}");
    }
}

/// A log or dimension table that exists with rows, but that no dimension of this name is
/// recorded with, is refused (exit 2, naming the setting), nothing written: dimlog would
/// take its rows for its own (a trial's `audit` table became a dimension with a surrogate
/// key dimlog never issued, which `lookup` then returned). Both ways to get there: a table
/// of the user's, and a dimension whose `name` changed.
async fn a_table_no_dimension_is_recorded_with_is_not_taken_over(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    // The dimension's table made by hand, the shape dimlog makes, with a row of its own.
    let made = cli::run(&fx.config_path(), &["init"]);
    assert_eq!(made.code, Some(0), "{made:?}");
    let (log, dim) = ("customer_versions", "dim_customer");
    let hash = match fx.backend {
        Backend::Sqlite => "X'00'",
        Backend::Postgres | Backend::Citus => "'\\x00'::bytea",
    };
    for (table, setting) in [(dim, "target.dimension"), (log, "target.log")] {
        for t in [log, dim] {
            fx.target_exec(&format!("CREATE TABLE hand_{t} AS SELECT * FROM {t}"))
                .await;
        }
        fx.target_exec(&format!(
            "INSERT INTO hand_{dim} (customer_sk, customer_id, email, tier, country, valid_from, valid_to, is_current, row_hash, load_id) \
             VALUES (77, 1, 'x', 'y', 'z', '2026-01-01T00:00:00Z', '9999-12-31T00:00:00Z', true, {hash}, 1)"
        ))
        .await;
        fx.target_exec(&format!(
            "INSERT INTO hand_{log} (log_id, customer_sk, customer_id, email, tier, country, valid_from, is_deleted, row_hash, load_id, loaded_at) \
             VALUES (5, 77, 1, 'x', 'y', 'z', '2026-01-01T00:00:00Z', false, {hash}, 1, '2026-01-01T00:00:00Z')"
        ))
        .await;
        fx.set_setting("name", &format!("\"by_hand_{}\"", setting.replace('.', "_")));
        fx.set_setting(&setting["target.".len()..], &format!("\"hand_{table}\""));
        let other = if table == dim { ("log", log) } else { ("dimension", dim) };
        fx.set_setting(other.0, &format!("\"fresh_{}\"", other.1));
        let out = cli::run(&fx.config_path(), &["run", "--upper", "2026-03-02T10:00:00Z"]);
        assert_eq!(out.code, Some(2), "{setting}: {out:?}");
        for words in [setting, &format!("hand_{table}"), "holds rows", "is not recorded"] {
            assert!(out.stderr.contains(words), "{setting}: {words}: {out:?}");
        }
        assert_eq!(
            fx.count(&format!("hand_{table}")).await,
            1,
            "{setting}: nothing written"
        );
        for t in [log, dim] {
            fx.target_exec(&format!("DROP TABLE hand_{t}")).await;
        }
        fx.target_exec(&format!("DROP TABLE IF EXISTS fresh_{}", other.1)).await;
    }

    // The dimension loaded, then its `name` changed: its tables are not taken over (a
    // check of its own names the dimension they belong to).
    fx.set_setting("name", "\"customer\"");
    fx.set_setting("log", &format!("\"{log}\""));
    fx.set_setting("dimension", &format!("\"{dim}\""));
    let out = cli::run(&fx.config_path(), &["run", "--upper", "2026-03-02T10:00:00Z"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    fx.set_setting("name", "\"customers\"");
    let out = cli::run(&fx.config_path(), &["run", "--upper", "2026-03-02T10:00:00Z"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("is the log of dimension `customer`"), "{out:?}");
}

/// `target.surrogate_key` changed after the dimension was built: every command that uses
/// the tables refuses it (exit 2, naming the setting and the column the tables hold),
/// writing nothing. A trial got a decoding error from `run` (SQLite read the new name as
/// a string), "restore the log from a backup" from `verify`, and advice from `rebuild`
/// to drop the real surrogate-key column.
async fn a_renamed_surrogate_key_setting_is_refused_by_every_command(mut fx: Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')"
    ))
    .await;
    let loaded = cli::run(&fx.config_path(), &["run", "--upper", "2026-03-02T10:00:00Z"]);
    assert_eq!(loaded.code, Some(0), "{loaded:?}");
    let before = fx.dimension().await;
    for renamed in ["csk", "Customer_SK_2"] {
        fx.set_setting("surrogate_key", &format!("\"{renamed}\""));
        for command in [
            &["run", "--upper", "2026-03-02T11:00:00Z"][..],
            &["run", "--full-refresh", "--upper", "2026-03-02T11:00:00Z"],
            &["verify"],
            &["rebuild"],
            &["doctor"],
        ] {
            let out = cli::run(&fx.config_path(), command);
            let expected = if command[0] == "doctor" { 1 } else { 2 };
            assert_eq!(out.code, Some(expected), "{renamed}, {command:?}: {out:?}");
            let said = format!("{}{}", out.stdout, out.stderr);
            for words in ["target.surrogate_key", "customer_sk", renamed] {
                assert!(said.contains(words), "{renamed}, {command:?}: {words}: {out:?}");
            }
            assert!(!said.contains("restore"), "{renamed}, {command:?}: {out:?}");
        }
    }
    fx.set_setting("surrogate_key", "\"customer_sk\"");
    assert_eq!(fx.dimension().await, before, "nothing written");
    assert_eq!(cli::run(&fx.config_path(), &["verify"]).code, Some(0));
}

/// SQLite keeps apart, under one primary key, values whose text is one (`2`, `'2'`,
/// `x'32'` in a column without a type, or a blob beside text in a TEXT column), which
/// dimlog reads as one key. Every load dedupes them as the first load does: a full
/// refresh, run again and again, appends nothing (a trial's appended two log rows
/// without a surrogate key each time), and the dimension agrees with the source. A rowid
/// alias holds integers only, and is taken as read.
#[tokio::test]
async fn sqlite_keys_one_as_text_are_one_key_on_every_load() {
    for declared in [
        "PRIMARY KEY",
        "TEXT PRIMARY KEY",
        "INT PRIMARY KEY",
        "INTEGER PRIMARY KEY",
    ] {
        let mut fx = Fixture::sqlite().await;
        // What each column keeps apart (a TEXT column stores 2 as '2', an INT one '2' as 2).
        let spellings = match declared {
            "INTEGER PRIMARY KEY" => "(2, 'a', '2026-01-01T00:00:00Z')",
            "TEXT PRIMARY KEY" => "('2', 'b', '2026-01-01T00:00:00Z'), (X'32', 'c', '2026-01-01T00:00:00Z')",
            "INT PRIMARY KEY" => "(2, 'a', '2026-01-01T00:00:00Z'), (X'32', 'c', '2026-01-01T00:00:00Z')",
            _ => "(2, 'a', '2026-01-01T00:00:00Z'), ('2', 'b', '2026-01-01T00:00:00Z'), (X'32', 'c', '2026-01-01T00:00:00Z')",
        };
        fx.exec(&format!(
            "CREATE TABLE src_k (k {declared}, v TEXT, updated_at TEXT NOT NULL);
             INSERT INTO src_k VALUES {spellings}, (3, 'd', '2026-01-01T00:00:00Z')"
        ))
        .await;
        let (source, target) = (fx.source_url.clone(), fx.target_url.clone());
        fx.set_config(format!(
            r#"name = "k"

[source]
url = "{source}"
table = "src_k"
key = ["k"]
updated_at = "updated_at"

[target]
url = "{target}"
log = "k_versions"
dimension = "dim_k"
surrogate_key = "k_sk"

[track]
columns = ["v"]
"#
        ));
        let config = fx.config_path();
        for args in [
            &["run", "--upper", "2026-02-01T00:00:00Z"][..],
            &["run", "--full-refresh", "--upper", "2026-02-01T00:00:00Z"],
            &["run", "--full-refresh", "--upper", "2026-02-01T00:00:00Z"],
            &["run", "--upper", "2026-02-01T00:00:00Z"],
        ] {
            let out = cli::run(&config, args);
            assert_eq!(out.code, Some(0), "{declared}, {args:?}: {out:?}");
        }
        let log = fx
            .target_query(
                "SELECT CAST(k AS TEXT), CAST(k_sk AS TEXT), CAST(is_deleted AS TEXT) FROM k_versions ORDER BY log_id",
            )
            .await;
        assert_eq!(
            log.len(),
            2,
            "{declared}: one version per key, nothing appended again: {log:?}"
        );
        assert!(
            log.iter().all(|r| r[1].is_some()),
            "{declared}: a live row without a surrogate key: {log:?}"
        );
        let verify = cli::run(&config, &["verify", "--against-source"]);
        assert_eq!(verify.code, Some(0), "{declared}: {verify:?}");
    }
}

/// A SQLite `source.query` that names a column in double quotes, after the column was
/// renamed at the source: SQLite's legacy fallback read the name as the string of its
/// letters, and a run loaded `'tier'` as every row's tier (rewriting versions in place).
/// The run now fails naming the column, and nothing is written.
#[tokio::test]
async fn a_sqlite_query_naming_a_renamed_column_fails_instead_of_loading_its_name() {
    let mut fx = Fixture::sqlite().await;
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
         (1, 'a@x', 'silver', 'FR', '2026-03-02T09:00:00Z'), (2, 'b@x', 'gold', 'DE', '2026-03-02T09:00:00Z')",
    )
    .await;
    fx.edit_config(
        "table = \"src_customers\"",
        "query = 'SELECT customer_id, email, \"tier\" AS tier, country, is_deleted, updated_at FROM src_customers'",
    );
    fx.run("2026-03-02T10:00:00Z").await;
    fx.exec("ALTER TABLE src_customers RENAME COLUMN tier TO tier_name")
        .await;
    let log_before = fx.log().await;
    let err = fx
        .try_run_with(dimlog::pipeline::RunOptions {
            upper: Some(crate::support::fixture::ts("2026-03-02T10:30:00Z")),
            ..dimlog::pipeline::RunOptions::incremental()
        })
        .await
        .expect_err("a query naming a column the source no longer has");
    assert!(err.to_string().contains("tier"), "{err}");
    assert_eq!(fx.log().await, log_before, "nothing written");
    let tiers = fx.dimension().await.values("tier");
    assert_eq!(tiers, [Some("silver".to_string()), Some("gold".to_string())]);
}
