//! Printing: one JSON object on stdout with `--json`, human text otherwise; progress
//! only on a terminal.

use crate::pipeline::Observer;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::io::{IsTerminal, Write};

/// Prints `prefix: text` on stderr, its control characters escaped ([`escape`]; line
/// breaks kept): warnings, notes and errors often name values from the data.
pub fn eprint_line(prefix: &str, text: &str) {
    eprint_text(&format!("{prefix}: {}", escape(text, true)));
}

/// Prints `text` and a line break on stderr. A failed write (a closed pipe, as with
/// `dimlog … 2>&1 | head -c 10`) is ignored: the command keeps its own exit code,
/// where `eprintln!` would panic.
pub fn eprint_text(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

pub use crate::inspect::escape;

/// Where a command's results go.
pub struct Output {
    /// `--json` was given.
    pub json: bool,
    /// `-q` was given: only errors are printed (and the JSON object, if asked for).
    pub quiet: bool,
}

impl Output {
    /// Human or JSON output.
    pub fn new(json: bool) -> Output {
        Output { json, quiet: false }
    }

    /// Output that prints only errors when `quiet` (`-q`).
    pub fn quiet(mut self, quiet: bool) -> Output {
        self.quiet = quiet;
        self
    }

    /// A warning or note on stderr (`prefix: text`), unless `-q`.
    pub fn note(&self, prefix: &str, text: &str) {
        if !self.quiet {
            eprint_line(prefix, text);
        }
    }

    /// Prints a JSON value on stdout, as one line.
    pub fn print_json<T: Serialize>(&self, value: &T) {
        let text = serde_json::to_string(value)
            .unwrap_or_else(|e| format!("{{\"error\":{{\"kind\":\"internal\",\"message\":\"{e}\"}}}}"));
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{text}");
    }

    /// Prints human text on stdout (ignored with `--json`), its control characters
    /// escaped ([`escape`]; line breaks kept).
    pub fn line(&self, text: impl AsRef<str>) {
        if !self.json && !self.quiet {
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{}", escape(text.as_ref(), true));
        }
    }

    /// Reports an error: JSON on stdout with `--json`, else `error: …` on stderr.
    pub fn error(&self, e: &crate::Error) {
        let hint = super::error::hint(e);
        if self.json {
            let mut error = serde_json::json!({"kind": e.kind(), "message": e.to_string()});
            if let Some(h) = &hint {
                error["hint"] = h.as_str().into();
            }
            if let Some(step) = e.failed_step() {
                error["step"] = step.into();
            }
            self.print_json(&serde_json::json!({ "error": error }));
        } else {
            if let Some(step) = e.failed_step() {
                tracing::info!("the statement that failed: {step}");
            }
            eprint_line("error", &e.to_string());
            if let Some(h) = hint {
                eprint_line("hint", &h);
            }
        }
    }

    /// A progress observer: a spinner with rows and rate on a terminal, nothing otherwise.
    pub fn progress(&self) -> Progress {
        let bar = (!self.json && !self.quiet && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::new_spinner();
            b.set_style(step_style(false));
            // Until the first step: connecting, perhaps waiting for another run's lock
            // (whose holder is logged above the line).
            b.set_message("starting (connecting, taking the lock)");
            b.enable_steady_tick(std::time::Duration::from_millis(120));
            b
        });
        Progress {
            bar,
            current: std::sync::Mutex::new(None),
            rows: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

/// The progress line: while reading, rows and the rate they arrive at (whole rows a
/// second: indicatif's own `per_sec` prints four decimals); in the steps after it, the
/// rows read so far without a rate, which would only fall while no row arrives.
fn step_style(reading: bool) -> ProgressStyle {
    let template = if reading {
        "{spinner} {msg} {pos} rows ({rate}, {elapsed})"
    } else {
        "{spinner} {msg} ({pos} rows read, {elapsed})"
    };
    ProgressStyle::with_template(template)
        .expect("valid template")
        .with_key("rate", |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{:.0} rows/s", s.per_sec());
        })
}

/// Progress for long work; finished when dropped. On a terminal, a spinner names the
/// step with rows and rows/s; elsewhere each step, once done, is one log line (shown
/// with `-v`) with its duration and the rows read during it.
pub struct Progress {
    bar: Option<ProgressBar>,
    /// The step under way: its name, when it started, and the rows read before it.
    current: std::sync::Mutex<Option<(String, std::time::Instant, u64)>>,
    /// Rows read so far.
    rows: std::sync::atomic::AtomicU64,
}

impl Progress {
    /// Logs the step under way as done (off a terminal), and starts `next`.
    fn step_done(&self, next: Option<&str>) {
        let rows = self.rows.load(std::sync::atomic::Ordering::Relaxed);
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let (Some((name, started, rows_before)), None) = (current.take(), &self.bar) {
            let seconds = started.elapsed().as_secs_f64();
            let read = rows - rows_before;
            if read > 0 {
                let rate = read as f64 / seconds.max(1e-6);
                tracing::info!("{name}: {seconds:.2} s, {read} rows ({rate:.0} rows/s)");
            } else {
                tracing::info!("{name}: {seconds:.2} s");
            }
        }
        *current = next.map(|n| (n.to_string(), std::time::Instant::now(), rows));
    }
}

impl Observer for Progress {
    fn phase(&self, name: &str) {
        if let Some(b) = &self.bar {
            b.set_style(step_style(name.starts_with("reading")));
            b.set_message(name.to_string());
        }
        self.step_done(Some(name));
    }
    fn rows_read(&self, total: u64) {
        self.rows.store(total, std::sync::atomic::Ordering::Relaxed);
        if let Some(b) = &self.bar {
            b.set_position(total);
        }
    }
    fn stopped(&self) {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let (Some((name, started, _)), None) = (current.take(), &self.bar) {
            tracing::info!("{name}: stopped after {:.2} s", started.elapsed().as_secs_f64());
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.step_done(None);
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// The widest cell [`table`] shows, in characters, ellipsis included: a wider value is
/// cut (`--json` carries it in full), so one huge value neither floods the terminal nor
/// breaks the layout.
pub const MAX_CELL: usize = 64;

/// `text` cut to at most [`MAX_CELL`] characters, on a character boundary, ending with
/// `…` when something was cut.
pub fn cell(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(MAX_CELL) {
        None => std::borrow::Cow::Borrowed(text),
        Some(_) => {
            let end = text.char_indices().nth(MAX_CELL - 1).map_or(text.len(), |(i, _)| i);
            std::borrow::Cow::Owned(format!("{}…", &text[..end]))
        }
    }
}

/// True when [`table`] would cut some cell of `rows`.
pub fn any_cut(rows: &[Vec<String>]) -> bool {
    rows.iter()
        .flatten()
        .any(|c| escape(c, false).chars().nth(MAX_CELL).is_some())
}

/// Renders rows as an aligned text table; control characters in cells (line breaks too)
/// are escaped ([`escape`]), and cells wider than [`MAX_CELL`] characters are cut (see
/// [`cell`]).
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| cell(&escape(c, false)).into_owned()).collect())
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    // Padded by hand: a format width is limited to u16::MAX.
    let fmt_row = |cells: Vec<&str>| -> String {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = widths.get(i).map_or(0, |w| w.saturating_sub(c.chars().count()));
                format!("{c}{}", " ".repeat(pad))
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = vec![fmt_row(headers.to_vec())];
    out.push(widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("  "));
    for r in &rows {
        out.push(fmt_row(r.iter().map(|c| c.as_ref()).collect()));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::is_unsafe;

    #[test]
    fn cells_are_cut_on_character_boundaries() {
        for unit in ["a", "é", "日", "𝄞"] {
            let fits = unit.repeat(MAX_CELL);
            assert_eq!(cell(&fits), fits.as_str());
            let wide = unit.repeat(MAX_CELL + 1);
            assert_eq!(cell(&wide), format!("{}…", unit.repeat(MAX_CELL - 1)));
            assert_eq!(cell(&wide).chars().count(), MAX_CELL);
        }
        assert_eq!(cell(""), "");
        let huge = "é".repeat(70_000);
        let t = table(&["a", "b"], &[vec![huge.clone(), "x".into()]]);
        assert!(t.lines().all(|l| l.chars().count() <= MAX_CELL + 3), "{t}");
        assert!(any_cut(&[vec![huge]]));
        assert!(!any_cut(&[vec!["x".repeat(MAX_CELL)]]));
    }

    #[test]
    fn unsafe_characters_are_escaped() {
        let mut all: Vec<char> = (0u32..0x20)
            .chain([0x7f])
            .chain(0x80..0xa0)
            .filter_map(char::from_u32)
            .collect();
        all.extend(['\u{061c}', '\u{200e}', '\u{200f}']);
        all.extend(('\u{202a}'..='\u{202e}').chain('\u{2066}'..='\u{2069}'));
        for c in all {
            let text = format!("a{c}b");
            let shown = escape(&text, false);
            assert_eq!(shown, format!("a\\u{{{:x}}}b", c as u32));
            assert!(!shown.chars().any(is_unsafe));
            if c == '\n' {
                assert_eq!(escape(&text, true), text);
            }
        }
        for fine in ["", "plain", "日本 é 𝄞", "tab-free", "\\u{1b} as typed"] {
            assert_eq!(escape(fine, false), fine);
        }
    }

    #[test]
    fn columns_stay_aligned() {
        let t = table(
            &["sk", "tier"],
            &[vec!["1".into(), "日本".into()], vec!["10".into(), "x".into()]],
        );
        assert_eq!(t, "sk  tier\n--  ----\n1   日本\n10  x");
    }
}
