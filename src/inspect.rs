//! Reading results back for people: the history of one key, watermarks and runs.

use crate::config::Plan;
use crate::context::SqlContext;
use crate::db::types::ColumnKind;
use crate::db::{sql, Conn, DbError, Param};
use crate::extract::Layout;
use serde::Serialize;

/// One version (or tombstone) of a key, as `dimlog history` shows it.
///
/// In JSON (`--json`), `values` is an object in column order (so
/// `jq '.versions[].values.email'` works) whose values are typed by their column: NULL
/// is `null`, whole and floating-point numbers are numbers, booleans `true`/`false`, a
/// JSON column's value the JSON itself, exact decimals (kept exact), times and text are
/// strings, and the value of a bytes column (SQLite BLOB, PostgreSQL bytea)
/// `{"hex": "<lowercase hex>"}`, so text that reads like hex is never taken for bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryRow {
    /// Surrogate key (none for a tombstone).
    pub surrogate_key: Option<i64>,
    /// Attribute values by column name, Type 2 then Type 1, as text; a bytes column's
    /// values as `\x` and lowercase hex.
    pub values: Vec<(String, Option<String>)>,
    /// For each of `values`, the kind of its column.
    pub kinds: Vec<ColumnKind>,
    /// Start of the interval.
    pub valid_from: String,
    /// End of the interval (none for a tombstone).
    pub valid_to: Option<String>,
    /// The open row of a live key.
    pub is_current: bool,
    /// A tombstone: the key was deleted here.
    pub is_deleted: bool,
    /// The run that appended the log row.
    pub load_id: i64,
}

impl Serialize for HistoryRow {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut row = s.serialize_struct("HistoryRow", 7)?;
        row.serialize_field("surrogate_key", &self.surrogate_key)?;
        row.serialize_field("values", &Values(self))?;
        row.serialize_field("valid_from", &self.valid_from)?;
        row.serialize_field("valid_to", &self.valid_to)?;
        row.serialize_field("is_current", &self.is_current)?;
        row.serialize_field("is_deleted", &self.is_deleted)?;
        row.serialize_field("load_id", &self.load_id)?;
        row.end()
    }
}

/// A row's values as the JSON object [`HistoryRow`] describes.
struct Values<'a>(&'a HistoryRow);

impl Serialize for Values<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let row = self.0;
        let mut map = s.serialize_map(Some(row.values.len()))?;
        for (i, (name, value)) in row.values.iter().enumerate() {
            let kind = row.kinds.get(i).copied().unwrap_or(ColumnKind::Text);
            map.serialize_entry(name, &typed(kind, value.as_deref()))?;
        }
        map.end()
    }
}

/// A value as JSON of its column's kind; a value that does not read as its kind (a
/// SQLite column holds any type) stays a string.
pub fn typed(kind: ColumnKind, value: Option<&str>) -> serde_json::Value {
    use serde_json::Value;
    let Some(v) = value else { return Value::Null };
    let text = || Value::String(v.to_string());
    match kind {
        ColumnKind::Bytes => serde_json::json!({ "hex": v.strip_prefix("\\x").unwrap_or(v).to_ascii_lowercase() }),
        ColumnKind::Int => v.parse::<i64>().map_or_else(|_| text(), Value::from),
        ColumnKind::Float => v
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or_else(text, Value::Number),
        ColumnKind::Bool => bool_text(v).map_or_else(text, Value::Bool),
        ColumnKind::Json => serde_json::from_str(v).unwrap_or_else(|_| text()),
        ColumnKind::TimestampTz => Value::String(instant_text(v)),
        _ => text(),
    }
}

/// An instant as every time dimlog prints is (`valid_from`'s RFC 3339 in UTC), not in
/// the engine's own text (`2026-12-02 14:33:45.345529+00`); text that reads as no
/// instant stays as it is.
fn instant_text(v: &str) -> String {
    crate::ts::Micros::parse(v, None).map_or_else(|_| v.to_string(), |t| t.to_text())
}

/// A boolean as the engines spell it (`true`/`t`/`1`, `false`/`f`/`0`).
fn bool_text(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "t" | "1" => Some(true),
        "false" | "f" | "0" => Some(false),
        _ => None,
    }
}

impl HistoryRow {
    /// The `i`th value as a table shows it: booleans as `true`/`false` whatever the
    /// engine stores (SQLite stores 1 and 0), NULL as `NULL`.
    pub fn shown(&self, i: usize) -> String {
        match (&self.values[i].1, self.kinds.get(i)) {
            (None, _) => "NULL".to_string(),
            (Some(v), Some(ColumnKind::Bool)) => bool_text(v).map_or_else(|| v.clone(), |b| b.to_string()),
            (Some(v), Some(ColumnKind::TimestampTz)) => instant_text(v),
            (Some(v), _) => v.clone(),
        }
    }
}

