//! Roles, words and surfaces from token labels alone, for attention imported without them.
//!
//! attnviz's own runs take all of this from the tokenizer. Arrays from elsewhere (transformers'
//! `outputs.attentions` with `tokenizer.convert_ids_to_tokens(...)`, an `.npz`) often carry only
//! the labels, so these rules read the conventions of the common tokenizers; a file or caller
//! that gives `roles` (or word ids) overrides them.
//!
//! - **Special tokens:** a label in square brackets of capitals, digits and `_` (`[CLS]`,
//!   `[SEP]`, `[PAD]`, `[MASK]`), or in angle brackets (`<s>`, `</s>`, `<pad>`, `<|endoftext|>`,
//!   `<|im_start|>`, `<extra_id_0>`). `[UNK]` and `<unk>` stand for text, so they are words.
//!   Which special token: padding when the name has `pad`; a sequence start in first position
//!   (GPT-2 opens with `<|endoftext|>`); an end for `[SEP]`, `</s>` and EOS-like names (`eos`,
//!   `end`, `eot`, `sep`); a start for `[CLS]`, `<s>` and BOS-like names (`bos`, `begin`,
//!   `start`); [`Role::Special`] otherwise (`[MASK]`, `<extra_id_0>`).
//! - **Words and pieces:** WordPiece's `##` continues the word before it. When some label starts
//!   with byte-level BPE's `Ġ` or SentencePiece's `▁`, a label with the mark starts a word and one
//!   without continues the word before it (the first after a special token starts one). When
//!   some label ends with `</w>` (CLIP, the original GPT), a word ends there.
//! - **Surfaces:** the label without those marks, `Ġ`/`▁` read as a space, `Ċ` as a newline;
//!   byte-level labels are decoded through GPT-2's byte table (`Ã¼` is `ü`).

use crate::attention::{display, LabelScheme, Role, Units};

/// Roles and surfaces inferred from labels.
#[derive(Clone, Debug, PartialEq)]
pub struct Inferred {
    /// Role of each label.
    pub roles: Vec<Role>,
    /// The text each label stands for (empty for special tokens).
    pub surfaces: Vec<String>,
    /// The tokenizer the marks point to (`Ġ`: byte-level BPE, `▁`: SentencePiece, `##`:
    /// WordPiece), for showing the labels; [`LabelScheme::Plain`] when none does.
    pub scheme: LabelScheme,
}

/// Whether `label` is written like a special token (see the module docs).
pub fn is_special_label(label: &str) -> bool {
    let inner = |open: char, close: char| {
        label
            .strip_prefix(open)
            .and_then(|s| s.strip_suffix(close))
            .filter(|s| !s.is_empty())
    };
    if let Some(name) = inner('[', ']') {
        return name != "UNK"
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    }
    if let Some(name) = inner('<', '>') {
        let name = name.trim_start_matches('/');
        return !name.eq_ignore_ascii_case("unk")
            && !name.is_empty()
            && !name.contains(char::is_whitespace)
            && !name.contains(['<', '>']);
    }
    false
}

/// The role a special-token label names, at position `i`.
fn special_role(label: &str, i: usize) -> Role {
    let name = label
        .trim_matches(['[', ']', '<', '>', '|', '/'])
        .to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| name.contains(w));
    if has(&["pad"]) {
        Role::Pad
    } else if i == 0 {
        // Whatever it is called (GPT-2 opens with `<|endoftext|>`), it opens the sequence.
        Role::Start
    } else if label == "</s>" || has(&["sep", "eos", "eot", "end"]) {
        Role::End
    } else if label == "<s>" || has(&["cls", "bos", "begin", "start"]) {
        Role::Start
    } else {
        Role::Special
    }
}

