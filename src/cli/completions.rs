//! `dimlog completions`.

use crate::Error;
use clap::CommandFactory;

/// Print shell completions generated from the CLI definition.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}

/// Runs `completions`; with `--json` the script comes as `{"shell", "script"}`.
pub fn run(args: CompletionsArgs, out: &super::Output) -> Result<i32, Error> {
    let mut cmd = super::Cli::command();
    if out.json {
        let mut script = Vec::new();
        clap_complete::generate(args.shell, &mut cmd, "dimlog", &mut script);
        out.print_json(&serde_json::json!({
            "shell": args.shell.to_string(),
            "script": String::from_utf8_lossy(&script),
        }));
    } else {
        // Generated into memory: clap_complete panics when its writer fails (a closed pipe).
        let mut script = Vec::new();
        clap_complete::generate(args.shell, &mut cmd, "dimlog", &mut script);
        let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), &script);
    }
    Ok(0)
}
