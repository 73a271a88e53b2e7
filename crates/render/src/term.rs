//! Text on its way to a terminal. Every terminal view (the attention view, a picture's view, the
//! comparison, the tables) writes through a `Term`, and every message through
//! [`write_message`]: both show each control character (C0, DEL, C1: ESC, BEL, newline, …) and
//! each bidirectional formatting character of what they are given as a visible escape
//! (`<U+001B>`, `<U+202E>`; [`escape_controls`], the one escaping function), so a name, a path,
//! a token or a file's metadata can neither drive the terminal (an OSC 52 clipboard write, a
//! cursor move, a screen clear) nor reorder the line it is shown in.
//!
//! A view cannot skip it: a `Term` is not a [`Write`] (`write!` does not compile on it), it
//! takes text only, escapes all of it, and the only escape sequences it sends are the colours a
//! view asks for by name (`Paint`) and the line ends it asks for (`Term::end_line`).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write};

use crate::colormap::Rgb;

/// Whether `c` changes the direction of the text around it: the embeddings, overrides and
/// isolates U+202A–U+202E and U+2066–U+2069, and the marks U+200E, U+200F and U+061C.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

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
            let _ = write!(out, "<U+{:04X}>", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Write one message line (a warning, a note, an error) to `w`: `line` escaped as a whole, a
/// newline in it included, then one newline, in one write (so that lines written by several
/// threads do not interleave).
pub fn write_message(w: &mut dyn Write, line: &str) -> io::Result<()> {
    let mut text = escape_controls(line).into_owned();
    text.push('\n');
    w.write_all(text.as_bytes())
}

/// A colour or weight a view gives some of its text; drawn only where colour is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Paint {
    /// Bold (headings).
    Bold,
    /// Dim (legends, notes).
    Dim,
    /// A background colour (a heatmap cell).
    Back(Rgb),
    /// A foreground on a background colour (a value on its colour, a half block of a picture).
    On {
        /// The text's colour.
        fg: Rgb,
        /// The background.
        bg: Rgb,
    },
}

impl Paint {
    /// The SGR sequence that starts it.
    fn start(self, out: &mut String) {
        let _ = match self {
            Paint::Bold => write!(out, "\x1b[1m"),
            Paint::Dim => write!(out, "\x1b[2m"),
            Paint::Back(Rgb(r, g, b)) => write!(out, "\x1b[48;2;{r};{g};{b}m"),
            Paint::On { fg, bg } => write!(
                out,
                "\x1b[48;2;{};{};{};38;2;{};{};{}m",
                bg.0, bg.1, bg.2, fg.0, fg.1, fg.2
            ),
        };
    }
}

/// One line of a view, in spans of plain and painted text, as a view builds it before it is
/// written ([`Term::line`]): its text is escaped when written, never before.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Line {
    spans: Vec<(Option<Paint>, String)>,
}

impl Line {
    /// An empty line.
    pub fn new() -> Line {
        Line::default()
    }

    /// Add plain text.
    pub fn push(&mut self, text: &str) -> &mut Line {
        match self.spans.last_mut() {
            Some((None, last)) => last.push_str(text),
            _ => self.spans.push((None, text.to_string())),
        }
        self
    }

    /// Add painted text.
    pub fn paint(&mut self, paint: Paint, text: &str) -> &mut Line {
        self.spans.push((Some(paint), text.to_string()));
        self
    }

    /// Drop the plain spaces that end the line (a masked cell at the end of a row leaves
    /// nothing behind); painted text is kept whole, spaces included (a cell is two spaces on its
    /// colour).
    pub fn trim_end(&mut self) -> &mut Line {
        while let Some((None, text)) = self.spans.last_mut() {
            let kept = text.trim_end_matches(' ').len();
            text.truncate(kept);
            if !text.is_empty() {
                break;
            }
            self.spans.pop();
        }
        self
    }
}

