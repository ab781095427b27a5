//! The oracle of the property test: spec section 1, written out a second time, row by
//! row, with none of dimlog's code.
//!
//! [`Source`] mirrors the real source table (every write the test makes goes to both),
//! and [`Model`] replays each run the way the spec words it: read the window
//! `[watermark - lookback, upper]`, keep one row per key (or per key and timestamp with
//! `history = "all"`), reconcile missing keys, then compare each staged row, in time
//! order, with *P*, the key's version with the greatest `valid_from <= t`, appending a
//! version, a correction, a tombstone or nothing. The dimension is the LEAD derivation of
//! the model's log.
//!
//! Why runs are replayed rather than the final dimension computed from the final source
//! alone: what a schedule made visible matters. A row stamped before `watermark -
//! lookback` that commits after the watermark passed it is never read; a reconciled hard
//! delete is stamped at that run's `upper`; and a late version equal to the version after
//! it stays a version of its own (surrogate keys are never merged away), whereas a single
//! load of the same rows in order would have collapsed them. [`derive_from_history`] is
//! that single-load derivation; the test checks both dimlog and this model against it
//! for a one-shot load.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use dimlog::state::RunCounts;
use dimlog::ts::{Micros, FAR_FUTURE};

/// The tracked values `(email, tier, country)`.
pub type Vals = [Option<&'static str>; 3];

/// What a source row says about its key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// A live row with these tracked values.
    Live(Vals),
    /// A soft-deleted row.
    Deleted,
}

/// Renders tracked values as `("a", NULL, "FR")`.
pub fn show_vals(v: &Vals) -> String {
    let cells: Vec<String> = v
        .iter()
        .map(|c| c.map_or_else(|| "NULL".to_string(), |s| format!("{s:?}")))
        .collect();
    format!("({})", cells.join(", "))
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Payload::Live(v) => f.write_str(&show_vals(v)),
            Payload::Deleted => f.write_str("deleted"),
        }
    }
}

/// One row of the source table, as the test wrote it.
#[derive(Clone, Debug)]
pub struct SourceRow {
    /// `customer_id`.
    pub key: i64,
    /// `updated_at`.
    pub at: Micros,
    /// The literal stored in `updated_at` (its offset may not be UTC).
    pub literal: String,
    /// Values or the delete flag.
    pub payload: Payload,
}

/// The source table: a table with one row per key (`history = "latest"`), or a landing
/// table with one row per key and timestamp (`history = "all"`).
pub struct Source {
    /// Landing-table style.
    pub feed: bool,
    /// Its rows.
    pub rows: Vec<SourceRow>,
}

fn sql_text(v: Option<&str>) -> String {
    v.map_or_else(|| "NULL".to_string(), |s| format!("'{}'", s.replace('\'', "''")))
}

impl Source {
    /// An empty source of the given style.
    pub fn new(feed: bool) -> Source {
        Source { feed, rows: Vec::new() }
    }

    /// The table the fixture reads.
    pub fn table(&self) -> &'static str {
        if self.feed {
            "src_feed"
        } else {
            "src_customers"
        }
    }

    /// Applies a write to the mirror and returns the SQL that does the same to the real
    /// table: in a landing table, a new row, or a correction in place of the row with the
    /// same key and timestamp; in a keyed table, an upsert of the key's row (a soft delete
    /// keeps the row's values and sets the flag).
    pub fn write(&mut self, key: i64, at: Micros, literal: String, payload: Payload) -> String {
        let table = self.table();
        let existing = if self.feed {
            self.rows.iter().position(|r| r.key == key && r.at == at)
        } else {
            self.rows.iter().position(|r| r.key == key)
        };
        let (values, deleted) = match payload {
            Payload::Live(v) => (Some(v), false),
            Payload::Deleted => (None, true),
        };
        let sql = match existing {
            Some(i) => {
                let old = &self.rows[i];
                let mut set = Vec::new();
                match (values, self.feed) {
                    (Some(v), _) => {
                        set.push(format!("email = {}", sql_text(v[0])));
                        set.push(format!("tier = {}", sql_text(v[1])));
                        set.push(format!("country = {}", sql_text(v[2])));
                    }
                    (None, true) => set.push("email = NULL, tier = NULL, country = NULL".into()),
                    (None, false) => {}
                }
                set.push(format!("is_deleted = {deleted}"));
                set.push(format!("updated_at = '{literal}'"));
                let row = if self.feed {
                    format!("customer_id = {key} AND updated_at = '{}'", old.literal)
                } else {
                    format!("customer_id = {key}")
                };
                format!("UPDATE {table} SET {} WHERE {row}", set.join(", "))
            }
            None => {
                let v = values.unwrap_or([None, None, None]);
                format!(
                    "INSERT INTO {table} (customer_id, email, tier, country, is_deleted, updated_at) \
                     VALUES ({key}, {}, {}, {}, {deleted}, '{literal}')",
                    sql_text(v[0]),
                    sql_text(v[1]),
                    sql_text(v[2])
                )
            }
        };
        let row = SourceRow {
            key,
            at,
            literal,
            payload,
        };
        match existing {
            Some(i) => self.rows[i] = row,
            None => self.rows.push(row),
        }
        sql
    }

    /// Removes every row of the key (a hard delete); returns the SQL.
    pub fn hard_delete(&mut self, key: i64) -> String {
        self.rows.retain(|r| r.key != key);
        format!("DELETE FROM {} WHERE customer_id = {key}", self.table())
    }
}

