//! How a token is shown to a person: its *display text*, from the raw vocabulary piece and the
//! tokenizer's kind. Defined once here and used by every renderer (terminal, PNG/SVG, HTML, JSON);
//! the report's page applies the two rules it needs itself ([`visible`] for the words it merges,
//! [`positioned`] for repeated labels), tested against the same cases
//! (`tests/display_label_cases.json`, `assets/report/labels.js`).
//!
//! The rules, by [`LabelScheme`]:
//!
//! - **byte-level BPE** (GPT-2, RoBERTa, BART, Llama 3, SmolLM2, Qwen2): each character of the
//!   piece stands for one byte (GPT-2's `bytes_to_unicode` table: `Ġ` is a space, `Ċ` a line
//!   feed, `Ã©` the two bytes of `é`); the bytes are decoded as UTF-8. Bytes that are only part
//!   of a character (an emoji split over two pieces) are shown as their hexadecimal values in
//!   angle brackets, `⟨F0 9F⟩`, never as mojibake.
//! - **SentencePiece** (T5, XLM-R, ALBERT, Marian, Llama 2, TinyLlama): `▁` is a space; a
//!   byte-fallback piece `<0x0A>` is that byte, decoded as above.
//! - **WordPiece** (BERT), **SMILES** (rxnmapper) and **plain** (labels from a file): the piece
//!   as it is (`##ing` keeps its `##`: it says the piece continues a word).
//!
//! Then, for every scheme, what is invisible is made visible ([`visible`]): the one space that
//! starts a word is dropped when the piece has something visible (`Ġcapital` → `capital`), every
//! other space that is not between two visible characters is a thin `·` (a lone space piece `Ġ`
//! → `·`, indentation `ĠĠĠ` → `···`), a line feed is `↵`, a tab `⇥`, and control and format
//! characters (bidirectional overrides among them) are `⟨U+202E⟩`. Special tokens (`[CLS]`,
//! `<|im_start|>`) keep their name, with only that last rule applied.

use std::fmt::Write;

use super::Role;

use unicode_categories::UnicodeCategories;

/// Which kind of tokenizer made the pieces: decides how a piece is decoded for display.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Default, Hash, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum LabelScheme {
    /// Labels shown as they are (attention from a file, a tokenizer of unknown kind).
    #[default]
    Plain,
    /// BERT's WordPiece: `##` marks a piece that continues a word.
    WordPiece,
    /// Byte-level BPE: every character of a piece stands for one byte.
    #[serde(rename = "byte-level")]
    ByteLevel,
    /// SentencePiece: `▁` is a space, `<0xNN>` a byte.
    SentencePiece,
    /// rxnmapper's SMILES tokenizer: atoms, bonds and ring closures; `>>` (or `>`) separates
    /// reactants, reagents and products.
    Smiles,
}

impl LabelScheme {
    /// Every scheme.
    pub const ALL: [LabelScheme; 5] = [
        LabelScheme::Plain,
        LabelScheme::WordPiece,
        LabelScheme::ByteLevel,
        LabelScheme::SentencePiece,
        LabelScheme::Smiles,
    ];

    /// The name in JSON and the HTML report (`plain`, `wordpiece`, `byte-level`,
    /// `sentencepiece`, `smiles`).
    pub fn as_str(self) -> &'static str {
        match self {
            LabelScheme::Plain => "plain",
            LabelScheme::WordPiece => "wordpiece",
            LabelScheme::ByteLevel => "byte-level",
            LabelScheme::SentencePiece => "sentencepiece",
            LabelScheme::Smiles => "smiles",
        }
    }

    /// The scheme named `name` (as [`LabelScheme::as_str`] writes it).
    pub fn from_name(name: &str) -> Option<LabelScheme> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// How a reader names the scheme in prose (`byte-level BPE`).
    pub fn describe(self) -> &'static str {
        match self {
            LabelScheme::Plain => "labels as given",
            LabelScheme::WordPiece => "WordPiece",
            LabelScheme::ByteLevel => "byte-level BPE",
            LabelScheme::SentencePiece => "SentencePiece",
            LabelScheme::Smiles => "SMILES",
        }
    }
}

/// The display text of the vocabulary piece `piece`, whose unit has `role`, from a tokenizer of
/// kind `scheme` (see the module documentation for the rules).
pub fn display_label(piece: &str, role: Role, scheme: LabelScheme) -> String {
    if role.is_special() {
        return escape_invisible(piece);
    }
    // Items are made as they are shown, never held all at once: a piece of 50 MiB took
    // 32 bytes an item (1.4 GiB) when they were collected first.
    match scheme {
        LabelScheme::ByteLevel => present(Decoded {
            rest: &byte_level_bytes(piece),
        }),
        LabelScheme::SentencePiece => match byte_fallback(piece) {
            Some(b) => present(Decoded { rest: &[b] }),
            None => present(
                piece
                    .chars()
                    .map(|c| Item::Char(if c == '\u{2581}' { ' ' } else { c })),
            ),
        },
        LabelScheme::WordPiece | LabelScheme::Smiles | LabelScheme::Plain => {
            present(piece.chars().map(Item::Char))
        }
    }
}

