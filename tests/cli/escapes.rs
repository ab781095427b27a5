//! Output safety (issue 14, item 10): data printed for people never reaches the terminal
//! as raw control characters (C0, DEL, C1, bidi overrides are shown escaped, `\u{1b}`),
//! `--json` keeps them as proper JSON strings, the SVG timeline stays XML 1.0, log colours
//! only go to a terminal, and a key that is not UTF-8 is named in hex.

use super::{assert_code, dimlog, json, text};
use crate::support::fixture::Fixture;

/// Every character a terminal or an XML parser may take for more than text.
fn dangerous() -> Vec<char> {
    let mut chars: Vec<char> = (0x01u32..0x20)
        .chain([0x7f])
        .chain(0x80..0xa0)
        .filter_map(char::from_u32)
        .collect();
    chars.extend(
        (0x202a..=0x202e)
            .chain(0x2066..=0x2069)
            .chain([0x200e, 0x200f, 0x061c])
            .filter_map(char::from_u32),
    );
    chars
}

fn is_dangerous(c: char) -> bool {
    dangerous().contains(&c)
}

/// Human output has no dangerous character but the line breaks.
fn assert_clean(what: &str, output: &str) {
    let bad: Vec<(usize, char)> = output
        .char_indices()
        .filter(|&(_, c)| c != '\n' && is_dangerous(c))
        .collect();
    assert!(bad.is_empty(), "{what}: raw control characters {bad:?} in\n{output:?}");
}

#[tokio::test]
async fn data_with_control_characters_is_printed_escaped() {
    let mut fx = Fixture::sqlite().await;
    fx.use_feed().await;
    let chars = dangerous();
    // One version of key 1 per character, each an hour apart.
    let mut emails = Vec::new();
    for (i, c) in chars.iter().enumerate() {
        let email = format!("a{c}b");
        fx.exec(&format!(
            "INSERT INTO src_feed (customer_id, email, tier, country, updated_at) VALUES \
             (1, 'a' || char({}) || 'b', 'free', 'FR', datetime('2026-03-01', '+{i} hours') || 'Z')",
            *c as u32
        ))
        .await;
        emails.push(email);
    }
    let config = fx.config_path();
    let config = config.to_str().unwrap();
    // -v with stderr redirected: no colour codes.
    let out = dimlog(
        fx.dir(),
        &["--config", config, "-v", "run", "--upper", "2026-03-10T00:00:00Z"],
    );
    assert_code(&out, 0, "run");
    assert!(
        !text(&out.stderr).contains('\u{1b}'),
        "colour in redirected stderr:\n{}",
        text(&out.stderr)
    );
    assert!(!text(&out.stderr).is_empty(), "-v logs nothing");

    let out = dimlog(fx.dir(), &["--config", config, "history", "--key", "1"]);
    assert_code(&out, 0, "history");
    let shown = text(&out.stdout);
    assert_clean("history", &shown);
    for c in &chars {
        let escaped = format!("a\\u{{{:x}}}b", *c as u32);
        assert!(shown.contains(&escaped), "{escaped} not shown:\n{shown}");
    }

    // --json: the values, exactly, as JSON strings.
    let out = dimlog(fx.dir(), &["--config", config, "--json", "history", "--key", "1"]);
    assert_code(&out, 0, "history --json");
    let report = json(&out, "history --json");
    let got: Vec<String> = report["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|v| v["values"]["email"].as_str().expect("text").to_string())
        .collect();
    assert_eq!(got, emails);

    // The SVG parses as XML whatever the values hold.
    let out = dimlog(
        fx.dir(),
        &[
            "--config", config, "history", "--key", "1", "--format", "svg", "--out", "k1.svg",
        ],
    );
    assert_code(&out, 0, "history --format svg");
    let svg = std::fs::read_to_string(fx.dir().join("k1.svg")).expect("svg");
    roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("not XML: {e}"));

    // status shows a failed run's error, which names the data: escaped too.
    let out = dimlog(fx.dir(), &["--config", config, "status"]);
    assert_code(&out, 0, "status");
    assert_clean("status", &text(&out.stdout));
}

