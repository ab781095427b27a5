//! dimlog's own names in SQL never collide with a user's names (issue 14, item 1; spec
//! section 4: "dimlog's own aliases in SQL never collide with a user's column names,
//! whatever they are called").
//!
//! The names are read from the SQL templates under `sql/` when the test runs, so a name a
//! later change adds is covered without touching this file: every `AS name` (column,
//! table and subquery aliases), every CTE name and column list, every `WINDOW` name,
//! every alias after FROM / JOIN / USING / UPDATE / INTO and after a subquery's `)`, every
//! column of a `CREATE TABLE` (dimlog's own tables and the temporary staging tables), and
//! every column reached through an alias (`x.prev_to`). To those come the names databases
//! give hidden columns (SQLite `rowid`, `oid`, `_rowid_`; PostgreSQL `xmin`, `ctid`, …).
//!
//! Each name is refused by the config (exit 2, naming the setting, for a name dimlog
//! reserves) or loaded: configs partition the names so every one is a key column (single
//! and composite keys), a Type 2 column and a Type 1 column at least once, and others are
//! the change column, the soft-delete flag, the tie-breaker, the surrogate key, the log
//! and dimension tables and a fact table. Each config then runs the same history — first
//! load (with and without a tombstone in it), a change, a Type 1 change, a soft delete, a
//! correction at the same timestamp, a duplicate decided by the tie-breaker, a late
//! version, keys coming back, a reconciled hard delete, a full refresh, `rebuild` — and
//! the log must be exactly the one this history gives (log ids and surrogate keys
//! numbered in key order, every value the source's), the dimension the one derived from
//! it, and `verify`, `history`, `lookup` and `assign-keys` right about it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use dimlog::config::{Backend, ConfigError, Overrides, Plan};
use dimlog::pipeline::{RunOptions, RunReport};
use dimlog::state::RunKind;

use crate::support::fixture::{on_both_backends, Fixture};

/// Words of SQL that are never names dimlog defines (keywords, and type names after a
/// CAST's `AS`).
const KEYWORDS: &str = "
    ADD ALL ALTER ANALYZE AND AS ASC AT BETWEEN BY CASE CAST CHECK COLLATE COLUMN COMMIT
    CONFLICT CONSTRAINT COPY CREATE CROSS CURRENT DATA DEFAULT DELETE DESC DISTINCT DO DROP
    ELSE END ESCAPE EXCEPT EXISTS FALSE FILTER FIRST FOLLOWING FOR FROM FULL GENERATED GLOB
    GROUP HAVING IDENTITY IF IN INDEX INNER INSERT INTERSECT INTERVAL INTO IS JOIN KEY LAST
    LATERAL LEFT LIKE LIMIT MATCHED MATERIALIZED MERGE NATURAL NO NOT NOTHING NULL NULLS
    OFFSET ON ONLY OR ORDER OUTER OVER PARTITION PRECEDING PRESERVE PRIMARY RANGE
    REFERENCES RENAME RETURNING RIGHT ROW ROWS SELECT SET SHARE STDIN STDOUT TABLE TEMP
    TEMPORARY THEN TIME TO TRUE UNBOUNDED UNION UNIQUE UPDATE USING VALUES WHEN WHERE
    WINDOW WITH ZONE
    BIGINT BLOB BOOLEAN BYTEA INT INT2 INTEGER NUMERIC REAL TEXT TIMESTAMPTZ";

fn is_keyword(word: &str) -> bool {
    let upper = word.to_ascii_uppercase();
    KEYWORDS.split_whitespace().any(|k| k == upper)
}

/// A token of a template with its Jinja parts taken out.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    /// An unquoted identifier or keyword.
    Word(String),
    /// A `{{ … }}` expression, a quoted identifier or a string literal: a name the user
    /// gives, or no name at all.
    Opaque,
    /// Any other character.
    Sym(char),
}

/// Removes `{# … #}` comments and `{% … %}` tags, turns `{{ … }}` into one opaque
/// token, drops `--` comments, then splits the SQL into tokens.
fn tokens(template: &str) -> Vec<Tok> {
    let mut sql = String::new();
    let mut rest = template;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("{#") {
            rest = r.split_once("#}").map_or("", |(_, after)| after);
        } else if let Some(r) = rest.strip_prefix("{%") {
            rest = r.split_once("%}").map_or("", |(_, after)| after);
        } else if let Some(r) = rest.strip_prefix("{{") {
            sql.push_str(" \u{1} ");
            rest = r.split_once("}}").map_or("", |(_, after)| after);
        } else if let Some(r) = rest.strip_prefix("--") {
            rest = r.split_once('\n').map_or("", |(_, after)| after);
            sql.push('\n');
        } else {
            let c = rest.chars().next().expect("not empty");
            sql.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    let chars: Vec<char> = sql.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            toks.push(Tok::Word(chars[start..i].iter().collect()));
            continue;
        }
        if c == '\'' || c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != c {
                i += 1;
            }
            toks.push(Tok::Opaque);
        } else if c == '\u{1}' {
            toks.push(Tok::Opaque);
        } else if c.is_ascii_digit() {
            while i + 1 < chars.len() && chars[i + 1].is_ascii_alphanumeric() {
                i += 1;
            }
            toks.push(Tok::Sym('0'));
        } else if !c.is_whitespace() {
            toks.push(Tok::Sym(c));
        }
        i += 1;
    }
    toks
}

fn word(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Word(w)) => Some(w.as_str()),
        _ => None,
    }
}

fn name(t: Option<&Tok>) -> Option<&str> {
    word(t).filter(|w| !is_keyword(w))
}

fn is_kw(t: Option<&Tok>, kw: &str) -> bool {
    word(t).is_some_and(|w| w.eq_ignore_ascii_case(kw))
}

