//! The SQL templates: every statement dimlog runs, one file per statement family and
//! backend under `sql/`, rendered with minijinja.
//!
//! Templates receive only identifiers that [`crate::ident`] validated and quoted, and
//! literals dimlog itself formats (the sentinel); values are bound parameters. The
//! filters `cols` (a prefixed column list) and `eqs` (a key join) keep composite keys
//! readable in the files.

use crate::db::Backend;
use crate::db::DbError;
use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;
use std::sync::OnceLock;

/// The statement families, one file each in every engine's `sql/<engine>/` folder.
pub const FAMILIES: [&str; 15] = [
    "init",
    "tables",
    "stage",
    "dedupe",
    "classify",
    "append",
    "rebuild",
    "state",
    "reconcile",
    "extract",
    "inspect",
    "lookup",
    "verify",
    "scaffold",
    "migrations",
];

/// Defines `template(family)` for an engine folder `sql/<engine>/`: every family of
/// [`FAMILIES`] is compiled in, so a family missing from an engine's folder does not
/// compile.
macro_rules! engine_templates {
    ($engine:literal) => {
        /// The text of the SQL template family `family` of this engine.
        fn template(family: &str) -> Option<&'static str> {
            macro_rules! file {
                ($family:literal) => {
                    include_str!(concat!(
                        env!("CARGO_MANIFEST_DIR"),
                        "/sql/",
                        $engine,
                        "/",
                        $family,
                        ".sql"
                    ))
                };
            }
            Some(match family {
                "init" => file!("init"),
                "tables" => file!("tables"),
                "stage" => file!("stage"),
                "dedupe" => file!("dedupe"),
                "classify" => file!("classify"),
                "append" => file!("append"),
                "rebuild" => file!("rebuild"),
                "state" => file!("state"),
                "reconcile" => file!("reconcile"),
                "extract" => file!("extract"),
                "inspect" => file!("inspect"),
                "lookup" => file!("lookup"),
                "verify" => file!("verify"),
                "scaffold" => file!("scaffold"),
                "migrations" => file!("migrations"),
                _ => return None,
            })
        }
    };
}
pub(crate) use engine_templates;

/// Statements that one engine has and the other does not, as (engine, family, names);
/// every other statement exists in every engine (a step an engine does not need is an
/// empty statement there). Each group is asked for only behind the capability of
/// [`crate::db::dialect::Dialect`] named beside it.
pub const ENGINE_SPECIFIC: &[(&str, &str, &[&str])] = &[
    // `alters_tables`: constraints and column types changed in place.
    (
        "postgres",
        "tables",
        &[
            "add_primary_key",
            "column_retyped",
            "drop_primary_key",
            "log_drop_load_defaults",
            "log_load_defaults",
            "primary_key_name",
            "referencing_keys",
            "retype_dimension_column",
            "set_not_null",
        ],
    ),
    // `dimlog distribute`, asked on a Citus coordinator alone (`Conn::speak_citus`).
    (
        "postgres",
        "tables",
        &[
            "distributed_tables",
            "foreign_keys",
            "unique_without_key",
            "shard_count",
        ],
    ),
    // Not `alters_tables`: the dimension is created again instead.
    ("sqlite", "tables", &["dimension_dependents"]),
    ("sqlite", "rebuild", &["drop_old", "rename_new"]),
    // `Conn::has_merge`: MERGE (PostgreSQL 15 and later).
    ("postgres", "rebuild", &["merge_touched"]),
    // `has_roles`, `has_state_schema`, `names_lock_holders`, and the session's advisory
    // lock (`Conn::lock_dimension`).
    (
        "postgres",
        "state",
        &[
            "current_schema",
            "lock_holder",
            "lock_holders",
            "lock_no_wait",
            "lock_wait",
            "owns_tables",
            "role_name",
            "table_owner",
            "schema_creatable",
            "schema_exists",
            "schema_unusable",
            "state_schemas",
            "state_schema_records",
            "read_only_by_default",
            "table_rights_missing",
            "temp_missing",
            "try_lock",
            "unlock",
        ],
    ),
    // `has_roles`: the rights a migration needs, checked first; `init_makes_assigned_table`.
    ("postgres", "migrations", &["rights", "v1_assigned_done"]),
    // `Conn::database_identity`.
    ("postgres", "extract", &["identity"]),
    // `ChangeTime::ByValue`: times read from text by dimlog.
    // `ChangeTime::ByValue` too; `extract::window_by_index` reads SQLite's plans only.
    ("sqlite", "extract", &["zone_less", "index_advice"]),
    // Not `values_have_declared_types`: fact times and keys canonicalised by dimlog.
    (
        "sqlite",
        "lookup",
        &[
            "at_parsed",
            "at_to_parse",
            "fact_keys",
            "key_map",
            "key_map_index",
            "key_spellings",
        ],
    ),
];

