//! Secrets in database URLs: found in every form a libpq or sqlx URL can carry them, and
//! kept out of everything dimlog prints, logs or writes.
//!
//! A URL carries a secret in its userinfo password (`postgres://user:pw@host/db`, maybe
//! percent-encoded), in a query parameter whose name says so (`password=`, in any case or
//! with a percent-encoded name, `sslpassword=`, anything naming a password, secret or
//! token), or as an inline client key (`sslkey=-----BEGIN …`); a libpq key/value string
//! (`host=h password=pw`) carries it as a `password=` pair. [`redact`] replaces each with
//! `***` in any text; [`strip`] leaves them out of a URL that is written to a file;
//! [`secrets`] lists the values, so a driver message that echoes one can be
//! [`scrub`]bed; [`for_driver`] hands the driver a URL it reads without logging a secret.

use std::borrow::Cow;

/// What a secret is replaced with.
pub const MASK: &str = "***";

/// Shorter values are not searched for in messages (a one-letter password would turn
/// every such letter into `***`); they are still redacted wherever they stand in a URL.
const MIN_SCRUBBED: usize = 4;

/// True when a parameter of this name (percent-decoded, any case) holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let n = decode(name).to_ascii_lowercase();
    ["password", "passwd", "secret", "token"].iter().any(|s| n.contains(s))
}

/// True when the parameter `name=value` holds a secret: a secret name, or a client key
/// given inline rather than as a file path.
fn is_secret_param(name: &str, value: &str) -> bool {
    if is_secret_name(name) {
        return true;
    }
    let n = decode(name).to_ascii_lowercase();
    (n == "sslkey" || n == "ssl-key" || n == "ssl_key") && decode(value).contains("-----BEGIN")
}

fn decode(s: &str) -> Cow<'_, str> {
    if !s.contains('%') && !s.contains('+') {
        return Cow::Borrowed(s);
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => match (bytes.get(i + 1), bytes.get(i + 2)) {
                (Some(a), Some(b)) if a.is_ascii_hexdigit() && b.is_ascii_hexdigit() => {
                    let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                    out.push(hex(*a) * 16 + hex(*b));
                    i += 3;
                }
                _ => {
                    out.push(b'%');
                    i += 1;
                }
            },
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

/// The span `(start, end)` of the userinfo password of each `scheme://user:pw@host` in
/// `text`: the authority runs to the first `/`, `?`, `#` or white space, and the
/// userinfo to its last `@`, as URL parsers read it.
fn userinfo_passwords(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("://") {
        let start = from + at + 3;
        let end = text[start..]
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace() || c == '"' || c == '`')
            .map_or(text.len(), |e| start + e);
        let authority = &text[start..end];
        if let Some(amp) = authority.rfind('@') {
            if let Some(colon) = authority[..amp].find(':') {
                if colon + 1 < amp {
                    spans.push((start + colon + 1, start + amp));
                }
            }
        }
        from = end.max(start);
    }
    spans
}

/// The span of the value of each secret `name=value` pair in `text` (URL query
/// parameters and libpq key/value pairs, `password = 'x y'` quoted too).
fn secret_values(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let is_name = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'%' | b'[' | b']' | b'.');
    let mut spans = Vec::new();
    for (eq, _) in text.match_indices('=') {
        // The name: the run of name characters before the `=` (spaces between allowed).
        let mut name_end = eq;
        while name_end > 0 && bytes[name_end - 1] == b' ' {
            name_end -= 1;
        }
        let mut name_start = name_end;
        while name_start > 0 && is_name(bytes[name_start - 1]) {
            name_start -= 1;
        }
        if name_start == name_end {
            continue;
        }
        let mut start = eq + 1;
        while start < bytes.len() && bytes[start] == b' ' {
            start += 1;
        }
        let end = if bytes.get(start) == Some(&b'\'') {
            // A quoted libpq value: up to the closing quote (\' escapes one).
            let mut i = start + 1;
            while i < bytes.len() && bytes[i] != b'\'' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            (i + 1).min(bytes.len())
        } else {
            text[start..]
                .find(|c: char| matches!(c, '&' | '#' | '"' | '`') || c.is_whitespace())
                .map_or(text.len(), |e| start + e)
        };
        if end > start && is_secret_param(&text[name_start..name_end], &text[start..end]) {
            spans.push((start, end));
        }
    }
    spans
}