/// The names one template defines (see the module's doc).
fn names_in(template: &str) -> BTreeSet<String> {
    let t = tokens(template);
    let at = |i: usize| t.get(i);
    let mut names = BTreeSet::new();
    let mut add = |n: &str| {
        names.insert(n.to_string());
    };
    for (i, tok) in t.iter().enumerate() {
        match tok {
            // `expr AS alias`, and `name AS (` / `name AS MATERIALIZED (` (a CTE or a
            // window), and `name (a, b) AS (` (a CTE with a column list).
            Tok::Word(w) if w.eq_ignore_ascii_case("AS") => {
                if let Some(n) = name(at(i + 1)) {
                    add(n);
                }
                let opens = at(i + 1) == Some(&Tok::Sym('('))
                    || is_kw(at(i + 1), "MATERIALIZED")
                    || (is_kw(at(i + 1), "NOT") && is_kw(at(i + 2), "MATERIALIZED"));
                if opens && i > 0 {
                    if let Some(n) = name(at(i - 1)) {
                        add(n);
                    } else if at(i - 1) == Some(&Tok::Sym(')')) {
                        let mut j = i - 1;
                        let mut columns = Vec::new();
                        while j > 0 && at(j) != Some(&Tok::Sym('(')) {
                            if let Some(n) = name(at(j)) {
                                columns.push(n);
                            }
                            j -= 1;
                        }
                        if j > 0 && name(at(j - 1)).is_some() && !is_kw(j.checked_sub(2).and_then(at), "TABLE") {
                            add(name(at(j - 1)).expect("checked"));
                            columns.into_iter().for_each(&mut add);
                        }
                    }
                }
            }
            Tok::Word(w) if w.eq_ignore_ascii_case("WINDOW") => {
                if let Some(n) = name(at(i + 1)) {
                    add(n);
                }
            }
            // `FROM table alias`, `JOIN table AS alias`, `UPDATE table alias`, …
            Tok::Word(w)
                if ["FROM", "JOIN", "USING", "UPDATE", "INTO"]
                    .iter()
                    .any(|k| w.eq_ignore_ascii_case(k)) =>
            {
                let mut j = i + 1;
                if !(at(j) == Some(&Tok::Opaque) || name(at(j)).is_some()) {
                    continue;
                }
                j += 1;
                while at(j) == Some(&Tok::Sym('.')) {
                    j += 2;
                }
                if is_kw(at(j), "AS") {
                    j += 1;
                }
                if let Some(n) = name(at(j)) {
                    if at(j + 1) != Some(&Tok::Sym('(')) {
                        add(n);
                    }
                }
            }
            // `(subquery) alias`
            Tok::Sym(')') => {
                if let Some(n) = name(at(i + 1)) {
                    add(n);
                }
            }
            // `alias.column`
            Tok::Sym('.') if i > 0 && name(at(i - 1)).is_some() => {
                if let Some(n) = name(at(i + 1)) {
                    add(n);
                }
            }
            // `CREATE [TEMP] TABLE [IF NOT EXISTS] name (column type, …)`
            Tok::Word(w)
                if w.eq_ignore_ascii_case("TABLE") && is_kw(at(i.wrapping_sub(1)), "TEMP")
                    || w.eq_ignore_ascii_case("TABLE") && is_kw(at(i.wrapping_sub(1)), "CREATE") =>
            {
                let mut j = i + 1;
                while is_kw(at(j), "IF") || is_kw(at(j), "NOT") || is_kw(at(j), "EXISTS") {
                    j += 1;
                }
                if let Some(n) = name(at(j)) {
                    add(n);
                }
                j += 1;
                while at(j) == Some(&Tok::Sym('.')) {
                    j += 2;
                }
                if at(j) != Some(&Tok::Sym('(')) {
                    continue;
                }
                let mut depth = 0;
                let mut first = true;
                while let Some(tok) = at(j) {
                    match tok {
                        Tok::Sym('(') => {
                            depth += 1;
                            if depth == 1 {
                                first = true;
                                j += 1;
                                continue;
                            }
                        }
                        Tok::Sym(')') => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        Tok::Sym(',') if depth == 1 => {
                            first = true;
                            j += 1;
                            continue;
                        }
                        _ => {}
                    }
                    if first && depth == 1 {
                        if let Some(n) = name(Some(tok)) {
                            add(n);
                        }
                    }
                    first = false;
                    j += 1;
                }
            }
            _ => {}
        }
    }
    names
}

/// Every name dimlog's SQL templates define, in both dialects, read from `sql/` now.
fn sql_names() -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
    let mut names = BTreeSet::new();
    let mut files = 0;
    for dialect in ["sqlite", "postgres"] {
        let dir = root.join(dialect);
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.extension().is_some_and(|e| e == "sql") {
                let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                names.extend(names_in(&text));
                files += 1;
            }
        }
    }
    assert!(files >= 20, "only {files} SQL templates under {}", root.display());
    names
}

/// The columns of the log and the dimension: never a key, tracked, Type 1 or
/// surrogate-key column (they may be the change column, the flag or the tie-breaker,
/// which only the source has).
const WRITTEN: &[&str] = &[
    "valid_from",
    "valid_to",
    "is_current",
    "is_deleted",
    "row_hash",
    "load_id",
    "loaded_at",
    "log_id",
];

/// PostgreSQL's system columns: no table of a PostgreSQL target can have a column named
/// so (`oid` stopped being one in PostgreSQL 12).
const PG_SYSTEM: &[&str] = &["tableoid", "xmin", "cmin", "xmax", "cmax", "ctid"];

/// Hidden columns databases give every table: SQLite's names for the rowid, and
/// PostgreSQL's system columns.
const HIDDEN: &[&str] = &[
    "rowid", "oid", "_rowid_", "tableoid", "xmin", "cmin", "xmax", "cmax", "ctid",
];

/// The names under test: those the SQL defines, each `dimlog_x` also as `x` (the name it
/// would have without dimlog's prefix), and the hidden columns.
fn all_names() -> BTreeSet<String> {
    let mut names = sql_names();
    let unprefixed: Vec<String> = names
        .iter()
        .filter_map(|n| n.strip_prefix("dimlog_"))
        .filter(|n| !n.is_empty())
        .map(String::from)
        .collect();
    names.extend(unprefixed);
    names.extend(HIDDEN.iter().map(|s| s.to_string()));
    names
}

/// What a name can be in a config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Key,
    Tracked,
    Type1,
    UpdatedAt,
    DeletedFlag,
    Tiebreak,
    SurrogateKey,
    Log,
    Dimension,
}

const ROLES: [Role; 9] = [
    Role::Key,
    Role::Tracked,
    Role::Type1,
    Role::UpdatedAt,
    Role::DeletedFlag,
    Role::Tiebreak,
    Role::SurrogateKey,
    Role::Log,
    Role::Dimension,
];

impl Role {
    fn setting(self) -> &'static str {
        match self {
            Role::Key => "source.key",
            Role::Tracked => "track.columns",
            Role::Type1 => "track.type1",
            Role::UpdatedAt => "source.updated_at",
            Role::DeletedFlag => "source.deleted_flag",
            Role::Tiebreak => "source.tiebreak",
            Role::SurrogateKey => "target.surrogate_key",
            Role::Log => "target.log",
            Role::Dimension => "target.dimension",
        }
    }
}

/// The contract's rule, written out independently of dimlog's code: `dimlog_…` (any
/// case) is dimlog's for every name a config gives; a column of the log or the dimension
/// (any case) cannot be a column the target's tables get; nor can a PostgreSQL system
/// column on a PostgreSQL target (exactly: a quoted `XMIN` is another name there).
fn refused(name: &str, role: Role, target: Backend) -> bool {
    let lower = name.to_ascii_lowercase();
    if lower.starts_with("dimlog_") {
        return true;
    }
    match role {
        Role::Key | Role::Tracked | Role::Type1 | Role::SurrogateKey => {
            WRITTEN.contains(&lower.as_str()) || (target == Backend::Postgres && PG_SYSTEM.contains(&name))
        }
        _ => false,
    }
}

