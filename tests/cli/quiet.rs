//! Issue 17: `-q` prints only errors. A successful `run` (even one with a warning),
//! `demo`, `new` and `verify` print nothing at all; an error, or what a failing `verify`
//! found, is still printed, and `--json` still prints its object.

use super::{assert_code, dimlog};
use crate::support::fixture::{on_both_backends, Fixture};

on_both_backends!(quiet_commands_print_only_errors);

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

async fn quiet_commands_print_only_errors(mut fx: Fixture) {
    // A row stamped after the upper bound makes the run warn.
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'silver', 'NL', '2026-03-02T09:00:00Z'),
             (2, 'bob@example.com', 'gold', NULL, '2026-03-02T13:00:00Z')",
    )
    .await;
    let config = fx.config_path();
    let config = config.to_str().expect("utf-8 path");
    let out = dimlog(
        fx.dir(),
        &["-q", "--config", config, "run", "--upper", "2026-03-02T12:00:00Z"],
    );
    assert_code(&out, 0, "-q run");
    assert_eq!((text(&out.stdout), text(&out.stderr)), (String::new(), String::new()));
    let loaded = fx.count("dim_customer").await;
    assert_eq!(loaded, 1, "the run ran");

    let out = dimlog(fx.dir(), &["-q", "--json", "--config", config, "status"]);
    assert_code(&out, 0, "-q --json status");
    assert!(
        text(&out.stdout).starts_with('{'),
        "--json still prints: {}",
        text(&out.stdout)
    );

    let out = dimlog(
        fx.dir(),
        &["-q", "--config", config, "run", "--upper", "2099-01-01T00:00:00Z"],
    );
    assert_code(&out, 2, "-q run refused");
    assert!(
        text(&out.stderr).starts_with("error: "),
        "errors still print: {}",
        text(&out.stderr)
    );

    let out = dimlog(fx.dir(), &["-q", "demo", "--dir", "quiet-demo"]);
    assert_code(&out, 0, "-q demo");
    assert_eq!((text(&out.stdout), text(&out.stderr)), (String::new(), String::new()));

    // verify: silent when it passes; a failure is what -q still prints (it printed
    // nothing and exited 3; found by an outside trial).
    let out = dimlog(fx.dir(), &["-q", "--config", config, "verify"]);
    assert_code(&out, 0, "-q verify");
    assert_eq!((text(&out.stdout), text(&out.stderr)), (String::new(), String::new()));
    fx.exec("UPDATE src_customers SET country = 'LU' WHERE customer_id = 1")
        .await;
    let out = dimlog(fx.dir(), &["-q", "--config", config, "verify", "--against-source"]);
    assert_code(&out, 3, "-q verify finding a fault");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("FAIL") && stderr.contains("1: tracked values differ"),
        "{stderr}"
    );
    assert!(!stderr.contains("ok    "), "only the failures: {stderr}");
}