impl From<&str> for Line {
    fn from(text: &str) -> Line {
        let mut line = Line::new();
        line.push(text);
        line
    }
}

/// Where a terminal view goes: text in, escaped text and the view's own colours out (see the
/// module's documentation). A line is written to the underlying writer when it ends.
pub(crate) struct Term<'w> {
    out: &'w mut dyn Write,
    color: bool,
    /// The line being written.
    pending: String,
}

impl<'w> Term<'w> {
    /// A terminal over `out`, drawing [`Paint`]s when `color`.
    pub fn new(out: &'w mut dyn Write, color: bool) -> Term<'w> {
        Term {
            out,
            color,
            pending: String::new(),
        }
    }

    /// Write `text`, escaped, on the current line.
    pub fn text(&mut self, text: &str) -> &mut Term<'w> {
        self.pending.push_str(&escape_controls(text));
        self
    }

    /// Write `text`, escaped, painted by `paint` where colour is on.
    pub fn painted(&mut self, paint: Paint, text: &str) -> &mut Term<'w> {
        if self.color {
            paint.start(&mut self.pending);
            self.text(text);
            self.pending.push_str("\x1b[0m");
        } else {
            self.text(text);
        }
        self
    }

    /// End the current line.
    pub fn end_line(&mut self) -> io::Result<()> {
        self.pending.push('\n');
        let result = self.out.write_all(self.pending.as_bytes());
        self.pending.clear();
        result
    }

    /// Write `text` as a line of its own (ended).
    pub fn say(&mut self, text: &str) -> io::Result<()> {
        self.text(text).end_line()
    }

    /// Write `text` as a line of its own, painted by `paint`.
    pub fn say_as(&mut self, paint: Paint, text: &str) -> io::Result<()> {
        self.painted(paint, text).end_line()
    }

    /// An empty line.
    pub fn blank(&mut self) -> io::Result<()> {
        self.end_line()
    }

    /// Write `line` as a line of its own.
    pub fn line(&mut self, line: &Line) -> io::Result<()> {
        for (paint, text) in &line.spans {
            match paint {
                Some(p) => self.painted(*p, text),
                None => self.text(text),
            };
        }
        self.end_line()
    }
}

impl Drop for Term<'_> {
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            let _ = self.out.write_all(self.pending.as_bytes());
        }
    }
}

/// What hostile text from outside looks like in tests: an OSC 52 clipboard write (ESC `]52;c;`
/// … BEL), a right-to-left override, a newline and a cursor move.
#[cfg(test)]
pub(crate) const HOSTILE: &str = "a\u{1b}]52;c;aGk=\u{7}b\u{202E}c\nd\u{1b}[2J";

