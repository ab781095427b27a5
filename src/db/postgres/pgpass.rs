//! The password file libpq reads (`PGPASSFILE`, else `~/.pgpass`), read as libpq reads it.
//!
//! The driver reads the file too, but returns the password field with its escapes
//! (`\:` and `\\`) left in, so a password holding `:` or `\` never matched. This reads
//! every field, the password included, with libpq's unescaping.

use std::path::PathBuf;

/// The password for a connection, from the password file, when the URL and `PGPASSWORD`
/// give none. A file that others may read is ignored, as libpq ignores it.
pub fn lookup(host: &str, port: u16, database: &str, user: &str) -> Option<String> {
    let path = std::env::var_os("PGPASSFILE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pgpass")))?;
    {
        use std::os::unix::fs::PermissionsExt as _;
        let meta = std::fs::metadata(&path).ok()?;
        if !meta.is_file() || meta.permissions().mode() & 0o077 != 0 {
            return None;
        }
    }
    let text = std::fs::read_to_string(&path).ok()?;
    find(&text, host, port, database, user)
}

/// The password of the first line whose host, port, database and user match (`*` matches
/// anything), as libpq picks it.
pub fn find(text: &str, host: &str, port: u16, database: &str, user: &str) -> Option<String> {
    let port = port.to_string();
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .find_map(|line| {
            let fields = split(line.trim_end_matches('\r'));
            let [h, p, d, u, password] = <[String; 5]>::try_from(fields).ok()?;
            let matches = |field: &str, value: &str| field == "*" || field == value;
            (matches(&h, host) && matches(&p, &port) && matches(&d, database) && matches(&u, user)).then_some(password)
        })
}

/// A line's fields: split on `:` not preceded by `\`, with `\x` read as `x`. The fifth
/// field runs to the end of the line (a password may hold unescaped colons).
fn split(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    fields.last_mut().expect("a field").push(next);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            _ => fields.last_mut().expect("a field").push(c),
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::find;

    #[test]
    fn escaped_colons_and_backslashes_are_read_in_every_field() {
        let text = "# comment\n\
                    otherhost:5432:*:etl:wrong\n\
                    db\\:1:5432:crm:etl:p\\:w\\\\d:x\n\
                    *:*:*:*:fallback\n";
        assert_eq!(find(text, "db:1", 5432, "crm", "etl").as_deref(), Some("p:w\\d:x"));
        assert_eq!(find(text, "db:1", 5433, "crm", "etl").as_deref(), Some("fallback"));
        assert_eq!(find("h:1:d:u\n", "h", 1, "d", "u"), None, "four fields are no entry");
        assert_eq!(find("h:1:d:u:\n", "h", 1, "d", "u").as_deref(), Some(""));
    }
}
