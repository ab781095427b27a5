//! The `dimlog` binary: parse, run, exit with the command's code.

#![deny(clippy::print_stdout, clippy::print_stderr)]

#[tokio::main]
async fn main() {
    let cli = dimlog::cli::parse();
    let code = dimlog::cli::main_with(cli).await;
    std::process::exit(code);
}
