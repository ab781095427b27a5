//! Late rows around a change of the Type 2 column set (spec 1.4: an unchanged row never
//! opens a version, a real change always does). Versions logged before the change hold a
//! hash over the old column set; a row compared with one of them (a late row, or the
//! source back on the current version's values) must be compared by what it holds under
//! the new set, not by that stale hash: it used to open a duplicate version.
//!
//! Each change kind (Type 1 → Type 2, Type 2 → Type 1, a column added, a column removed)
//! is run with the late row already in the source when the change is accepted, and with
//! the late row arriving after it.

use dimlog::pipeline::{RunOptions, RunReport};

use super::assert_verified;
use crate::support::fixture::{assert_snapshot, on_both_backends, summary, ts, Fixture};

on_both_backends!(
    type1_to_type2_with_a_late_row_pending,
    type1_to_type2_with_a_late_row_after,
    type2_to_type1_with_a_late_row_pending,
    type2_to_type1_with_a_late_row_after,
    adding_a_column_with_a_late_row_pending,
    adding_a_column_with_a_late_row_after,
    removing_a_column_with_a_late_row_pending,
    removing_a_column_with_a_late_row_after,
    late_row_pending_at_a_type1_to_type2_change,
    a_version_carried_over_late_keeps_a_removed_columns_value,
    a_version_carried_over_keeps_the_keys_type1_values,
);

const INSERT: &str = "INSERT INTO src_customers (customer_id, email, tier, country, name, updated_at) VALUES";

/// A change of the column sets, as the config's `columns` and `type1` before and after.
#[derive(Clone, Copy, Debug)]
enum Change {
    Type1ToType2,
    Type2ToType1,
    Add,
    Remove,
}