/// Returns the template text of the family `name` for `backend`: its own file, or, for
/// an engine that extends another and replaces nothing of this family, the base's.
pub fn template(backend: Backend, name: &str) -> &'static str {
    let mut dialect = backend.dialect();
    loop {
        if let Some(text) = dialect.template(name) {
            return text;
        }
        match dialect.base() {
            Some(base) => dialect = base,
            None => panic!("no sql template {name}"),
        }
    }
}

fn environment() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        // `cols(list, prefix)`: `p."a", p."b"`.
        env.add_filter("cols", |list: Vec<String>, prefix: Option<String>| -> String {
            list.iter()
                .map(|c| match &prefix {
                    Some(p) if !p.is_empty() => format!("{p}.{c}"),
                    _ => c.clone(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        });
        // `eqs(list, a, b)`: `a."k" = b."k" AND …`.
        env.add_filter("eqs", |list: Vec<String>, a: String, b: String| -> String {
            list.iter()
                .map(|c| format!("{a}.{c} = {b}.{c}"))
                .collect::<Vec<_>>()
                .join(" AND ")
        });
        // `text`: a SQLite value as text; a double (storage class REAL) in the fewest
        // digits, 15 to 17, that give the same double back (SQLite's own text has 15,
        // and would make `0.30000000000000004` the key `0.3`).
        env.add_filter("text", |expr: String| -> String {
            format!(
                "CASE WHEN typeof({expr}) <> 'real' OR CAST(CAST({expr} AS TEXT) AS REAL) = {expr} THEN CAST({expr} AS TEXT) \
                 WHEN CAST(printf('%!.16g', {expr}) AS REAL) = {expr} THEN printf('%!.16g', {expr}) \
                 ELSE printf('%!.17g', {expr}) END"
            )
        });
        // `lit`: text as a SQL string literal (for the few catalog functions that take a
        // name as text, such as Citus's `create_distributed_table`).
        env.add_filter("lit", |text: String| -> String { format!("'{}'", text.replace('\'', "''")) });
        // `bare`: a quoted identifier as its name (`"a""b"` → `a"b`).
        env.add_filter("bare", |quoted: String| -> String { super::citus::bare(&quoted) });
        // `next_micro`: a PostgreSQL timestamptz expression 1 µs later, with IMMUTABLE
        // operators only (timestamptz + interval is STABLE: a day's length depends on the
        // session's zone), so that Citus may run it on its shards; the same instant.
        env.add_filter("next_micro", |expr: String| -> String {
            format!("((({expr}) AT TIME ZONE 'UTC') + interval '1 microsecond') AT TIME ZONE 'UTC'")
        });
        // `pgts`: a PostgreSQL timestamptz expression as dimlog's fixed-width UTC text.
        env.add_filter("pgts", |expr: String| -> String {
            format!("to_char(({expr}) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')")
        });
        env
    })
}

/// The part of a template before its first statement: comments and macros.
fn preamble(text: &str) -> &str {
    &text[..text.find("-- statement:").unwrap_or(text.len())]
}

/// The text of statement `statement` in `text`, if it has one.
fn body<'a>(text: &'a str, statement: &str) -> Option<&'a str> {
    let marker = format!("-- statement: {statement}\n");
    let start = text.find(&marker)? + marker.len();
    let end = text[start..].find("-- statement:").map_or(text.len(), |e| start + e);
    Some(&text[start..end])
}

