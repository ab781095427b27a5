//! The single integration-test binary. Test themes live in modules under `tests/<theme>/`,
//! so cargo builds and links the crate's dependencies once instead of once per file.

mod cli;
mod harness;
mod reliability;
mod scenarios;
mod support;
