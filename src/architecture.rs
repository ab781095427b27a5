//! The module map as a test: data flows one way, extract → dedupe → detect → log →
//! rebuild → lookup, with the orchestration and the commands above the stages, the CLI on
//! top, and the database layer and the plain helpers below. A module may use only
//! modules of lower layers, so the graph has no cycle and no stage reaches back into an
//! earlier one or up into what drives it.

use std::collections::BTreeSet;
use std::path::Path;

/// Layers, lowest first; modules of one layer never use each other.
const LAYERS: &[&[&str]] = &[
    &["ident", "ts", "secret", "failpoint"],
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
    &["backfill", "verify", "inspect", "scaffold"],
    &["timeline"],
    &["dimension"],
    &["cli"],
];

fn layer(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The crate modules a file names as `crate::<module>`, outside comments and its tests.
fn uses(text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
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
    let text = "use crate::db::Conn;\n// crate::cli in a comment\nlet x = crate::ts::Micros::now(); crate::Error::Usage\n#[cfg(test)]\nuse crate::pipeline;";
    let found: Vec<String> = uses(text).into_iter().collect();
    assert_eq!(found, ["db", "ts"]);
}
