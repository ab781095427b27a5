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

/// A source column whose name dimlog cannot use as it is (a space, a dash, a leading
/// digit, a letter outside ASCII), named in any setting of source columns, is refused
/// (exit 2) with the way on: `source.query`, with an alias that is a valid name (a trial
/// with a key `Cust No` got no hint, where a clash with `valid_from` got one).
#[test]
fn a_source_column_name_dimlog_cannot_use_says_to_rename_it_in_source_query() {
    let dir = tempfile::tempdir().expect("temp dir");
    for name in ["Cust No", "order-id", "1st", "naïve", "a.b.c"] {
        for (setting, line) in [
            ("source.key", format!("key = [{name:?}]")),
            ("source.updated_at", format!("updated_at = {name:?}")),
            ("track.columns", format!("columns = [{name:?}]")),
        ] {
            let key = if setting == "source.key" {
                line.clone()
            } else {
                "key = [\"id\"]".into()
            };
            let updated = if setting == "source.updated_at" {
                line.clone()
            } else {
                "updated_at = \"ts\"".into()
            };
            let tracked = if setting == "track.columns" {
                line.clone()
            } else {
                "columns = [\"x\"]".into()
            };
            std::fs::write(
                dir.path().join("dimlog.toml"),
                format!(
                    "name = \"d\"\n[source]\nurl = \"sqlite://s.db\"\ntable = \"t\"\n{key}\n{updated}\n\
                     [target]\nurl = \"sqlite://w.db\"\nlog = \"l\"\ndimension = \"dim\"\nsurrogate_key = \"sk\"\n\
                     [track]\n{tracked}\n"
                ),
            )
            .expect("write");
            let out = dimlog(dir.path(), &["--json", "status"]);
            assert_code(&out, 2, &format!("{setting} = {name:?}"));
            let v = json(&out, "status --json");
            let message = v["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(setting), "{name:?}: {message}");
            let alias = message
                .split(" AS ")
                .nth(1)
                .and_then(|rest| rest.split([',', ' ']).next())
                .unwrap_or_else(|| panic!("{setting} = {name:?}: no alias in {message}"));
            assert!(message.contains("source.query"), "{message}");
            assert!(
                !alias.is_empty()
                    && alias.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !alias.starts_with(|c: char| c.is_ascii_digit()),
                "{setting} = {name:?}: alias {alias:?} is no valid name: {message}"
            );
        }
    }
}
