//! `dimlog new`: writes a starter config guessed from the source table.

use super::{GlobalArgs, Output};
use crate::cli::scaffold::{self, Request};
use crate::config::{ConfigError, DbUrl};
use crate::db::{Access, Conn, DbError};
use crate::ident::Ident;
use crate::Error;
use std::path::{Path, PathBuf};

/// Write a commented starter config for a source table: its primary key as the natural
/// key, the likely change column, a soft-delete flag if there is one, every other column
/// tracked, and a SQLite target (warehouse.db) beside the config. Where a guess would be
/// a coin toss it writes a TODO instead, lists the candidates and exits 2.
#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// The source database (postgres://… or sqlite://…; a relative SQLite path is taken
    /// from the working directory and rewritten relative to the config).
    #[arg(long, value_name = "URL")]
    pub source_url: String,
    /// The source table (name or schema.name).
    #[arg(long, value_name = "T")]
    pub table: String,
    /// Where to write the config [default: the --config path, dimlog.toml].
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Overwrite the file if it exists.
    #[arg(long)]
    pub force: bool,
    /// The change column, when the guess is wrong or there are several candidates.
    #[arg(long, value_name = "C")]
    pub updated_at: Option<String>,
    /// The natural key column (repeat for a composite key), when the table has no primary
    /// key or it is not the natural key.
    #[arg(long = "key", value_name = "C")]
    pub key: Vec<String>,
    /// The zone of a change column whose values carry none (PostgreSQL `timestamp`,
    /// SQLite text without an offset), e.g. Europe/Paris: written as source.timezone.
    #[arg(long, value_name = "ZONE")]
    pub timezone: Option<String>,
    /// The target database [default: sqlite://warehouse.db beside the config].
    #[arg(long, value_name = "URL")]
    pub target_url: Option<String>,
}

/// An absolute form of `p` (relative to the working directory), without touching the
/// file system.
fn absolute(p: &Path) -> Result<PathBuf, Error> {
    std::path::absolute(p).map_err(|e| Error::Usage(format!("cannot resolve {}: {e}", p.display())))
}

/// The URL as the config file should hold it: a relative SQLite path (taken from the
/// working directory, as every flag is) is rewritten relative to the config's folder,
/// or made absolute when the database is not under it; a password is left out.
fn url_for_file(flag: &str, raw: &str, config_dir: &Path) -> Result<(String, bool), Error> {
    if let Some(rest) = raw.strip_prefix("sqlite://").or_else(|| raw.strip_prefix("sqlite:")) {
        let (path, query) = match rest.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (rest, None),
        };
        if path.is_empty() || path == ":memory:" {
            return Err(Error::Usage(format!(
                "{flag} {raw:?}: give the path of a SQLite file, e.g. sqlite://source.db"
            )));
        }
        let file = crate::db::url::sqlite_file_of(path).map_err(|_| {
            Error::Usage(format!(
                "{flag} {raw:?}: the path is not UTF-8 once its %-escapes are decoded"
            ))
        })?;
        let full = absolute(&file)?;
        let shown = match full.strip_prefix(config_dir) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel.to_path_buf(),
            _ => full,
        };
        return Ok(crate::secret::strip(&crate::db::url::sqlite_url_of(&shown, query)));
    }
    Ok(crate::secret::strip(raw))
}

