//! "Did you mean": what the command line says when a word is close to one it knows.
//!
//! TEXT is positional, so without this a misspelt subcommand (`attnviz serv -m ./model`) would
//! be run as the text "serv". A first word that is a subcommand's name within one edit (or a
//! word other tools use for one, `compare`) is refused with the subcommand it is close to, and
//! how to analyse the word itself (`attnviz -- serv`), as a subcommand's own name already is.
//! Only a word of lower-case letters is taken for one: a sentence, a capitalised word or a word
//! with punctuation is a text.
//!
//! clap ranks an unknown flag's neighbours by Jaro similarity alone, which offers `--alti` for
//! `--ablation` and `--top` for `--output`. Unknown flags are ranked here instead
//! ([`similar_flag`]): the same name written with `_` or capitals, then a typo (one edit), then
//! shared words (`--logit-lens` → `--lens`), then a shared stem (`--ablation` → `--ablate`),
//! then two edits; with none, no guess is offered.

use std::ffi::OsString;

use clap::builder::StyledStr;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Command, CommandFactory, FromArgMatches};

use super::cli::Args;

/// Words other tools use for a subcommand, and the subcommand.
const SYNONYMS: &[(&str, &str)] = &[("compare", "diff")];

/// Parse the process's arguments, exiting with clap's message (and status 2) on a mistake.
pub fn parse_args() -> Args {
    try_parse(std::env::args_os()).unwrap_or_else(|e| e.exit())
}

/// Parse `argv` (the program name first) as [`parse_args`] does.
pub fn try_parse<I, T>(argv: I) -> Result<Args, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    let mut cmd = Args::command();
    cmd.build();
    if let Some(e) = near_subcommand(&cmd, &argv) {
        return Err(e);
    }
    let matches = cmd.clone().try_get_matches_from(&argv);
    match matches.and_then(|m| Args::from_arg_matches(&m)) {
        Ok(args) => Ok(args),
        Err(e) if e.kind() == ErrorKind::UnknownArgument => Err(better_flag(e, &cmd, &argv)),
        Err(e) => Err(e),
    }
}

/// The first word that is not a flag or a flag's value, before any `--`; `None` when there is
/// none, or when help or the version is asked for (clap prints those whatever else is there).
fn first_positional(cmd: &Command, argv: &[OsString]) -> Option<String> {
    let mut words = argv.iter().skip(1).map(|a| a.to_string_lossy()).peekable();
    let mut first = None;
    while let Some(word) = words.next() {
        if word == "--" {
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            if matches!(long, "help" | "version") {
                return None;
            }
            if long.contains('=') {
                continue;
            }
            if let Some(arg) = cmd.get_arguments().find(|a| {
                a.get_long_and_visible_aliases()
                    .is_some_and(|l| l.contains(&long))
            }) {
                skip_value(arg, &mut words);
            }
        } else if let Some(shorts) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            for (i, c) in shorts.char_indices() {
                if c == 'h' || c == 'V' {
                    return None;
                }
                let Some(arg) = cmd.get_arguments().find(|a| a.get_short() == Some(c)) else {
                    break;
                };
                if arg.get_action().takes_values() {
                    // `-mDIR` carries its value; `-m DIR` takes the next word.
                    if i + c.len_utf8() == shorts.len() {
                        skip_value(arg, &mut words);
                    }
                    break;
                }
            }
        } else if first.is_none() {
            first = Some(word.into_owned());
        }
    }
    first
}

/// Step over the value of `arg` in `words`, as clap reads it: a required value is the next
/// word whatever it is; an optional one (`--ablate [MODE]`) only when it is not a flag.
fn skip_value<'a>(
    arg: &clap::Arg,
    words: &mut std::iter::Peekable<impl Iterator<Item = std::borrow::Cow<'a, str>>>,
) {
    if !arg.get_action().takes_values() {
        return;
    }
    let optional = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
    match words.peek() {
        Some(next) if optional && next.starts_with('-') => {}
        Some(_) => {
            words.next();
        }
        None => {}
    }
}

/// The subcommand a first word is close to (one edit, or a synonym), if it is not one itself.
/// clap's `help` subcommand is left out: `held` or `hell` is more likely a text than a typo.
fn close_subcommand(cmd: &Command, word: &str) -> Option<String> {
    if word.is_empty() || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
    let names: Vec<&str> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .map(|s| s.get_name())
        .collect();
    if names.contains(&word) || word == "help" {
        return None;
    }
    let near = |a: &str, b: &str| strsim::osa_distance(a, b) <= 1;
    names
        .iter()
        .find(|n| near(word, n))
        .map(|n| n.to_string())
        .or_else(|| {
            SYNONYMS
                .iter()
                .find(|(synonym, _)| near(word, synonym))
                .map(|(_, n)| n.to_string())
        })
}