/// `text` with every secret of every URL or key/value string in it replaced by `***`.
pub fn redact(text: &str) -> String {
    let mut spans = userinfo_passwords(text);
    spans.extend(secret_values(text));
    if spans.is_empty() {
        return text.to_string();
    }
    spans.sort();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in spans {
        if start < at {
            at = at.max(end);
            continue;
        }
        out.push_str(&text[at..start]);
        out.push_str(MASK);
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

/// The secret values `url` carries, as written and percent-decoded, for [`scrub`].
pub fn secrets(url: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (start, end) in userinfo_passwords(url).into_iter().chain(secret_values(url)) {
        let raw = url[start..end].trim_matches('\'');
        for v in [raw.to_string(), decode(raw).into_owned()] {
            if v.chars().count() >= MIN_SCRUBBED && !out.contains(&v) {
                out.push(v);
            }
        }
    }
    // Longest first, so a secret that contains another is replaced whole.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out
}

/// `text` (a driver's message) with each of `secrets` replaced by `***`, then
/// [`redact`]ed.
pub fn scrub(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), MASK);
        }
    }
    redact(&out)
}

/// `url` without its secrets, for a file: no userinfo password, no secret parameter (the
/// others stay as they were written); and whether something was left out.
pub fn strip(url: &str) -> (String, bool) {
    let mut out = url.to_string();
    let mut stripped = false;
    if let Some((start, end)) = userinfo_passwords(url).into_iter().next() {
        // `user:pw@` becomes `user@`.
        out = format!("{}{}", &url[..start - 1], &url[end..]);
        stripped = true;
    }
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q);
        let (query, fragment) = match query[1..].split_once('#') {
            Some((q, f)) => (q.to_string(), format!("#{f}")),
            None => (query[1..].to_string(), String::new()),
        };
        let kept: Vec<&str> = query
            .split('&')
            .filter(|pair| {
                let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
                let secret = is_secret_param(name, value);
                stripped |= secret;
                !secret && !pair.is_empty()
            })
            .collect();
        out = if kept.is_empty() {
            format!("{head}{fragment}")
        } else {
            format!("{head}?{}{fragment}", kept.join("&"))
        };
    }
    (out, stripped)
}

/// The URL as the PostgreSQL driver should get it: a `password` parameter named in
/// another case (`PASSWORD=`, `Password=`) is passed as `password`, and any other secret
/// parameter the driver does not read (`sslpassword`, …) is left out, because the driver
/// logs an unknown parameter together with its value. Returns the names left out.
pub fn for_driver(url: &str) -> (String, Vec<String>) {
    let mut dropped = Vec::new();
    let url = map_query_pairs(url, |pair| {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let decoded = decode(name);
        if decoded == "password" {
            Some(pair.to_string())
        } else if decoded.eq_ignore_ascii_case("password") {
            Some(format!("password={value}"))
        } else if is_secret_name(name) {
            dropped.push(decoded.into_owned());
            None
        } else {
            Some(pair.to_string())
        }
    });
    (url, dropped)
}

