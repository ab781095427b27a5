//! Rebuild: derive the dimension from the log.
//!
//! Every dimension row is derived from the log, never patched from the change alone:
//! per key, the latest log row for each `valid_from`, ordered; `valid_to =
//! LEAD(valid_from)` or the far-future sentinel; tombstones close the version before
//! them. A load derives again every row of the keys it touched and writes the result;
//! `dimlog rebuild` derives every row. Either way the result is merged into the
//! dimension **in place**, by surrogate key (on PostgreSQL 15+ a load's merge is a
//! `MERGE`): rows no longer derived are deleted, rows that differ are updated, new rows
//! inserted, so only rows that change are written. The dimension is never dropped or
//! replaced: grants, indexes, comments, views, foreign keys from fact tables to the
//! surrogate key and columns users added all stay, no lock stronger than a writer's is
//! taken, and a reader's snapshot keeps its rows.

use crate::config::ConfigError;
use crate::context::{run_named, SqlContext};
use crate::db::{sql, Conn, DbError, Param};
use serde::Serialize;

/// The context of the merge statements: which rows were derived (`touched`: the touched
/// keys' into `dimlog_derived`/`dimlog_rebuilt`; else every key's).
#[derive(Serialize)]
struct Merge<'a> {
    #[serde(flatten)]
    ctx: &'a SqlContext,
    touched: bool,
}

/// The merge of derived rows into the dimension: delete, update, insert.
const MERGE: [&str; 3] = ["delete_stale", "update_changed", "insert_missing"];

/// The derivation of the touched keys' rows; an engine leaves out the steps it does not
/// need (PostgreSQL: a temporary table and statistics; SQLite: a table and an index).
const DERIVE_TOUCHED: [&str; 5] = [
    "drop_rebuilt",
    "derive_rebuilt",
    "index_rebuilt",
    "derive_touched",
    "analyze_derived",
];

/// The derivation of every key's rows (a full rebuild), as [`DERIVE_TOUCHED`].
const DERIVE_ALL: [&str; 5] = [
    "drop_rebuilt",
    "derive_rebuilt",
    "index_rebuilt",
    "derive_all",
    "analyze_rebuilt",
];

/// Rebuilds the dimension rows of the keys the classified changes touch (listed in
/// `dimlog_touched`), and with `stale` those of the earlier versions the load carried over
/// to a new Type 2 column set (see [`crate::log::find_stale_versions`]).
///
/// On PostgreSQL the rows are derived into a temporary table from the history classify
/// read and the rows this load appended (no second pass over the log), then merged
/// where the server has `MERGE` (15 and later): a row that did not change is not
/// rewritten, a version that only closed is updated in place, and only new versions are
/// inserted. Elsewhere the same is done by a delete, an update and an insert.
pub async fn rebuild_touched(conn: &mut Conn, ctx: &SqlContext, stale: bool) -> Result<(), DbError> {
    #[derive(Serialize)]
    struct Touched<'a> {
        #[serde(flatten)]
        ctx: &'a SqlContext,
        stale: bool,
    }
    // The key list's statistics come first: without them the check below was planned
    // as a scan of the whole dimension (on Citus, of every shard: 0.4 s at 1M keys for
    // 21k touched ones), with them as a probe of its key index per touched key.
    run_named(
        conn,
        "rebuild",
        &["touched", "analyze_touched"],
        &Touched { ctx, stale },
    )
    .await?;
    // Surrogate keys never vanish: a touched key's version the log lost stops the load.
    let lost = sql::statement(conn.backend(), "rebuild", "lost_versions", ctx)?;
    let lost = conn
        .query_text("checking the log still holds the touched keys' versions", &lost, &[])
        .await?;
    if !lost.is_empty() {
        let n = ctx.key_names.len();
        let shown: Vec<String> = lost
            .iter()
            .map(|r| {
                let key: Vec<String> = r[..n]
                    .iter()
                    .map(|v| v.clone().unwrap_or_else(|| "NULL".into()))
                    .collect();
                format!(
                    "key ({}): surrogate key {}",
                    key.join(", "),
                    r[n].clone().unwrap_or_default()
                )
            })
            .collect();
        return Err(DbError::LogLostVersions(format!(
            "the log {} no longer holds versions that the dimension {} has ({}{}): rows were deleted from the log. \
             Nothing was loaded, since rebuilding these keys from the log would drop those versions. Restore the log from a \
             backup (`dimlog verify` then checks it)",
            ctx.log.replace('"', ""),
            ctx.dim.replace('"', ""),
            shown.join("; "),
            if lost.len() >= 5 { "; …" } else { "" }
        )));
    }
    let merge = Merge { ctx, touched: true };
    // The derivation joins the history with the key list and the merge joins the
    // dimension with the derived rows: each engine derives them its way (statistics
    // for a planner that uses them, an index for one that does not).
    run_named(conn, "rebuild", &DERIVE_TOUCHED, &merge).await?;
    if conn.has_merge() {
        run_named(conn, "rebuild", &["merge_touched"], &merge).await?;
    } else {
        run_named(conn, "rebuild", &MERGE, &merge).await?;
    }
    run_named(conn, "rebuild", &["drop_rebuilt"], &merge).await
}