/// One log row of the model.
#[derive(Clone, Debug)]
pub struct LogRow {
    /// The key.
    pub key: i64,
    /// Its valid_from.
    pub valid_from: Micros,
    /// Values, or a tombstone.
    pub payload: Payload,
    /// The model's surrogate key (none for tombstones).
    pub sk: Option<u64>,
    /// The ordinal of the successful run that appended it.
    pub run: usize,
}

/// One row of the model's dimension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DimRow {
    /// The model's surrogate key.
    pub sk: u64,
    /// The key.
    pub key: i64,
    /// Tracked values.
    pub vals: Vals,
    /// Start, inclusive.
    pub valid_from: Micros,
    /// End, exclusive (the sentinel when open).
    pub valid_to: Micros,
    /// The open row of a live key.
    pub is_current: bool,
    /// The run of the log row it derives from.
    pub run: usize,
}

/// What one run reads and how.
#[derive(Clone, Copy, Debug)]
pub struct RunSpec {
    /// The fixed upper bound.
    pub upper: Micros,
    /// `source.lookback`, µs.
    pub lookback: i64,
    /// `--full-refresh`.
    pub full_refresh: bool,
    /// Hard deletes reconciled in this run.
    pub reconcile: bool,
}

/// What a run would do, computed without changing the model.
#[derive(Clone, Debug)]
pub struct Planned {
    /// The counts the run record must show.
    pub counts: RunCounts,
    /// Live keys closed by reconciliation.
    pub reconciled: i64,
    /// Of those, keys whose newest version was not before `upper` (closed 1 µs after it).
    pub reconciled_after_upper: i64,
    /// Low side of the window.
    pub low: Option<Micros>,
    /// The watermark after the run.
    pub watermark: Option<Micros>,
    /// Rows to append (their `run` is filled in on commit).
    pub appended: Vec<LogRow>,
    /// The window is empty (upper before `watermark - lookback`, or, before the first
    /// watermark, before the source's oldest row): the run is refused before anything is
    /// read (exit 2) and changes nothing.
    pub refused: bool,
    next_sk: u64,
}

/// The model's target: its log, watermark and surrogate-key counter.
pub struct Model {
    history_all: bool,
    /// Every log row, in append order.
    pub log: Vec<LogRow>,
    /// The incremental watermark.
    pub watermark: Option<Micros>,
    next_sk: u64,
    /// Successful runs so far.
    pub runs: usize,
}

/// A key's effective timeline: the latest log row of each valid_from.
type Timeline = BTreeMap<Micros, (Payload, Option<u64>)>;

impl Model {
    /// An empty target.
    pub fn new(history_all: bool) -> Model {
        Model {
            history_all,
            log: Vec::new(),
            watermark: None,
            next_sk: 1,
            runs: 0,
        }
    }

    fn timelines(&self) -> BTreeMap<i64, Timeline> {
        let mut out: BTreeMap<i64, Timeline> = BTreeMap::new();
        for r in &self.log {
            out.entry(r.key).or_default().insert(r.valid_from, (r.payload, r.sk));
        }
        out
    }