fn toml_list(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

/// The names one config gives.
#[derive(Clone, Debug)]
struct Names {
    keys: Vec<String>,
    tracked: Vec<String>,
    type1: Vec<String>,
    updated_at: String,
    deleted_flag: String,
    tiebreak: Option<String>,
    sk: String,
    log: String,
    dim: String,
    /// `[track] current_columns`: a Type 6 twin of the first tracked column.
    twin: bool,
}

impl Names {
    fn config(&self, source_url: &str, target_url: &str) -> String {
        let mut text = format!(
            "name = \"names\"\n\n[source]\nurl = {source_url:?}\ntable = \"names_src\"\nkey = {}\nupdated_at = {:?}\ndeleted_flag = {:?}\nlookback = \"3h\"\nsafety_lag = \"0s\"\nhistory = \"latest\"\n",
            toml_list(&self.keys),
            self.updated_at,
            self.deleted_flag
        );
        if let Some(t) = &self.tiebreak {
            text.push_str(&format!("tiebreak = {t:?}\n"));
        }
        text.push_str(&format!(
            "\n[target]\nurl = {target_url:?}\nlog = {:?}\ndimension = {:?}\nsurrogate_key = {:?}\n\n[track]\ncolumns = {}\ntype1 = {}\n",
            self.log,
            self.dim,
            self.sk,
            toml_list(&self.tracked),
            toml_list(&self.type1)
        ));
        if self.twin {
            text.push_str(&format!("current_columns = {}\n", toml_list(&self.tracked[..1])));
        }
        text.push_str("\n[deletes]\nhard = \"ignore\"\nmax_fraction = 1.0\n");
        text
    }

    /// A config whose names are all harmless, with `name` in `role`.
    fn benign_with(role: Role, name: &str) -> Names {
        let mut n = Names {
            keys: vec!["benign_id".into()],
            tracked: vec!["benign_a".into()],
            type1: vec!["benign_b".into()],
            updated_at: "benign_changed".into(),
            deleted_flag: "benign_gone".into(),
            tiebreak: Some("benign_seq".into()),
            sk: "benign_sk".into(),
            log: "benign_log".into(),
            dim: "benign_dim".into(),
            twin: false,
        };
        let name = name.to_string();
        match role {
            Role::Key => n.keys = vec![name],
            Role::Tracked => n.tracked = vec![name],
            Role::Type1 => n.type1 = vec![name],
            Role::UpdatedAt => n.updated_at = name,
            Role::DeletedFlag => n.deleted_flag = name,
            Role::Tiebreak => n.tiebreak = Some(name),
            Role::SurrogateKey => n.sk = name,
            Role::Log => n.log = name,
            Role::Dimension => n.dim = name,
        }
        n
    }
}

/// Every name in every role: refused (exit 2, naming the setting and the column, saying
/// what to do) exactly when the rule says so, in lower and upper case; accepted by the
/// config otherwise. Then a few of them through the binary.
fn refusals(target: Backend) {
    let names = all_names();
    for benign in ["benign_id", "benign_a", "benign_log"] {
        assert!(!names.contains(benign), "{benign} is a name under test; rename it here");
    }
    let target_url = match target {
        Backend::Sqlite => "sqlite://warehouse.db",
        Backend::Postgres | Backend::Citus => "postgres://dimlog@127.0.0.1:9/none",
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut refused_cases, mut accepted_cases) = (0, 0);
    for name in names.iter().flat_map(|n| [n.clone(), n.to_ascii_uppercase()]) {
        for role in ROLES {
            let text = Names::benign_with(role, &name).config("sqlite://source.db", target_url);
            let result = Plan::from_toml(
                &text,
                &dir.path().join("dimlog.toml"),
                dir.path(),
                &Overrides::default(),
            );
            if refused(&name, role, target) {
                refused_cases += 1;
                match result {
                    Err(ConfigError::Invalid { setting, message }) => {
                        assert_eq!(setting, role.setting(), "{name} as {role:?}: {message}");
                        assert!(message.contains(&format!("`{name}`")), "{name} as {role:?}: {message}");
                        let fix = match role {
                            Role::SurrogateKey | Role::Log | Role::Dimension => "choose another",
                            _ => "source.query",
                        };
                        assert!(
                            message.contains(fix),
                            "{name} as {role:?} must say what to do: {message}"
                        );
                    }
                    Err(e) => panic!("{name} as {role:?}: not an invalid setting: {e}"),
                    Ok(_) => panic!("{name} as {role:?} on {target:?} was accepted"),
                }
            } else {
                accepted_cases += 1;
                if let Err(e) = result {
                    panic!("{name} as {role:?} on {target:?} was refused: {e}");
                }
            }
        }
    }
    assert!(
        refused_cases > 100 && accepted_cases > 1000,
        "{refused_cases} refused, {accepted_cases} accepted"
    );

    // Through the binary: exit 2, an error of kind `config` naming the setting and the
    // column, nothing read (the source file does not even exist).
    let mut cases = vec![
        ("DIMLOG_RN", Role::Tracked),
        ("dimlog_n", Role::Key),
        ("dimlog_sk", Role::SurrogateKey),
        ("Valid_From", Role::Type1),
        ("dimlog_stage", Role::Log),
        ("dimlog_tiebreak", Role::Tiebreak),
    ];
    if target == Backend::Postgres {
        cases.push(("xmin", Role::Tracked));
        cases.push(("ctid", Role::Key));
    }
    for (name, role) in cases {
        assert!(refused(name, role, target), "{name} as {role:?}");
        let config = dir.path().join("dimlog.toml");
        std::fs::write(
            &config,
            Names::benign_with(role, name).config("sqlite://source.db", target_url),
        )
        .expect("write config");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_dimlog"))
            .arg("--config")
            .arg(&config)
            .args(["run", "--json"])
            .current_dir(dir.path())
            .env_remove("DIMLOG_SOURCE_URL")
            .env_remove("DIMLOG_TARGET_URL")
            .env_remove("DIMLOG_FAILPOINT")
            .output()
            .expect("run dimlog");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "{name} as {role:?}: {stdout}");
        let value: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        let message = value["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(value["error"]["kind"], "config", "{stdout}");
        assert!(
            message.contains(role.setting()) && message.contains(&format!("`{name}`")),
            "{name} as {role:?}: {message}"
        );
        assert!(!dir.path().join("source.db").exists(), "the source was opened");
    }
}

mod refused_names_exit_2_naming_the_setting {
    #[test]
    fn sqlite() {
        super::refusals(dimlog::config::Backend::Sqlite);
    }

    #[test]
    fn postgres() {
        super::refusals(dimlog::config::Backend::Postgres);
    }
}

/// A value the test writes into the source and expects back.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Lit {
    Int(i64),
    Text(String),
}

