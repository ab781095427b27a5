//! Every `dimlog` command line shown in README.md and docs/ (in fenced `sh` blocks) is one
//! the binary accepts: its command and flags exist and its values parse; and each is run,
//! in the order its file shows them, against a world like the one the docs describe
//! (issue 17, "docs that match the binary"): a `customers` table in PostgreSQL, the
//! server names of the docs pointing at it. What a line's comment says it does (`# prints
//! 6`, `# exit 1`, `# {"surrogate_key":6}`) is checked; else it must succeed. A flag
//! renamed, an example whose output drifted, fails here, naming the file and line.

use std::path::{Path, PathBuf};

use clap::Parser;
use dimlog::cli::Cli;

/// Markdown files: README.md and everything under docs/.
fn markdown() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("docs/ is readable") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![root.join("README.md")];
    walk(&root.join("docs"), &mut out);
    out
}

/// The `dimlog` command lines of a file's `sh` blocks, continuation lines joined, with
/// the line each starts on. `cargo run … --` stands for `dimlog`.
fn command_lines(text: &str) -> Vec<(usize, String)> {
    commented_lines(text).into_iter().map(|(n, c, _)| (n, c)).collect()
}

/// [`command_lines`], each with its line's comment (what it says the command does).
fn commented_lines(text: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            in_sh = !in_sh && trimmed == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let (start, mut joined) = pending.take().unwrap_or((n + 1, String::new()));
        joined.push_str(line.trim().trim_end_matches('\\').trim_end());
        joined.push(' ');
        if line.trim_end().ends_with('\\') {
            pending = Some((start, joined));
            continue;
        }
        if let Some(command) = dimlog_command(&joined) {
            let comment = joined
                .find(" #")
                .map(|at| joined[at + 2..].trim().to_string())
                .unwrap_or_default();
            out.push((start, command, comment));
        }
    }
    out
}

/// The `dimlog …` part of a shell line: from the program name to a comment, a closing
/// `)` of `$(…)`, or the end.
fn dimlog_command(line: &str) -> Option<String> {
    let line = line.replace("cargo run --release -- ", "dimlog ");
    let at = line.match_indices("dimlog ").map(|(i, _)| i).find(|&i| {
        // The program, not a word that ends in it (`/opt/etl/dimlog …` is a path too).
        i == 0 || matches!(line.as_bytes()[i - 1], b' ' | b'(' | b'=' | b'/')
    })?;
    if line[..at].trim_start().starts_with('#') {
        return None;
    }
    let rest = &line[at..];
    let end = [rest.find(" #"), rest.find(')')]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(rest.len());
    Some(rest[..end].trim().to_string())
}