/// Roles and surfaces of `labels` (see the module docs).
pub fn infer(labels: &[String]) -> Inferred {
    let ordinary = |t: &str| !is_special_label(t);
    let marker = labels
        .iter()
        .filter(|t| ordinary(t))
        .find_map(|t| ['Ġ', '▁'].into_iter().find(|&m| t.starts_with(m)));
    let word_end_marks = labels
        .iter()
        .any(|t| ordinary(t) && t.ends_with("</w>") && t.len() > 4);
    let mut roles = Vec::with_capacity(labels.len());
    let mut surfaces = Vec::with_capacity(labels.len());
    let mut prev_ordinary = false;
    let mut prev_ended_word = true;
    for (i, t) in labels.iter().enumerate() {
        if !ordinary(t) {
            roles.push(special_role(t, i));
            surfaces.push(String::new());
            prev_ordinary = false;
            prev_ended_word = true;
            continue;
        }
        let (continues, surface) = if let Some(rest) = t.strip_prefix("##") {
            (!rest.is_empty(), rest.to_string())
        } else if let Some(m) = marker {
            match t.strip_prefix(m) {
                Some(rest) => (false, format!(" {rest}")),
                None => (true, t.to_string()),
            }
        } else if word_end_marks {
            let stripped = t.strip_suffix("</w>");
            (
                !prev_ended_word,
                stripped.map_or_else(|| t.to_string(), |s| format!("{s} ")),
            )
        } else {
            (false, t.to_string())
        };
        prev_ended_word = !word_end_marks || t.ends_with("</w>");
        roles.push(if continues && prev_ordinary {
            Role::Piece
        } else {
            Role::Word
        });
        let surface = match marker {
            // Byte-level BPE labels spell bytes as characters (GPT-2's table): `Ã¼` is `ü`.
            Some('Ġ') => byte_level_text(t).unwrap_or(surface),
            _ => surface,
        };
        surfaces.push(surface.replace(['Ġ', '▁'], " ").replace('Ċ', "\n"));
        prev_ordinary = true;
    }
    let scheme = match marker {
        Some('Ġ') => LabelScheme::ByteLevel,
        Some(_) => LabelScheme::SentencePiece,
        None if labels.iter().any(|t| ordinary(t) && t.starts_with("##")) => LabelScheme::WordPiece,
        None => LabelScheme::Plain,
    };
    Inferred {
        roles,
        surfaces,
        scheme,
    }
}

/// The text a byte-level label spells, when its bytes are whole UTF-8 characters (GPT-2's byte
/// table, as every view decodes it: [`display::piece_text`]).
fn byte_level_text(label: &str) -> Option<String> {
    let text = display::piece_text(label, LabelScheme::ByteLevel);
    (!text.contains('\u{FFFD}')).then_some(text)
}

/// Word ids from roles: each [`Role::Word`] starts a word, each [`Role::Piece`] continues the one
/// before it (or starts one after a special token); special tokens have none. Numbered across
/// the pair.
pub fn word_ids(roles: &[Role], segments: &[u32]) -> Vec<Option<usize>> {
    let mut out = Vec::with_capacity(roles.len());
    let mut next = 0usize;
    let mut current: Option<usize> = None;
    for (i, r) in roles.iter().enumerate() {
        if r.is_special() {
            out.push(None);
            current = None;
            continue;
        }
        let new_segment = i > 0 && segments.get(i) != segments.get(i - 1);
        let id = match (r, current) {
            (Role::Piece, Some(w)) if !new_segment => w,
            _ => {
                next += 1;
                next - 1
            }
        };
        current = Some(id);
        out.push(Some(id));
    }
    out
}