    /// What a run with `spec` would read and append, by the rules of spec section 1.
    pub fn plan(&self, source: &Source, spec: &RunSpec) -> Planned {
        // 1. Extract.
        let low = if spec.full_refresh {
            None
        } else {
            self.watermark.map(|w| w.plus(-spec.lookback))
        };
        // A first load (no watermark yet) whose upper bound is before the source's
        // oldest row would read nothing: refused too.
        let oldest = source.rows.iter().map(|r| r.at).min();
        let before_oldest = self.watermark.is_none() && oldest.is_some_and(|o| spec.upper < o);
        if low.is_some_and(|l| spec.upper < l) || before_oldest {
            return Planned {
                counts: RunCounts::default(),
                reconciled: 0,
                reconciled_after_upper: 0,
                low,
                watermark: self.watermark,
                appended: Vec::new(),
                refused: true,
                next_sk: self.next_sk,
            };
        }
        let read: Vec<&SourceRow> = source
            .rows
            .iter()
            .filter(|r| low.is_none_or(|l| r.at >= l) && r.at <= spec.upper)
            .collect();
        let max_read = read.iter().map(|r| r.at).max();

        // 2. Dedupe. The test never writes two rows with one key and timestamp (a keyed
        // table has one row per key), so there are no ties to break here.
        let mut staged: BTreeMap<(i64, Micros), Payload> = BTreeMap::new();
        if self.history_all {
            for r in &read {
                let clash = staged.insert((r.key, r.at), r.payload);
                assert!(clash.is_none(), "the test wrote two rows with one key and timestamp");
            }
        } else {
            let mut newest: BTreeMap<i64, &SourceRow> = BTreeMap::new();
            for &r in &read {
                let e = newest.entry(r.key).or_insert(r);
                if r.at > e.at {
                    *e = r;
                }
            }
            for (k, r) in newest {
                staged.insert((k, r.at), r.payload);
            }
        }
        let rows_after_dedupe = staged.len() as i64;

        // 4 (hard deletes). Live keys missing from the source's full key list get a
        // tombstone at `upper`, or just after their newest version if that is later.
        let timelines = self.timelines();
        let mut reconciled = 0;
        let mut reconciled_after_upper = 0;
        if spec.reconcile {
            // Keys the source holds live: a row flagged deleted is not one (hard and soft
            // deletes behind every window are alike to reconciliation).
            let in_source: BTreeSet<i64> = source
                .rows
                .iter()
                .filter(|r| matches!(r.payload, Payload::Live(_)))
                .map(|r| r.key)
                .collect();
            let staged_keys: BTreeSet<i64> = staged.keys().map(|(k, _)| *k).collect();
            for (key, tl) in &timelines {
                let Some((newest, (payload, _))) = tl.iter().next_back() else {
                    continue;
                };
                let live = matches!(payload, Payload::Live(_));
                if live && !in_source.contains(key) && !staged_keys.contains(key) {
                    let at = if *newest < spec.upper {
                        spec.upper
                    } else {
                        reconciled_after_upper += 1;
                        newest.plus(1)
                    };
                    staged.insert((*key, at), Payload::Deleted);
                    reconciled += 1;
                }
            }
        }

        // Keys the source holds live that are neither live in the log nor staged: stamped
        // behind every window. Reconciliation reads their rows up to `upper` again.
        if spec.reconcile && !self.history_all {
            let staged_keys: BTreeSet<i64> = staged.keys().map(|(k, _)| *k).collect();
            let live_in_log = |key: &i64| {
                timelines
                    .get(key)
                    .and_then(|tl| tl.values().next_back())
                    .is_some_and(|(p, _)| matches!(p, Payload::Live(_)))
            };
            let mut newest: BTreeMap<i64, &SourceRow> = BTreeMap::new();
            let unseen: BTreeSet<i64> = source
                .rows
                .iter()
                .filter(|r| matches!(r.payload, Payload::Live(_)))
                .map(|r| r.key)
                .filter(|k| !staged_keys.contains(k) && !live_in_log(k))
                .collect();
            for r in source
                .rows
                .iter()
                .filter(|r| unseen.contains(&r.key) && r.at <= spec.upper)
            {
                let e = newest.entry(r.key).or_insert(r);
                if r.at > e.at {
                    *e = r;
                }
            }
            for (k, r) in newest {
                staged.insert((k, r.at), r.payload);
            }
        }

        // A delete stamped at the same instant as a live version of its key (the latest log
        // row of that valid_from) moves 1 µs after it, so the version keeps its surrogate
        // key (issue 21). One that lands on another live version there (logged, or staged)
        // is dropped: there is no room for it.
        let live_at = |key: i64, at: Micros| {
            timelines
                .get(&key)
                .and_then(|tl| tl.get(&at))
                .is_some_and(|(p, _)| matches!(p, Payload::Live(_)))
        };
        let colliding: Vec<(i64, Micros)> = staged
            .iter()
            .filter(|(&(key, at), p)| matches!(p, Payload::Deleted) && live_at(key, at))
            .map(|(&k, _)| k)
            .collect();
        for (key, at) in colliding {
            staged.remove(&(key, at));
            let to = at.plus(1);
            let blocked = live_at(key, to) || matches!(staged.get(&(key, to)), Some(Payload::Live(_)));
            if !blocked {
                staged.insert((key, to), Payload::Deleted);
            }
        }

        // Keys with a tombstone in their history (history = "latest"; a staged row is its
        // key's state now). If the key's newest row is that tombstone, a live row stamped at
        // or before it revives the key (a version at `upper`, or just after the tombstone),
        // and a tombstone stamped at or before it is the delete again (dropped). If the key
        // is back (a live row follows its newest tombstone), a row stamped before that
        // return is dropped when it is live and equals the newest version, else moved to
        // `upper` or just after the newest row (a version, or the key deleted now).
        let mut revived = 0;
        if !self.history_all {
            // (key, stamp) → dropped, or moved to (time, counted as a revival).
            type Settled = ((i64, Micros), Option<(Micros, bool)>);
            let settled: Vec<Settled> = staged
                .iter()
                .filter_map(|(&(key, at), &payload)| {
                    let tl = timelines.get(&key)?;
                    let (&tomb, _) = tl.iter().rev().find(|(_, (p, _))| matches!(p, Payload::Deleted))?;
                    let (&newest, (newest_payload, _)) = tl.iter().next_back()?;
                    let live = matches!(payload, Payload::Live(_));
                    if newest == tomb {
                        return match (live, at <= tomb) {
                            (true, true) => Some(((key, at), Some((spec.upper.max(tomb.plus(1)), true)))),
                            (false, true) => Some(((key, at), None)),
                            (_, false) => None,
                        };
                    }
                    let (&back, _) = tl.range(tomb.plus(1)..).next()?;
                    if at >= back {
                        None
                    } else if live && *newest_payload == payload {
                        Some(((key, at), None))
                    } else {
                        Some(((key, at), Some((spec.upper.max(newest.plus(1)), false))))
                    }
                })
                .collect();
            for ((key, at), to) in settled {
                let payload = staged.remove(&(key, at)).expect("a staged row");
                if let Some((to, revival)) = to {
                    staged.insert((key, to), payload);
                    if revival {
                        revived += 1;
                    }
                }
            }
        }

        // 3-4. Detect and append: each staged row against P, in time order per key.
        let mut counts = RunCounts {
            rows_read: read.len() as i64,
            rows_after_dedupe,
            duplicates_dropped: read.len() as i64 - rows_after_dedupe,
            revived,
            future_rows: source.rows.iter().filter(|r| r.at > spec.upper).count() as i64,
            ..RunCounts::default()
        };
        let mut work = timelines.clone();
        let mut next_sk = self.next_sk;
        let mut appended = Vec::new();
        for ((key, at), payload) in staged {
            let newest_logged = timelines.get(&key).and_then(|tl| tl.keys().next_back().copied());
            let tl = work.entry(key).or_default();
            let p = tl.range(..=at).next_back().map(|(vf, e)| (*vf, *e));
            let change: Option<(Payload, Option<u64>)> = match (payload, p) {
                (Payload::Deleted, Some((_, (Payload::Deleted, _)))) => None,
                (Payload::Deleted, p) => {
                    // A delete with no version of its key before it closes nothing: it is
                    // logged, but counted apart (issue 21), not as a tombstone.
                    if p.is_some() {
                        counts.tombstones += 1;
                    }
                    Some((Payload::Deleted, None))
                }
                (Payload::Live(v), Some((_, (Payload::Live(pv), _)))) if pv == v => None,
                (Payload::Live(v), Some((p_from, (Payload::Live(_), p_sk)))) if p_from == at => {
                    counts.corrections += 1;
                    Some((Payload::Live(v), p_sk))
                }
                (Payload::Live(v), _) => {
                    counts.versions += 1;
                    if newest_logged.is_some_and(|n| at < n) {
                        counts.late_versions += 1;
                    }
                    next_sk += 1;
                    Some((Payload::Live(v), Some(next_sk - 1)))
                }
            };
            if let Some((payload, sk)) = change {
                tl.insert(at, (payload, sk));
                appended.push(LogRow {
                    key,
                    valid_from: at,
                    payload,
                    sk,
                    run: usize::MAX,
                });
            }
        }

        // 6. The watermark: max(old, greatest updated_at read).
        let watermark = match (self.watermark, max_read) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        Planned {
            counts,
            reconciled,
            reconciled_after_upper,
            low,
            watermark,
            appended,
            refused: false,
            next_sk,
        }
    }

