//! `dimlog history` shows a value of any length: wide cells of the table are cut to a
//! fixed number of characters (never inside a character) and end with an ellipsis, while
//! `--json` carries every value in full (issue 14, item 13: a value longer than 65,535
//! characters made the table panic with exit 101).

use super::{assert_code, json, text};
use crate::support::fixture::{on_both_backends, Fixture};

on_both_backends!(history_cuts_wide_cells_and_json_keeps_them);

/// The widest cell the table shows, ellipsis included (`src/cli/output.rs`).
const MAX_CELL: usize = 64;

/// A value of `chars` characters starting with `tag`, then mixing one-, two-, three- and
/// four-byte characters, so that any cut point falls next to a multi-byte one.
fn wide(tag: &str, chars: usize) -> String {
    tag.chars().chain("aé日𝄞".chars().cycle()).take(chars).collect()
}

async fn history_cuts_wide_cells_and_json_keeps_them(mut fx: Fixture) {
    // Longer than u16::MAX characters (the old panic), one just over the cell width, one
    // exactly at it (not cut).
    let huge = wide("huge", 70_000);
    let over = wide("over", MAX_CELL + 1);
    let exact = wide("exact", MAX_CELL);
    fx.exec(&format!(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (1, '{exact}', '{huge}', '{over}', '2026-03-02T09:00:00Z')"
    ))
    .await;
    fx.run("2026-03-02T10:00:00Z").await;

    let out = fx.cli(&["history", "--key", "1"]);
    assert_code(&out, 0, "history with a 70,000-character value");
    let stdout = text(&out.stdout);
    assert!(!stdout.contains('\u{fffd}'), "a character was cut in half:\n{stdout}");
    let cut = |v: &str| format!("{}…", v.chars().take(MAX_CELL - 1).collect::<String>());
    let row = stdout
        .lines()
        .find(|l| l.starts_with('1'))
        .unwrap_or_else(|| panic!("no row of surrogate key 1:\n{stdout}"));
    assert!(
        row.contains(&cut(&huge)),
        "the huge value is not cut to {MAX_CELL} characters:\n{row}"
    );
    assert!(
        row.contains(&cut(&over)),
        "a value one character too wide is not cut:\n{row}"
    );
    assert!(
        row.contains(&exact) && !row.contains(&cut(&exact)),
        "a value that fits was cut:\n{row}"
    );
    for line in stdout.lines() {
        assert!(
            line.chars().count() < 400,
            "a line of {} characters",
            line.chars().count()
        );
    }
    assert!(
        stdout.contains("--json"),
        "the table should say where the full values are:\n{stdout}"
    );

    let out = fx.cli(&["history", "--key", "1", "--json"]);
    assert_code(&out, 0, "history --json");
    let v = json(&out, "history --json");
    let values = &v["versions"][0]["values"];
    assert_eq!(
        values["tier"].as_str(),
        Some(huge.as_str()),
        "--json must keep the full value"
    );
    assert_eq!(values["country"].as_str(), Some(over.as_str()));
    assert_eq!(values["email"].as_str(), Some(exact.as_str()));
}