/// The URL with each `name=value` pair of its query replaced by what `keep` returns for
/// it (`None` leaves it out), the fragment kept; no `?` when no pair is left.
pub fn map_query_pairs(url: &str, mut keep: impl FnMut(&str) -> Option<String>) -> String {
    let Some(q) = url.find('?') else {
        return url.to_string();
    };
    let (head, query) = url.split_at(q);
    let (query, fragment) = match query[1..].split_once('#') {
        Some((q, f)) => (q, format!("#{f}")),
        None => (&query[1..], String::new()),
    };
    let pairs: Vec<String> = query.split('&').filter_map(&mut keep).collect();
    if pairs.is_empty() {
        format!("{head}{fragment}")
    } else {
        format!("{head}?{}{fragment}", pairs.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORMS: &[&str] = &[
        "postgres://me:pw1234@host:5432/db",
        "postgres://me:p%40w1234@host/db",
        "postgres://me:p@w1234@host/db",
        "postgres://host/db?user=me&password=pw1234",
        "postgres://host/db?PASSWORD=pw1234&sslmode=disable",
        "postgres://host/db?sslmode=disable&Password=pw1234#frag",
        "postgres://host/db?pass%77ord=pw1234",
        "postgresql://host/db?sslpassword=pw1234",
        "postgres://host/db?sslkey=-----BEGIN%20KEY-----pw1234-----END%20KEY-----",
        "host=h user=me password=pw1234 dbname=db",
        "host=h password = 'pw 1234' dbname=db",
        "cannot connect to postgres://me:pw1234@host/db: refused",
    ];

    #[test]
    fn every_form_is_redacted() {
        for f in FORMS {
            let r = redact(f);
            assert!(!r.contains("pw1234") && !r.contains("1234"), "{f} -> {r}");
            assert!(r.contains(MASK), "{f} -> {r}");
        }
        assert_eq!(
            redact("postgres://me:pw@host/db?sslmode=disable"),
            "postgres://me:***@host/db?sslmode=disable"
        );
        assert_eq!(
            redact("postgres://me@host/db?a=1&password=x&b=2"),
            "postgres://me@host/db?a=1&password=***&b=2"
        );
        assert_eq!(redact("sqlite:///tmp/a.db"), "sqlite:///tmp/a.db");
        assert_eq!(
            redact("postgres://h/db?passfile=/x&sslkey=/k.pem"),
            "postgres://h/db?passfile=/x&sslkey=/k.pem"
        );
    }

    #[test]
    fn every_form_is_stripped() {
        for f in FORMS.iter().filter(|f| f.contains("://") && !f.starts_with("cannot")) {
            let (s, stripped) = strip(f);
            assert!(stripped && !s.contains("1234"), "{f} -> {s}");
        }
        assert_eq!(
            strip("postgres://me:pw@h/db?sslmode=disable&password=x").0,
            "postgres://me@h/db?sslmode=disable"
        );
        assert_eq!(strip("postgres://h/db?password=x").0, "postgres://h/db");
        assert_eq!(strip("postgres://me@h/db"), ("postgres://me@h/db".to_string(), false));
    }

    #[test]
    fn secrets_are_listed_decoded_and_scrubbed() {
        let s = secrets("postgres://me:p%40w1234@host/db?sslpassword=other99");
        assert!(
            s.contains(&"p@w1234".to_string())
                && s.contains(&"p%40w1234".to_string())
                && s.contains(&"other99".to_string()),
            "{s:?}"
        );
        assert_eq!(scrub("bad key p@w1234 and other99", &s), "bad key *** and ***");
        assert!(secrets("postgres://me:pw@h/db").is_empty(), "too short to search for");
    }

    #[test]
    fn the_driver_gets_password_in_its_spelling_and_no_other_secret() {
        assert_eq!(
            for_driver("postgres://h/db?PASSWORD=x&sslmode=disable"),
            ("postgres://h/db?password=x&sslmode=disable".into(), vec![])
        );
        assert_eq!(
            for_driver("postgres://h/db?sslpassword=x"),
            ("postgres://h/db".into(), vec!["sslpassword".to_string()])
        );
        assert_eq!(
            for_driver("postgres://h/db?pass%77ord=x").0,
            "postgres://h/db?pass%77ord=x"
        );
        assert_eq!(for_driver("postgres://me:pw@h/db").0, "postgres://me:pw@h/db");
    }
}