/// The text a piece stands for, before anything is made visible: a byte-level piece's bytes and
/// a SentencePiece byte piece's byte decoded as UTF-8 (bytes of no whole character as U+FFFD, as
/// the tokenizers' own decoders write them), `▁` as a space; other pieces as they are.
pub fn piece_text(piece: &str, scheme: LabelScheme) -> String {
    match scheme {
        LabelScheme::ByteLevel => String::from_utf8_lossy(&byte_level_bytes(piece)).into_owned(),
        LabelScheme::SentencePiece => match byte_fallback(piece) {
            Some(b) => String::from_utf8_lossy(&[b]).into_owned(),
            None => piece.replace('\u{2581}', " "),
        },
        _ => piece.to_string(),
    }
}

/// `text` with what a reader cannot see made visible: the word-initial space dropped when there is
/// anything else, other spaces that are not between two visible characters as `·`, `↵` for a
/// line feed, `⇥` for a tab, `⟨U+XXXX⟩` for other control, format and unusual space characters.
/// The page's script applies the same rule to the words it merges (`assets/report/labels.js`).
pub fn visible(text: &str) -> String {
    present(text.chars().map(Item::Char))
}

/// `labels` with each one that occurs more than once followed by its position in subscript
/// digits (`C`, `C` → `C₀`, `C₁`), so that repeated tokens are told apart; a label that occurs
/// once stays as it is. `positions[i]` is the number the view gives unit `i`.
pub fn positioned<S: AsRef<str>>(labels: &[S], positions: &[usize]) -> Vec<String> {
    let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for l in labels {
        *counts.entry(l.as_ref()).or_default() += 1;
    }
    labels
        .iter()
        .zip(positions)
        .map(|(l, &p)| {
            let l = l.as_ref();
            if counts[l] > 1 {
                format!("{l}{}", subscript(p))
            } else {
                l.to_string()
            }
        })
        .collect()
}

/// `n` in subscript digits (`17` → `₁₇`).
pub fn subscript(n: usize) -> String {
    n.to_string()
        .chars()
        .map(|d| char::from_u32(0x2080 + d.to_digit(10).unwrap_or(0)).unwrap_or('?'))
        .collect()
}

/// One thing to show: a character, or bytes that are not (or only part of) a UTF-8 character.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Item<'a> {
    Char(char),
    Bytes(&'a [u8]),
}

impl Item<'_> {
    /// Whether the item shows as something other than whitespace.
    fn is_visible(&self) -> bool {
        match self {
            Item::Char(c) => !c.is_whitespace(),
            Item::Bytes(_) => true,
        }
    }
}

/// GPT-2's `bytes_to_unicode`: the bytes that stand for themselves (printable Latin-1 but the
/// space and the soft hyphen); every other byte `b` is the character `256 + k`, with `k` its rank
/// among those others.
fn stands_for_itself(b: u32) -> bool {
    (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b)
}

/// The byte a byte-level character stands for, or `None` for a character outside the table.
fn byte_of(c: char) -> Option<u8> {
    let u = c as u32;
    if stands_for_itself(u) {
        return Some(u as u8);
    }
    let k = u.checked_sub(256)?;
    (0u32..=255)
        .filter(|&b| !stands_for_itself(b))
        .nth(k as usize)
        .map(|b| b as u8)
}

/// The bytes a byte-level piece stands for; a character outside the table (an added token's own
/// text) stands for its UTF-8 bytes.
fn byte_level_bytes(piece: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(piece.len());
    for c in piece.chars() {
        match byte_of(c) {
            Some(b) => out.push(b),
            None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    out
}

/// The byte of a SentencePiece byte-fallback piece (`<0x0A>`), if `piece` is one.
fn byte_fallback(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// `bytes` as UTF-8 characters, with each run of bytes that form no whole character one
/// [`Item::Bytes`] (as `std::str::from_utf8` delimits them), made one at a time.
#[derive(Clone)]
struct Decoded<'a> {
    rest: &'a [u8],
}

/// The character `bytes` start with and its length, if they start with a whole one.
fn first_char(bytes: &[u8]) -> Option<(char, usize)> {
    let window = &bytes[..bytes.len().min(4)];
    let valid = match std::str::from_utf8(window) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&window[..e.valid_up_to()]).unwrap_or_default(),
    };
    valid.chars().next().map(|c| (c, c.len_utf8()))
}

