//! The full `--help` of every command, snapshotted: an interface change (a flag renamed, a
//! default changed, a help text lost) shows up in review instead of in someone's cron job.

use super::{assert_code, dimlog, text};
use clap::CommandFactory;

#[test]
fn help_of_every_command_is_pinned() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut commands: Vec<String> = dimlog::cli::Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    commands.sort();
    for expected in ["new", "man", "completions", "history", "assign-keys"] {
        assert!(commands.iter().any(|c| c == expected), "no command {expected}");
    }
    let top = dimlog(dir.path(), &["--help"]);
    assert_code(&top, 0, "--help");
    snapshot("help__dimlog", "dimlog --help", &text(&top.stdout));
    for c in &commands {
        let out = dimlog(dir.path(), &[c.as_str(), "--help"]);
        assert_code(&out, 0, &format!("{c} --help"));
        snapshot(&format!("help__{c}"), &format!("dimlog {c} --help"), &text(&out.stdout));
    }
}

fn snapshot(name: &str, description: &str, text: &str) {
    insta::with_settings!({
        snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"),
        prepend_module_to_snapshot => false,
        description => description,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, text);
    });
}