impl Lit {
    fn sql(&self) -> String {
        match self {
            Lit::Int(i) => i.to_string(),
            Lit::Text(s) => format!("'{}'", s.replace('\'', "''")),
        }
    }

    fn text(&self) -> String {
        match self {
            Lit::Int(i) => i.to_string(),
            Lit::Text(s) => s.clone(),
        }
    }
}

/// One load test: a config's names and the source table around them.
#[derive(Clone, Debug)]
struct Shape {
    names: Names,
    /// Every key column is text (else the first is an integer).
    text_keys: bool,
    /// The source table's primary key is the natural key (else it has none, and
    /// duplicates are decided by `names.tiebreak`).
    primary_key: bool,
    /// The first load holds a deleted key (a tombstone with no version before it).
    tombstone_first: bool,
    /// The Type 2 column the last run adds (`--accept-config-change`).
    added: String,
    /// A fact table in the target, and its timestamp column.
    facts: String,
    fact_at: String,
}

/// One source row: key `key` with tracked values of version `vt` and Type 1 values of
/// version `vy`, stamped `at` (a time of 2026-01-01).
#[derive(Clone, Copy, Debug)]
struct Row {
    key: i64,
    vt: i64,
    vy: i64,
    at: &'static str,
    deleted: bool,
    tiebreak: i64,
}

fn row(key: i64, vt: i64, vy: i64, at: &'static str) -> Row {
    Row {
        key,
        vt,
        vy,
        at,
        deleted: false,
        tiebreak: 0,
    }
}

/// A time of 2026-01-01 as the source stores it.
fn source_ts(at: &str) -> String {
    format!("2026-01-01T{at}:00Z")
}

/// A time of 2026-01-01 as dumps show it.
fn dump_ts(at: &str) -> String {
    format!("2026-01-01T{at}:00.000000Z")
}

fn q(name: &str) -> String {
    format!("\"{name}\"")
}

impl Shape {
    fn int_type(backend: Backend) -> &'static str {
        match backend {
            Backend::Sqlite => "INTEGER",
            Backend::Postgres | Backend::Citus => "bigint",
        }
    }

    fn key_is_int(&self, c: usize) -> bool {
        c == 0 && !self.text_keys
    }

    fn key(&self, c: usize, i: i64) -> Lit {
        if self.key_is_int(c) {
            Lit::Int(i)
        } else {
            Lit::Text(format!("{}-{i}", self.names.keys[c]))
        }
    }

    fn tracked(&self, j: usize, i: i64, v: i64) -> Lit {
        if j.is_multiple_of(2) {
            Lit::Int(i * 10_000 + j as i64 * 100 + v)
        } else {
            Lit::Text(format!("{}/{i}/{v}", self.names.tracked[j]))
        }
    }

    fn type1(&self, j: usize, i: i64, v: i64) -> Lit {
        if !j.is_multiple_of(2) {
            Lit::Int(i * 10_000 + 5_000 + j as i64 * 100 + v)
        } else {
            Lit::Text(format!("{}/{i}/y{v}", self.names.type1[j]))
        }
    }

    fn added_value(&self, i: i64) -> Lit {
        Lit::Text(format!("{}/{i}", self.added))
    }

    fn source_table(&self, backend: Backend) -> String {
        let int = Shape::int_type(backend);
        let mut cols = Vec::new();
        for (c, k) in self.names.keys.iter().enumerate() {
            cols.push(format!(
                "{} {} NOT NULL",
                q(k),
                if self.key_is_int(c) { int } else { "text" }
            ));
        }
        for (j, t) in self.names.tracked.iter().enumerate() {
            cols.push(format!("{} {}", q(t), if j.is_multiple_of(2) { int } else { "text" }));
        }
        for (j, t) in self.names.type1.iter().enumerate() {
            cols.push(format!("{} {}", q(t), if !j.is_multiple_of(2) { int } else { "text" }));
        }
        let ts = match backend {
            Backend::Sqlite => "TEXT",
            Backend::Postgres | Backend::Citus => "timestamptz",
        };
        cols.push(format!("{} {ts} NOT NULL", q(&self.names.updated_at)));
        cols.push(format!("{} boolean NOT NULL", q(&self.names.deleted_flag)));
        if let Some(t) = &self.names.tiebreak {
            cols.push(format!("{} {int} NOT NULL", q(t)));
        }
        if self.primary_key {
            let keys: Vec<String> = self.names.keys.iter().map(|k| q(k)).collect();
            cols.push(format!("PRIMARY KEY ({})", keys.join(", ")));
        }
        format!("CREATE TABLE names_src ({})", cols.join(", "))
    }

    fn key_where(&self, i: i64) -> String {
        let parts: Vec<String> = (0..self.names.keys.len())
            .map(|c| format!("{} = {}", q(&self.names.keys[c]), self.key(c, i).sql()))
            .collect();
        parts.join(" AND ")
    }

    fn insert(&self, r: &Row) -> String {
        let mut cols = Vec::new();
        let mut vals = Vec::new();
        for c in 0..self.names.keys.len() {
            cols.push(q(&self.names.keys[c]));
            vals.push(self.key(c, r.key).sql());
        }
        for j in 0..self.names.tracked.len() {
            cols.push(q(&self.names.tracked[j]));
            vals.push(self.tracked(j, r.key, r.vt).sql());
        }
        for j in 0..self.names.type1.len() {
            cols.push(q(&self.names.type1[j]));
            vals.push(self.type1(j, r.key, r.vy).sql());
        }
        cols.push(q(&self.names.updated_at));
        vals.push(format!("'{}'", source_ts(r.at)));
        cols.push(q(&self.names.deleted_flag));
        vals.push(r.deleted.to_string());
        if let Some(t) = &self.names.tiebreak {
            cols.push(q(t));
            vals.push(r.tiebreak.to_string());
        }
        format!(
            "INSERT INTO names_src ({}) VALUES ({})",
            cols.join(", "),
            vals.join(", ")
        )
    }

    /// Replaces the key's rows with `r`.
    fn put(&self, r: &Row) -> String {
        format!(
            "DELETE FROM names_src WHERE {}; {}",
            self.key_where(r.key),
            self.insert(r)
        )
    }
}

/// A log row this history must have appended: key `key`, surrogate key `sk` (none for a
/// tombstone or a Type 1 observation), values of versions `vals` (none for a tombstone),
/// the added column filled or not, at `at`, by run number `run`.
#[derive(Clone, Copy, Debug)]
struct Expect {
    key: i64,
    sk: Option<i64>,
    vals: Option<(i64, i64)>,
    added: bool,
    at: &'static str,
    run: usize,
}

fn version(key: i64, sk: i64, vt: i64, vy: i64, at: &'static str, run: usize) -> Expect {
    Expect {
        key,
        sk: Some(sk),
        vals: Some((vt, vy)),
        added: false,
        at,
        run,
    }
}