    /// Commits a planned run; returns its run ordinal.
    pub fn commit(&mut self, planned: Planned) -> usize {
        let run = self.runs;
        self.runs += 1;
        self.log
            .extend(planned.appended.into_iter().map(|r| LogRow { run, ..r }));
        self.watermark = planned.watermark;
        self.next_sk = planned.next_sk;
        run
    }

    /// The dimension (spec 1.5): per key, the latest log row of each valid_from, in
    /// order; `valid_to` is the next valid_from or the sentinel; tombstones close the
    /// version before them and are no rows.
    pub fn dimension(&self) -> Vec<DimRow> {
        let mut runs: BTreeMap<(i64, Micros), usize> = BTreeMap::new();
        for r in &self.log {
            runs.insert((r.key, r.valid_from), r.run);
        }
        let mut out = Vec::new();
        for (key, tl) in self.timelines() {
            let entries: Vec<_> = tl.iter().collect();
            for (i, (from, (payload, sk))) in entries.iter().enumerate() {
                let Payload::Live(vals) = payload else { continue };
                let next = entries.get(i + 1).map(|(f, _)| **f);
                out.push(DimRow {
                    sk: sk.expect("a version has a surrogate key"),
                    key,
                    vals: *vals,
                    valid_from: **from,
                    valid_to: next.unwrap_or(FAR_FUTURE),
                    is_current: next.is_none(),
                    run: runs[&(key, **from)],
                });
            }
        }
        out
    }
}

