//! The history of one key as an SVG timeline (`dimlog history --format svg`).
//!
//! A table of versions answers "what were the values"; a picture answers "when did what
//! change, and where are the holes" at a glance, and can be pasted into a ticket. Each
//! version is one bar on a time axis, from `valid_from` to `valid_to`, labelled with the
//! values that changed from the version before it (all values for the first one); the
//! open version of a live key runs to the right edge; a tombstone is a red cross at the
//! moment the key was deleted. The picture is drawn with `plotters` and derived only from
//! the rows of [`crate::inspect::history`]: no clock, so the same history always gives
//! the same bytes. It never touches a database or a file.

use crate::inspect::HistoryRow;
use crate::ts::{Micros, FAR_FUTURE};
use chrono::{DateTime, Utc};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Fill of a closed version's bar (`#4682b4`); tests count bars by it.
pub const VERSION_FILL: RGBColor = RGBColor(0x46, 0x82, 0xb4);
/// Fill of the current (open) version's bar (`#2e8b57`).
pub const CURRENT_FILL: RGBColor = RGBColor(0x2e, 0x8b, 0x57);
/// Colour of tombstone marks (`#c0392b`).
pub const TOMBSTONE_COLOR: RGBColor = RGBColor(0xc0, 0x39, 0x2b);

/// Width of the picture in pixels.
const WIDTH: u32 = 1000;
/// Height of one row (one version or tombstone).
const ROW_HEIGHT: u32 = 44;
/// Longest label drawn, in characters; longer ones end with `…`.
const MAX_LABEL: usize = 90;

/// Why a timeline could not be drawn.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TimelineError {
    /// There is nothing to draw.
    #[error("the key has no versions")]
    Empty,
    /// A row's timestamp did not parse (a bug: history rows are dimlog's own text).
    #[error("history row has a bad timestamp {text:?}: {reason}")]
    BadTimestamp {
        /// The text.
        text: String,
        /// Why.
        reason: crate::ts::TimestampError,
    },
    /// plotters failed while drawing.
    #[error("drawing the timeline failed: {0}")]
    Draw(String),
}

fn parse(text: &str) -> Result<Micros, TimelineError> {
    Micros::parse(text, None).map_err(|reason| TimelineError::BadTimestamp {
        text: text.to_string(),
        reason,
    })
}

fn show(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("NULL")
}

/// The label of each row: for a version, the values that changed from the previous live
/// version (all values for the first, `back:` after a tombstone); for a tombstone,
/// `deleted`.
pub fn labels(rows: &[HistoryRow]) -> Vec<String> {
    let mut previous: Option<&HistoryRow> = None;
    let mut after_tombstone = false;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        if r.is_deleted {
            out.push("deleted".to_string());
            after_tombstone = true;
            continue;
        }
        let text = match previous {
            None => r
                .values
                .iter()
                .map(|(n, v)| format!("{n}={}", show(v)))
                .collect::<Vec<_>>()
                .join(", "),
            Some(p) => {
                let changes: Vec<String> = r
                    .values
                    .iter()
                    .zip(&p.values)
                    .filter(|((_, new), (_, old))| new != old)
                    .map(|((n, new), (_, old))| format!("{n}: {} → {}", show(old), show(new)))
                    .collect();
                let body = if changes.is_empty() {
                    "no tracked change".to_string()
                } else {
                    changes.join(", ")
                };
                if after_tombstone {
                    format!("back: {body}")
                } else {
                    body
                }
            }
        };
        out.push(truncate(&text));
        previous = Some(r);
        after_tombstone = false;
    }
    out
}

/// A label cut to [`MAX_LABEL`] characters, its control characters written as `\u{…}`
/// ([`crate::inspect::escape`]): XML 1.0 allows most of them in no form, not even as
/// character references, and the SVG must parse whatever the data holds.
fn truncate(s: &str) -> String {
    let s = crate::inspect::escape(s, false);
    if s.chars().count() <= MAX_LABEL {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(MAX_LABEL - 1).collect();
        t.push('…');
        t
    }
}

fn utc(m: Micros) -> DateTime<Utc> {
    m.to_utc()
}

