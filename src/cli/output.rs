//! Printing: one JSON object on stdout with `--json`, human text otherwise; progress
//! only on a terminal.

use crate::pipeline::Observer;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::io::{IsTerminal, Write};

/// Where a command's results go.
pub struct Output {
    /// `--json` was given.
    pub json: bool,
}

impl Output {
    /// Human or JSON output.
    pub fn new(json: bool) -> Output {
        Output { json }
    }

    /// Prints a JSON value on stdout, as one line.
    pub fn print_json<T: Serialize>(&self, value: &T) {
        let text = serde_json::to_string(value)
            .unwrap_or_else(|e| format!("{{\"error\":{{\"kind\":\"internal\",\"message\":\"{e}\"}}}}"));
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{text}");
    }

    /// Prints human text on stdout (ignored with `--json`).
    pub fn line(&self, text: impl AsRef<str>) {
        if !self.json {
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{}", text.as_ref());
        }
    }

    /// Reports an error: JSON on stdout with `--json`, else `error: …` on stderr.
    pub fn error(&self, e: &crate::Error) {
        if self.json {
            self.print_json(&serde_json::json!({"error": {"kind": e.kind(), "message": e.to_string()}}));
        } else {
            eprintln!("error: {e}");
        }
    }

    /// A progress observer: a spinner with rows and rate on a terminal, nothing otherwise.
    pub fn progress(&self) -> Progress {
        let bar = (!self.json && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::new_spinner();
            b.set_style(
                ProgressStyle::with_template("{spinner} {msg} {pos} rows ({per_sec}, {elapsed})")
                    .expect("valid template"),
            );
            b.enable_steady_tick(std::time::Duration::from_millis(120));
            b
        });
        Progress { bar }
    }
}

/// Progress for long work; finished when dropped.
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Observer for Progress {
    fn phase(&self, name: &str) {
        if let Some(b) = &self.bar {
            b.set_message(name.to_string());
        }
        tracing::debug!("{name}");
    }
    fn rows_read(&self, total: u64) {
        if let Some(b) = &self.bar {
            b.set_position(total);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// Renders rows as an aligned text table.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    let fmt_row = |cells: Vec<&str>| -> String {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = vec![fmt_row(headers.to_vec())];
    out.push(widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("  "));
    for r in rows {
        out.push(fmt_row(r.iter().map(String::as_str).collect()));
    }
    out.join("\n")
}