/// Rebuilds every key in place, inside the caller's transaction: after a first load
/// into an empty log every log row is new, so this is the touched-keys rebuild without
/// the list of keys to join.
pub async fn rebuild_in_place(conn: &mut Conn, ctx: &SqlContext) -> Result<(), DbError> {
    run_named(conn, "rebuild", &["delete_all", "insert_all"], ctx).await
}

/// Fills the empty dimension after a first load appended one log row per key: each live
/// row is its key's only version, so no window over the log is needed.
pub async fn rebuild_first_load(conn: &mut Conn, ctx: &SqlContext) -> Result<(), DbError> {
    run_named(conn, "rebuild", &["insert_first"], ctx).await
}

/// Rebuilds the whole dimension from the log in place, inside the caller's transaction
/// (`dimlog rebuild`, and a run that accepted a config change): first the dimension's
/// columns are aligned with what dimlog writes (`align_columns`: a missing one is added,
/// a retyped one altered, and the columns in `no_longer_written` — dimlog's own, no
/// longer in the config — dropped), then every row is derived and merged by surrogate
/// key, and a primary key, NOT NULL or unique index that a hand edit took away is put
/// back.
pub async fn rebuild_all(conn: &mut Conn, ctx: &SqlContext, no_longer_written: &[String]) -> Result<(), crate::Error> {
    let added = align_columns(conn, ctx, no_longer_written).await?;
    let merge = Merge { ctx, touched: false };
    run_named(conn, "rebuild", &DERIVE_ALL, &merge).await?;
    run_named(conn, "rebuild", &MERGE, &merge).await?;
    run_named(conn, "rebuild", &["drop_rebuilt"], &merge).await?;
    restore_constraints(conn, ctx, &added).await?;
    Ok(())
}

/// A column dimlog writes in the dimension.
#[derive(Clone, Debug, Serialize)]
struct OwnColumn {
    /// Quoted.
    name: String,
    /// Bare, as the catalog names it.
    bare: String,
    target_type: String,
    /// NOT NULL.
    #[serde(skip)]
    required: bool,
    /// An attribute or `current_<col>` twin, whose type follows the source's.
    #[serde(skip)]
    follows_source: bool,
}

fn unquote(quoted: &str) -> String {
    quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .unwrap_or(quoted)
        .replace("\"\"", "\"")
}

/// Every column dimlog writes in the dimension, in table order.
async fn own_columns(conn: &mut Conn, ctx: &SqlContext) -> Result<Vec<OwnColumn>, DbError> {
    let empty = serde_json::json!({});
    let types = sql::statement(conn.backend(), "tables", "own_types", &empty)?;
    let types = conn.query_text("reading dimlog's column types", &types, &[]).await?;
    let t = |i: usize| types[0][i].clone().unwrap_or_default();
    let (int, ts, boolean, bytes) = (t(0), t(1), t(2), t(3));
    let col = |name: &str, target_type: &str, required: bool, follows_source: bool| OwnColumn {
        name: name.to_string(),
        bare: unquote(name),
        target_type: target_type.to_string(),
        required,
        follows_source,
    };
    let mut cols = vec![col(&ctx.sk, &int, true, false)];
    if ctx.key_hash {
        cols.push(col(crate::context::KEY_HASH, &int, true, false));
    }
    cols.extend(ctx.key_defs.iter().map(|c| col(&c.name, &c.target_type, true, false)));
    cols.extend(ctx.attr_defs.iter().map(|c| col(&c.name, &c.target_type, false, true)));
    cols.extend(
        ctx.current_defs
            .iter()
            .map(|c| col(&c.name, &c.target_type, false, true)),
    );
    cols.extend([
        col("valid_from", &ts, true, false),
        col("valid_to", &ts, true, false),
        col("is_current", &boolean, true, false),
        col("row_hash", &bytes, true, false),
        col("load_id", &int, true, false),
    ]);
    Ok(cols)
}

