//! `dimlog init`.

use super::{load_plan, GlobalArgs, Output};
use crate::pipeline::Session;
use crate::Error;

/// Create dimlog's tables, the version log and the dimension, with their indexes.
/// Idempotent; `dimlog run` does it too.
#[derive(Debug, clap::Args)]
pub struct InitArgs {}

/// Runs `init`.
pub async fn run(global: &GlobalArgs, _args: InitArgs, out: &Output) -> Result<i32, Error> {
    let plan = load_plan(global)?;
    let mut session = Session::open(&plan).await?;
    session.check_zone(&plan).await?;
    session.create_target(&plan).await?;
    let record = session
        .under_lock(&plan, true, async |session: &mut Session| {
            Ok(crate::tables::init(&mut session.target, &plan, &session.layout).await?)
        })
        .await;
    session.close().await;
    let record = record?;
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
