//! A password in a database URL is never shown (issue 14, item 12), whatever form it
//! takes: every form a libpq/sqlx URL can carry a secret in (the userinfo password, plain
//! or percent-encoded; a `password=` query parameter in any case or with an encoded name;
//! `sslpassword`; an inline `sslkey`; a libpq key/value string) × every place dimlog
//! prints or writes (text and `--json` errors of a refused or unreachable server, `-v`
//! logs, `RUST_LOG=debug`, the `DIMLOG_SOURCE_URL` override, `init`/`status`/`run`/
//! `verify` on a working server, `dimlog new`'s written config and output, `Debug`).

use std::path::Path;

use dimlog::config::{DbUrl, Overrides, Plan};

use super::bad_input::refusing_server;
use super::cli::{self, CliOutput};
use crate::support::fixture::Fixture;

/// Part of every secret below: it must appear in no output and no file.
const SECRET: &str = "hunter2secret";

/// One way a URL carries a secret: a name, and the URL made from a server's URL
/// (`postgres://user@host:port/db`, no password, no query).
struct Form {
    name: &'static str,
    make: fn(&url::Url) -> String,
}

fn with_query(base: &url::Url, query: &str) -> String {
    let mut u = base.clone();
    u.set_query(None);
    format!("{u}?{query}")
}

fn user_of(base: &url::Url) -> String {
    if base.username().is_empty() {
        "postgres".into()
    } else {
        base.username().to_string()
    }
}

const FORMS: &[Form] = &[
    Form {
        name: "userinfo password",
        make: |b| {
            let mut u = b.clone();
            u.set_password(Some(SECRET)).expect("a password");
            u.to_string()
        },
    },
    Form {
        name: "percent-encoded userinfo password",
        make: |b| {
            format!(
                "postgres://{}:{SECRET}%2F%40x@{}:{}{}",
                user_of(b),
                b.host_str().unwrap_or("127.0.0.1"),
                b.port().unwrap_or(5432),
                b.path()
            )
        },
    },
    Form {
        name: "password= query parameter",
        make: |b| with_query(b, &format!("password={SECRET}")),
    },
    Form {
        name: "PASSWORD= query parameter after another",
        make: |b| with_query(b, &format!("sslmode=prefer&PASSWORD={SECRET}")),
    },
    Form {
        name: "Password= query parameter before another",
        make: |b| with_query(b, &format!("Password={SECRET}&application_name=x")),
    },
    Form {
        name: "percent-encoded parameter name",
        make: |b| with_query(b, &format!("pass%77ord={SECRET}")),
    },
    Form {
        name: "sslpassword",
        make: |b| with_query(b, &format!("sslpassword={SECRET}")),
    },
    Form {
        name: "userinfo and query both",
        make: |b| {
            let mut u = b.clone();
            u.set_password(Some(&format!("{SECRET}1"))).expect("a password");
            with_query(&u, &format!("password={SECRET}2"))
        },
    },
    Form {
        name: "inline sslkey",
        make: |b| {
            with_query(
                b,
                &format!("sslkey=-----BEGIN%20PRIVATE%20KEY-----{SECRET}-----END%20PRIVATE%20KEY-----"),
            )
        },
    },
];

/// A libpq key/value string (not a URL: refused as a config error, exit 2).
fn key_value(base: &url::Url) -> String {
    format!(
        "host={} port={} user={} password={SECRET} dbname=x",
        base.host_str().unwrap_or("127.0.0.1"),
        base.port().unwrap_or(5432),
        user_of(base)
    )
}

/// Every URL to try against a server: the forms, then the key/value string.
fn urls(base: &url::Url) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = FORMS.iter().map(|f| (f.name.to_string(), (f.make)(base))).collect();
    out.push(("libpq key/value string".into(), key_value(base)));
    for (name, url) in &out {
        assert!(url.contains(SECRET), "{name}: {url}");
    }
    out
}

/// Asserts the secret is nowhere in the output (and the files given), and that nothing
/// panicked.
fn assert_hidden(what: &str, out: &CliOutput, files: &[&Path]) {
    assert!(!out.all().contains(SECRET), "{what}: the secret was printed: {out:?}");
    assert_ne!(out.code, Some(101), "{what}: dimlog panicked: {out:?}");
    for f in files {
        if let Ok(text) = std::fs::read_to_string(f) {
            assert!(
                !text.contains(SECRET),
                "{what}: the secret was written to {}:\n{text}",
                f.display()
            );
        }
    }
}