#[derive(Serialize)]
struct WithColumn<'a> {
    #[serde(flatten)]
    ctx: &'a SqlContext,
    column: &'a OwnColumn,
}

/// Makes the dimension's columns those dimlog writes, in place: adds a missing one
/// (nullable, until [`restore_constraints`]), on PostgreSQL gives an attribute the type
/// the log now has, and drops the columns of `no_longer_written` that are there. Columns
/// users added are left alone. A view that uses a column to retype or drop is named in
/// a refusal (exit 2) before anything changes.
async fn align_columns(
    conn: &mut Conn,
    ctx: &SqlContext,
    no_longer_written: &[String],
) -> Result<Vec<OwnColumn>, crate::Error> {
    let backend = conn.backend();
    let dialect = conn.dialect();
    let same = |a: &str, b: &str| dialect.same_name(a, b);
    let present_sql = sql::statement(backend, "tables", "dimension_columns", ctx)?;
    let layout = conn
        .query_text("reading the dimension's columns", &present_sql, &[])
        .await?;
    let wanted = own_columns(conn, ctx).await?;
    if !dialect.alters_tables() {
        let sk = unquote(&ctx.sk);
        let mismatch = layout.iter().find_map(|r| {
            let (name, ty, pk) = (r[0].as_deref()?, r[1].as_deref().unwrap_or(""), r[2].as_deref());
            if same(name, &sk) && pk == Some("0") {
                return Some(format!("a surrogate key `{name}` that is not its primary key"));
            }
            let w = wanted.iter().find(|w| same(&w.bare, name))?;
            (!w.target_type.eq_ignore_ascii_case(ty))
                .then(|| format!("column `{name}` declared {ty}, where dimlog makes it {}", w.target_type))
        });
        let mismatch = mismatch.or_else(|| {
            (!layout.iter().any(|r| r[0].as_deref().is_some_and(|n| same(n, &sk))))
                .then(|| format!("no surrogate key column `{sk}`"))
        });
        if let Some(mismatch) = mismatch {
            recreate_sqlite_dimension(conn, ctx, &wanted, &layout, &mismatch).await?;
            return Ok(Vec::new());
        }
    }
    let present: Vec<String> = layout
        .into_iter()
        .filter_map(|r| r.into_iter().next().flatten())
        .collect();
    let to_drop: Vec<OwnColumn> = no_longer_written
        .iter()
        .filter(|c| !wanted.iter().any(|w| same(&w.bare, c)))
        .filter(|c| present.iter().any(|p| same(p, c)))
        .map(|c| OwnColumn {
            name: crate::ident::Ident::column(c).map(|i| i.quoted()).unwrap_or_default(),
            bare: c.clone(),
            target_type: String::new(),
            required: false,
            follows_source: false,
        })
        .collect();
    let mut retyped = Vec::new();
    if dialect.alters_tables() {
        let check = sql::statement(backend, "tables", "column_retyped", ctx)?;
        for c in wanted.iter().filter(|c| c.follows_source) {
            let differs = conn
                .query_text(
                    "comparing a dimension column's type",
                    &check,
                    &[Param::Text(c.bare.clone()), Param::Text(c.target_type.clone())],
                )
                .await?;
            if differs.first().and_then(|r| r[0].as_deref()) == Some("true") {
                retyped.push(c.clone());
            }
        }
    }
    {
        let views_sql = sql::statement(backend, "tables", "column_views", ctx)?;
        for (c, why) in to_drop
            .iter()
            .map(|c| (c, "is no longer in the config's [track] lists, so dimlog takes it off"))
            .chain(
                retyped
                    .iter()
                    .map(|c| (c, "changed type in the log, so dimlog retypes it in")),
            )
        {
            let views: Vec<String> = conn
                .query_text(
                    "finding views over a column",
                    &views_sql,
                    &[Param::Text(c.bare.clone())],
                )
                .await?
                .into_iter()
                .filter_map(|r| r.into_iter().next().flatten())
                .collect();
            if !views.is_empty() {
                return Err(ConfigError::invalid(
                    "track.columns",
                    format!(
                        "column `{}` {why} the dimension {}, but the view(s) {} use it, and PostgreSQL cannot change a column a view uses;                          nothing was changed. Drop the view(s) (and create them again afterwards), or keep the column in the config",
                        c.bare,
                        ctx.dim.replace("\".\"", ".").trim_matches('"'),
                        views.join(", ")
                    ),
                )
                .into());
            }
        }
    }
    for column in &to_drop {
        run_named(conn, "tables", &["drop_dimension_column"], &WithColumn { ctx, column }).await?;
    }
    for column in &retyped {
        run_named(
            conn,
            "tables",
            &["retype_dimension_column"],
            &WithColumn { ctx, column },
        )
        .await?;
    }
    let mut added = Vec::new();
    for column in wanted.iter().filter(|w| !present.iter().any(|p| same(p, &w.bare))) {
        run_named(conn, "tables", &["add_dimension_column"], &WithColumn { ctx, column }).await?;
        added.push(column.clone());
    }
    Ok(added)
}

