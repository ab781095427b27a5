//! Every `dimlog` command line shown in README.md and docs/ (in fenced `sh` blocks) is one
//! the binary accepts: its command and flags exist and its values parse (issue 17, "docs
//! that match the binary"). A flag renamed or removed fails here, naming the file and line.

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
            out.push((start, command));
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