/// A key that is not UTF-8 (and keys holding control characters) are named so that the
/// message shows them unambiguously: hex `x'…'` for bytes, escapes for controls.
#[tokio::test]
async fn errors_name_keys_unambiguously() {
    let mut fx = Fixture::sqlite().await;
    fx.exec(
        "CREATE TABLE src_text (code TEXT PRIMARY KEY, email TEXT, tier TEXT, country TEXT,
                                is_deleted BOOLEAN NOT NULL DEFAULT false, updated_at TEXT NOT NULL)",
    )
    .await;
    let config = fx
        .config()
        .replace("table = \"src_customers\"", "table = \"src_text\"")
        .replace("key = [\"customer_id\"]", "key = [\"code\"]");
    fx.set_config(config);
    let path = fx.config_path();
    let path = path.to_str().unwrap();
    // The key itself is not UTF-8; then a good key with a bad value; then a key with an
    // escape sequence and a bad value.
    let cases = [
        ("CAST(X'ff41' AS TEXT)", "'x'", "x'ff41'"),
        ("CAST(X'c3' AS TEXT)", "'x'", "x'c3'"),
        ("'k' || char(27) || '[31m'", "CAST(X'ff' AS TEXT)", "k\\u{1b}[31m"),
    ];
    for (key, email, shown) in cases {
        fx.exec(&format!(
            "DELETE FROM src_text; INSERT INTO src_text (code, email, tier, country, updated_at) \
             VALUES ({key}, {email}, 'free', 'FR', '2026-03-01T00:00:00Z')"
        ))
        .await;
        for json_flag in [false, true] {
            let mut args = vec!["--config", path, "run", "--upper", "2026-03-02T00:00:00Z"];
            if json_flag {
                args.insert(2, "--json");
            }
            let out = dimlog(fx.dir(), &args);
            assert_code(&out, 1, key);
            let message = if json_flag {
                json(&out, key)["error"]["message"]
                    .as_str()
                    .expect("message")
                    .to_string()
            } else {
                let stderr = text(&out.stderr);
                assert_clean(key, &stderr);
                stderr
            };
            let escaped_json = shown.replace("\\u{1b}", "\u{1b}");
            let want = if json_flag { escaped_json.as_str() } else { shown };
            assert!(message.contains(want), "{key}: {want:?} not in {message:?}");
            assert!(!message.contains("key ()"), "{message}");
        }
        let out = dimlog(fx.dir(), &["--config", path, "status"]);
        assert_clean("status", &text(&out.stdout));
    }
}

/// `--json` tells bytes from text (issue 14, item 10e), and a SQLite column is read by its
/// declared type, not by each value's storage class (item 11b, as README documents): in a
/// BLOB column every value is bytes (text as its UTF-8 bytes, so `'abc'` and `X'616263'`
/// are the same value), in a TEXT column every value is text (a blob whose bytes are UTF-8
/// reads as that text). Bytes are `{"hex": "…"}` in `--json`, `\x…` in the table; text
/// that looks like hex stays a string.
#[tokio::test]
async fn blobs_and_text_are_told_apart() {
    let mut fx = Fixture::sqlite().await;
    fx.exec("CREATE TABLE src_files (file_id INTEGER PRIMARY KEY, content BLOB, label TEXT, updated_at TEXT NOT NULL)")
        .await;
    let config = fx
        .config()
        .replace("table = \"src_customers\"", "table = \"src_files\"")
        .replace("key = [\"customer_id\"]", "key = [\"file_id\"]")
        .replace("deleted_flag = \"is_deleted\"\n", "")
        .replace(
            "columns = [\"email\", \"tier\", \"country\"]",
            "columns = [\"content\", \"label\"]",
        );
    fx.set_config(config);
    // (content, label) and what --json must show for them.
    let cases: Vec<(&str, &str, serde_json::Value, serde_json::Value)> = vec![
        (
            "X'66ff6f'",
            "'\\x66ff6f'",
            serde_json::json!({"hex": "66ff6f"}),
            serde_json::json!("\\x66ff6f"),
        ),
        (
            "'abc'",
            "X'616263'",
            serde_json::json!({"hex": "616263"}),
            serde_json::json!("abc"),
        ),
        ("X''", "''", serde_json::json!({"hex": ""}), serde_json::json!("")),
        ("NULL", "NULL", serde_json::Value::Null, serde_json::Value::Null),
        ("42", "42", serde_json::json!({"hex": "3432"}), serde_json::json!("42")),
    ];
    for (i, (content, label, _, _)) in cases.iter().enumerate() {
        fx.exec(&format!(
            "INSERT INTO src_files VALUES ({}, {content}, {label}, '2026-03-01T00:00:00Z')",
            i + 1
        ))
        .await;
    }
    let path = fx.config_path();
    let path = path.to_str().unwrap();
    let out = dimlog(fx.dir(), &["--config", path, "run", "--upper", "2026-03-02T00:00:00Z"]);
    assert_code(&out, 0, "run");
    for (i, (content, label, want_content, want_label)) in cases.iter().enumerate() {
        let key = (i + 1).to_string();
        let out = dimlog(fx.dir(), &["--config", path, "--json", "history", "--key", &key]);
        assert_code(&out, 0, "history --json");
        let v = json(&out, "history --json");
        let values = &v["versions"][0]["values"];
        assert_eq!(&values["content"], want_content, "{content} / {label}: {v}");
        assert_eq!(&values["label"], want_label, "{content} / {label}: {v}");
    }
    // 'abc' and X'616263' in the BLOB column are one value: same row_hash.
    let hashes = fx
        .target_query("SELECT DISTINCT lower(hex(row_hash)) FROM customer_versions WHERE file_id = 2")
        .await;
    fx.exec("UPDATE src_files SET content = X'616263', updated_at = '2026-03-02T00:00:00Z' WHERE file_id = 2")
        .await;
    let r = fx.run("2026-03-03T00:00:00Z").await;
    assert_eq!(r.counts.versions, 0, "text and its bytes differ: {r:?}");
    assert_eq!(hashes.len(), 1);
}