/// The error for a first word close to a subcommand, if it is one.
fn near_subcommand(cmd: &Command, argv: &[OsString]) -> Option<clap::Error> {
    let word = first_positional(cmd, argv)?;
    let name = close_subcommand(cmd, &word)?;
    let bin = cmd.get_name();
    let mut e = clap::Error::new(ErrorKind::InvalidSubcommand).with_cmd(cmd);
    e.insert(
        ContextKind::InvalidSubcommand,
        ContextValue::String(word.clone()),
    );
    e.insert(
        ContextKind::SuggestedSubcommand,
        ContextValue::Strings(vec![name]),
    );
    e.insert(
        ContextKind::Suggested,
        ContextValue::StyledStrs(vec![StyledStr::from(format!(
            "to analyse the text '{word}', write it after '--': '{bin} -- {word}'"
        ))]),
    );
    e.insert(
        ContextKind::Usage,
        ContextValue::StyledStr(cmd.clone().render_usage()),
    );
    Some(e)
}

/// clap's unknown-flag error with the neighbour [`similar_flag`] finds, among the flags of the
/// subcommand the flag was given to, in place of clap's own guess.
fn better_flag(mut e: clap::Error, cmd: &Command, argv: &[OsString]) -> clap::Error {
    let Some(ContextValue::String(typed)) = e.get(ContextKind::InvalidArg).cloned() else {
        return e;
    };
    let Some(typed) = typed.strip_prefix("--") else {
        return e;
    };
    let typed = typed.split('=').next().unwrap_or(typed);
    let owner = first_positional(cmd, argv)
        .and_then(|w| cmd.find_subcommand(&w).cloned())
        .unwrap_or_else(|| cmd.clone());
    let longs: Vec<&str> = owner
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long())
        .collect();
    // clap's Jaro guess goes (from its usage line too); its other tips (a subcommand's flag of
    // that name) stay.
    e.remove(ContextKind::SuggestedArg);
    e.insert(
        ContextKind::Usage,
        ContextValue::StyledStr(owner.clone().render_usage()),
    );
    match similar_flag(typed, &longs).as_slice() {
        [] => {}
        [one] => {
            e.remove(ContextKind::Suggested);
            e.insert(
                ContextKind::SuggestedArg,
                ContextValue::String(format!("--{one}")),
            );
        }
        several => {
            let list = several
                .iter()
                .map(|l| format!("'--{l}'"))
                .collect::<Vec<_>>()
                .join(", ");
            e.insert(
                ContextKind::Suggested,
                ContextValue::StyledStrs(vec![StyledStr::from(format!(
                    "similar arguments exist: {list}"
                ))]),
            );
        }
    }
    e
}