/// Creates a SQLite dimension again, empty, with the columns, types and primary key
/// dimlog makes, when its own are not (`mismatch` says how): SQLite cannot alter a
/// column's declared type or add a primary key. Refused (exit 2), naming them, when that
/// would lose something users made: columns of their own, views, triggers, indexes or
/// foreign keys of other tables.
async fn recreate_sqlite_dimension(
    conn: &mut Conn,
    ctx: &SqlContext,
    wanted: &[OwnColumn],
    layout: &[crate::db::TextRow],
    mismatch: &str,
) -> Result<(), crate::Error> {
    let dependents_sql = sql::statement(conn.backend(), "tables", "dimension_dependents", ctx)?;
    let mut lost: Vec<String> = layout
        .iter()
        .filter_map(|r| r[0].clone())
        .filter(|n| !wanted.iter().any(|w| w.bare.eq_ignore_ascii_case(n)))
        .map(|n| format!("column {n}"))
        .collect();
    lost.extend(
        conn.query_text("finding what uses the dimension", &dependents_sql, &[])
            .await?
            .into_iter()
            .filter_map(|r| r.into_iter().next().flatten()),
    );
    if !lost.is_empty() {
        return Err(ConfigError::invalid(
            "target.dimension",
            format!(
                "the dimension {} has {mismatch} (a hand edit, or a retype migration); SQLite cannot change that in place, \
                 and creating the table again would lose what was added to it: {}. Nothing was changed: drop those \
                 (keep their definitions), run `dimlog rebuild`, and create them again",
                ctx.dim_plain,
                lost.join(", ")
            ),
        )
        .into());
    }
    run_named(conn, "tables", &["dimension"], &ctx.for_swap_table()).await?;
    run_named(conn, "rebuild", &["drop_old", "rename_new"], ctx).await?;
    Ok(())
}

/// After a rebuild in place filled columns [`align_columns`] added: puts back what a
/// hand edit took away with them: NOT NULL (PostgreSQL), the primary key on the surrogate
/// key (PostgreSQL), and the unique index on (key, valid_from), each only if missing.
async fn restore_constraints(conn: &mut Conn, ctx: &SqlContext, added: &[OwnColumn]) -> Result<(), DbError> {
    let backend = conn.backend();
    if conn.dialect().alters_tables() {
        for column in added.iter().filter(|c| c.required) {
            run_named(conn, "tables", &["set_not_null"], &WithColumn { ctx, column }).await?;
        }
        let find = sql::statement(backend, "tables", "primary_key_name", &serde_json::json!({}))?;
        let pk = conn
            .query_text("finding a primary key", &find, &[Param::Text(ctx.dim.clone())])
            .await?;
        if pk.is_empty() {
            let add = serde_json::json!({ "table": ctx.dim, "name": ctx.dim_pk, "column": ctx.sk, "keys": ctx.keys });
            run_named(conn, "tables", &["add_primary_key"], &add).await?;
        }
    }
    let exists = sql::statement(backend, "tables", "dimension_index_exists", ctx)?;
    if conn
        .query_text("finding the dimension's key index", &exists, &[])
        .await?
        .is_empty()
    {
        run_named(conn, "tables", &["dimension_index"], ctx).await?;
    }
    Ok(())
}
