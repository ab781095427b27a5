//! Helpers shared by the integration tests.

pub mod fixture;
pub mod pg;
pub mod property;