/// Every version and tombstone of one key, oldest first.
pub async fn history(
    conn: &mut Conn,
    ctx: &SqlContext,
    layout: &Layout,
    key: &[String],
) -> Result<Vec<HistoryRow>, DbError> {
    // The key in canonical form, as every way in reads it (lookup::canonical_key): on
    // SQLite, each spelling of it the log holds.
    let spellings = crate::lookup::resolve_key(conn, ctx, key).await?;
    #[derive(Serialize)]
    struct KeyContext<'a> {
        #[serde(flatten)]
        base: &'a SqlContext,
        key_casts: Vec<String>,
    }
    let kctx = KeyContext {
        base: ctx,
        key_casts: crate::lookup::key_casts(ctx),
    };
    let sql = sql::statement(conn.backend(), "inspect", "history", &kctx)?;
    let mut rows = Vec::new();
    for key in &spellings {
        let params: Vec<Param> = key.iter().map(|k| Param::Text(k.clone())).collect();
        rows.extend(conn.query_text("reading the key's history", &sql, &params).await?);
    }
    let names: Vec<String> = layout.attrs().iter().map(|c| c.bare.clone()).collect();
    if spellings.len() > 1 {
        // Each spelling's rows come oldest first (fixed-width UTC text sorts by time).
        let at = names.len() + 1;
        rows.sort_by(|a, b| a[at].cmp(&b[at]));
    }
    let kinds: Vec<ColumnKind> = layout.attrs().iter().map(|c| c.kind).collect();
    Ok(rows
        .into_iter()
        .map(|r| {
            let n = names.len();
            HistoryRow {
                surrogate_key: r[0].as_deref().and_then(|v| v.parse().ok()),
                values: names.iter().cloned().zip(r[1..=n].iter().cloned()).collect(),
                kinds: kinds.clone(),
                valid_from: r[n + 1].clone().unwrap_or_default(),
                valid_to: r[n + 2].clone(),
                is_current: r[n + 3].as_deref() == Some("true"),
                is_deleted: r[n + 4].as_deref() == Some("true"),
                load_id: r[n + 5].as_deref().and_then(|v| v.parse().ok()).unwrap_or(0),
            }
        })
        .collect())
}

/// Watermarks and recent runs, for `dimlog status`.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    /// The dimension.
    pub dimension: String,
    /// One entry per role.
    pub watermarks: Vec<WatermarkRow>,
    /// The source's newest change, when the source was asked (null otherwise: status
    /// reads only the target unless told to read the source too).
    pub source_newest: Option<String>,
    /// How far the incremental watermark is behind the source's newest change, seconds
    /// (null when the source was not asked); behind the source's clock when the newest
    /// change is stamped after it.
    pub lag_seconds: Option<f64>,
    /// The source's clock (null when the source was not asked).
    pub source_clock: Option<String>,
    /// Newest first.
    pub runs: Vec<crate::state::RunRecord>,
    /// The column sets and hash version the dimension was built with.
    pub columns: Option<crate::tables::DimensionRecord>,
    /// A config change that `dimlog run --accept-config-change` would apply, in words.
    pub pending_config_change: Option<String>,
    /// The source column the dimension's versions are stamped by, as the target records
    /// it (null before its first run, or on tables from before schema version 2).
    pub change_column: Option<String>,
}

/// One watermark.
#[derive(Clone, Debug, Serialize)]
pub struct WatermarkRow {
    /// `incremental`, `backfill:<from>/<to>`, on a change feed `columns-changed` (the
    /// watermark of the last accepted column change), or `tracked-columns-changed` (the
    /// run that last accepted a change of the Type 2 columns).
    pub role: String,
    /// The watermark.
    pub high_watermark: Option<String>,
    /// The run that set it.
    pub run_id: Option<i64>,
    /// When it was set.
    pub updated_at: Option<String>,
}

impl Status {
    /// The incremental watermark, if there is one.
    pub fn incremental_watermark(&self) -> Option<crate::ts::Micros> {
        self.watermarks
            .iter()
            .find(|w| w.role == crate::state::INCREMENTAL)
            .and_then(|w| w.high_watermark.as_deref())
            .and_then(|t| crate::ts::Micros::parse(t, None).ok())
    }
}

/// Reads the status of a dimension.
pub async fn status(
    target: &mut Conn,
    plan: &Plan,
    source_newest: Option<crate::ts::Micros>,
    limit: i64,
) -> Result<Status, DbError> {
    let watermarks: Vec<WatermarkRow> = crate::state::watermarks(target, plan)
        .await?
        .into_iter()
        .map(|r| WatermarkRow {
            role: r[0].clone().unwrap_or_default(),
            high_watermark: r[1].clone(),
            run_id: r[2].as_deref().and_then(|v| v.parse().ok()),
            updated_at: r[3].clone(),
        })
        .collect();
    let runs = crate::state::recent_runs(target, plan, limit).await?;
    let mut status = Status {
        dimension: plan.name.clone(),
        watermarks,
        source_newest: source_newest.map(|t| t.to_text()),
        lag_seconds: None,
        source_clock: None,
        runs,
        columns: None,
        pending_config_change: None,
        change_column: None,
    };
    status.lag_seconds = match (source_newest, status.incremental_watermark()) {
        (Some(n), Some(w)) => Some(((n.0 - w.0).max(0)) as f64 / 1e6),
        _ => None,
    };
    Ok(status)
}

/// Whether `c` would be taken by a terminal for more than a character: C0 and C1
/// controls, DEL, the marks and overrides that reorder bidirectional text, and the two
/// noncharacters XML 1.0 forbids (U+FFFE, U+FFFF).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{fffe}' | '\u{ffff}' | '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every [`is_unsafe`] character written visibly as `\u{…}` (hex code
/// point), so data printed for people cannot move the cursor, recolour or retitle the
/// terminal, or reorder what is shown; line breaks stay when `keep_newlines`. The CLI's
/// `--json` never goes through this: JSON strings carry the characters exactly.
pub fn escape(text: &str, keep_newlines: bool) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| is_unsafe(c) && !(keep_newlines && c == '\n');
    if !text.chars().any(bad) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if bad(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}