impl Change {
    fn before(self) -> (&'static str, &'static str) {
        match self {
            Change::Type1ToType2 | Change::Add => (r#"["email", "tier"]"#, r#"["name"]"#),
            Change::Type2ToType1 => (r#"["email", "tier", "name"]"#, "[]"),
            Change::Remove => (r#"["email", "tier", "country"]"#, r#"["name"]"#),
        }
    }

    fn after(self) -> (&'static str, &'static str) {
        match self {
            Change::Type1ToType2 => (r#"["email", "tier", "name"]"#, "[]"),
            Change::Type2ToType1 | Change::Remove => (r#"["email", "tier"]"#, r#"["name"]"#),
            Change::Add => (r#"["email", "tier", "country"]"#, r#"["name"]"#),
        }
    }

    /// A change of customer 2 in the column the change is about, and whether it is a
    /// change of a Type 2 column after the change (a version) or not (none).
    fn column_change(self) -> (&'static str, bool) {
        match self {
            Change::Type1ToType2 => ("name = 'Bobby'", true),
            Change::Type2ToType1 => ("name = 'Bobby'", false),
            Change::Add => ("country = 'FR'", true),
            Change::Remove => ("country = 'FR'", false),
        }
    }
}

/// The fixture with a `name` column, a lookback that rereads 10:00 after 11:00, and the
/// given column sets.
async fn prepare(fx: &mut Fixture, (columns, type1): (&str, &str)) {
    fx.with_type1_name().await;
    fx.set_setting("lookback", "\"2h\"");
    set_columns(fx, (columns, type1));
}

fn set_columns(fx: &mut Fixture, (columns, type1): (&str, &str)) {
    fx.set_setting("columns", columns);
    fx.set_setting("type1", type1);
}

fn upper(text: &str) -> RunOptions {
    RunOptions {
        upper: Some(ts(text)),
        ..RunOptions::incremental()
    }
}

fn accepting(text: &str) -> RunOptions {
    RunOptions {
        accept_config_change: true,
        ..upper(text)
    }
}

/// `(versions, late, corrections, tombstones)`.
fn appended(r: &RunReport) -> (i64, i64, i64, i64) {
    (
        r.counts.versions,
        r.counts.late_versions,
        r.counts.corrections,
        r.counts.tombstones,
    )
}

/// A dry run, then the run itself: the dry run counts what the run does (versions carried
/// over included) and writes nothing.
async fn dry_then_run(fx: &mut Fixture, opts: RunOptions) -> RunReport {
    let log_rows = fx.count("customer_versions").await;
    let dry = fx
        .run_with(RunOptions {
            dry_run: true,
            ..opts.clone()
        })
        .await;
    assert_eq!(
        fx.count("customer_versions").await,
        log_rows,
        "the dry run wrote to the log"
    );
    let r = fx.run_with(opts).await;
    assert_eq!(
        (appended(&dry), dry.rehashed, dry.rehashed_earlier, dry.type1_updates),
        (appended(&r), r.rehashed, r.rehashed_earlier, r.type1_updates),
        "dry run {dry:?}\nrun {r:?}"
    );
    r
}

/// One customer's dimension rows: `tier@HH:MM`, in valid_from order.
async fn tiers(fx: &mut Fixture, customer: &str) -> Vec<String> {
    fx.dimension()
        .await
        .records()
        .into_iter()
        .filter(|r| r["customer_id"].as_deref() == Some(customer))
        .map(|r| {
            let from = r["valid_from"].clone().unwrap_or_default();
            format!(
                "{}@{}",
                r["tier"].clone().unwrap_or_else(|| "NULL".into()),
                from.get(11..16).unwrap_or("?")
            )
        })
        .collect()
}

/// Three customers loaded under the old column sets: 1 and 3 have a second version at
/// 11:00 (`gold`), 2 has one. Customers 1 and 3 have no country: a column added later
/// holds NULL in every version logged before, so their rows stay unchanged under the new
/// set (a value there would be a real change of a version the source never agreed with).
async fn load_before(fx: &mut Fixture) {
    fx.exec(&format!(
        "{INSERT} (1, 'ann@example.com', 'free', NULL, 'Ann', '2026-03-02T09:00:00Z'),
                  (2, 'bob@example.com', 'pro', 'DE', 'Bob', '2026-03-02T09:00:00Z'),
                  (3, 'cyd@example.com', 'free', NULL, 'Cyd', '2026-03-02T09:00:00Z')"
    ))
    .await;
    assert_eq!(appended(&fx.run("2026-03-02T10:00:00Z").await), (3, 0, 0, 0));
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T11:00:00Z' WHERE customer_id IN (1, 3)")
        .await;
    assert_eq!(appended(&fx.run("2026-03-02T11:30:00Z").await), (2, 0, 0, 0));
}

/// The late rows: customer 1 back at 10:00 on the values of its first version (no
/// change under either column set), customer 3 at 10:00 with another tier (a real change).
async fn late_rows(fx: &mut Fixture) {
    fx.exec(
        "UPDATE src_customers SET tier = 'free', updated_at = '2026-03-02T10:00:00Z' WHERE customer_id = 1;
         UPDATE src_customers SET tier = 'silver', updated_at = '2026-03-02T10:00:00Z' WHERE customer_id = 3",
    )
    .await;
}

/// The whole story of one change kind, with the late rows pending at the accepting run
/// (`pending`) or arriving after it.
async fn late_rows_around_a_change(mut fx: Fixture, change: Change, pending: bool) {
    prepare(&mut fx, change.before()).await;
    load_before(&mut fx).await;

    set_columns(&mut fx, change.after());
    if pending {
        late_rows(&mut fx).await;
        let r = dry_then_run(&mut fx, accepting("2026-03-02T11:45:00Z")).await;
        assert_eq!(
            appended(&r),
            (1, 1, 0, 0),
            "{change:?}: only customer 3's late row opens a version: {r:?}"
        );
        assert_eq!(
            (r.rehashed, r.rehashed_earlier),
            (1, 1),
            "{change:?}: customer 2's current version is carried over, and customer 1's first: {r:?}"
        );
    } else {
        let r = fx.run_with(accepting("2026-03-02T11:45:00Z")).await;
        assert_eq!(appended(&r), (0, 0, 0, 0), "{change:?}: {r:?}");
        assert_eq!((r.rehashed, r.rehashed_earlier), (3, 0), "{change:?}: {r:?}");
        late_rows(&mut fx).await;
        let r = dry_then_run(&mut fx, upper("2026-03-02T11:50:00Z")).await;
        assert_eq!(
            appended(&r),
            (1, 1, 0, 0),
            "{change:?}: customer 1's unchanged late row opens no version, customer 3's does: {r:?}"
        );
        assert_eq!(r.rehashed_earlier, 1, "{change:?}: customer 1's first version: {r:?}");
    }
    assert_eq!(tiers(&mut fx, "1").await, ["free@09:00", "gold@11:00"], "{change:?}");
    assert_eq!(
        tiers(&mut fx, "3").await,
        ["free@09:00", "silver@10:00", "gold@11:00"],
        "{change:?}"
    );
    assert_verified(&fx, false).await;

    // The source back on the current versions' values: nothing changed.
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T12:00:00Z' WHERE customer_id IN (1, 3)")
        .await;
    let r = dry_then_run(&mut fx, upper("2026-03-02T12:10:00Z")).await;
    assert_eq!(
        appended(&r),
        (0, 0, 0, 0),
        "{change:?}: a row equal to the current version opens none: {r:?}"
    );
    assert_eq!(
        r.rehashed_earlier,
        if pending { 2 } else { 0 },
        "{change:?}: the current versions not carried over at the change are now: {r:?}"
    );
    assert_eq!(tiers(&mut fx, "1").await, ["free@09:00", "gold@11:00"], "{change:?}");
    assert_verified(&fx, true).await;

    // Real changes still open versions: a tracked column, and the changed column.
    fx.exec("UPDATE src_customers SET tier = 'platinum', updated_at = '2026-03-02T13:00:00Z' WHERE customer_id = 1")
        .await;
    let r = fx.run("2026-03-02T13:10:00Z").await;
    assert_eq!(appended(&r), (1, 0, 0, 0), "{change:?}: {r:?}");
    let (set, versions) = change.column_change();
    fx.exec(&format!(
        "UPDATE src_customers SET {set}, updated_at = '2026-03-02T14:00:00Z' WHERE customer_id = 2"
    ))
    .await;
    let r = fx.run("2026-03-02T14:10:00Z").await;
    assert_eq!(appended(&r), (i64::from(versions), 0, 0, 0), "{change:?}: {set}: {r:?}");
    // A late row that differs from its predecessor under the new set is a late version.
    fx.exec("UPDATE src_customers SET tier = 'bronze', updated_at = '2026-03-02T12:30:00Z' WHERE customer_id = 1")
        .await;
    let r = fx.run("2026-03-02T14:20:00Z").await;
    assert_eq!(appended(&r), (1, 1, 0, 0), "{change:?}: {r:?}");
    fx.exec("UPDATE src_customers SET tier = 'platinum', updated_at = '2026-03-02T13:00:00Z' WHERE customer_id = 1")
        .await;
    let r = fx.run("2026-03-02T14:30:00Z").await;
    assert_eq!(appended(&r), (0, 0, 0, 0), "{change:?}: {r:?}");
    assert_eq!(
        tiers(&mut fx, "1").await,
        ["free@09:00", "gold@11:00", "bronze@12:30", "platinum@13:00"],
        "{change:?}"
    );

    // Rereading everything changes nothing, and the dimension is the log's.
    let r = fx
        .run_with(RunOptions {
            kind: dimlog::state::RunKind::FullRefresh,
            ..upper("2026-03-02T14:40:00Z")
        })
        .await;
    assert_eq!(appended(&r), (0, 0, 0, 0), "{change:?}: {r:?}");
    assert_eq!((r.type1_updates, r.rehashed_earlier), (0, 0), "{change:?}: {r:?}");
    // (The fixture's own derivation reads a Type 1 observation as a row: `verify` checks
    // the dimension against dimlog's.)
    if !matches!(change, Change::Type2ToType1) {
        fx.assert_dimension_derives_from_log().await;
    }
    assert_verified(&fx, true).await;
}

async fn type1_to_type2_with_a_late_row_pending(fx: Fixture) {
    late_rows_around_a_change(fx, Change::Type1ToType2, true).await;
}

async fn type1_to_type2_with_a_late_row_after(fx: Fixture) {
    late_rows_around_a_change(fx, Change::Type1ToType2, false).await;
}

async fn type2_to_type1_with_a_late_row_pending(fx: Fixture) {
    late_rows_around_a_change(fx, Change::Type2ToType1, true).await;
}

async fn type2_to_type1_with_a_late_row_after(fx: Fixture) {
    late_rows_around_a_change(fx, Change::Type2ToType1, false).await;
}

async fn adding_a_column_with_a_late_row_pending(fx: Fixture) {
    late_rows_around_a_change(fx, Change::Add, true).await;
}

async fn adding_a_column_with_a_late_row_after(fx: Fixture) {
    late_rows_around_a_change(fx, Change::Add, false).await;
}

async fn removing_a_column_with_a_late_row_pending(fx: Fixture) {
    late_rows_around_a_change(fx, Change::Remove, true).await;
}

async fn removing_a_column_with_a_late_row_after(fx: Fixture) {
    late_rows_around_a_change(fx, Change::Remove, false).await;
}

/// One snapshot section: the run's counts, then the whole dimension and log.
async fn section(fx: &mut Fixture, title: &str, r: &RunReport) -> String {
    format!(
        "== {title}\n{} rehashed={} rehashed_earlier={}\n\n{}\n{}\n",
        summary(r),
        r.rehashed,
        r.rehashed_earlier,
        fx.dump_dimension().await,
        fx.dump_log().await
    )
}

/// The whole dimension and log of the reported case: `name` moves from Type 1 to Type 2
/// while customer 1's source row is a late row with its first version's values. The
/// accepting run opens no version for it, and the source back on the current version's
/// values opens none either.
async fn late_row_pending_at_a_type1_to_type2_change(mut fx: Fixture) {
    prepare(&mut fx, Change::Type1ToType2.before()).await;
    load_before(&mut fx).await;
    set_columns(&mut fx, Change::Type1ToType2.after());
    late_rows(&mut fx).await;
    let r = fx.run_with(accepting("2026-03-02T11:45:00Z")).await;
    assert_eq!(appended(&r), (1, 1, 0, 0), "{r:?}");
    let mut snap = section(
        &mut fx,
        "name becomes Type 2; customer 1 back on its first version at 10:00",
        &r,
    )
    .await;
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T12:00:00Z' WHERE customer_id IN (1, 3)")
        .await;
    let r = fx.run("2026-03-02T12:10:00Z").await;
    assert_eq!(appended(&r), (0, 0, 0, 0), "{r:?}");
    snap += &section(&mut fx, "customers 1 and 3 back on their current versions", &r).await;
    fx.assert_dimension_derives_from_log().await;
    assert_verified(&fx, true).await;
    assert_snapshot(
        "late_row_pending_at_a_type1_to_type2_change",
        "Type 1 -> Type 2 with a late row pending: no version for unchanged rows",
        &snap,
    );
}

/// One customer's dimension rows: `tier|country@HH:MM`, in valid_from order.
async fn tiers_and_countries(fx: &mut Fixture, customer: &str) -> Vec<String> {
    fx.dimension()
        .await
        .records()
        .into_iter()
        .filter(|r| r["customer_id"].as_deref() == Some(customer))
        .map(|r| {
            let v = |c: &str| r.get(c).cloned().flatten().unwrap_or_else(|| "NULL".into());
            format!(
                "{}|{}@{}",
                v("tier"),
                v("country"),
                v("valid_from").get(11..16).unwrap_or("?")
            )
        })
        .collect()
}

/// A version carried over after `country` was removed keeps the country it logged (the
/// log keeps a removed column's history), so adding `country` back shows it again.
async fn a_version_carried_over_late_keeps_a_removed_columns_value(mut fx: Fixture) {
    fx.set_setting("lookback", "\"2h\"");
    fx.set_setting("columns", r#"["tier", "country"]"#);
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, 'ann@example.com', 'free', 'DE', '2026-03-02T09:00:00Z')",
    )
    .await;
    fx.run("2026-03-02T10:00:00Z").await;
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T11:00:00Z' WHERE customer_id = 1")
        .await;
    fx.run("2026-03-02T11:30:00Z").await;

    fx.set_setting("columns", r#"["tier"]"#);
    let r = fx.run_with(accepting("2026-03-02T11:45:00Z")).await;
    assert_eq!((appended(&r), r.rehashed), ((0, 0, 0, 0), 1), "{r:?}");
    // Late, with the first version's tier and another country (no longer tracked).
    fx.exec(
        "UPDATE src_customers SET tier = 'free', country = 'FR', updated_at = '2026-03-02T10:00:00Z' WHERE customer_id = 1",
    )
    .await;
    let r = fx.run("2026-03-02T11:50:00Z").await;
    assert_eq!((appended(&r), r.rehashed_earlier), ((0, 0, 0, 0), 1), "{r:?}");
    fx.exec(
        "UPDATE src_customers SET tier = 'gold', country = 'DE', updated_at = '2026-03-02T12:00:00Z' WHERE customer_id = 1",
    )
    .await;
    let r = fx.run("2026-03-02T12:10:00Z").await;
    assert_eq!((appended(&r), r.rehashed_earlier), ((0, 0, 0, 0), 0), "{r:?}");
    let countries = fx
        .target_query("SELECT country FROM customer_versions WHERE customer_sk = 1 ORDER BY log_id")
        .await;
    assert_eq!(
        countries,
        [vec![Some("DE".to_string())], vec![Some("DE".to_string())]],
        "the carried-over row keeps the version's logged country"
    );

    fx.set_setting("columns", r#"["tier", "country"]"#);
    let r = fx.run_with(accepting("2026-03-02T12:30:00Z")).await;
    assert_eq!((appended(&r), r.rehashed), ((0, 0, 0, 0), 1), "{r:?}");
    assert_eq!(
        tiers_and_countries(&mut fx, "1").await,
        ["free|DE@09:00", "gold|DE@11:00"]
    );
    assert_verified(&fx, true).await;
}

/// A version carried over at a key's newest instant keeps the key's newest Type 1 value
/// (here an observation logged at that instant, after the version), so the dimension
/// still shows it on every row.
async fn a_version_carried_over_keeps_the_keys_type1_values(mut fx: Fixture) {
    prepare(&mut fx, Change::Add.before()).await;
    load_before(&mut fx).await;
    // A Type 1 correction that did not move updated_at, reread within the lookback: an
    // observation at the current version's instant.
    fx.exec("UPDATE src_customers SET name = 'Ann Lee' WHERE customer_id = 1")
        .await;
    let r = fx.run("2026-03-02T11:40:00Z").await;
    assert_eq!((appended(&r), r.type1_updates), ((0, 0, 0, 0), 1), "{r:?}");

    set_columns(&mut fx, Change::Add.after());
    fx.exec("UPDATE src_customers SET tier = 'free', updated_at = '2026-03-02T10:00:00Z' WHERE customer_id = 1")
        .await;
    let r = fx.run_with(accepting("2026-03-02T11:45:00Z")).await;
    assert_eq!(appended(&r), (0, 0, 0, 0), "{r:?}");
    assert_eq!(
        (r.rehashed, r.rehashed_earlier),
        (2, 1),
        "customers 2 and 3, and 1's first: {r:?}"
    );
    fx.exec("UPDATE src_customers SET tier = 'gold', updated_at = '2026-03-02T12:00:00Z' WHERE customer_id = 1")
        .await;
    let r = fx.run("2026-03-02T12:10:00Z").await;
    assert_eq!(
        (appended(&r), r.rehashed_earlier, r.type1_updates),
        ((0, 0, 0, 0), 1, 0),
        "{r:?}"
    );
    let names: Vec<Option<String>> = fx
        .dimension()
        .await
        .records()
        .into_iter()
        .filter(|r| r["customer_id"].as_deref() == Some("1"))
        .map(|r| r["name"].clone())
        .collect();
    assert_eq!(names, [Some("Ann Lee".to_string()), Some("Ann Lee".to_string())]);
    assert_verified(&fx, true).await;
}