/// The declarative oracle for one load of everything: per key, the rows in time order
/// (only the newest per key with `history = "latest"`), consecutive equal values
/// collapsed into the earlier version, soft deletes as tombstones (a tombstone after a
/// tombstone collapsed likewise), then `valid_to = LEAD(valid_from)`. Returns
/// `(key, values, valid_from, valid_to, is_current)` by key and valid_from.
pub fn derive_from_history(rows: &[SourceRow], history_all: bool) -> Vec<(i64, Vals, Micros, Micros, bool)> {
    let mut by_key: BTreeMap<i64, BTreeMap<Micros, Payload>> = BTreeMap::new();
    for r in rows {
        by_key.entry(r.key).or_default().insert(r.at, r.payload);
    }
    let mut out = Vec::new();
    for (key, mut rows) in by_key {
        if !history_all {
            let newest = rows.pop_last().expect("a key has a row");
            rows = BTreeMap::from([newest]);
        }
        let mut kept: Vec<(Micros, Payload)> = Vec::new();
        for (at, p) in rows {
            if kept.last().map(|(_, last)| *last) != Some(p) {
                kept.push((at, p));
            }
        }
        for (i, (from, p)) in kept.iter().enumerate() {
            if let Payload::Live(v) = p {
                let next = kept.get(i + 1).map(|(t, _)| *t);
                out.push((key, *v, *from, next.unwrap_or(FAR_FUTURE), next.is_none()));
            }
        }
    }
    out
}