/// Draws the rows of one key (oldest first, as [`crate::inspect::history`] returns them)
/// as an SVG document titled `title`.
pub fn render_svg(title: &str, rows: &[HistoryRow]) -> Result<String, TimelineError> {
    if rows.is_empty() {
        return Err(TimelineError::Empty);
    }
    let starts: Vec<Micros> = rows.iter().map(|r| parse(&r.valid_from)).collect::<Result<_, _>>()?;
    let ends: Vec<Option<Micros>> = rows
        .iter()
        .map(|r| match &r.valid_to {
            Some(t) if !r.is_deleted => parse(t).map(|t| (t != FAR_FUTURE).then_some(t)),
            _ => Ok(None),
        })
        .collect::<Result<_, _>>()?;
    let first = *starts.iter().min().expect("rows is not empty");
    let last = starts
        .iter()
        .chain(ends.iter().flatten())
        .max()
        .copied()
        .unwrap_or(first);
    // Room on the right for the open version and the last labels: a quarter of the span,
    // at least an hour.
    let span = (last.0 - first.0).max(0);
    let pad = (span / 4).max(3_600_000_000);
    let x0 = utc(first.plus(-pad / 6));
    let x1 = utc(last.plus(pad));
    let labels = labels(rows);
    // Row i (oldest first, drawn at the top) is the band [2k, 2k + 2] of an integer axis,
    // k = n - 1 - i, so its label sits on the odd tick 2k + 1.
    let n = rows.len() as i32;
    let height = 110 + ROW_HEIGHT * rows.len() as u32;

    let draw = |e: &dyn std::fmt::Display| TimelineError::Draw(e.to_string());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(crate::inspect::escape(title, false), ("sans-serif", 18))
            .margin(12)
            .margin_right(48)
            .x_label_area_size(36)
            .y_label_area_size(90)
            .build_cartesian_2d(x0..x1, 0..2 * n)
            .map_err(|e| draw(&e))?;
        let row_label = |v: &i32| {
            let k = (v - 1) / 2;
            if v % 2 == 1 && (0..n).contains(&k) {
                match rows[(n - 1 - k) as usize].surrogate_key {
                    Some(sk) => format!("sk {sk}"),
                    None => "tombstone".to_string(),
                }
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .max_light_lines(1)
            .set_tick_mark_size(LabelAreaPosition::Left, 0)
            .y_labels(2 * rows.len() + 1)
            .y_label_formatter(&row_label)
            .x_labels(6)
            .x_label_formatter(&|t: &DateTime<Utc>| t.format("%Y-%m-%d %H:%M").to_string())
            .x_desc("valid_from → valid_to (UTC)")
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(|e| draw(&e))?;

        let right = utc(last.plus(pad));
        let mid = first.0 + (last.0 + pad - first.0) / 2;
        for (i, r) in rows.iter().enumerate() {
            let k = n - 1 - i as i32;
            let start = starts[i];
            if r.is_deleted {
                chart
                    .draw_series(std::iter::once(Cross::new(
                        (utc(start), 2 * k + 1),
                        7,
                        TOMBSTONE_COLOR.stroke_width(3),
                    )))
                    .map_err(|e| draw(&e))?;
                // The label goes right of the cross, or left of it in the right half.
                let (anchor, dx) = if start.0 <= mid {
                    (HPos::Left, 12)
                } else {
                    (HPos::Right, -12)
                };
                let style = TextStyle::from(("sans-serif", 13).into_font())
                    .color(&TOMBSTONE_COLOR)
                    .pos(Pos::new(anchor, VPos::Center));
                let mark = EmptyElement::at((utc(start), 2 * k + 1))
                    + Text::new(format!("deleted at {}", r.valid_from), (dx, 0), style);
                chart.draw_series(std::iter::once(mark)).map_err(|e| draw(&e))?;
                continue;
            }
            let (end, fill) = match ends[i] {
                Some(e) => (utc(e), VERSION_FILL),
                None if r.is_current => (right, CURRENT_FILL),
                None => (right, VERSION_FILL),
            };
            let mut bar = Rectangle::new([(utc(start), 2 * k), (end, 2 * k + 2)], fill.filled());
            bar.set_margin(6, 20, 0, 0);
            chart.draw_series(std::iter::once(bar)).map_err(|e| draw(&e))?;
            let label = if r.is_current {
                format!("{} (current)", labels[i])
            } else {
                labels[i].clone()
            };
            // Labels sit under the bar, starting where it starts, or ending where it ends
            // when it starts in the right half (so they stay on the picture).
            let (at, anchor) = if start.0 <= mid {
                (utc(start), HPos::Left)
            } else {
                (end, HPos::Right)
            };
            let style = TextStyle::from(("sans-serif", 12).into_font())
                .color(&BLACK)
                .pos(Pos::new(anchor, VPos::Bottom));
            let text = EmptyElement::at((at, 2 * k)) + Text::new(label, (0, -2), style);
            chart.draw_series(std::iter::once(text)).map_err(|e| draw(&e))?;
        }
        root.present().map_err(|e| draw(&e))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(sk: Option<i64>, tier: &str, from: &str, to: Option<&str>) -> HistoryRow {
        HistoryRow {
            surrogate_key: sk,
            values: vec![
                ("email".into(), Some("a@x".into())),
                ("tier".into(), (!tier.is_empty()).then(|| tier.to_string())),
            ],
            kinds: vec![crate::db::types::ColumnKind::Text; 2],
            valid_from: from.into(),
            valid_to: to.map(String::from),
            is_current: to == Some("9999-12-31T00:00:00.000000Z"),
            is_deleted: sk.is_none(),
            load_id: 1,
        }
    }

    fn sample() -> Vec<HistoryRow> {
        vec![
            row(Some(1), "silver", "2026-10-01T00:00:00Z", Some("2026-10-02T00:00:00Z")),
            row(Some(4), "", "2026-10-02T00:00:00Z", Some("2026-10-03T00:00:00Z")),
            row(None, "", "2026-10-03T00:00:00Z", None),
            row(
                Some(7),
                "gold",
                "2026-10-04T00:00:00Z",
                Some("9999-12-31T00:00:00.000000Z"),
            ),
        ]
    }

    #[test]
    fn labels_show_what_changed() {
        assert_eq!(
            labels(&sample()),
            [
                "email=a@x, tier=silver",
                "tier: silver → NULL",
                "deleted",
                "back: tier: NULL → gold"
            ]
        );
    }

    #[test]
    fn one_bar_per_version_and_deterministic() {
        let svg = render_svg("customer 1", &sample()).unwrap();
        assert_eq!(svg, render_svg("customer 1", &sample()).unwrap());
        let bars = svg.matches("fill=\"#4682B4\"").count() + svg.matches("fill=\"#2E8B57\"").count();
        assert_eq!(bars, 3, "{svg}");
        assert!(svg.contains("deleted at"));
    }

    #[test]
    fn empty_history_is_an_error() {
        assert!(matches!(render_svg("x", &[]), Err(TimelineError::Empty)));
    }
}
