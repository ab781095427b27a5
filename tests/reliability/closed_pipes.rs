//! Output to a closed pipe (`dimlog … | head -c 10`): a write that fails is ignored, and
//! the command exits with its own code, never with a panic's 101.

use std::process::Stdio;

use super::cli;
use crate::support::fixture::Fixture;

/// Runs `dimlog <args>` with stdout and stderr pipes whose reading ends are closed at
/// once; returns the exit code.
fn with_closed_pipes(config: &std::path::Path, args: &[&str]) -> Option<i32> {
    let mut cmd = cli::command(config);
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn dimlog");
    drop(child.stdout.take());
    drop(child.stderr.take());
    child.wait().expect("wait").code()
}

#[tokio::test]
async fn output_to_closed_pipes_never_panics() {
    let mut fx = Fixture::sqlite().await;
    // Some versions of one key (a closed pipe refuses the first write, however short).
    for i in 0..5 {
        fx.exec(&format!(
            "INSERT OR REPLACE INTO src_customers (customer_id, email, tier, country, updated_at) \
             VALUES (1, 'ann{i}@example.com', 'free', 'FR', '2026-03-02T09:0{i}:00Z')"
        ))
        .await;
        fx.run(&format!("2026-03-02T09:0{i}:30Z")).await;
    }
    let config = fx.config_path();
    let cases: &[(&[&str], i32)] = &[
        (&["history", "--key", "1"], 0),
        (&["history", "--key", "1", "--json"], 0),
        (&["status"], 0),
        (&["verify"], 0),
        // `-v`'s log lines go through the log's own writer (which complained of a failed
        // write with `eprintln!`, and panicked).
        (&["run", "-v", "--upper", "2026-03-02T09:04:30Z"], 0),
        (&["verify", "-v"], 0),
        (&["status", "-v"], 0),
        (&["completions", "bash"], 0),
        (&["--help"], 0),
        (&["history", "--key", "999"], 0),
        (
            &[
                "assign-keys",
                "--facts",
                "public.dim_cust",
                "--key-column",
                "customer_id",
                "--at-column",
                "at",
                "--sk-column",
                "c_sk",
            ],
            2,
        ),
        (&["run", "--upper", "not a time"], 2),
        (&["no-such-command"], 2),
    ];
    for (args, code) in cases {
        let direct = cli::run(&config, args);
        assert_eq!(direct.code, Some(*code), "{direct:?}");
        for _ in 0..20 {
            let got = with_closed_pipes(&config, args);
            assert_eq!(got, Some(*code), "`dimlog {}` with closed pipes", args.join(" "));
        }
    }
}