fn tombstone(key: i64, at: &'static str, run: usize) -> Expect {
    Expect {
        key,
        sk: None,
        vals: None,
        added: false,
        at,
        run,
    }
}

type Record = BTreeMap<String, Option<String>>;

impl Shape {
    /// The values `e` gives each column of the log (as dumps render them).
    fn log_record(&self, log_id: usize, e: &Expect, run_ids: &[i64], with_added: bool) -> Record {
        let n = &self.names;
        let mut r = Record::new();
        r.insert("log_id".into(), Some(log_id.to_string()));
        r.insert(n.sk.clone(), e.sk.map(|s| s.to_string()));
        for (c, k) in n.keys.iter().enumerate() {
            r.insert(k.clone(), Some(self.key(c, e.key).text()));
        }
        for (j, t) in n.tracked.iter().enumerate() {
            r.insert(t.clone(), e.vals.map(|(vt, _)| self.tracked(j, e.key, vt).text()));
        }
        for (j, t) in n.type1.iter().enumerate() {
            r.insert(t.clone(), e.vals.map(|(_, vy)| self.type1(j, e.key, vy).text()));
        }
        if with_added {
            r.insert(
                self.added.clone(),
                (e.added && e.vals.is_some()).then(|| self.added_value(e.key).text()),
            );
        }
        r.insert("valid_from".into(), Some(dump_ts(e.at)));
        r.insert("is_deleted".into(), Some(e.vals.is_none().to_string()));
        r.insert("load_id".into(), Some(run_ids[e.run - 1].to_string()));
        r
    }

    /// The dimension the expected log derives to (spec 1.5), by key and valid_from: per
    /// key the latest log row of each valid_from among versions and tombstones, live ones
    /// as rows with valid_to the next valid_from; Type 1 columns from the key's newest
    /// live observation; the Type 6 twin from its newest live version.
    fn dimension_records(&self, log: &[Record], with_added: bool) -> Vec<Record> {
        let n = &self.names;
        let key_of = |r: &Record| -> Vec<Option<String>> { n.keys.iter().map(|k| r[k].clone()).collect() };
        let mut keys: Vec<Vec<Option<String>>> = log.iter().map(key_of).collect();
        keys.sort();
        keys.dedup();
        let mut out = Vec::new();
        let mut attrs: Vec<String> = n.tracked.clone();
        if with_added {
            attrs.push(self.added.clone());
        }
        for key in keys {
            let rows: Vec<&Record> = log.iter().filter(|r| key_of(r) == key).collect();
            let live = |r: &Record| r["is_deleted"].as_deref() == Some("false");
            let mut versions: BTreeMap<String, &Record> = BTreeMap::new();
            for r in rows.iter().filter(|r| !live(r) || r[&n.sk].is_some()) {
                versions.insert(r["valid_from"].clone().expect("valid_from"), r);
            }
            let newest_observation = rows.iter().filter(|r| live(r)).max_by_key(|r| {
                (
                    r["valid_from"].clone(),
                    r["log_id"].as_deref().map(|i| i.parse::<i64>().unwrap()),
                )
            });
            let newest_live_version = versions.values().rev().find(|r| live(r));
            let entries: Vec<(&String, &&Record)> = versions.iter().collect();
            for (i, (from, r)) in entries.iter().enumerate() {
                if !live(r) {
                    continue;
                }
                let mut d = Record::new();
                d.insert(n.sk.clone(), r[&n.sk].clone());
                for k in &n.keys {
                    d.insert(k.clone(), r[k].clone());
                }
                for a in &attrs {
                    d.insert(a.clone(), r[a].clone());
                }
                for t in &n.type1 {
                    d.insert(t.clone(), newest_observation.and_then(|o| o[t].clone()));
                }
                if n.twin {
                    let t0 = &n.tracked[0];
                    d.insert(format!("current_{t0}"), newest_live_version.and_then(|v| v[t0].clone()));
                }
                d.insert("valid_from".into(), Some(from.to_string()));
                let to = entries
                    .get(i + 1)
                    .map_or(crate::support::fixture::SENTINEL.to_string(), |(f, _)| f.to_string());
                d.insert("valid_to".into(), Some(to));
                d.insert("is_current".into(), Some((i + 1 == entries.len()).to_string()));
                d.insert("load_id".into(), r["load_id"].clone());
                out.push(d);
            }
        }
        out
    }
}

/// The log and the dimension must be exactly what the expected log gives.
async fn check(fx: &mut Fixture, shape: &Shape, expected: &[Expect], run_ids: &[i64], with_added: bool, what: &str) {
    let log = fx.log().await;
    let hashes = log.values("row_hash");
    let deleted = log.values("is_deleted");
    for (h, d) in hashes.iter().zip(&deleted) {
        assert_eq!(
            h.is_none(),
            d.as_deref() == Some("true"),
            "{what}: row_hash is NULL exactly on tombstones\n{log}"
        );
    }
    let actual: Vec<Record> = log
        .records()
        .into_iter()
        .map(|mut r| {
            r.remove("row_hash");
            r.remove("loaded_at");
            r
        })
        .collect();
    let wanted: Vec<Record> = expected
        .iter()
        .enumerate()
        .map(|(i, e)| shape.log_record(i + 1, e, run_ids, with_added))
        .collect();
    assert_eq!(actual, wanted, "{what}: the log\n{log}");

    let dim = if shape.names.twin {
        fx.dimension_with_current().await
    } else {
        fx.dimension().await
    };
    let mut actual: Vec<Record> = dim
        .records()
        .into_iter()
        .map(|mut r| {
            r.remove("row_hash");
            r
        })
        .collect();
    let mut wanted = shape.dimension_records(&wanted, with_added);
    actual.sort();
    wanted.sort();
    assert_eq!(actual, wanted, "{what}: the dimension\n{dim}");
}

async fn load(fx: &mut Fixture, upper: &str, kind: RunKind, reconcile: bool, accept: bool) -> RunReport {
    fx.run_with(RunOptions {
        upper: Some(crate::support::fixture::ts(&source_ts(upper))),
        kind,
        reconcile_deletes: reconcile,
        accept_config_change: accept,
        ..RunOptions::incremental()
    })
    .await
}

/// (versions, late versions, corrections, tombstones) of a run.
fn counts(r: &RunReport) -> (i64, i64, i64, i64) {
    let c = &r.counts;
    (c.versions, c.late_versions, c.corrections, c.tombstones)
}

