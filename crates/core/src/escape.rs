//! Text from outside (tokens, file names, metadata) made safe to print: control and
//! bidirectional formatting characters shown as visible escapes.

use std::borrow::Cow;

/// `s` with every control character (C0, DEL, C1: ESC, newline, …) and bidirectional
/// formatting character shown as a visible escape, `<U+202E>`, so text from a token or a file
/// name reaches the terminal as text.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() || is_bidi_control(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() || is_bidi_control(c) {
            out.push_str(&format!("<U+{:04X}>", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Whether `c` changes the direction of the text around it: the embeddings, overrides and
/// isolates U+202A–U+202E and U+2066–U+2069, and the marks U+200E, U+200F and U+061C.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}
