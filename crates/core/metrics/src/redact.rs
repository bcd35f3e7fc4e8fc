//! Keys out of every server text goodput keeps or prints: a server that echoes the
//! `Authorization` header in an error ("Incorrect API key provided: Bearer sk-…"), a proxy page
//! that shows the request's headers, an imported file's error strings. Definition:
//! `docs/metrics.md`, "Keys are never kept".
//!
//! What is replaced by `[redacted]`:
//! - every occurrence of a secret the client knows (its API key);
//! - the credentials after `Bearer` or `Basic`;
//! - the value after a key-like name (`api-key`, `api_key`, `apikey`, `x-api-key`,
//!   `authorization`, `access_token`, `token`, `secret`, `password`) and `:` or `=`;
//! - words that look like provider keys: `sk-`, `sk_`, `gsk_`, `hf_`, `xai-`, `AIza`, `ghp_`,
//!   `pk-` followed by at least 8 key characters.

use std::borrow::Cow;

/// What stands in for a redacted secret.
pub const REDACTED: &str = "[redacted]";

/// Prefixes of provider keys.
const KEY_PREFIXES: [&str; 8] = ["sk-", "sk_", "gsk_", "hf_", "xai-", "AIza", "ghp_", "pk-"];

/// Names whose value is a credential (compared case-insensitively, `-` and `_` alike).
const KEY_NAMES: [&str; 8] =
    ["x-api-key", "api-key", "apikey", "authorization", "access-token", "token", "secret", "password"];

fn key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '+' | '/' | '=' | '*')
}

/// `text` with every secret in it replaced by [`REDACTED`]; `known` are secrets the caller holds
/// (its API key; empty ones and ones under 4 characters are ignored). Borrowed when nothing was
/// found.
pub fn redact<'a>(text: &'a str, known: &[&str]) -> Cow<'a, str> {
    let mut out: Cow<'a, str> = Cow::Borrowed(text);
    for k in known.iter().filter(|k| k.len() >= 4) {
        if out.contains(*k) {
            out = Cow::Owned(out.replace(*k, REDACTED));
        }
    }
    match redact_patterns(&out) {
        Some(s) => Cow::Owned(s),
        None => out,
    }
}

/// In place, for a message owned by a record.
pub fn redact_in_place(text: &mut String, known: &[&str]) {
    if let Cow::Owned(s) = redact(text, known) {
        *text = s;
    }
}

/// The text with pattern-found secrets replaced, or `None` when there were none.
fn redact_patterns(text: &str) -> Option<String> {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let lower = text.to_ascii_lowercase();
    let bytes = text.as_bytes();
    let at_word_start = |i: usize| i == 0 || !key_char(bytes[i - 1] as char);
    // the end of a run of key characters from `i` (a full stop after it ends a sentence)
    let run_end = |i: usize| {
        let end = text[i..].char_indices().find(|&(_, c)| !key_char(c)).map_or(text.len(), |(j, _)| i + j);
        i + text[i..end].trim_end_matches('.').len()
    };
    // skips spaces and quotes from `i`
    let skip = |mut i: usize, what: &[u8]| {
        while i < bytes.len() && what.contains(&bytes[i]) {
            i += 1;
        }
        i
    };
    for (i, _) in text.char_indices() {
        if !at_word_start(i) {
            continue;
        }
        // a provider key
        if let Some(p) = KEY_PREFIXES.iter().find(|p| text[i..].starts_with(**p)) {
            let end = run_end(i);
            if end - i >= p.len() + 8 {
                spans.push((i + p.len(), end));
                continue;
            }
        }
        // credentials after a scheme
        for scheme in ["bearer ", "basic "] {
            if lower[i..].starts_with(scheme) {
                let from = skip(i + scheme.len(), b" ");
                let end = run_end(from);
                if end > from {
                    spans.push((from, end));
                }
            }
        }
        // the value of a key-like name: `name: value`, `name=value`, `"name": "value"`
        for name in KEY_NAMES {
            let n = name.len();
            let Some(cand) = lower.get(i..i + n) else { continue };
            let name_char = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
            if cand.replace('_', "-") != name || (i + n < bytes.len() && name_char(bytes[i + n])) {
                continue;
            }
            let mut j = skip(i + n, b"\"' ");
            if j < bytes.len() && (bytes[j] == b':' || bytes[j] == b'=') {
                j = skip(j + 1, b"\"' ");
                // `Authorization: Bearer x`: the scheme's rule takes the credentials
                if lower[j..].starts_with("bearer ") || lower[j..].starts_with("basic ") {
                    continue;
                }
                let end = run_end(j);
                if end > j {
                    spans.push((j, end));
                }
            }
        }
    }
    if spans.is_empty() {
        return None;
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (a, b) in spans {
        if b <= at {
            continue;
        }
        let a = a.max(at);
        out.push_str(&text[at..a]);
        out.push_str(REDACTED);
        at = b;
    }
    out.push_str(&text[at..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echoed_authorization_header_is_redacted() {
        let body = r#"{"error":{"message":"Incorrect API key provided: Bearer sk-proj-abc123DEF456ghi789. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error"}}"#;
        let r = redact(body, &[]);
        assert!(!r.contains("abc123DEF456ghi789"), "{r}");
        assert!(r.contains("Incorrect API key provided: Bearer [redacted]. You can find"), "{r}");
        // the URL that merely names api-keys is left alone
        assert!(r.contains("account/api-keys"), "{r}");
    }

    #[test]
    fn the_clients_own_key_is_redacted_wherever_it_appears() {
        let r = redact("key mysecretvalue42 was refused (mysecretvalue42)", &["mysecretvalue42"]);
        assert_eq!(r, "key [redacted] was refused ([redacted])");
        // a too short or empty known secret is not used
        assert_eq!(redact("a b c", &["", "b"]), "a b c");
    }

    #[test]
    fn header_and_field_styles() {
        assert_eq!(redact("api-key: 0123abcd", &[]), "api-key: [redacted]");
        assert_eq!(redact("X-Api-Key=zzzz9999", &[]), "X-Api-Key=[redacted]");
        assert_eq!(redact(r#"{"api_key": "hunter22"}"#, &[]), r#"{"api_key": "[redacted]"}"#);
        assert_eq!(redact("Authorization: Basic dXNlcjpwYXNz", &[]), "Authorization: Basic [redacted]");
        assert_eq!(redact("authorization=abc.def", &[]), "authorization=[redacted]");
        assert_eq!(redact("provided: sk-ant-api03-XXXXXXXXXXXX", &[]), "provided: sk-[redacted]");
        assert_eq!(redact("hf_abcdefghijkl and gsk_1234567890", &[]), "hf_[redacted] and gsk_[redacted]");
    }

    #[test]
    fn ordinary_text_is_borrowed_unchanged() {
        for t in ["HTTP 429: rate limited", "the token budget is 8192", "tokens: 16", "sk-short", "risk-free"] {
            assert!(matches!(redact(t, &[]), Cow::Borrowed(_)), "{t}");
        }
    }
}
