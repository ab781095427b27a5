//! `dimlog init`.

use super::{load_plan, GlobalArgs, Output};
use crate::{Dimension, Error};

/// Create dimlog's tables, the version log and the dimension, with their indexes.
/// Idempotent; `dimlog run` does it too.
#[derive(Debug, clap::Args)]
pub struct InitArgs {}

/// Runs `init`.
pub async fn run(global: &GlobalArgs, _args: InitArgs, out: &Output) -> Result<i32, Error> {
    let dimension = Dimension::from_plan(load_plan(global)?);
    let record = dimension.init().await?;
    let plan = dimension.plan();
    if out.json {
        out.print_json(&serde_json::json!({
            "dimension": plan.name,
            "log": plan.target.log.to_string(),
            "dimension_table": plan.target.dimension.to_string(),
            "tracked_columns": record.tracked_columns,
            "type1_columns": record.type1_columns,
            "hash_version": record.hash_version,
        }));
    } else {
        out.line(format!(
            "initialised dimension {:?}: log {}, dimension {} (target {})",
            plan.name, plan.target.log, plan.target.dimension, plan.target.url
        ));
    }
    Ok(0)
}
