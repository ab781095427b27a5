//! `dimlog man`: man pages generated from the CLI definition, so they never drift from it.

use super::{GlobalArgs, Output};
use crate::Error;
use clap::CommandFactory;
use std::path::PathBuf;

/// Print the man page (roff) generated from this CLI: `dimlog man | man -l -`. With
/// --out DIR, write dimlog.1 and one dimlog-COMMAND.1 per command there instead.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Print the page of this command instead of the top-level page.
    #[arg(value_name = "COMMAND")]
    pub command: Option<String>,
    /// Write every page into this folder (created if missing).
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    pub out: Option<PathBuf>,
}

/// The top-level command, built, with `dimlog-<sub>` display names on its subcommands.
fn built() -> clap::Command {
    let mut cmd = super::Cli::command().disable_help_subcommand(true);
    cmd.build();
    cmd
}

/// Runs `man`.
pub fn run(_global: &GlobalArgs, args: ManArgs, out: &Output) -> Result<i32, Error> {
    let cmd = built();
    if let Some(dir) = &args.out {
        let io = |e: std::io::Error| Error::Usage(format!("cannot write man pages to {}: {e}", dir.display()));
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut pages = vec![clap_mangen::Man::new(cmd.clone()).generate_to(dir).map_err(io)?];
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            pages.push(clap_mangen::Man::new(sub.clone()).generate_to(dir).map_err(io)?);
        }
        if out.json {
            out.print_json(&serde_json::json!({"pages": pages}));
        } else {
            for p in &pages {
                out.line(p.display().to_string());
            }
        }
        return Ok(0);
    }
    let page = match &args.command {
        None => cmd,
        Some(name) => match cmd.find_subcommand(name) {
            Some(sub) => sub.clone(),
            None => {
                let names: Vec<&str> = cmd.get_subcommands().map(|s| s.get_name()).collect();
                return Err(Error::Usage(format!(
                    "no command {name:?}; the commands are: {}",
                    names.join(", ")
                )));
            }
        },
    };
    let mut text = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut text)
        .map_err(|e| Error::Internal(format!("rendering the man page: {e}")))?;
    let text = String::from_utf8_lossy(&text).into_owned();
    if out.json {
        out.print_json(&serde_json::json!({"man": text}));
    } else {
        use std::io::Write;
        let _ = std::io::stdout().lock().write_all(text.as_bytes());
    }
    Ok(0)
}
