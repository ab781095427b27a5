//! The single integration-test binary. Test themes live in modules under `tests/<theme>/`,
//! so cargo builds and links the crate's dependencies once instead of once per file.

mod backfill;
#[cfg(feature = "citus-tests")]
mod citus;
mod cli;
mod columns;
mod connections;
mod deletes;
mod facade;
mod harness;
mod lookup;
mod production;
mod reliability;
mod scenarios;
mod support;
mod timezones;