fn base_url(raw: &str) -> url::Url {
    let mut u = url::Url::parse(raw).expect("a URL");
    let _ = u.set_password(None);
    if u.username().is_empty() {
        u.set_username("postgres").expect("a user");
    }
    u.set_query(None);
    u
}

/// A server that cannot be reached, and one that refuses every password: each form in
/// source.url, in target.url and in `DIMLOG_SOURCE_URL` fails the command (exit 1; the
/// key/value string is a config error, exit 2) with text and `--json` errors, `-vv` and
/// `RUST_LOG=debug` logs that never show the secret.
#[tokio::test]
async fn no_form_of_password_is_printed_when_a_connection_fails() {
    let unreachable = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let (refusing, _) = refusing_server();
    let mut fx = Fixture::sqlite().await;
    let good = fx.config().to_string();
    let (source_url, target_url) = (fx.source_url.clone(), fx.target_url.clone());
    for port in [unreachable, refusing] {
        let base = base_url(&format!("postgres://dimlog@127.0.0.1:{port}/warehouse"));
        for (form, url) in urls(&base) {
            let expected = if form.contains("key/value") { 2 } else { 1 };
            for (setting, current) in [("source.url", &source_url), ("target.url", &target_url)] {
                fx.set_config(good.clone());
                fx.edit_config(&format!("url = \"{current}\""), &format!("url = \"{url}\""));
                for args in [
                    &["run", "--upper", "2026-03-02T10:00:00Z"][..],
                    &["run", "--json", "--upper", "2026-03-02T10:00:00Z"],
                    &["run", "-vv", "--upper", "2026-03-02T10:00:00Z"],
                    &["init"],
                    &["init", "--json"],
                    &["status", "-v"],
                ] {
                    let what = format!("{form} in {setting}, port {port}, dimlog {}", args.join(" "));
                    let out = cli::run(&fx.config_path(), args);
                    assert_hidden(&what, &out, &[]);
                    // `status` reads only the target: with the bad URL on the source side
                    // it finds a target never loaded (exit 2) and never connects.
                    let expected = if args[0] == "status" && setting == "source.url" {
                        2
                    } else {
                        expected
                    };
                    assert_eq!(out.code, Some(expected), "{what}: {out:?}");
                    if args.contains(&"--json") {
                        let v: serde_json::Value = serde_json::from_str(out.stdout.trim())
                            .unwrap_or_else(|e| panic!("{what}: not one JSON object ({e}): {out:?}"));
                        assert!(v["error"]["message"].is_string(), "{what}: {v}");
                    } else {
                        assert!(out.stderr.contains("error: "), "{what}: {out:?}");
                    }
                }
                let mut cmd = cli::command(&fx.config_path());
                cmd.env("RUST_LOG", "debug");
                let out = cli::run_with(cmd, &["run", "--upper", "2026-03-02T10:00:00Z"]);
                assert_hidden(&format!("{form} in {setting}, RUST_LOG=debug"), &out, &[]);
            }
            fx.set_config(good.clone());
            let mut cmd = cli::command(&fx.config_path());
            cmd.env("DIMLOG_SOURCE_URL", &url);
            let out = cli::run_with(cmd, &["run", "-vv", "--upper", "2026-03-02T10:00:00Z"]);
            assert_hidden(&format!("{form} in DIMLOG_SOURCE_URL"), &out, &[]);
            assert_eq!(out.code, Some(expected), "{form} in DIMLOG_SOURCE_URL: {out:?}");
        }
    }
}

