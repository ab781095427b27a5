//! The core pipeline's scenarios, each written once and run on SQLite and PostgreSQL
//! (`<scenario>::sqlite`, `<scenario>::postgres`), with the same insta snapshot for both.

mod cli;
#[cfg(feature = "failpoints")]
mod crash;
mod first_load;
mod first_load_sqlite;
mod history;
mod merge;
mod names;
mod rules;
mod types;