#[test]
fn every_command_line_in_the_docs_parses() {
    let mut wrong = Vec::new();
    let mut seen = 0;
    for path in markdown() {
        let text = std::fs::read_to_string(&path).expect("readable");
        for (line, command) in command_lines(&text) {
            seen += 1;
            let words =
                shlex::split(&command).unwrap_or_else(|| panic!("{}:{line}: unbalanced quotes", path.display()));
            if let Err(e) = Cli::try_parse_from(&words) {
                let first = e.to_string().lines().next().unwrap_or_default().to_string();
                wrong.push(format!("{}:{line}: `{command}`: {first}", path.display()));
            }
        }
    }
    assert!(
        seen >= 20,
        "only {seen} command lines found: is the harness reading the docs?"
    );
    assert!(
        wrong.is_empty(),
        "command lines the binary refuses:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn command_lines_are_found_as_a_shell_reads_them() {
    let text = "x\n```sh\ndimlog run   # first\nA=1 dimlog lookup --key 42 \\\n    --at T\nout=$(dimlog --json run) || true\n# dimlog not this\ncargo run --release -- demo\n```\ndimlog outside\n";
    let found: Vec<String> = command_lines(text).into_iter().map(|(_, c)| c).collect();
    assert_eq!(
        found,
        [
            "dimlog run",
            "dimlog lookup --key 42 --at T",
            "dimlog --json run",
            "dimlog demo"
        ]
    );
    // A refused flag is refused.
    assert!(Cli::try_parse_from(["dimlog", "run", "--no-such-flag"]).is_err());
}

/// What a line's comment says its command does; by default, it succeeds.
#[derive(Debug, Default, PartialEq)]
struct Expect {
    exit: i32,
    /// `# prints X`: stdout, trimmed.
    prints: Option<String>,
    /// `# {...}`: a JSON object whose fields stdout's has (`...` for the rest).
    json: Option<serde_json::Value>,
}

fn expectation(comment: &str) -> Expect {
    let mut expect = Expect::default();
    if let Some(rest) = comment.strip_prefix("prints ") {
        expect.prints = Some(rest.split(',').next().unwrap_or_default().trim().to_string());
    }
    if comment.starts_with('{') {
        let object = comment.replace(", ...", "").replace(",...", "");
        expect.json = Some(serde_json::from_str(&object).unwrap_or_else(|e| panic!("`# {comment}`: {e}")));
    }
    if let Some(at) = comment.find("exit ") {
        let code: String = comment[at + 5..].chars().take_while(|c| c.is_ascii_digit()).collect();
        expect.exit = code.parse().expect("an exit code after `exit `");
    }
    expect
}

/// Lines the docs world cannot run, each with why and where it is tested instead.
const NOT_RUN_HERE: &[(&str, &str)] = &[
    (
        "--key customer_id=42 --key region=EU",
        "a two-column key; the world's key is one column (tests/lookup/key_forms.rs)",
    ),
    (
        "dimlog distribute",
        "needs a Citus coordinator (tests/citus/distribute.rs)",
    ),
];

/// The world the docs describe: `public.customers` in a fresh PostgreSQL database whose
/// URL stands for every server the docs name. Six customers, so that customer 42 is the
/// sixth key and its first version has surrogate key 6; every row changed in September
/// 2026.
async fn docs_world() -> (tempfile::TempDir, String) {
    let url = crate::support::pg::fresh_database().await;
    let mut conn = crate::support::fixture::connect("source.url", &url).await;
    conn.execute_script(
        "the docs world",
        "CREATE TABLE public.customers (customer_id bigint PRIMARY KEY, email text, tier text, \
         updated_at timestamptz NOT NULL); \
         INSERT INTO public.customers VALUES \
         (7, 'a@x.test', 'free', '2026-09-01T08:00:00Z'), (13, 'b@x.test', 'pro', '2026-09-02T08:00:00Z'), \
         (21, 'c@x.test', 'free', '2026-09-03T08:00:00Z'), (30, 'd@x.test', 'pro', '2026-09-04T08:00:00Z'), \
         (35, 'e@x.test', 'free', '2026-09-05T08:00:00Z'), (42, 'f@x.test', 'gold', '2026-09-06T08:00:00Z')",
    )
    .await
    .unwrap_or_else(|e| panic!("the docs world: {e}"));
    let _ = conn.close().await;
    (tempfile::tempdir().expect("temp dir"), url)
}

/// A doc line as it runs in the world: every `postgres://…` URL is the world's database,
/// and `/opt/etl/customer/` (where the recipes keep the config) is the world's folder.
fn in_world(words: Vec<String>, url: &str) -> Vec<String> {
    words
        .into_iter()
        .map(|w| {
            if w.starts_with("postgres://") {
                url.to_string()
            } else {
                w.replace("/opt/etl/customer/", "")
            }
        })
        .collect()
}

fn dimlog(dir: &Path, args: &[String]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_dimlog"))
        .args(args)
        .current_dir(dir)
        .env_remove("DIMLOG_SOURCE_URL")
        .env_remove("DIMLOG_TARGET_URL")
        .env_remove("DIMLOG_FAILPOINT")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run the dimlog binary")
}

#[tokio::test]
async fn every_command_line_in_the_docs_does_what_it_says() {
    let mut wrong = Vec::new();
    let mut ran = 0;
    for path in markdown() {
        let text = std::fs::read_to_string(&path).expect("readable");
        let lines = commented_lines(&text);
        if lines.is_empty() {
            continue;
        }
        let (dir, url) = docs_world().await;
        // A file that does not write a config starts where the README's first steps
        // end: a config from `dimlog new`, one loaded run, and facts staged for them
        // (`stg_orders`, in the target, as `assign-keys` wants them).
        if !lines.iter().any(|(_, c, _)| c.starts_with("dimlog new")) {
            for setup in [vec!["new", "--source-url", &url, "--table", "customers"], vec!["run"]] {
                let out = dimlog(dir.path(), &setup.iter().map(|s| s.to_string()).collect::<Vec<_>>());
                assert!(
                    out.status.success(),
                    "docs world setup `dimlog {}`: {}",
                    setup[0],
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let target = format!("sqlite://{}", dir.path().join("warehouse.db").display());
            let mut conn = crate::support::fixture::connect("target.url", &target).await;
            conn.execute_script(
                "staging facts",
                "CREATE TABLE stg_orders (order_id integer PRIMARY KEY, customer_id integer, ordered_at text); \
                 INSERT INTO stg_orders VALUES (1, 42, '2026-10-01T07:00:00Z'), (2, 7, '2026-09-01T09:00:00Z')",
            )
            .await
            .unwrap_or_else(|e| panic!("staging facts: {e}"));
            let _ = conn.close().await;
        }
        for (line, command, comment) in lines {
            let at = format!("{}:{line}: `{command}`", path.display());
            if let Some((_, why)) = NOT_RUN_HERE.iter().find(|(pat, _)| command.contains(pat)) {
                eprintln!("not run here: {at}: {why}");
                continue;
            }
            let words = in_world(shlex::split(&command).expect("balanced quotes"), &url);
            let expect = expectation(&comment);
            let out = dimlog(dir.path(), &words[1..]);
            ran += 1;
            let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
            if out.status.code() != Some(expect.exit) {
                wrong.push(format!(
                    "{at}: exit {:?}, the docs say {}\n  stdout: {stdout}\n  stderr: {stderr}",
                    out.status.code(),
                    expect.exit
                ));
                continue;
            }
            if let Some(prints) = &expect.prints {
                if &stdout != prints {
                    wrong.push(format!("{at}: printed {stdout:?}, the docs say {prints:?}"));
                }
            }
            if let Some(fields) = expect.json.as_ref().and_then(|j| j.as_object()) {
                let got: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_default();
                for (k, v) in fields {
                    if got.get(k) != Some(v) {
                        wrong.push(format!("{at}: {k} is {:?}, the docs say {v}", got.get(k)));
                    }
                }
            }
        }
    }
    assert!(
        ran >= 15,
        "only {ran} command lines ran: is the harness reading the docs?"
    );
    assert!(
        wrong.is_empty(),
        "command lines that do not do what the docs say:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn comments_say_what_a_line_does() {
    assert_eq!(expectation("first load: everything"), Expect::default());
    assert_eq!(
        expectation("prints -1, exit 0"),
        Expect {
            prints: Some("-1".into()),
            ..Expect::default()
        }
    );
    assert_eq!(expectation("exit 1").exit, 1);
    assert_eq!(
        expectation(r#"{"converted": true, "shards": 32, ...}"#).json,
        Some(serde_json::json!({"converted": true, "shards": 32}))
    );
}
