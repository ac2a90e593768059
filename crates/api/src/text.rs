//! Text that comes from cluster data (annotation values, executor IDs, messages quoting them), made
//! safe to store and to show: control characters escaped, length bounded.
//!
//! Node annotations are written by executors, agents and operators, and a Node may carry up to 256
//! KiB of them; a status or an Event that copied them raw would grow with them (past etcd's object
//! size), and a terminal that printed them raw would obey the escape sequences they hold.
//! Everything k8sm reports from such data goes through here.

use std::borrow::Cow;

use sha2::{Digest, Sha256};

/// Longest annotation value, such as an executor ID, quoted in a message (the quotes and the
/// truncation marker included). A real executor ID (`sha256:` and 64 hex digits) is 71 bytes.
pub const MAX_QUOTED_VALUE: usize = 128;

/// Whether `c` must not reach a terminal or a log as it is: ASCII and Unicode control characters
/// (C0, DEL, C1), and the invisible format characters that reorder or hide text (bidirectional
/// overrides and isolates, zero-width characters, the byte order mark).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}'
            | '\u{FEFF}')
}

/// `text` with every unsafe character (see [`is_unsafe`]) escaped (`\n`, `\t`, `\r`, `\u{1b}`), and
/// at most `max` bytes long: a longer text is cut and ends with a marker that gives its full
/// length, such as `…(truncated, 204800 bytes)`. Text that needs neither is returned as it is.
pub fn bounded(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max && !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len().min(max));
    if escape_within(&mut out, text, max, false) {
        return Cow::Owned(out);
    }
    let marker = marker(text.len());
    if max <= marker.len() {
        // Too small for the marker: the cut text alone, so that the bound holds.
        truncate_at_char(&mut out, max);
        return Cow::Owned(out);
    }
    truncate_at_char(&mut out, max - marker.len());
    out.push_str(&marker);
    Cow::Owned(out)
}

/// `text` quoted (`"…"`, quotes and backslashes escaped as well as unsafe characters), at most
/// `max` bytes in all (for a `max` of 40 or more: room for the quotes and the marker): how a
/// message shows a value it could not use, such as a malformed annotation.
pub fn quoted(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max) + 2);
    out.push('"');
    // Room for the closing quote.
    if escape_within(&mut out, text, max.saturating_sub(1), true) {
        out.push('"');
        return out;
    }
    // The marker goes after the closing quote, so that the quoted part reads as the start of the
    // value.
    let marker = marker(text.len());
    truncate_at_char(&mut out, max.saturating_sub(marker.len() + 1).max(1));
    out.push('"');
    out.push_str(&marker);
    out
}

/// A bounded stand-in for an ID that is kept to be compared later, such as the executor ID of a
/// node k8sm deleted (`status.deletedNodes`): the ID itself when it is safe and at most
/// [`crate::MAX_EXECUTOR_ID`] bytes (as every real executor ID is), else its start, its length and
/// its SHA-256, so that stand-ins are equal only for equal IDs. Applied to a stand-in, it returns
/// the stand-in.
pub fn recorded_id(id: &str) -> Cow<'_, str> {
    if id.len() <= crate::MAX_EXECUTOR_ID && !id.chars().any(is_unsafe) {
        return Cow::Borrowed(id);
    }
    let mut start = String::new();
    escape_within(&mut start, id, 24, false);
    let digest = hex::encode(Sha256::digest(id.as_bytes()));
    Cow::Owned(format!("{start}…({} bytes, sha256:{digest})", id.len()))
}

/// Appends `text` escaped to `out` while `out` stays within `max` bytes; whether all of it fit.
fn escape_within(out: &mut String, text: &str, max: usize, quote: bool) -> bool {
    let mut buffer = [0u8; 4];
    for c in text.chars() {
        let piece: Cow<str> = if is_unsafe(c) || (quote && matches!(c, '"' | '\\')) {
            Cow::Owned(escape(c))
        } else {
            Cow::Borrowed(c.encode_utf8(&mut buffer))
        };
        if out.len() + piece.len() > max {
            return false;
        }
        out.push_str(&piece);
    }
    true
}

/// One character, escaped the way Rust writes it in a string literal.
fn escape(c: char) -> String {
    match c {
        '\n' => "\\n".to_owned(),
        '\t' => "\\t".to_owned(),
        '\r' => "\\r".to_owned(),
        '"' => "\\\"".to_owned(),
        '\\' => "\\\\".to_owned(),
        c => format!("\\u{{{:x}}}", u32::from(c)),
    }
}