/// Whether `shown` (what a terminal received) holds a control or bidirectional character other
/// than a line end and the colours a [`Term`] sends ([`Paint`]'s SGR sequences).
#[cfg(test)]
pub(crate) fn raw_controls(shown: &str) -> Vec<String> {
    let sgr = regex::Regex::new(r"\x1b\[[0-9;]*m").unwrap();
    sgr.replace_all(shown, "")
        .chars()
        .filter(|&c| (c.is_control() && c != '\n') || is_bidi_control(c))
        .map(|c| format!("U+{:04X}", c as u32))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(color: bool, f: impl FnOnce(&mut Term) -> io::Result<()>) -> String {
        let mut out = Vec::new();
        {
            let mut t = Term::new(&mut out, color);
            f(&mut t).unwrap();
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_control_and_bidi_character_is_escaped_on_every_path() {
        for color in [false, true] {
            let shown = written(color, |t| {
                t.text(HOSTILE);
                t.painted(Paint::Bold, HOSTILE);
                t.end_line()?;
                t.say(HOSTILE)?;
                t.say_as(Paint::Dim, HOSTILE)?;
                let mut line = Line::from(HOSTILE);
                line.paint(Paint::Back(Rgb(1, 2, 3)), HOSTILE).push(HOSTILE);
                t.line(&line)
            });
            assert_eq!(raw_controls(&shown), Vec::<String>::new(), "{shown:?}");
            assert_eq!(shown.lines().count(), 4, "{shown:?}");
            assert!(shown.contains("a<U+001B>]52;c;aGk=<U+0007>b<U+202E>c<U+000A>d<U+001B>[2J"));
            assert_eq!(shown.contains("\x1b[1m"), color);
        }
    }

    #[test]
    fn paints_are_drawn_only_with_colour_and_always_reset() {
        let paints = |t: &mut Term| {
            t.painted(Paint::Bold, "b")
                .painted(Paint::Dim, "d")
                .painted(Paint::Back(Rgb(253, 231, 37)), "  ")
                .painted(
                    Paint::On {
                        fg: Rgb(255, 255, 255),
                        bg: Rgb(0, 0, 0),
                    },
                    "v",
                )
                .end_line()
        };
        assert_eq!(
            written(true, paints),
            "\x1b[1mb\x1b[0m\x1b[2md\x1b[0m\x1b[48;2;253;231;37m  \x1b[0m\
             \x1b[48;2;0;0;0;38;2;255;255;255mv\x1b[0m\n"
        );
        assert_eq!(written(false, paints), "bd  v\n");
    }

    #[test]
    fn a_line_trims_its_trailing_plain_spaces_but_not_its_painted_cells() {
        let cell = Paint::Back(Rgb(0, 0, 0));
        let mut line = Line::from("ab");
        line.paint(cell, "  ").push("x  ").push("  ");
        line.trim_end();
        assert_eq!(written(false, |t| t.line(&line)), "ab  x\n");
        // A row that ends on a coloured cell keeps it.
        let mut line = Line::from("ab ");
        line.paint(cell, "  ").push("  ");
        line.trim_end();
        assert_eq!(
            written(true, |t| t.line(&line)),
            "ab \x1b[48;2;0;0;0m  \x1b[0m\n"
        );
        let mut blank = Line::from("   ");
        blank.trim_end();
        assert_eq!(written(false, |t| t.line(&blank)), "\n");
    }

    #[test]
    fn a_message_is_one_escaped_line() {
        let mut out = Vec::new();
        write_message(&mut out, HOSTILE).unwrap();
        let shown = String::from_utf8(out).unwrap();
        assert_eq!(raw_controls(&shown), Vec::<String>::new());
        assert_eq!(shown.matches('\n').count(), 1);
        assert!(shown.ends_with('\n'));
    }

    /// Every terminal view, fed [`HOSTILE`] in each field that comes from outside (the model's
    /// id and name, the text, the tokens, a picture's name, the special tokens' names, the
    /// lens's and the ablation's tokens): the field is shown, escaped, and nothing else.
    #[test]
    fn every_view_shows_each_outside_field_escaped() {
        use crate::analysis::attribution::{HeadAblation, TokenRef};
        use crate::analysis::lens::{LensToken, LogitLens};
        use crate::attention::fixtures::{encoder_decoder, synthetic, with_picture};
        use crate::attention::{Attention, HeadSel, Selection};
        use crate::compare::terminal::{write_compare_view, CompareTerminalOptions};
        use crate::image::picture::{terminal_view, Query};
        use crate::stats_table::{write_stats_table, StatsTableOptions};
        use crate::terminal::{write_matrix_view, write_view, MatrixText, TerminalOptions};

        let hostile = |mut att: Attention| {
            att.model.id = format!("/models/{HOSTILE}");
            att.model.name = Some(HOSTILE.to_string());
            att.text = HOSTILE.to_string();
            att
        };
        let tokens = ["[CLS]", HOSTILE, "b", "[SEP]"];
        let small = hostile(synthetic(&tokens, 1, 2));
        let long: Vec<String> = (0..60).map(|i| format!("{HOSTILE}{i}")).collect();
        let long: Vec<&str> = long.iter().map(String::as_str).collect();
        let long = hostile(synthetic(&long, 1, 1));
        let seq2seq = encoder_decoder(&tokens, &["<s>", HOSTILE, "</s>"], 1, 1, 2, 0);
        let cross = hostile(seq2seq.primary().clone());
        let mut picture = hostile(with_picture(HOSTILE));
        picture.model.name = Some(HOSTILE.to_string());

        let mut shown: Vec<(&str, String)> = Vec::new();
        let mut out = |name, f: &dyn Fn(&mut Vec<u8>) -> io::Result<()>| {
            let mut bytes = Vec::new();
            f(&mut bytes).unwrap();
            shown.push((name, String::from_utf8(bytes).unwrap()));
        };
        for color in [false, true] {
            for raw_tokens in [false, true] {
                let opts = TerminalOptions {
                    color,
                    raw_tokens,
                    ..TerminalOptions::default()
                };
                for att in [&small, &long, &cross] {
                    out("view", &|w| {
                        write_view(att, Selection::new(0, HeadSel::Mean), &opts, w)
                    });
                }
                let text = MatrixText {
                    title: "contributions".into(),
                    axes: "rows · columns".into(),
                    caption: "contribution".into(),
                    top_heading: "Strongest (top {top}):".into(),
                };
                out("matrix", &|w| {
                    write_matrix_view(&small, &small.matrix(0, HeadSel::Mean), &text, &opts, w)
                });
            }
            out("picture", &|w| {
                let text = terminal_view(&picture, 1, HeadSel::Mean, Query::Cls, color).unwrap();
                w.write_all(text.as_bytes())
            });
            let c = attnviz_analysis::compare::compare(&small, &small, Default::default()).unwrap();
            out("compare", &|w| {
                let opts = CompareTerminalOptions {
                    color,
                    ..CompareTerminalOptions::default()
                };
                write_compare_view(&c, &opts, w)
            });
            out("stats", &|w| {
                let opts = StatsTableOptions {
                    color,
                    token_names: Some(format!("{HOSTILE}, {HOSTILE}")),
                    ..StatsTableOptions::default()
                };
                write_stats_table(&crate::analysis::head_stats(&small), &opts, w)
            });
        }
        out("lens", &|w| {
            let token = LensToken {
                id: 0,
                text: HOSTILE.to_string(),
                prob: 0.5,
            };
            let lens = LogitLens {
                stages: vec!["embeddings".into()],
                positions: vec![HOSTILE.to_string()],
                k: 1,
                top: vec![vec![vec![token]]],
            };
            crate::lens_table::write_lens_table(&lens, 100, w)
        });
        out("ablation", &|w| {
            let ablation = HeadAblation {
                position: 0,
                position_token: HOSTILE.to_string(),
                target: TokenRef {
                    id: 1,
                    text: HOSTILE.to_string(),
                },
                mode: "zero",
                base_log_prob: -1.0,
                layers: 1,
                heads: 1,
                delta: vec![vec![0.5]],
                ranked: Vec::new(),
            };
            crate::heads_table::write_ablation(&ablation, w)
        });
        for (name, text) in &shown {
            assert_eq!(raw_controls(text), Vec::<String>::new(), "{name}: {text}");
            // Shown: escaped (a label cut to its column keeps its first escape), in the lens's
            // cells each control a `·`, or, where a token is named on its own (attribution,
            // ablation), quoted as JSON quotes it (`\u001b`: `analysis::lens::quoted`).
            assert!(
                text.contains("U+001B>")
                    || text.contains("U+001B⟩")
                    || text.contains("a·]52")
                    || text.contains("a\\u001b]52"),
                "{name} does not show the field: {text}"
            );
        }
        let picture_view = &shown.iter().find(|(n, _)| *n == "picture").unwrap().1;
        assert!(
            picture_view.contains("a<U+001B>]52;c;aGk=<U+0007>b<U+202E>c<U+000A>d"),
            "{picture_view}"
        );
    }
}
