//! Helpers shared by the integration tests.

pub mod fixture;
pub mod pg;
