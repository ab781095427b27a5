//! `dimlog history --format svg`: valid XML, one bar per version, a mark per tombstone; the
//! same picture on both backends (it is derived from the rows alone).

use super::{assert_code, dimlog, json, text};
use crate::support::fixture::{assert_snapshot, on_both_backends, Fixture};
use dimlog::timeline::{CURRENT_FILL, VERSION_FILL};

on_both_backends!(svg_timeline_has_one_bar_per_version);

fn hex(c: plotters::style::RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

fn run(fx: &Fixture, upper: &str) {
    let config = fx.config_path();
    let out = dimlog(
        fx.dir(),
        &["--config", config.to_str().unwrap(), "run", "--upper", upper],
    );
    assert_code(&out, 0, "run");
}

async fn svg_timeline_has_one_bar_per_version(mut fx: Fixture) {
    fx.exec(
        "INSERT INTO src_customers (customer_id, email, tier, country, updated_at) VALUES
             (7, 'cy@example.com', 'pro', 'DE', '2026-09-30T12:00:00Z')",
    )
    .await;
    run(&fx, "2026-10-01T00:00:00Z");
    fx.exec("UPDATE src_customers SET tier = 'basic', updated_at = '2026-10-01T08:00:00Z' WHERE customer_id = 7")
        .await;
    run(&fx, "2026-10-02T00:00:00Z");
    fx.exec("UPDATE src_customers SET is_deleted = true, updated_at = '2026-10-02T08:00:00Z' WHERE customer_id = 7")
        .await;
    run(&fx, "2026-10-03T00:00:00Z");
    fx.exec(
        "UPDATE src_customers SET is_deleted = false, country = NULL, updated_at = '2026-10-03T09:00:00Z' WHERE customer_id = 7",
    )
    .await;
    run(&fx, "2026-10-04T00:00:00Z");

    let config = fx.config_path();
    let config = config.to_str().unwrap();
    let out = dimlog(
        fx.dir(),
        &[
            "--config", config, "--json", "history", "--key", "7", "--format", "svg", "--out", "c7.svg",
        ],
    );
    assert_code(&out, 0, "history --format svg");
    let report = json(&out, "history svg --json");
    assert_eq!(report["versions"], 3, "{report}");
    assert_eq!(report["tombstones"], 1, "{report}");

    let svg = std::fs::read_to_string(fx.dir().join("c7.svg")).expect("the svg file");
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("not XML: {e}\n{svg}"));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let fills = [hex(VERSION_FILL), hex(CURRENT_FILL)];
    let bars: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("fill").is_some_and(|f| fills.iter().any(|c| c == f)))
        .collect();
    assert_eq!(bars.len(), 3, "one bar per version");
    let current: Vec<_> = bars
        .iter()
        .filter(|b| b.attribute("fill") == Some(hex(CURRENT_FILL).as_str()))
        .collect();
    assert_eq!(current.len(), 1, "one current version");
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or_default().trim().to_string())
        .collect();
    for label in [
        "email=cy@example.com, tier=pro, country=DE",
        "tier: pro → basic",
        "deleted at 2026-10-02T08:00:00.000000Z",
        "back: country: DE → NULL (current)",
        "sk 1",
        "tombstone",
    ] {
        assert!(texts.iter().any(|t| t == label), "no label {label:?} in {texts:?}");
    }
    assert_snapshot(
        "svg__timeline",
        "history --key 7 --format svg (same on both backends)",
        &svg,
    );

    // To stdout without --out; an unknown key writes nothing and exits 1.
    let out = dimlog(
        fx.dir(),
        &["--config", config, "history", "--key", "7", "--format", "svg"],
    );
    assert_code(&out, 0, "history --format svg to stdout");
    assert_eq!(text(&out.stdout), svg);
    let out = dimlog(
        fx.dir(),
        &[
            "--config", config, "history", "--key", "99", "--format", "svg", "--out", "none.svg",
        ],
    );
    assert_code(&out, 1, "history --format svg of an unknown key");
    assert!(!fx.dir().join("none.svg").exists());
}