/// On a working server (which trusts every connection, so any password is accepted),
/// each URL form as the target: `init`, `run -vv`, `status` (text and `--json`),
/// `verify -v` and `RUST_LOG=debug` succeed and never show the secret; the plan's and
/// the URL's `Debug` hide it too.
#[tokio::test]
async fn no_form_of_password_is_printed_by_commands_that_work() {
    let mut fx = Fixture::postgres().await;
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at)
         VALUES (1, 'ann@example.com', 'free', 'FR', '2026-03-02T09:00:00Z')",
    )
    .await;
    let good = fx.config().to_string();
    let target_url = fx.target_url.clone();
    let base = base_url(&target_url);
    for (i, (form, url)) in urls(&base).into_iter().enumerate() {
        if form.contains("key/value") {
            continue;
        }
        fx.set_config(good.clone());
        fx.edit_config(
            &format!("url = \"{target_url}\"\nlog"),
            &format!("url = \"{url}\"\nlog"),
        );
        let upper = format!("2026-03-02T10:{i:02}:00Z");
        for args in [
            &["init"][..],
            &["init", "--json"],
            &["run", "-vv", "--upper", &upper],
            &["status"],
            &["status", "--json", "-v"],
            &["verify", "-v"],
            &["history", "--key", "1", "-vv"],
        ] {
            let what = format!("{form} in target.url, dimlog {}", args.join(" "));
            let out = cli::run(&fx.config_path(), args);
            assert_hidden(&what, &out, &[]);
            assert_eq!(out.code, Some(0), "{what}: {out:?}");
        }
        let mut cmd = cli::command(&fx.config_path());
        cmd.env("RUST_LOG", "debug");
        let out = cli::run_with(cmd, &["status"]);
        assert_hidden(&format!("{form}, RUST_LOG=debug status"), &out, &[]);

        let plan = Plan::from_toml(fx.config(), &fx.config_path(), fx.dir(), &Overrides::default())
            .unwrap_or_else(|e| panic!("{form}: {e}"));
        let debug = format!("{plan:?} {:?} {}", plan.target.url, plan.target.url);
        assert!(!debug.contains(SECRET), "{form}: Debug shows the secret: {debug}");
        let parsed = DbUrl::parse("target.url", &url, None).expect("a URL");
        assert!(!format!("{parsed:?} {parsed}").contains(SECRET), "{form}");
    }
}

/// `dimlog new --source-url` with each form: the config it writes and everything it
/// prints (text and `--json`) leave the secret out, the written URL keeps the rest (user,
/// host, database), it says to use PGPASSWORD or `DIMLOG_SOURCE_URL`, and the config
/// then runs with the password given in `DIMLOG_SOURCE_URL`.
#[tokio::test]
async fn dimlog_new_never_writes_or_prints_a_password() {
    let fx = Fixture::postgres().await;
    let base = base_url(&fx.source_url);
    for (i, (form, url)) in urls(&base).into_iter().enumerate() {
        for json in [false, true] {
            let out_path = fx.dir().join(format!("new_{i}_{json}.toml"));
            let out_arg = out_path.to_str().expect("a path").to_string();
            let mut args = vec![
                "new",
                "--source-url",
                &url,
                "--table",
                "src_customers",
                "--out",
                &out_arg,
            ];
            if json {
                args.push("--json");
            }
            let what = format!("{form}: dimlog {}", if json { "new --json" } else { "new" });
            let out = cli::run(&fx.config_path(), &args);
            assert_hidden(&what, &out, &[&out_path]);
            if form.contains("key/value") {
                assert_eq!(out.code, Some(2), "{what}: {out:?}");
                continue;
            }
            assert_eq!(out.code, Some(0), "{what}: {out:?}");
            let written = std::fs::read_to_string(&out_path).expect("the config");
            let expected_url = format!("url = \"{base}\"");
            assert!(
                written.contains(&expected_url) || written.contains(&format!("url = \"{base}?")),
                "{what}: the written URL is not the server's without the secret ({base}):\n{written}"
            );
            let says = |text: &str| text.contains("PGPASSWORD") && text.contains("DIMLOG_SOURCE_URL");
            assert!(says(&out.all()), "{what}: no note on where the password goes: {out:?}");
            assert!(says(&written), "{what}: no note in the file:\n{written}");
            if !json {
                // The config runs, the password handed over in the environment.
                let mut cmd = cli::command(&out_path);
                cmd.env("DIMLOG_SOURCE_URL", &url);
                let out = cli::run_with(cmd, &["init"]);
                assert_hidden(&format!("{form}: init of the new config"), &out, &[&out_path]);
                assert_eq!(out.code, Some(0), "{form}: {out:?}");
            }
        }
    }
}
