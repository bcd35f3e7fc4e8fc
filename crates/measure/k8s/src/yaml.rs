//! YAML written from JSON values, every string quoted or a literal block.

use serde_json::Value;

/// A JSON value as block YAML in which every string is quoted (or a literal block), so that no
/// YAML reader takes a timestamp, a number or `yes` for anything but a string.
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    yaml_node(&mut out, v, 0);
    out
}

/// A mapping key as plain YAML where that is unambiguous, else quoted.
fn yaml_key(k: &str) -> String {
    let plain = !k.is_empty()
        && k.chars().all(|c| c.is_ascii_alphanumeric() || "._/-".contains(c))
        && k.starts_with(|c: char| c.is_ascii_alphabetic());
    if plain { k.to_string() } else { yaml_string(k) }
}

/// A string scalar, double-quoted (JSON's escapes are YAML's).
fn yaml_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// A scalar, or `None` for a mapping or sequence.
fn yaml_scalar(v: &Value) -> Option<String> {
    match v {
        Value::Null => Some("null".into()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(yaml_string(s)),
        Value::Array(a) if a.is_empty() => Some("[]".into()),
        Value::Object(o) if o.is_empty() => Some("{}".into()),
        _ => None,
    }
}

/// A multi-line string as a literal block (`|`, `|-` or `|+` by its trailing line breaks), when
/// every line can stand in one: no leading blank, no tab, no carriage return.
fn literal_block(s: &str, indent: usize) -> Option<String> {
    if !s.contains('\n') || s.contains('\r') || s.contains('\t') || s.starts_with([' ', '\n']) {
        return None;
    }
    let body = s.trim_end_matches('\n');
    let chomp = match s.len() - body.len() {
        0 => "-",
        1 => "",
        _ => "+",
    };
    let pad = " ".repeat(indent);
    let mut out = format!("|{chomp}\n");
    for line in s.strip_suffix('\n').unwrap_or(s).split('\n') {
        if line.is_empty() {
            out.push('\n');
        } else {
            out.push_str(&pad);
            out.push_str(line);
            out.push('\n');
        }
    }
    Some(out)
}

fn yaml_node(out: &mut String, v: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(o) if !o.is_empty() => {
            for (k, x) in o {
                out.push_str(&pad);
                out.push_str(&yaml_key(k));
                out.push(':');
                yaml_child(out, x, indent);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for x in a {
                out.push_str(&pad);
                out.push('-');
                yaml_child(out, x, indent);
            }
        }
        _ => {
            out.push_str(&pad);
            out.push_str(&yaml_scalar(v).unwrap_or_default());
            out.push('\n');
        }
    }
}

/// What follows `key:` or `-` at `indent`.
fn yaml_child(out: &mut String, x: &Value, indent: usize) {
    if let Some(block) = x.as_str().and_then(|s| literal_block(s, indent + 2)) {
        out.push(' ');
        out.push_str(&block);
    } else if let Some(scalar) = yaml_scalar(x) {
        out.push(' ');
        out.push_str(&scalar);
        out.push('\n');
    } else {
        out.push('\n');
        yaml_node(out, x, indent + 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_strings_stay_strings() {
        let v = serde_json::json!({
            "a": "2026-12-05T09:04:35.379860176Z",
            "b": ["yes", "no", "null", "1e3", "", "0x10", "a: b", "# not a comment", "~"],
            "c": { "script": "set -u\nline two\n", "no-newline": "x\ny", "two": "x\n\n", "lead": " x\ny" },
            "n": 4, "t": true, "e": {}, "l": [],
            "app.kubernetes.io/name": "goodput", "9lives": 1,
        });
        let text = to_yaml(&v);
        assert!(text.contains("a: \"2026-12-05T09:04:35.379860176Z\"\n"), "{text}");
        assert!(text.contains("  script: |\n    set -u\n    line two\n"), "{text}");
        let back: serde_norway::Value = serde_norway::from_str(&text).unwrap();
        assert_eq!(serde_json::to_value(back).unwrap(), v, "{text}");
    }
}