/// The known long flags (`longs`, without `--`) closest to the unknown `typed`, best first
/// (several only when they tie): the same name up to `_` and capitals; else one edit away (a
/// typo); else sharing words (every word of one name among the other's: `--logit-lens`,
/// `--lens`); else sharing a stem (a common start of 5 letters, or one name starting with the
/// whole other, of 3 letters or more: `--ablation`, `--ablate`); else, for names over 4
/// letters, two edits away. Nothing when none applies.
fn similar_flag<'a>(typed: &str, longs: &[&'a str]) -> Vec<&'a str> {
    let typed = typed.to_ascii_lowercase().replace('_', "-");
    if typed.is_empty() {
        return Vec::new();
    }
    let best = |scored: Vec<(usize, &'a str)>| -> Vec<&'a str> {
        let Some(min) = scored.iter().map(|(s, _)| *s).min() else {
            return Vec::new();
        };
        scored
            .into_iter()
            .filter(|(s, _)| *s == min)
            .map(|(_, l)| l)
            .collect()
    };
    if let Some(l) = longs.iter().find(|l| **l == typed) {
        return vec![l];
    }
    let edits = |most: usize| {
        best(
            longs
                .iter()
                .map(|l| (strsim::osa_distance(&typed, l), *l))
                .filter(|(d, _)| *d <= most)
                .collect(),
        )
    };
    let typo = edits(1);
    if !typo.is_empty() {
        return typo;
    }
    let words_of = |s: &str| {
        s.split('-')
            .filter(|w| !w.is_empty())
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let typed_words = words_of(&typed);
    let inside = |a: &[String], b: &[String]| a.iter().all(|w| b.contains(w));
    let shared = best(
        longs
            .iter()
            .filter_map(|l| {
                let words = words_of(l);
                (inside(&words, &typed_words) || inside(&typed_words, &words))
                    .then_some((words.len().abs_diff(typed_words.len()), *l))
            })
            .collect(),
    );
    if !shared.is_empty() {
        return shared;
    }
    let common = |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let stems = best(
        longs
            .iter()
            .filter_map(|l| {
                let shared = common(&typed, l);
                let whole = shared == l.len().min(typed.len()) && shared >= 3;
                // The longest shared start ranks first.
                (shared >= 5 || whole).then_some((usize::MAX - shared, *l))
            })
            .collect(),
    );
    if !stems.is_empty() {
        return stems;
    }
    if typed.chars().count() > 4 {
        return edits(2);
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(argv: &[&str]) -> String {
        try_parse(argv.iter().copied())
            .expect_err("a mistake")
            .render()
            .to_string()
    }

    #[test]
    fn a_first_word_one_edit_from_a_subcommand_is_refused_with_the_subcommand() {
        for (argv, name) in [
            (&["attnviz", "serv", "-m", "./model"][..], "serve"),
            (&["attnviz", "serv"], "serve"),
            (
                &["attnviz", "rendr", "out.npz", "--html", "r.html"],
                "render",
            ),
            (&["attnviz", "difff", "a.json", "b.json"], "diff"),
            (&["attnviz", "compare", "a.json", "b.json"], "diff"),
            (
                &["attnviz", "-m", "./model", "merg", "a", "--out", "x"],
                "merge",
            ),
            (&["attnviz", "--ablate", "mean", "sevre"], "serve"),
        ] {
            let e = error_of(argv);
            assert!(e.contains(&format!("'{name}'")), "{argv:?}: {e}");
            let word = argv
                .iter()
                .find(|w| e.contains(&format!("subcommand '{w}'")));
            let word = word.unwrap_or_else(|| panic!("{argv:?}: the word is named: {e}"));
            assert!(e.contains(&format!("attnviz -- {word}")), "{e}");
        }
    }

    #[test]
    fn texts_that_only_look_like_subcommands_are_still_texts() {
        for argv in [
            &["attnviz", "The cat sat."][..],
            &["attnviz", "Serve"],
            &["attnviz", "serve."],
            &["attnviz", "--", "serv"],
            &["attnviz", "--pair", "serv", "The cat"],
            &["attnviz", "-m", "serv", "The cat"],
            &["attnviz", "-mserv", "The cat"],
            &["attnviz", "--model=serv", "The cat"],
            &["attnviz", "cat"],
            &["attnviz", "held"],
        ] {
            let args = try_parse(argv.iter().copied()).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            assert!(args.command.is_none() && args.text.is_some(), "{argv:?}");
        }
        // Real subcommands run as they did.
        let args = try_parse(["attnviz", "diff", "a.json", "b.json"]).unwrap();
        assert!(matches!(
            args.command,
            Some(super::super::cli::Command::Diff(_))
        ));
    }

    #[test]
    fn unknown_flags_get_the_flag_they_resemble() {
        let mut cmd = Args::command();
        cmd.build();
        let longs: Vec<&str> = cmd.get_arguments().filter_map(|a| a.get_long()).collect();
        for (typed, expected) in [
            ("ablation", &["ablate"][..]),
            ("logit-lens", &["lens"]),
            ("max_memory", &["max-memory"]),
            ("Lens", &["lens"]),
            ("colour", &["color"]),
            ("lenses", &["lens"]),
            ("attributions", &["attribution"]),
            ("values-zeroing", &["value-zeroing"]),
            ("output", &[]),
            ("precision", &["full-precision", "html-precision"]),
            ("revison", &["revision"]),
            ("verbose", &[]),
            ("heatmap", &[]),
        ] {
            assert_eq!(similar_flag(typed, &longs), expected, "--{typed}");
        }
        let e = error_of(&["attnviz", "The cat", "--ablation"]);
        assert!(e.contains("'--ablate'") && !e.contains("--alti"), "{e}");
        let e = error_of(&["attnviz", "The cat", "--logit-lens"]);
        assert!(e.contains("'--lens'"), "{e}");
        let e = error_of(&["attnviz", "The cat", "--output", "x"]);
        assert!(
            !e.contains("--top"),
            "clap's guess is gone, from the usage line too: {e}"
        );
        let e = error_of(&["attnviz", "The cat", "--precision", "8"]);
        assert!(e.contains("'--full-precision', '--html-precision'"), "{e}");
        // A subcommand's flags are its own.
        let e = error_of(&["attnviz", "render", "a.npz", "--colour", "never"]);
        assert!(e.contains("'--color'"), "{e}");
        let e = error_of(&["attnviz", "serve", "-m", "x", "--prot", "1"]);
        assert!(e.contains("'--port'"), "{e}");
    }
}