fn marker(original: usize) -> String {
    format!("…(truncated, {original} bytes)")
}

/// Cuts `text` to at most `max` bytes, at a character boundary, and never inside an escape such as
/// `\u{1b}` (half an escape would read as something else).
fn truncate_at_char(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if let Some(start) = text[..end].rfind("\\u{")
        && !text[start..end].contains('}')
    {
        end = start;
    }
    text.truncate(end);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn any_text_comes_out_bounded_and_safe(text in "\\PC*|[\\x00-\\x1f\\x7f-\\u{9f}\\u{202e}a-z\"\\\\]*", max in 0usize..400) {
            let out = bounded(&text, max);
            prop_assert!(out.len() <= max);
            prop_assert!(!out.chars().any(is_unsafe));
            if text.len() <= max && !text.chars().any(is_unsafe) {
                prop_assert_eq!(out.as_ref(), text.as_str());
            }
            let quoted = quoted(&text, max.max(40));
            prop_assert!(quoted.len() <= max.max(40));
            prop_assert!(quoted.starts_with('"') && !quoted.chars().any(is_unsafe));
            let id = recorded_id(&text);
            prop_assert!(id.len() <= crate::MAX_EXECUTOR_ID && !id.chars().any(is_unsafe));
        }
    }

    #[test]
    fn ordinary_text_is_untouched() {
        let id = format!("sha256:{}", "ab".repeat(32));
        assert!(matches!(bounded(&id, 128), Cow::Borrowed(_)));
        assert_eq!(bounded("node-0001", 253), "node-0001");
        assert_eq!(bounded("ünïcödé → ok", 64), "ünïcödé → ok");
        assert_eq!(quoted("yesterday", 128), "\"yesterday\"");
        assert_eq!(
            quoted("sha256:garbage", 128),
            format!("{:?}", "sha256:garbage")
        );
    }

    #[test]
    fn control_and_invisible_characters_are_escaped() {
        assert_eq!(
            bounded("a\x1b[31mred\x07\nb\t\u{202e}c\u{9b}", 100),
            "a\\u{1b}[31mred\\u{7}\\nb\\t\\u{202e}c\\u{9b}"
        );
        assert_eq!(bounded("say \"hi\" \\", 100), "say \"hi\" \\");
        assert_eq!(quoted("say \"hi\"\x1b", 100), "\"say \\\"hi\\\"\\u{1b}\"");
    }

    #[test]
    fn long_text_is_cut_with_a_marker_within_the_bound() {
        let long = "x".repeat(200 * 1024);
        let cut = bounded(&long, 256);
        assert!(cut.len() <= 256, "{}", cut.len());
        assert!(cut.ends_with("…(truncated, 204800 bytes)"), "{cut}");
        assert!(cut.starts_with("xxxx"));

        let quoted = quoted(&long, MAX_QUOTED_VALUE);
        assert!(quoted.len() <= MAX_QUOTED_VALUE, "{}", quoted.len());
        assert!(quoted.starts_with("\"xxx"), "{quoted}");
        assert!(quoted.ends_with("\"…(truncated, 204800 bytes)"), "{quoted}");
    }

    #[test]
    fn recorded_ids_are_bounded_and_compare_like_the_ids() {
        let real = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(recorded_id(&real), real);
        let long = "\x1b[2J".repeat(50_000);
        let other = format!("{long}x");
        let (a, b) = (recorded_id(&long), recorded_id(&other));
        assert!(a.len() <= crate::MAX_EXECUTOR_ID, "{a}");
        assert!(!a.chars().any(is_unsafe), "{a}");
        assert_ne!(a, b);
        assert_eq!(a, recorded_id(&long.clone()));
        assert_eq!(recorded_id(&a), a, "a stand-in stands for itself");
    }

    #[test]
    fn cuts_fall_between_characters_and_escapes() {
        // Multi-byte characters and escapes at every offset: the result is valid, bounded, and
        // never ends in half an escape.
        let hostile: String = "é\x1b€\u{7}".repeat(50);
        for max in 0..200 {
            let texts = [bounded(&hostile, max).into_owned(), quoted(&hostile, max)];
            assert!(texts[0].len() <= max, "{max}: {}", texts[0]);
            if max >= 40 {
                assert!(texts[1].len() <= max, "{max}: {}", texts[1]);
            }
            for text in texts {
                assert!(!text.chars().any(is_unsafe), "{max}: {text:?}");
                if let Some(start) = text.rfind("\\u{") {
                    assert!(text[start..].contains('}'), "{max}: {text}");
                }
            }
        }
    }
}
