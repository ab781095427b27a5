//! Connecting to PostgreSQL the way production does (issue 20, items 5 and 6): TLS with
//! every `sslmode`, a connect timeout for a server that never answers, and an
//! `application_name` a DBA can read.

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::fixture::Fixture;
use crate::support::pg;

/// Points every URL of the fixture's config at `url`.
fn retarget(fx: &mut Fixture, from: &str, url: &str) {
    let text = fx.config().replace(&format!("\"{from}\""), &format!("\"{url}\""));
    fx.set_config(text);
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Against a server that accepts only TLS: `sslmode=require` loads over TLS,
/// `verify-full` with the CA in `sslrootcert` does too, `verify-full` without it fails
/// naming the certificate, and `disable` fails because the server refuses plain text.
/// (dimlog was built without TLS: `require` failed, `prefer` went plain.)
#[tokio::test]
async fn tls_connections_follow_sslmode() {
    let (admin, ca) = pg::start_tls_cluster().unwrap_or_else(|e| panic!("cannot start a TLS server: {e}"));
    let require = format!("{admin}?sslmode=require");
    let mut fx = Fixture::postgres_reset(require.clone()).await;
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) \
         VALUES (1, 'a@example.com', 'pro', 'NL', '2026-05-01T10:00:00Z')",
    )
    .await;
    fx.run("2026-05-02T00:00:00Z").await;
    assert_eq!(fx.count("dim_customer").await, 1);
    let ssl = fx
        .target_query("SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .await;
    assert_eq!(ssl[0][0].as_deref(), Some("true"));

    let ca = ca.display().to_string();
    let full = format!("{admin}?sslmode=verify-full&sslrootcert={ca}");
    retarget(&mut fx, &require, &full);
    let out = fx.cli(&["status"]);
    assert_eq!(out.status.code(), Some(0), "verify-full with the CA: {}", stderr(&out));

    let prefer = admin.clone();
    retarget(&mut fx, &full, &prefer);
    let out = fx.cli(&["status"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the default (prefer) uses TLS when offered: {}",
        stderr(&out)
    );

    let unverified = format!("{admin}?sslmode=verify-full");
    retarget(&mut fx, &prefer, &unverified);
    let out = fx.cli(&["status"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.to_lowercase().contains("certificate"), "{err}");

    let plain = format!("{admin}?sslmode=disable");
    retarget(&mut fx, &unverified, &plain);
    let out = fx.cli(&["status"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("pg_hba.conf") && err.contains("no encryption"), "{err}");
}

/// A listener that accepts the connection and never answers fails the command after
/// `?connect_timeout=2`, saying so, without the password. (It hung until killed, and the
/// parameter was ignored with a warning.)
#[tokio::test]
async fn a_server_that_never_answers_fails_after_connect_timeout() {
    let mut fx = Fixture::sqlite().await;
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let target = fx.target_url.clone();
    let url = format!("postgres://dimlog:s3cretpw@127.0.0.1:{port}/warehouse?connect_timeout=2");
    retarget(&mut fx, &target, &url);
    let started = Instant::now();
    let out = fx.cli(&["status"]);
    let took = started.elapsed();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no answer within 2 s") && err.contains("connect_timeout"),
        "{err}"
    );
    assert!(!err.contains("s3cretpw"), "{err}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
    assert!(took >= Duration::from_secs(2), "took {took:?}");

    let url_bad = format!("postgres://dimlog@127.0.0.1:{port}/warehouse?connect_timeout=soon");
    retarget(&mut fx, &url, &url_bad);
    let out = fx.cli(&["status"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("target.url") && err.contains("connect_timeout"), "{err}");
    drop(silent);
}

/// The application names of the other sessions of the fixture's database, polled until
/// two of them are `want` (a run paused at a failpoint holds its source and target
/// connections, opened one after the other).
async fn wait_for_application(fx: &mut Fixture, want: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let names: Vec<String> = fx
            .target_query(
                "SELECT application_name FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .await
            .into_iter()
            .filter_map(|r| r[0].clone())
            .collect();
        // The run's source and target sessions both (the fixture's own say `dimlog`).
        if names.iter().filter(|n| *n == want).count() >= 2 || Instant::now() > deadline {
            return names;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// dimlog's sessions show `dimlog:<dimension>` in `pg_stat_activity`, unless the URL
/// names the application (`?application_name=nightly`), which is kept. (Both were
/// always `dimlog`.)
#[tokio::test]
async fn sessions_are_named_for_the_dimension_unless_the_url_says() {
    let mut fx = Fixture::postgres().await;
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) \
         VALUES (1, 'a@example.com', 'pro', 'NL', '2026-05-01T10:00:00Z')",
    )
    .await;
    let url = fx.target_url.clone();
    for (config_url, want) in [
        (url.clone(), "dimlog:customer"),
        (format!("{url}?application_name=nightly"), "nightly"),
    ] {
        let text = fx.config().replace(&format!("\"{url}\""), &format!("\"{config_url}\""));
        std::fs::write(fx.config_path(), &text).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_dimlog"))
            .arg("--config")
            .arg(fx.config_path())
            .args(["run", "--upper", "2026-05-02T00:00:00Z"])
            .env("DIMLOG_FAILPOINT", "after_extract:sleep")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let names = wait_for_application(&mut fx, want).await;
        child.kill().unwrap();
        child.wait().unwrap();
        // The run's source and target sessions (the fixture's own say `dimlog`).
        assert_eq!(names.iter().filter(|n| *n == want).count(), 2, "{want}: {names:?}");
    }
}

/// A password holding `:` and `\\` is read from the password file with libpq's escapes
/// (`\\:`, `\\\\`), in every field; a line without them is another password. (The driver
/// left the escapes in, so such passwords never matched.)
#[tokio::test]
async fn the_password_file_is_read_with_its_escapes() {
    let admin = pg::start_password_cluster().unwrap_or_else(|e| panic!("cannot start a server with passwords: {e}"));
    let port = url::Url::parse(&admin).unwrap().port().unwrap();
    let mut fx = Fixture::sqlite().await;
    let mut conn = crate::support::fixture::connect("target.url", &admin).await;
    conn.execute_script("setup", "CREATE ROLE etl LOGIN SUPERUSER PASSWORD 'p:w\\d'")
        .await
        .unwrap();
    let target = fx.target_url.clone();
    let url = format!("postgres://etl@127.0.0.1:{port}/postgres");
    retarget(&mut fx, &target, &url);
    for (line, code) in [
        (format!("127.0.0.1:{port}:*:etl:p\\:w\\\\d"), 0),
        (format!("127.0.0.1:{port}:*:etl:p:wd"), 1),
    ] {
        let file = fx.dir().join("pgpass");
        std::fs::write(&file, format!("# dimlog test\n{line}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_dimlog"))
            .arg("--config")
            .arg(fx.config_path())
            .arg("init")
            .env("PGPASSFILE", &file)
            .env_remove("PGPASSWORD")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(code), "{line}: {err}");
        if code == 1 {
            assert!(err.contains("password authentication failed"), "{err}");
        }
    }
}

/// A parameter of a PostgreSQL URL that the driver cannot read (a misspelt `sslmode`, a
/// port that is no number) is a config error naming the setting (exit 2, kind `config`),
/// for the config's URL and the one `DIMLOG_TARGET_URL` puts in its place, before
/// anything connects; its message
/// says "error with configuration" once, if at all (it said it twice, with exit 1).
#[tokio::test]
async fn a_url_parameter_the_driver_cannot_read_is_a_config_error() {
    let mut fx = Fixture::postgres().await;
    fx.exec("INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES (1, 'a', 'b', 'c', '2026-03-02T09:00:00Z')")
        .await;
    fx.run("2026-03-02T10:00:00Z").await;
    let url = fx.target_url.clone();
    let with = |param: &str| {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}{param}")
    };
    for param in [
        "sslmode=bogus",
        "sslmode=",
        "statement-cache-capacity=many",
        "sslrootcert=",
    ] {
        let bad = with(param);
        for (how, args, env) in [
            ("config", vec!["status", "--json"], None),
            ("environment", vec!["status", "--json"], Some(bad.clone())),
        ] {
            if how == "config" {
                retarget(&mut fx, &url, &bad);
            }
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_dimlog"));
            cmd.arg("--config").arg(fx.config_path()).args(&args);
            cmd.env_remove("DIMLOG_TARGET_URL");
            if let Some(env) = &env {
                cmd.env("DIMLOG_TARGET_URL", env);
            }
            let out = cmd.output().expect("dimlog");
            if how == "config" {
                retarget(&mut fx, &bad, &url);
            }
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            if param == "sslrootcert=" {
                // An empty value the driver accepts: the command works.
                assert_eq!(out.status.code(), Some(0), "{param} ({how}): {stdout} {}", stderr(&out));
                continue;
            }
            assert_eq!(out.status.code(), Some(2), "{param} ({how}): {stdout} {}", stderr(&out));
            let error: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
            let message = error["error"]["message"].as_str().unwrap_or_default();
            assert_eq!(error["error"]["kind"], "config", "{param} ({how}): {error}");
            // (The fixture's source is the target's database: its URL is the same.)
            let setting = if how == "config" {
                ".url"
            } else {
                "target.url (as overridden)"
            };
            assert!(message.contains(setting), "{param} ({how}): {message}");
            assert!(message.matches("error with configuration").count() <= 1, "{message}");
        }
    }
}
