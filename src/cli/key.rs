//! `--key` as `history` and `lookup` take it.

use crate::layout::Layout;
use crate::Error;

/// Whether `text` reads as a column name (a letter or `_`, then letters, digits, `_`).
fn names_a_column(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_') && chars.all(|c| c.is_alphanumeric() || c == '_')
}

/// For a one-column text key that found nothing: when the value reads `column=value`
/// with another column's name, the note that the key column has another name (a text
/// key may hold `a=b`, so it was looked up as given; found by an outside trial).
pub fn unfound_hint(layout: &Layout, args: &[String]) -> Option<String> {
    let ([arg], [key]) = (args, layout.keys.as_slice()) else {
        return None;
    };
    let (k, v) = arg.split_once('=')?;
    (names_a_column(k) && k != key.bare).then(|| {
        format!(
            "no key is {arg:?}; if `{k}` was meant as the key column, the key is `{name}`: --key {name}={v}",
            name = key.bare
        )
    })
}

/// Parses `--key` arguments: `V` (or `COLUMN=V`) for a one-column key, or `COLUMN=VALUE`
/// per column, in any order; returns the values in key order.
pub fn key_values(layout: &Layout, args: &[String]) -> Result<Vec<String>, Error> {
    let names: Vec<&str> = layout.keys.iter().map(|c| c.bare.as_str()).collect();
    // One column: the argument is its value unless it starts with `COLUMN=`, so a value
    // holding `=` needs no escaping unless it starts with the column's own name.
    if let ([arg], [name]) = (args, names.as_slice()) {
        match arg.split_once('=') {
            Some((k, v)) if k == *name => return Ok(vec![v.to_string()]),
            // `other_column=42` on a key that holds no text is a misspelt column, never
            // a value: looked up as one it would find nothing and print the unknown
            // member, silently. (A text key may hold `a=b`.)
            // The fix offered is the value under the right name: such a key holds no
            // `a=b` (found by an outside trial: the old hint's spelling was refused).
            Some((k, v)) if names_a_column(k) && layout.keys[0].kind != crate::db::types::ColumnKind::Text => {
                return Err(Error::Usage(format!(
                    "--key {arg:?}: `{k}` is not the key column (the key is `{name}`); write --key {name}={v}"
                )))
            }
            _ => return Ok(vec![arg.clone()]),
        }
    }
    if let [name] = names.as_slice() {
        return Err(Error::Usage(format!(
            "--key given {} times, but the key has one column (`{name}`): give one value",
            args.len()
        )));
    }
    let mut values: Vec<Option<String>> = vec![None; names.len()];
    for a in args {
        let Some((k, v)) = a.split_once('=') else {
            return Err(Error::Usage(format!(
                "--key {a:?}: write COLUMN=VALUE for each key column ({})",
                names.join(", ")
            )));
        };
        let Some(i) = names.iter().position(|n| *n == k) else {
            return Err(Error::Usage(format!(
                "--key {a:?}: `{k}` is not a key column; the key is ({})",
                names.join(", ")
            )));
        };
        if values[i].is_some() {
            return Err(Error::Usage(format!(
                "--key {a:?}: key column `{k}` is given twice; give each of ({}) once",
                names.join(", ")
            )));
        }
        values[i] = Some(v.to_string());
    }
    values
        .into_iter()
        .zip(&names)
        .map(|(v, n)| v.ok_or_else(|| Error::Usage(format!("--key: no value for key column `{n}`; give {n}=VALUE"))))
        .collect()
}
