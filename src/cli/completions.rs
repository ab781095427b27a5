//! `dimlog completions`.

use crate::Error;
use clap::CommandFactory;

/// Print shell completions generated from the CLI definition.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}

/// Runs `completions`.
pub fn run(args: CompletionsArgs) -> Result<i32, Error> {
    let mut cmd = super::Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "dimlog", &mut std::io::stdout());
    Ok(0)
}