/// The length of the bytes that form no character at the start of `bytes` (which does not
/// start with a whole character).
fn invalid_len(bytes: &[u8]) -> usize {
    let window = &bytes[..bytes.len().min(4)];
    match std::str::from_utf8(window) {
        // A character cut off by the end of the input.
        Err(e) => e.error_len().unwrap_or(window.len()),
        Ok(_) => window.len(),
    }
}

impl<'a> Iterator for Decoded<'a> {
    type Item = Item<'a>;

    fn next(&mut self) -> Option<Item<'a>> {
        if self.rest.is_empty() {
            return None;
        }
        if let Some((c, len)) = first_char(self.rest) {
            self.rest = &self.rest[len..];
            return Some(Item::Char(c));
        }
        // Consecutive bad sequences are one run.
        let mut end = 0;
        while end < self.rest.len() && first_char(&self.rest[end..]).is_none() {
            end += invalid_len(&self.rest[end..]);
        }
        let (run, rest) = self.rest.split_at(end);
        self.rest = rest;
        Some(Item::Bytes(run))
    }
}

/// Whether `c` is shown as `⟨U+XXXX⟩`: control and format characters (bidirectional controls,
/// zero-width spaces, the byte-order mark; not the joiners inside emoji), and whitespace other
/// than the space, line feed and tab.
fn is_invisible(c: char) -> bool {
    if matches!(c, ' ' | '\n' | '\t' | '\u{200C}' | '\u{200D}') {
        return false;
    }
    c.is_control() || c.is_other_format() || c.is_whitespace()
}

/// `text` with only what cannot be seen escaped, its spaces as they are: a line feed as `↵`, a
/// tab as `⇥`, control, format and unusual space characters as `⟨U+XXXX⟩`. Special tokens keep
/// their names this way, and the figures quote a text this way.
pub fn escape_invisible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push('↵'),
            '\t' => out.push('⇥'),
            c if is_invisible(c) => out.push_str(&format!("⟨U+{:04X}⟩", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// The display text of decoded items (see [`visible`]); `items` is walked twice (whether
/// anything is visible, then the text), never collected.
fn present<'a>(items: impl Iterator<Item = Item<'a>> + Clone) -> String {
    let any_visible = items.clone().any(|i| i.is_visible());
    let mut items = items.peekable();
    // The one space that starts a word goes, when there is something to show after it.
    if any_visible && items.peek() == Some(&Item::Char(' ')) {
        items.next();
    }
    let mut out = String::new();
    let mut previous_visible = None;
    while let Some(item) = items.next() {
        match item {
            Item::Bytes(b) => {
                out.push('⟨');
                for (i, byte) in b.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    let _ = write!(out, "{byte:02X}");
                }
                out.push('⟩');
            }
            Item::Char(' ') => {
                let between =
                    previous_visible == Some(true) && items.peek().is_some_and(Item::is_visible);
                out.push(if between { ' ' } else { '·' });
            }
            Item::Char('\n') => out.push('↵'),
            Item::Char('\t') => out.push('⇥'),
            Item::Char(c) if is_invisible(c) => {
                let _ = write!(out, "⟨U+{:04X}⟩", c as u32);
            }
            Item::Char(c) => out.push(c),
        }
        previous_visible = Some(item.is_visible());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_table_is_gpt2s() {
        // 188 bytes stand for themselves, 68 are moved to U+0100 onwards, in byte order.
        assert_eq!((0..256u32).filter(|&b| stands_for_itself(b)).count(), 188);
        assert_eq!(byte_of('Ġ'), Some(b' '));
        assert_eq!(byte_of('Ċ'), Some(b'\n'));
        assert_eq!(byte_of('ĉ'), Some(b'\t'));
        assert_eq!(byte_of('Ā'), Some(0));
        assert_eq!(byte_of('Ń'), Some(0xAD));
        assert_eq!(byte_of('a'), Some(b'a'));
        assert_eq!(byte_of('\u{0144}'), None, "past the 68 moved bytes");
    }

    #[test]
    fn subscripts_and_positions() {
        assert_eq!(subscript(0), "₀");
        assert_eq!(subscript(107), "₁₀₇");
        assert_eq!(
            positioned(&["C", "C", "O", "C"], &[0, 1, 2, 3]),
            ["C₀", "C₁", "O", "C₃"]
        );
    }

    #[test]
    fn scheme_names_round_trip() {
        for s in LabelScheme::ALL {
            assert_eq!(LabelScheme::from_name(s.as_str()), Some(s));
        }
    }
}