/// The text of segment `segment` of `units`: its surfaces joined, trimmed (what a sentence read
/// back from its tokens looks like; WordPiece text comes back lower-cased and spaced).
pub fn text_of(units: &Units, segment: u32) -> String {
    let mut text = String::new();
    for i in 0..units.len() {
        if units.segments[i] != segment || units.is_special(i) {
            continue;
        }
        let s = &units.surfaces[i];
        // Pieces join their word; punctuation joins the word before it (as transformers'
        // `clean_up_tokenization_spaces` puts WordPiece text back together).
        let joins = units.roles[i] == Role::Piece
            || s.starts_with(['.', ',', '?', '!', ';', ':', ')', ']', '}', '\''])
            || s == "n't";
        if !text.is_empty()
            && !joins
            && !s.starts_with(char::is_whitespace)
            && !text.ends_with(char::is_whitespace)
        {
            text.push(' ');
        }
        text.push_str(s);
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Short name of an attention source for titles: a file's name, or the source as is.
pub fn source_name(source: &str) -> String {
    std::path::Path::new(source)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(source)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(s: &[&str]) -> Vec<String> {
        s.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn wordpiece_labels() {
        let l = labels(&[
            "[CLS]", "the", "un", "##believ", "##ably", "[UNK]", "[SEP]", "b", "[SEP]", "[PAD]",
        ]);
        let inf = infer(&l);
        use Role::*;
        assert_eq!(
            inf.roles,
            [Start, Word, Word, Piece, Piece, Word, End, Word, End, Pad]
        );
        assert_eq!(inf.surfaces[3], "believ");
        let segments = [0, 0, 0, 0, 0, 0, 0, 1, 1, 1];
        assert_eq!(
            word_ids(&inf.roles, &segments),
            [
                None,
                Some(0),
                Some(1),
                Some(1),
                Some(1),
                Some(2),
                None,
                Some(3),
                None,
                None
            ]
        );
    }

    #[test]
    fn byte_level_and_sentencepiece_labels() {
        use Role::*;
        let gpt2 = infer(&labels(&[
            "<|endoftext|>",
            "The",
            "Ġqu",
            "ick",
            "Ġfox",
            "Ċ",
        ]));
        assert_eq!(gpt2.roles, [Start, Word, Word, Piece, Word, Piece]);
        assert_eq!(gpt2.surfaces[2], " qu");
        assert_eq!(gpt2.surfaces[5], "\n");
        let bytes = infer(&labels(&["ĠÃ¼ber", "Ġcaf", "Ã©", "Ġx"]));
        assert_eq!(bytes.surfaces, [" über", " caf", "é", " x"]);
        let t5 = infer(&labels(&["▁The", "▁c", "at", "</s>", "<pad>"]));
        assert_eq!(t5.roles, [Word, Word, Piece, End, Pad]);
        let roberta = infer(&labels(&["<s>", "ĠA", "</s>", "</s>", "ĠB", "</s>"]));
        assert_eq!(roberta.roles, [Start, Word, End, End, Word, End]);
        let chat = infer(&labels(&[
            "<|im_start|>",
            "user",
            "<|im_end|>",
            "<extra_id_0>",
        ]));
        assert_eq!(chat.roles, [Start, Word, End, Special]);
    }

    #[test]
    fn word_end_marks_and_plain_labels() {
        use Role::*;
        let clip = infer(&labels(&["a</w>", "pho", "to</w>", "cat</w>"]));
        assert_eq!(clip.roles, [Word, Word, Piece, Word]);
        assert_eq!(clip.surfaces[0], "a ");
        let plain = infer(&labels(&["a", "<", "b", "<unk>", "[x]"]));
        assert_eq!(plain.roles, [Word; 5]);
    }

    #[test]
    fn text_comes_back_from_surfaces() {
        let l = labels(&[
            "[CLS]", "the", "un", "##believ", "##ably", "fox", "[SEP]", "it", "[SEP]",
        ]);
        let inf = infer(&l);
        let seg = vec![0, 0, 0, 0, 0, 0, 0, 1, 1];
        let u = Units::tokens(
            l,
            vec![],
            seg.clone(),
            seg.clone(),
            inf.roles.clone(),
            word_ids(&inf.roles, &seg),
            inf.surfaces,
        );
        assert_eq!(text_of(&u, 0), "the unbelievably fox");
        assert_eq!(text_of(&u, 1), "it");
        let inf = infer(&labels(&["<s>", "ĠThe", "Ġqu", "ick", "</s>"]));
        let n = 5;
        let u = Units::tokens(
            labels(&["<s>", "ĠThe", "Ġqu", "ick", "</s>"]),
            vec![],
            vec![0; n],
            vec![0; n],
            inf.roles.clone(),
            word_ids(&inf.roles, &[0; 5]),
            inf.surfaces,
        );
        assert_eq!(text_of(&u, 0), "The quick");
    }
}
