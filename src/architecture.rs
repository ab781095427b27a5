//! The module map as a test: data flows one way, extract → dedupe → detect → log →
//! rebuild → lookup, with the orchestration and the commands above the stages, the CLI on
//! top, and the database layer and the plain helpers below. A module may use only
//! modules of lower layers, so the graph has no cycle and no stage reaches back into an
//! earlier one or up into what drives it.

use std::collections::BTreeSet;
use std::path::Path;

/// Layers, lowest first; modules of one layer never use each other.
const LAYERS: &[&[&str]] = &[
    &["ident", "ts", "secret", "failpoint", "interrupt"],
    &["db"],
    &["config", "hash", "layout"],
    &["rights", "context"],
    &["state", "record"],
    &["tables"],
    &["extract"],
    &["stage"],
    &["dedupe", "reconcile"],
    &["detect"],
    &["log"],
    &["rebuild"],
    &["lookup"],
    &["pipeline"],
    &["backfill", "verify", "inspect"],
    // Checks the setup with verify's table checks and their fixes.
    &["doctor"],
    &["timeline"],
    &["dimension"],
    &["cli"],
];

fn layer(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// A file's code before its unit tests.
fn without_tests(text: &str) -> &str {
    text.split("#[cfg(test)]\nmod tests").next().unwrap_or("")
}

/// The crate modules a file names as `crate::<module>`, outside comments and its tests.
fn uses(text: &str) -> BTreeSet<String> {
    let code = without_tests(text);
    let mut found = BTreeSet::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_module_uses_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut wrong = Vec::new();
    for path in all {
        let relative = path.strip_prefix(&src).expect("under src");
        let module = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .map(|s| s.trim_end_matches(".rs").to_string())
            .expect("a name");
        if matches!(module.as_str(), "lib" | "main" | "architecture") {
            continue;
        }
        let own = layer(&module).unwrap_or_else(|| panic!("module {module} is in no layer of LAYERS"));
        let text = std::fs::read_to_string(&path).expect("readable");
        for used in uses(&text) {
            if used == module {
                continue;
            }
            let Some(theirs) = layer(&used) else {
                continue; // crate::Error and other items of the crate root
            };
            if theirs >= own {
                wrong.push(format!("{} uses crate::{used}", relative.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "edges against the layers:\n{}", wrong.join("\n"));
}

#[test]
fn uses_reads_crate_paths_outside_comments() {
    let text = "use crate::db::Conn;\n// crate::cli in a comment\nlet x = crate::ts::Micros::now(); crate::Error::Usage\n#[cfg(test)]\nmod tests {\nuse crate::pipeline;\n}";
    let found: Vec<String> = uses(text).into_iter().collect();
    assert_eq!(found, ["db", "ts"]);
}

/// Every long flag of the command line, over all subcommands.
#[cfg(feature = "cli")]
fn cli_flags() -> BTreeSet<String> {
    fn walk(cmd: &clap::Command, out: &mut BTreeSet<String>) {
        for arg in cmd.get_arguments() {
            if let Some(long) = arg.get_long() {
                out.insert(format!("--{long}"));
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, out);
        }
    }
    let mut out = BTreeSet::new();
    walk(&<crate::cli::Cli as clap::CommandFactory>::command(), &mut out);
    out
}

/// The flags a line of code names (outside comments): `--name` not followed by more of
/// a name.
#[cfg(feature = "cli")]
fn flags_named(line: &str, flags: &BTreeSet<String>) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    flags
        .iter()
        .filter(|f| {
            code.match_indices(f.as_str()).any(|(i, _)| {
                let after = code[i + f.len()..].chars().next();
                !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            })
        })
        .cloned()
        .collect()
}

/// The library says what is wrong and classifies the way out; only `cli` turns that into
/// flags (`cli::error`), so a program that embeds dimlog never tells its users to type a
/// flag it does not have.
#[cfg(feature = "cli")]
#[test]
fn the_library_never_names_a_cli_flag() {
    let flags = cli_flags();
    assert!(flags.contains("--full-refresh") && flags.contains("--key"), "{flags:?}");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut wrong = Vec::new();
    for path in all {
        let relative = path.strip_prefix(&src).expect("under src");
        if relative.starts_with("cli") || relative == Path::new("main.rs") || relative == Path::new("architecture.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable");
        for (n, line) in without_tests(&text).lines().enumerate() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("//") {
                continue;
            }
            for flag in flags_named(line, &flags) {
                wrong.push(format!("{}:{}: {flag}", relative.display(), n + 1));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "library code that names a CLI flag:\n{}",
        wrong.join("\n")
    );
}

#[cfg(feature = "cli")]
#[test]
fn flags_named_finds_whole_flags_outside_comments() {
    let flags: BTreeSet<String> = ["--key", "--full-refresh"].map(String::from).into();
    assert_eq!(flags_named("\"rerun with --full-refresh\"", &flags), ["--full-refresh"]);
    assert!(flags_named("\"--key-column\" // --key", &flags).is_empty());
}