/// Renders one statement of a template: the template's preamble (comments, macros)
/// plus that statement's text, so values other statements need may be absent. A
/// template holds several statements, each after a line `-- statement: NAME`. An engine
/// that extends another ([`crate::db::dialect::Dialect::base`]) has the base's preamble
/// and then its own (where it redefines a macro, its own wins), and the statement from
/// its own file if that has it, else the base's.
pub fn statement<C: Serialize>(backend: Backend, name: &str, statement: &str, ctx: &C) -> Result<String, DbError> {
    let mut chain = vec![backend.dialect()];
    while let Some(base) = chain.last().and_then(|d| d.base()) {
        chain.push(base);
    }
    let texts: Vec<&str> = chain.iter().filter_map(|d| d.template(name)).collect();
    let Some(found) = texts.iter().find_map(|text| body(text, statement)) else {
        return Err(DbError::Template {
            name: format!("{name}/{statement}"),
            message: "no such statement".into(),
        });
    };
    // A macro defined twice keeps its last definition: the engine's own preamble last.
    let mut source: String = texts.iter().rev().map(|text| preamble(text)).collect();
    source.push_str(found);
    environment()
        .render_str(&source, ctx)
        .map(|s| s.trim().to_string())
        .map_err(|e| DbError::Template {
            name: format!("{name}/{statement}"),
            message: format!("{e:#}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const ENGINES: [Backend; 2] = [Backend::Sqlite, Backend::Postgres];

    fn statements(backend: Backend, family: &str) -> BTreeSet<String> {
        template(backend, family)
            .lines()
            .filter_map(|l| l.strip_prefix("-- statement: "))
            .map(|n| n.trim().to_string())
            .collect()
    }

    fn declared(engine: &str, family: &str) -> BTreeSet<String> {
        ENGINE_SPECIFIC
            .iter()
            .filter(|(e, f, _)| *e == engine && *f == family)
            .flat_map(|(_, _, names)| names.iter().map(|n| n.to_string()))
            .collect()
    }

    /// A statement in one engine's files and not the other's is a step a stage would ask
    /// for and fail on: only the declared ones may be.
    #[test]
    fn every_statement_is_in_every_engine_or_declared_engine_specific() {
        for family in FAMILIES {
            for (this, other) in [(ENGINES[0], ENGINES[1]), (ENGINES[1], ENGINES[0])] {
                let only: BTreeSet<String> = statements(this, family)
                    .difference(&statements(other, family))
                    .cloned()
                    .collect();
                assert_eq!(
                    only,
                    declared(this.dialect().name(), family),
                    "{family}.sql: statements only {} has (declare them in ENGINE_SPECIFIC, or add them to {})",
                    this.dialect().name(),
                    other.dialect().name()
                );
            }
        }
    }

    /// An engine that extends another replaces statements of its base and adds none: a
    /// statement only it had would be one a stage asks every engine for.
    #[test]
    fn an_extending_engine_only_replaces_statements_of_its_base() {
        let citus = Backend::Citus.dialect();
        let base = citus.base().expect("Citus extends PostgreSQL");
        for family in FAMILIES {
            let Some(own) = citus.template(family) else { continue };
            let theirs = base.template(family).expect("a family of the base");
            for name in own.lines().filter_map(|l| l.strip_prefix("-- statement: ")) {
                assert!(
                    theirs.contains(&format!("-- statement: {}\n", name.trim())),
                    "sql/citus/{family}.sql has {name}, which sql/postgres/{family}.sql does not"
                );
                let ctx = serde_json::json!({});
                let _ = statement(Backend::Citus, family, name.trim(), &ctx);
            }
        }
    }

    /// Every declared engine-specific statement exists where it is declared.
    #[test]
    fn every_declared_statement_exists() {
        for (engine, family, names) in ENGINE_SPECIFIC {
            let backend = ENGINES
                .into_iter()
                .find(|b| b.dialect().name() == *engine)
                .expect("an engine");
            let present = statements(backend, family);
            for name in *names {
                assert!(present.contains(*name), "{engine}/{family}.sql has no statement {name}");
            }
        }
    }

    /// Every statement of every engine is a template that compiles (its preamble's
    /// macros included), so a syntax error shows here rather than in one database test.
    #[test]
    fn every_statement_of_every_engine_compiles() {
        for backend in ENGINES {
            for family in FAMILIES {
                let text = template(backend, family);
                let preamble_end = text.find("-- statement:").unwrap_or(0);
                for name in statements(backend, family) {
                    let marker = format!("-- statement: {name}\n");
                    let start = text.find(&marker).expect("listed") + marker.len();
                    let end = text[start..].find("-- statement:").map_or(text.len(), |e| start + e);
                    let source = format!("{}{}", &text[..preamble_end], &text[start..end]);
                    if let Err(e) = environment().template_from_str(&source) {
                        panic!("{}/{family}.sql, statement {name}: {e:#}", backend.dialect().name());
                    }
                }
            }
        }
    }

    /// The (family, statement) pairs the code names literally: in `statement(…,
    /// "family", "name", …)` and in `run_named(…, "family", &["a", "b"], …)`.
    fn named_in_code() -> BTreeSet<(String, String)> {
        fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).expect("readable") {
                let path = entry.expect("an entry").path();
                if path.is_dir() {
                    files(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    out.push(path);
                }
            }
        }
        // A string literal at the start of `text` (after blanks), and the bytes up to
        // its closing quote.
        let literal = |text: &str| -> Option<(String, usize)> {
            let lead = text.len() - text.trim_start().len();
            let rest = text[lead..].strip_prefix('"')?;
            let end = rest.find('"')?;
            Some((rest[..end].to_string(), lead + 1 + end + 1))
        };
        let mut all = Vec::new();
        files(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut all);
        let mut found = BTreeSet::new();
        for path in all {
            let text = std::fs::read_to_string(&path).expect("readable");
            for (call, list) in [("statement(", false), ("run_named(", true)] {
                for (at, _) in text.match_indices(call) {
                    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
                    if text[line_start..at].trim_start().starts_with("//") {
                        continue;
                    }
                    // Skip the first argument (the backend or the connection).
                    let args = &text[at + call.len()..];
                    let Some(comma) = args.find(',') else { continue };
                    let Some((family, used)) = literal(&args[comma + 1..]) else {
                        continue;
                    };
                    let after = &args[comma + 1 + used..];
                    let Some(after) = after.trim_start().strip_prefix(',') else {
                        continue;
                    };
                    if list {
                        let Some(items) = after.trim_start().strip_prefix("&[") else {
                            continue;
                        };
                        let items = &items[..items.find(']').unwrap_or(0)];
                        for item in items.split(',') {
                            if let Some((name, _)) = literal(item) {
                                found.insert((family.clone(), name));
                            }
                        }
                    } else if let Some((name, _)) = literal(after) {
                        found.insert((family.clone(), name));
                    }
                }
            }
        }
        found
    }

    /// Every statement the code names exists in every engine, or in the one it is
    /// declared specific to (a step asked of the other engine would fail at run time).
    #[test]
    fn every_statement_the_code_names_exists() {
        let named = named_in_code();
        assert!(
            named.len() > 80,
            "the scan finds the code's statements: {}",
            named.len()
        );
        for (family, name) in named {
            assert!(
                FAMILIES.contains(&family.as_str()),
                "no family {family} (statement {name})"
            );
            let engines: Vec<Backend> = ENGINES
                .into_iter()
                .filter(|b| statements(*b, &family).contains(&name))
                .collect();
            let specific = ENGINE_SPECIFIC
                .iter()
                .any(|(_, f, names)| *f == family && names.contains(&name.as_str()));
            assert!(
                engines.len() == ENGINES.len() || (engines.len() == 1 && specific),
                "{family}/{name} is in {:?}",
                engines.iter().map(|b| b.dialect().name()).collect::<Vec<_>>()
            );
        }
    }

    /// Each engine folder holds exactly the families of [`FAMILIES`].
    #[test]
    fn every_engine_has_every_family() {
        for backend in ENGINES {
            for family in FAMILIES {
                assert!(backend.dialect().template(family).is_some(), "{family}");
            }
            assert!(backend.dialect().template("no_such_family").is_none());
        }
    }
}
