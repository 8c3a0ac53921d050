//! Text for messages that reach a client: ASCII only. A message that quotes generated
//! text or catalog names must survive any `client_encoding` (PostgreSQL converts every
//! message to it, and a character LATIN1 cannot hold turns a refusal into an encoding
//! error), so every other character is written as its code point.

use std::borrow::Cow;

/// `text` with every character outside printable ASCII (tab and line feed kept) written
/// as `<U+XXXX>`.
pub fn ascii(text: &str) -> Cow<'_, str> {
    let keep = |c: char| c == '\t' || c == '\n' || (' '..='~').contains(&c);
    if text.chars().all(keep) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if keep(c) {
            out.push(c);
        } else {
            out.push_str(&format!("<U+{:04X}>", u32::from(c)));
        }
    }
    Cow::Owned(out)
}

/// `text` on one line that shows what it says: a line feed, a tab and every character
/// that hides what text does ([`crate::text::is_hidden`]: a carriage return, an escape, C1,
/// format and separator characters) written as `<U+XXXX>`, other characters kept. For a
/// message that quotes names or a statement's parts: a name holding `\n-- Note: ...` would
/// otherwise start a line of its own in a log, a terminal or a repair prompt.
pub fn one_line(text: &str) -> Cow<'_, str> {
    let escaped = |c: char| c == '\n' || c == '\t' || crate::text::is_hidden(c);
    if !text.chars().any(escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escaped(c) {
            out.push_str(&format!("<U+{:04X}>", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`ascii`] of the first `max` bytes of `text` (cut at a character boundary), with
/// `...` when it was cut.
pub fn ascii_snippet(text: &str, max: usize) -> String {
    if text.len() <= max {
        return ascii(text).into_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", ascii(&text[..end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_ascii() {
        assert!(matches!(ascii("SELECT 1"), Cow::Borrowed("SELECT 1")));
        assert_eq!(ascii("caf\u{e9}\r\u{2026}"), "caf<U+00E9><U+000D><U+2026>");
        assert_eq!(ascii("\u{1f600}"), "<U+1F600>");
        assert_eq!(ascii_snippet("abcdef", 3), "abc...");
        assert_eq!(ascii_snippet("ab\u{e9}f", 3), "ab...");
        assert_eq!(ascii_snippet("ab", 3), "ab");
        for s in ["x\u{e9}y", "\u{7f}", "a\tb\nc"] {
            assert!(ascii(s).is_ascii());
        }
        assert_eq!(
            ascii("\r\x1b[2K\u{85}\u{202e}\u{200b}\u{2028}"),
            "<U+000D><U+001B>[2K<U+0085><U+202E><U+200B><U+2028>"
        );
    }

    #[test]
    fn one_line_messages() {
        assert!(matches!(one_line("caf\u{e9}"), Cow::Borrowed(_)));
        assert_eq!(
            one_line("\"nl\n-- Note\"\t\r\x1b\u{85}\u{202e}\u{e9}"),
            "\"nl<U+000A>-- Note\"<U+0009><U+000D><U+001B><U+0085><U+202E>\u{e9}"
        );
    }
}
