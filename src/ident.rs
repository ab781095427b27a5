//! Identifiers from config: validated once, always quoted.
//!
//! Table and column names come from the user's config, so they cannot be bound as
//! parameters. This module is the only place that turns them into SQL text: a name must
//! match `[A-Za-z_][A-Za-z0-9_]*` (optionally `schema.name` for tables) and is emitted in
//! double quotes, so a config can never inject SQL.

use std::fmt;

/// A validated SQL identifier, possibly schema-qualified.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ident {
    parts: Vec<String>,
}

/// Why a name was refused.
#[derive(Debug, thiserror::Error)]
#[error("{value:?} is not a valid name: use ASCII letters, digits and _, not starting with a digit, up to 63 characters (optionally schema.name)")]
pub struct IdentError {
    /// The refused text.
    pub value: String,
}

fn valid_part(p: &str) -> bool {
    let mut chars = p.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && p.len() <= 63
}

impl Ident {
    /// A table name: `name` or `schema.name`.
    pub fn table(s: &str) -> Result<Ident, IdentError> {
        let parts: Vec<&str> = s.split('.').collect();
        if parts.len() > 2 || !parts.iter().all(|p| valid_part(p)) {
            return Err(IdentError { value: s.into() });
        }
        Ok(Ident {
            parts: parts.into_iter().map(String::from).collect(),
        })
    }

    /// A column name: a single part.
    pub fn column(s: &str) -> Result<Ident, IdentError> {
        if !valid_part(s) {
            return Err(IdentError { value: s.into() });
        }
        Ok(Ident { parts: vec![s.into()] })
    }

    /// The unquoted last part, for messages and catalog lookups.
    pub fn name(&self) -> &str {
        self.parts.last().expect("an identifier has a part")
    }

    /// The schema part, when qualified.
    pub fn schema(&self) -> Option<&str> {
        (self.parts.len() == 2).then(|| self.parts[0].as_str())
    }

    /// The quoted SQL form, e.g. `"public"."dim_customer"`.
    pub fn quoted(&self) -> String {
        self.parts
            .iter()
            .map(|p| format!("\"{p}\""))
            .collect::<Vec<_>>()
            .join(".")
    }

    /// The same name with a suffix on its last part (for the swap table of a rebuild).
    pub fn with_suffix(&self, suffix: &str) -> Ident {
        let mut parts = self.parts.clone();
        let last = parts.last_mut().expect("an identifier has a part");
        last.push_str(suffix);
        Ident { parts }
    }
}

impl fmt::Display for Ident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.parts.join("."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_injection() {
        assert!(Ident::table("x\"; DROP TABLE y; --").is_err());
        assert!(Ident::column("a b").is_err());
        assert!(Ident::column("1a").is_err());
        assert!(Ident::table("a.b.c").is_err());
        assert!(Ident::column("s.c").is_err());
    }

    #[test]
    fn quotes_parts() {
        assert_eq!(Ident::table("public.dim").unwrap().quoted(), "\"public\".\"dim\"");
        assert_eq!(Ident::column("_x1").unwrap().quoted(), "\"_x1\"");
    }
}