/// Runs `new`.
pub async fn run(global: &GlobalArgs, args: NewArgs, out: &Output) -> Result<i32, Error> {
    let path = args.out.clone().unwrap_or_else(|| global.config.clone());
    if path.exists() && !args.force {
        return Err(Error::Usage(format!(
            "{} exists; choose another --out, or pass --force to overwrite it",
            path.display()
        )));
    }
    let table = Ident::table(&args.table).map_err(|e| {
        Error::Usage(format!(
            "--table: {e}. For a table whose name is not plain, write the config by hand with \
             source.query = \"SELECT * FROM <its quoted name>\" (see docs/config.md)"
        ))
    })?;
    let source = DbUrl::parse("--source-url", &args.source_url, None).map_err(ConfigError::from)?;
    let config_dir = absolute(&path)?.parent().map(Path::to_path_buf).unwrap_or_default();
    let (source_url, had_password) = url_for_file("--source-url", &args.source_url, &config_dir)?;
    let (target_url, target_password) = match &args.target_url {
        Some(t) => {
            DbUrl::parse("--target-url", t, None).map_err(ConfigError::from)?;
            url_for_file("--target-url", t, &config_dir)?
        }
        None => ("sqlite://warehouse.db".to_string(), false),
    };
    let mut header_notes = Vec::new();
    let mut notes = Vec::new();
    if had_password || target_password {
        header_notes
            .push("Passwords are not written here: set PGPASSWORD, use ~/.pgpass, or give the full URL in".to_string());
        header_notes.push("DIMLOG_SOURCE_URL / DIMLOG_TARGET_URL.".to_string());
        let (flag, env) = match (had_password, target_password) {
            (true, true) => ("--source-url and --target-url", "DIMLOG_SOURCE_URL / DIMLOG_TARGET_URL"),
            (true, false) => ("--source-url", "DIMLOG_SOURCE_URL"),
            _ => ("--target-url", "DIMLOG_TARGET_URL"),
        };
        notes.push(format!(
            "the password in {flag} is not written to {}: set PGPASSWORD (or use ~/.pgpass), or give the full URL in {env} when you run dimlog",
            path.display()
        ));
    }
    let request = Request {
        table,
        source_url,
        target_url,
        key: args.key.clone(),
        updated_at: args.updated_at.clone(),
        timezone: match &args.timezone {
            Some(z) => Some(
                z.trim()
                    .parse::<chrono_tz::Tz>()
                    .map_err(|_| {
                        Error::Usage(format!(
                            "--timezone {z:?} is no IANA time zone; write e.g. Europe/Paris or UTC"
                        ))
                    })?
                    .name()
                    .to_string(),
            ),
            None => None,
        },
        header_notes,
    };
    let mut conn = Conn::open(&source, Access::ReadOnly).await.map_err(|e| match e {
        DbError::NoDatabase { .. } => Error::Usage(format!(
            "--source-url: {e}; dimlog opens a source read-only and never creates one: check the path"
        )),
        other => other.into(),
    })?;
    let profile = scaffold::profile(&mut conn, &request).await;
    let _ = conn.close().await;
    let profile = profile?;
    let generated = scaffold::generate(&request, &profile)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Usage(format!("cannot create the folder {}: {e}", dir.display())))?;
    }
    std::fs::write(&path, &generated.toml)
        .map_err(|e| Error::Usage(format!("cannot write {}: {e}", path.display())))?;
    let code = if generated.todo.is_empty() { 0 } else { 2 };
    if out.json {
        out.print_json(&serde_json::json!({
            "config": path,
            "table": request.table.to_string(),
            "backend": profile.backend.dialect().name(),
            "name": generated.name,
            "key": generated.key,
            "updated_at": generated.updated_at,
            "deleted_flag": generated.deleted_flag,
            "timezone": generated.timezone,
            "tracked_columns": generated.tracked,
            "type1_columns": generated.type1,
            "skipped_columns": generated.skipped.iter().map(|(c, why)| serde_json::json!({"column": c, "reason": why})).collect::<Vec<_>>(),
            "todo": generated.todo,
            "ready": code == 0,
            "notes": notes,
        }));
        return Ok(code);
    }
    for n in &notes {
        out.note("note", n);
    }
    out.line(format!(
        "wrote {}: key {}, change column {}, {} tracked column(s){}",
        path.display(),
        if generated.key.is_empty() {
            "(to choose)".to_string()
        } else {
            format!("({})", generated.key.join(", "))
        },
        generated.updated_at.as_deref().unwrap_or("(to choose)"),
        generated.tracked.len(),
        generated
            .deleted_flag
            .as_deref()
            .map(|d| format!(", soft deletes from {d}"))
            .unwrap_or_default()
    ));
    for (c, why) in &generated.skipped {
        out.note("note", &format!("`{c}` is not tracked: {why}"));
    }
    if !generated.type1.is_empty() {
        out.note(
            "note",
            &format!(
                "{} look like change times too: carried as Type 1 (track.type1), so that a touch that moves only them opens no version",
                generated.type1.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
            ),
        );
    }
    if code == 0 {
        out.line(format!(
            "review it, then load with: dimlog --config {} run",
            path.display()
        ));
        return Ok(0);
    }
    for t in &generated.todo {
        super::output::eprint_line("todo", &format!("{}: {}", t.setting, t.message));
        if !t.flag.is_empty() {
            // A candidate when there is one, else a placeholder that reads as one.
            let placeholder = if t.flag == "--timezone" { "ZONE" } else { "COLUMN" };
            let example = t.candidates.first().map(String::as_str).unwrap_or(placeholder);
            super::output::eprint_text(&format!(
                "      pick one: rerun with {} {example} --force, or edit {} in {}",
                t.flag,
                t.setting,
                path.display()
            ));
        }
    }
    super::output::eprint_text(&format!(
        "{} is written but needs the choice(s) above before `dimlog run` (exit 2)",
        path.display()
    ));
    Ok(code)
}
