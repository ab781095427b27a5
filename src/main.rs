//! The `dimlog` binary: parse, run, exit with the command's code.

use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = dimlog::cli::Cli::parse();
    let code = dimlog::cli::main_with(cli).await;
    std::process::exit(code);
}
