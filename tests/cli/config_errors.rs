//! Issue 17: a TOML syntax error keeps toml's snippet on its own lines (the line, and a
//! caret under the place), on stderr and in `--json`'s message, exit 2.

use super::{assert_code, dimlog, json};

#[test]
fn a_toml_error_keeps_its_multi_line_snippet() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("dimlog.toml"), "name = \"x\"\n[source\nurl = 1\n").expect("write");
    let out = dimlog(dir.path(), &["status"]);
    assert_code(&out, 2, "a broken config");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines.iter().any(|l| l.trim_start().starts_with("2 | [source")),
        "{stderr}"
    );
    assert!(
        lines.iter().any(|l| l.trim_start().starts_with('|') && l.contains('^')),
        "{stderr}"
    );
    let out = dimlog(dir.path(), &["--json", "status"]);
    assert_code(&out, 2, "a broken config, --json");
    let v = json(&out, "status --json");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("\n2 | [source")
            || v["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("2 | [source\n"),
        "{v}"
    );
}

/// No config where a command looks: exit 2, and the hint says how to get one, for every
/// command that reads one.
#[test]
fn a_missing_config_says_how_to_get_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    for command in [
        &["run"][..],
        &["status"],
        &["doctor"],
        &["history", "--key", "1"],
        &["verify"],
    ] {
        let out = dimlog(dir.path(), command);
        assert_code(&out, 2, "no config");
        // doctor lists it among its checks, on stdout.
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            said.contains("dimlog.toml") && said.contains("hint: write one with `dimlog new`"),
            "{command:?}: {said}"
        );
    }
}
