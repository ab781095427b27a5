//! Reliability (issue 6), on SQLite and PostgreSQL: a property test against an oracle of
//! spec section 1, runs that meet each other at the dimension's lock, processes killed
//! mid-run, a real late commit, and bad input that must fail clearly and commit nothing.
//! `MESSAGES.md` beside this file lists the message a user sees for each bad input.

mod bad_input;
pub(crate) mod cli;
mod closed_pipes;
#[cfg(feature = "failpoints")]
mod concurrency;
mod config_names;
mod edges;
mod hand_edits;
#[cfg(feature = "failpoints")]
mod interrupt;
mod late_commit;
mod model;
#[cfg(feature = "failpoints")]
mod new_file;
mod no_create;
mod other_user;
mod property;
mod read_only_medium;
mod secrets;
#[cfg(feature = "failpoints")]
mod sigkill;
mod source_files;
pub mod target_only;
mod window;