/// `dimlog <args> --json` against the fixture's config: exit code and output.
fn cli_json(fx: &Fixture, args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let mut all: Vec<&str> = args.to_vec();
    all.push("--json");
    let out = fx.cli(&all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "dimlog {args:?}: not JSON ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), value)
}

/// `--key` arguments naming every key column.
fn key_args(shape: &Shape, i: i64) -> Vec<String> {
    let mut args = Vec::new();
    for (c, k) in shape.names.keys.iter().enumerate() {
        args.push("--key".to_string());
        args.push(format!("{k}={}", shape.key(c, i).text()));
    }
    args
}

/// The whole history, on a fresh target, with the log and the dimension checked after
/// every run, then `verify`, `rebuild`, `history`, `lookup` and `assign-keys`.
async fn load_history(mut fx: Fixture, shape: &Shape) {
    let backend = fx.backend;
    let what = format!("{backend:?} {shape:#?}");
    let n = shape.names.clone();
    let config = n.config(&fx.source_url, &fx.target_url);
    fx.set_config(config);
    fx.exec(&shape.source_table(backend)).await;
    let b = shape.tombstone_first;
    let t1 = !n.type1.is_empty();
    let mut log: Vec<Expect> = Vec::new();
    let mut run_ids: Vec<i64> = Vec::new();

    // 1. First load, in key order; with a key that is deleted from the start.
    for k in 1..=3 {
        fx.exec(&shape.put(&row(k, 1, 1, "01:00"))).await;
    }
    if b {
        fx.exec(&shape.put(&Row {
            deleted: true,
            ..row(4, 1, 1, "01:00")
        }))
        .await;
    }
    let r = load(&mut fx, "02:00", RunKind::Incremental, false, false).await;
    run_ids.push(r.run_id.expect("a run id"));
    assert_eq!(counts(&r), (3, 0, 0, 0), "run 1: {what}");
    assert_eq!(
        r.unseen_deletes,
        i64::from(b),
        "run 1, a key deleted from the start: {what}"
    );
    for k in 1..=3 {
        log.push(version(k, k, 1, 1, "01:00", 1));
    }
    if b {
        log.push(tombstone(4, "01:00", 1));
    }
    check(&mut fx, shape, &log, &run_ids, false, &format!("run 1: {what}")).await;

    // 2. A Type 2 change, a Type 1 change, a soft delete.
    fx.exec(&shape.put(&row(1, 2, 1, "02:30"))).await;
    fx.exec(&shape.put(&row(2, 1, 2, "02:30"))).await;
    fx.exec(&shape.put(&Row {
        deleted: true,
        ..row(3, 1, 1, "02:30")
    }))
    .await;
    let r = load(&mut fx, "03:00", RunKind::Incremental, false, false).await;
    run_ids.push(r.run_id.expect("a run id"));
    assert_eq!(counts(&r), (1, 0, 0, 1), "run 2: {what}");
    assert_eq!(r.type1_updates, i64::from(t1), "run 2: {what}");
    log.push(version(1, 4, 2, 1, "02:30", 2));
    if t1 {
        log.push(Expect {
            sk: None,
            ..version(2, 0, 1, 2, "02:30", 2)
        });
    }
    log.push(tombstone(3, "02:30", 2));
    check(&mut fx, shape, &log, &run_ids, false, &format!("run 2: {what}")).await;

    // 3. A correction at the same timestamp; a change with a duplicate that the
    //    tie-breaker decides.
    fx.exec(&shape.put(&row(1, 3, 1, "02:30"))).await;
    fx.exec(&shape.put(&Row {
        tiebreak: 2,
        ..row(2, 4, 2, "03:30")
    }))
    .await;
    if n.tiebreak.is_some() {
        fx.exec(&shape.insert(&Row {
            tiebreak: 1,
            ..row(2, 7, 2, "03:30")
        }))
        .await;
    }
    let r = load(&mut fx, "04:00", RunKind::Incremental, false, false).await;
    run_ids.push(r.run_id.expect("a run id"));
    assert_eq!(counts(&r), (1, 0, 1, 0), "run 3: {what}");
    log.push(version(1, 4, 3, 1, "02:30", 3));
    log.push(version(2, 5, 4, 2, "03:30", 3));
    check(&mut fx, shape, &log, &run_ids, false, &format!("run 3: {what}")).await;

    // 4. A late version (the source's row moved back in time); keys coming back.
    fx.exec(&shape.put(&row(1, 5, 1, "02:00"))).await;
    fx.exec(&shape.put(&row(3, 6, 1, "04:30"))).await;
    if b {
        fx.exec(&shape.put(&row(4, 1, 1, "04:30"))).await;
    }
    let r = load(&mut fx, "05:00", RunKind::Incremental, false, false).await;
    run_ids.push(r.run_id.expect("a run id"));
    assert_eq!(counts(&r), (2 + i64::from(b), 1, 0, 0), "run 4: {what}");
    log.push(version(1, 6, 5, 1, "02:00", 4));
    log.push(version(3, 7, 6, 1, "04:30", 4));
    if b {
        log.push(version(4, 8, 1, 1, "04:30", 4));
    }
    check(&mut fx, shape, &log, &run_ids, false, &format!("run 4: {what}")).await;
    // The source's current row of key 1 is the late one; the dimension's is not.
    let (code, report) = cli_json(&fx, &["verify", "--against-source"]);
    assert_eq!(code, Some(3), "verify --against-source after run 4: {report}\n{what}");
    let found: Vec<&serde_json::Value> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["count"].as_u64() != Some(0))
        .collect();
    let key1: Vec<String> = (0..n.keys.len()).map(|c| shape.key(c, 1).text()).collect();
    assert!(
        found.len() == 1
            && found[0]["count"] == 1
            && found[0]["examples"][0]
                .as_str()
                .is_some_and(|e| e.starts_with(&format!("{}: ", key1.join(", ")))),
        "verify --against-source after run 4 must find key 1 only: {report}\n{what}"
    );

    // 5. A hard delete, reconciled.
    fx.exec(&format!("DELETE FROM names_src WHERE {}", shape.key_where(2)))
        .await;
    let r = load(&mut fx, "06:00", RunKind::Incremental, true, false).await;
    run_ids.push(r.run_id.expect("a run id"));
    assert_eq!(counts(&r), (0, 0, 0, 1), "run 5: {what}");
    log.push(tombstone(2, "06:00", 5));
    check(&mut fx, shape, &log, &run_ids, false, &format!("run 5: {what}")).await;

    // 6. A full refresh finds nothing new.
    let r = load(&mut fx, "07:00", RunKind::FullRefresh, false, false).await;
    run_ids.push(r.run_id.expect("a run id"));
    assert_eq!(counts(&r), (0, 0, 0, 0), "run 6: {what}");
    check(&mut fx, shape, &log, &run_ids, false, &format!("run 6: {what}")).await;

    // 7. One more Type 2 column: current versions the source agrees with are carried
    //    over, key 1's late version (the source's current row) gets a correction.
    let int = Shape::int_type(backend);
    fx.exec(&format!("ALTER TABLE names_src ADD COLUMN {} text", q(&shape.added)))
        .await;
    for k in [1, 3, 4] {
        fx.exec(&format!(
            "UPDATE names_src SET {} = {} WHERE {}",
            q(&shape.added),
            shape.added_value(k).sql(),
            shape.key_where(k)
        ))
        .await;
    }
    let mut tracked = n.tracked.clone();
    tracked.push(shape.added.clone());
    let old = format!("columns = {}", toml_list(&n.tracked));
    fx.edit_config(&old, &format!("columns = {}", toml_list(&tracked)));
    let r = load(&mut fx, "08:00", RunKind::Incremental, false, true).await;
    run_ids.push(r.run_id.expect("a run id"));
    assert_eq!(counts(&r), (0, 0, 1, 0), "run 7: {what}");
    assert_eq!(r.rehashed, 1 + i64::from(b), "run 7: {what}");
    for e in [
        version(3, 7, 6, 1, "04:30", 7),
        version(4, 8, 1, 1, "04:30", 7),
        version(1, 6, 5, 1, "02:00", 7),
    ] {
        if e.key != 4 || b {
            log.push(Expect { added: true, ..e });
        }
    }
    let mut shape = shape.clone();
    shape.names.tracked = tracked;
    let shape = &shape;
    check(&mut fx, shape, &log, &run_ids, true, &format!("run 7: {what}")).await;

    // verify finds nothing; rebuild changes nothing.
    let (code, report) = cli_json(&fx, &["verify"]);
    assert_eq!(code, Some(0), "verify: {report}\n{what}");
    let before = fx.dimension().await;
    let (code, report) = cli_json(&fx, &["rebuild"]);
    assert_eq!(code, Some(0), "rebuild: {report}\n{what}");
    assert_eq!(fx.dimension().await, before, "rebuild: {what}");
    check(&mut fx, shape, &log, &run_ids, true, &format!("rebuild: {what}")).await;

    // history: key 1's three versions, key 2's two and its tombstone.
    let t0 = &n.tracked[0];
    for (k, sks, vts) in [
        (1, vec![Some(1), Some(6), Some(4)], vec![Some(1), Some(5), Some(3)]),
        (2, vec![Some(2), Some(5), None], vec![Some(1), Some(4), None]),
    ] {
        let mut args = vec!["history".to_string()];
        args.extend(key_args(shape, k));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, report) = cli_json(&fx, &args);
        assert_eq!(code, Some(0), "history of key {k}: {report}\n{what}");
        let versions = report["versions"].as_array().expect("versions");
        let got_sks: Vec<Option<i64>> = versions.iter().map(|v| v["surrogate_key"].as_i64()).collect();
        assert_eq!(got_sks, sks, "history of key {k}: {report}\n{what}");
        let got: Vec<Option<String>> = versions
            .iter()
            // Typed JSON (numbers as numbers): compared as the text of the value.
            .map(|v| match &v["values"][t0] {
                serde_json::Value::Null => None,
                serde_json::Value::String(s) => Some(s.clone()),
                other => Some(other.to_string()),
            })
            .collect();
        let want: Vec<Option<String>> = vts.iter().map(|v| v.map(|vt| shape.tracked(0, k, vt).text())).collect();
        assert_eq!(got, want, "history of key {k}: {report}\n{what}");
    }

    // lookup and assign-keys: (key, time) -> surrogate key.
    let facts: [(i64, &str, i64); 6] = [
        (1, "00:30", -1),
        (1, "02:15", 6),
        (1, "02:45", 4),
        (2, "04:00", 5),
        (2, "06:30", -1),
        (3, "05:00", 7),
    ];
    for (k, at, sk) in [facts[0], facts[2]] {
        let mut args = vec!["lookup".to_string()];
        args.extend(key_args(shape, k));
        args.extend(["--at".to_string(), source_ts(at)]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, report) = cli_json(&fx, &args);
        assert_eq!(
            (code, report["surrogate_key"].as_i64()),
            (Some(0), Some(sk)),
            "lookup key {k} at {at}: {report}\n{what}"
        );
    }
    let ts_type = match backend {
        Backend::Sqlite => "TEXT",
        Backend::Postgres | Backend::Citus => "timestamptz",
    };
    let mut cols: Vec<String> = Vec::new();
    for (c, k) in n.keys.iter().enumerate() {
        cols.push(format!("{} {}", q(k), if shape.key_is_int(c) { int } else { "text" }));
    }
    cols.push(format!("{} {ts_type}", q(&shape.fact_at)));
    let mut ddl = format!("CREATE TABLE {} ({})", q(&shape.facts), cols.join(", "));
    for (k, at, _) in facts {
        let mut vals: Vec<String> = (0..n.keys.len()).map(|c| shape.key(c, k).sql()).collect();
        vals.push(format!("'{}'", source_ts(at)));
        ddl.push_str(&format!(
            "; INSERT INTO {} VALUES ({})",
            q(&shape.facts),
            vals.join(", ")
        ));
    }
    fx.target_exec(&ddl).await;
    let mut args = vec!["assign-keys".to_string(), "--facts".into(), shape.facts.clone()];
    for k in &n.keys {
        args.extend(["--key-column".to_string(), k.clone()]);
    }
    args.extend([
        "--at-column".to_string(),
        shape.fact_at.clone(),
        "--sk-column".into(),
        n.sk.clone(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, report) = cli_json(&fx, &args);
    assert_eq!(
        (code, report["facts_matched"].as_i64(), report["facts_unknown"].as_i64()),
        (Some(0), Some(4), Some(2)),
        "assign-keys: {report}\n{what}"
    );
    let cast = |c: &str| match backend {
        Backend::Sqlite => format!("CAST({} AS TEXT)", q(c)),
        Backend::Postgres | Backend::Citus => format!("{}::text", q(c)),
    };
    let order: Vec<String> = n.keys.iter().map(|k| q(k)).chain([q(&shape.fact_at)]).collect();
    let rows = fx
        .target_query(&format!(
            "SELECT {} FROM {} ORDER BY {}",
            cast(&n.sk),
            q(&shape.facts),
            order.join(", ")
        ))
        .await;
    let got: Vec<Option<String>> = rows.into_iter().map(|r| r[0].clone()).collect();
    let want: Vec<Option<String>> = facts.iter().map(|(_, _, sk)| Some(sk.to_string())).collect();
    assert_eq!(got, want, "assign-keys: the facts' surrogate keys\n{what}");

    // A fact table named like dimlog's own names is refused, before anything is written.
    let facts_at = args.iter().position(|a| *a == "--facts").expect("--facts") + 1;
    let mut refused_args = args.clone();
    let reserved = format!("Dimlog_{}", shape.facts);
    refused_args[facts_at] = &reserved;
    let (code, report) = cli_json(&fx, &refused_args);
    let message = report["error"]["message"].as_str().unwrap_or_default();
    let hint = report["error"]["hint"].as_str().unwrap_or_default();
    assert!(
        code == Some(2) && hint.contains("--facts") && message.contains(&format!("`{reserved}`")),
        "assign-keys --facts {reserved}: {report}\n{what}"
    );
}

/// Hands out names round-robin, never one already used in the config being built.
struct Pool {
    names: Vec<String>,
    next: usize,
}

impl Pool {
    fn new(names: Vec<String>) -> Pool {
        assert!(names.len() > 20, "too few names: {names:?}");
        Pool { names, next: 0 }
    }

    fn take(&mut self, used: &mut BTreeSet<String>) -> String {
        for _ in 0..self.names.len() {
            let n = self.names[self.next % self.names.len()].clone();
            self.next += 1;
            if used.insert(n.to_ascii_lowercase()) {
                return n;
            }
        }
        panic!("the pool ran out of names");
    }
}

/// Takes `count` names, first those still `needed` in this role, then from the pool.
fn take_needed(
    count: usize,
    needed: &mut BTreeSet<String>,
    pool: &mut Pool,
    used: &mut BTreeSet<String>,
) -> Vec<String> {
    let mut out = Vec::new();
    let candidates: Vec<String> = needed.iter().cloned().collect();
    for n in candidates {
        if out.len() == count {
            break;
        }
        if used.insert(n.to_ascii_lowercase()) {
            needed.remove(&n);
            out.push(n);
        }
    }
    while out.len() < count {
        let n = pool.take(used);
        needed.remove(&n);
        out.push(n);
    }
    out
}

/// Configs that give every loadable name the key, tracked and Type 1 roles at least
/// once, and the other roles in turn: keys of 1 to 4 columns (integer or text first),
/// sources with and without a primary key (then with a tie-breaker), first loads with
/// and without a tombstone, with and without Type 1 columns and a Type 6 twin, and every
/// third config in upper case.
fn shapes(names: &BTreeSet<String>, backend: Backend) -> Vec<Shape> {
    // A PostgreSQL source cannot have a system column, so those are only refused there.
    let exists = |n: &&String| !(backend == Backend::Postgres && PG_SYSTEM.contains(&n.as_str()));
    let loadable = |role: Role| -> Vec<String> {
        names
            .iter()
            .filter(exists)
            .filter(|n| !refused(n, role, backend))
            .cloned()
            .collect()
    };
    let columns = loadable(Role::Tracked);
    for role in [Role::Key, Role::Type1, Role::SurrogateKey] {
        assert_eq!(loadable(role), columns, "{role:?}");
    }
    let mut need_key: BTreeSet<String> = columns.iter().cloned().collect();
    let mut need_tracked = need_key.clone();
    let mut need_type1 = need_key.clone();
    let mut column_pool = Pool::new(columns);
    let mut loose_pool = Pool::new(loadable(Role::UpdatedAt));
    let mut table_pool = Pool::new(loadable(Role::Log));
    let mut out = Vec::new();
    while !(need_key.is_empty() && need_tracked.is_empty() && need_type1.is_empty()) {
        let i = out.len();
        let mut used = BTreeSet::new();
        let keys = take_needed([1, 7, 6, 8][i % 4], &mut need_key, &mut column_pool, &mut used);
        let tracked = take_needed(6, &mut need_tracked, &mut column_pool, &mut used);
        let type1 = take_needed(
            if i % 5 == 4 { 0 } else { 7 },
            &mut need_type1,
            &mut column_pool,
            &mut used,
        );
        let sk = column_pool.take(&mut used);
        let added = column_pool.take(&mut used);
        let updated_at = loose_pool.take(&mut used);
        let deleted_flag = loose_pool.take(&mut used);
        let primary_key = i % 2 == 0;
        let tiebreak = (!primary_key).then(|| loose_pool.take(&mut used));
        let fact_at = loose_pool.take(&mut used);
        let twin = i % 3 == 1 && !used.contains(&format!("current_{}", tracked[0].to_ascii_lowercase()));
        let mut tables = BTreeSet::from(["names_src".to_string(), "src_customers".to_string()]);
        let log = table_pool.take(&mut tables);
        let dim = table_pool.take(&mut tables);
        let facts = table_pool.take(&mut tables);
        let mut shape = Shape {
            names: Names {
                keys,
                tracked,
                type1,
                updated_at,
                deleted_flag,
                tiebreak,
                sk,
                log,
                dim,
                twin,
            },
            text_keys: i % 4 >= 2,
            primary_key,
            tombstone_first: i % 3 != 0,
            added,
            facts,
            fact_at,
        };
        if i % 3 == 2 {
            let up = |v: &mut String| *v = v.to_ascii_uppercase();
            let n = &mut shape.names;
            n.keys.iter_mut().chain(&mut n.tracked).chain(&mut n.type1).for_each(up);
            [
                &mut n.updated_at,
                &mut n.deleted_flag,
                &mut n.sk,
                &mut n.log,
                &mut n.dim,
            ]
            .into_iter()
            .for_each(up);
            n.tiebreak.iter_mut().for_each(up);
            [&mut shape.added, &mut shape.facts, &mut shape.fact_at]
                .into_iter()
                .for_each(up);
        }
        out.push(shape);
    }
    out
}

async fn every_sql_name_is_refused_or_loads(fx: Fixture) {
    let backend = fx.backend;
    let names = all_names();
    let shapes = shapes(&names, backend);
    let loaded: BTreeSet<String> = shapes
        .iter()
        .flat_map(|s| {
            let n = &s.names;
            let mut all: Vec<String> = n.keys.iter().chain(&n.tracked).chain(&n.type1).cloned().collect();
            all.extend([
                n.updated_at.clone(),
                n.deleted_flag.clone(),
                n.sk.clone(),
                n.log.clone(),
                n.dim.clone(),
            ]);
            all.extend(n.tiebreak.clone());
            all.extend([s.added.clone(), s.facts.clone(), s.fact_at.clone()]);
            all.into_iter().map(|x| x.to_ascii_lowercase())
        })
        .collect();
    let never: Vec<&String> = names
        .iter()
        .filter(|n| !loaded.contains(n.as_str()) && ROLES.iter().any(|r| !refused(n, *r, backend)))
        .filter(|n| !(backend == Backend::Postgres && PG_SYSTEM.contains(&n.as_str())))
        .collect();
    assert!(never.is_empty(), "names never loaded: {never:?}");
    eprintln!(
        "{} names ({} loaded, the rest refused) in {} configs on {backend:?}",
        names.len(),
        loaded.len(),
        shapes.len()
    );
    let started = std::time::Instant::now();
    for shape in &shapes {
        let fx = match backend {
            Backend::Sqlite => Fixture::sqlite().await,
            Backend::Postgres | Backend::Citus => Fixture::postgres_reset(fx.target_url.clone()).await,
        };
        load_history(fx, shape).await;
    }
    eprintln!("loaded in {:.1}s", started.elapsed().as_secs_f64());
}

on_both_backends!(every_sql_name_is_refused_or_loads);
