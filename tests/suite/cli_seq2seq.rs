//! The encoder–decoder families' inputs through the `attnviz` binary, on the tiny random BART,
//! T5 and Marian checkpoints: what cannot run gets one line and writes nothing (an empty source
//! or target, `--target` on a model without a decoder reading one, `--generate 0` or beyond the
//! decoder's positions, a target longer than the decoder takes); `--truncate`'s notes count the
//! source and the target; the figures quote what their rows read and keep the long side of a
//! long-source/short-target run (and the reverse) along its axis.

use std::fs;
use std::path::{Path, PathBuf};

use crate::fidelity::reference::fixture;
use crate::support::cli::{assert_clean_failure, run, tree};

const LONG: &str = "This is a very long sentence that goes on and on beyond the maximum length \
                    of the model, so the tokenizer must cut it somewhere before the end.";
const LONG_TARGET: &str =
    "Mein Freund liest jeden Morgen ein Buch im Garten, und die Kinder spielen Fußball.";

fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// `tiny-t5` with its tokenizer's 32-token limit lifted to 512: T5's relative positions set no
/// limit of their own, so a 60-token source or target runs.
fn t5_without_limit(dir: &Path) -> PathBuf {
    let to = dir.join("t5-512");
    crate::support::cli::copy_model(&fixture("tiny-t5"), &to);
    let config = to.join("tokenizer_config.json");
    let text = fs::read_to_string(&config).unwrap();
    assert!(text.contains("\"model_max_length\": 32"), "{text}");
    fs::write(
        &config,
        text.replace("\"model_max_length\": 32", "\"model_max_length\": 512"),
    )
    .unwrap();
    to
}

#[test]
fn seq2seq_inputs_that_cannot_run_get_one_line_and_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("out");
    fs::create_dir(&out_dir).unwrap();
    let (png, json) = (out_dir.join("a.png"), out_dir.join("a.json"));
    let outputs = ["--png", path(&png), "--json", path(&json)];
    let (bart, t5, marian) = (
        fixture("tiny-bart"),
        fixture("tiny-t5"),
        fixture("tiny-marian"),
    );
    let (bert, gpt2) = (fixture("tiny-bert"), fixture("tiny-gpt2"));
    let huge = usize::MAX.to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        // An empty source: one line, not the default-length note before it.
        (vec![path(&bart), ""], "the text is empty"),
        (vec![path(&marian), "  "], "the text is empty"),
        (vec![path(&bart), "Hi", "--target", ""], "--target is empty"),
        (vec![path(&t5), "Hi", "--target", " "], "--target is empty"),
        // Models whose decoder reads no target.
        (vec![path(&bert), "Hi", "--target", "x"], "drop --target"),
        (
            vec![path(&gpt2), "Hi", "--target", "x"],
            "or use --generate",
        ),
        (
            vec![path(&bart), "Hi", "--generate", "0"],
            "generates nothing",
        ),
        // Beyond the decoder's positions: said before the capture's size (which would be
        // astronomical), and no overflow at the largest number.
        (
            vec![path(&bart), "Hi", "--generate", "100000000"],
            "generate at most 31",
        ),
        (
            vec![path(&bart), "Hi", "--generate", &huge],
            "generate at most 31",
        ),
        (
            vec![path(&marian), "Hi", "--generate", &huge],
            "generate at most",
        ),
        (
            vec![path(&t5), "Hi", "--generate", &huge],
            "generate at most",
        ),
        // A target over the decoder's positions names the target, not "the input".
        (
            vec![path(&marian), "Hi", "--target", LONG_TARGET],
            "the target is 46 tokens long",
        ),
        (
            vec![path(&bart), "Hi", "--target", LONG_TARGET],
            "shorten --target or pass --truncate",
        ),
        (
            vec![path(&t5), "Hi", "--target", LONG_TARGET],
            "the target is",
        ),
    ];
    for (args, needle) in cases {
        let mut all = vec!["-m"];
        all.extend(&args);
        all.extend(outputs);
        let out = run(&all);
        assert_clean_failure(&out, needle);
        assert!(
            tree(&out_dir).is_empty(),
            "{args:?} left {:?}",
            tree(&out_dir)
        );
    }
}

#[test]
fn truncation_notes_count_the_source_and_the_target() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("a.json");
    for model in ["tiny-bart", "tiny-marian", "tiny-t5"] {
        let dir = fixture(model);
        // A long source over a short target: the note gives the source's kept length (the
        // encoder's tokens), whatever --kind shows.
        let out = run(&[
            "-m",
            path(&dir),
            LONG,
            "--target",
            "Ein Satz.",
            "--truncate",
            "--quiet",
            "--json",
            path(&json),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{model}: {err}");
        let doc: serde_json::Value = serde_json::from_slice(&fs::read(&json).unwrap()).unwrap();
        let n_source = doc["encoder"]["tokens"].as_array().unwrap().len();
        let n_target = doc["decoder"]["tokens"].as_array().unwrap().len();
        assert!(n_source > 2 * n_target, "{model}: {n_source} vs {n_target}");
        assert!(
            err.contains(&format!("truncated to the model's maximum of {n_source} ")),
            "{model}: {err}"
        );
        // The reverse: the target is cut, and its note says to what.
        let out = run(&[
            "-m",
            path(&dir),
            "Good morning.",
            "--target",
            LONG_TARGET,
            "--truncate",
            "--quiet",
            "--json",
            path(&json),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{model}: {err}");
        let doc: serde_json::Value = serde_json::from_slice(&fs::read(&json).unwrap()).unwrap();
        let n_target = doc["decoder"]["tokens"].as_array().unwrap().len();
        assert!(
            err.contains(&format!(
                "truncated to the decoder's maximum of {n_target} "
            )),
            "{model}: {err}"
        );
        assert!(!err.contains("model's maximum"), "{model}: {err}");
    }
}

/// The texts of an SVG's `<text>` elements, with their anchor and whether they read upwards.
fn svg_texts(svg: &str) -> Vec<(String, f64, f64, bool)> {
    let doc = roxmltree::Document::parse(svg).expect("SVG is XML");
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| {
            let num = |a: &str| n.attribute(a).and_then(|v| v.parse().ok()).unwrap_or(0.0);
            (
                n.text().unwrap_or("").trim().to_string(),
                num("x"),
                num("y"),
                n.attribute("transform").is_some(),
            )
        })
        .collect()
}

fn svg_size(svg: &str) -> (f64, f64) {
    let doc = roxmltree::Document::parse(svg).expect("SVG is XML");
    let root = doc.root_element();
    let num = |a: &str| root.attribute(a).unwrap().parse::<f64>().unwrap();
    (num("width"), num("height"))
}

/// The rows of a head figure's heatmap: the y of the first and the last row label's centre.
fn row_label_span(texts: &[(String, f64, f64, bool)], first: &str, last: &str) -> (f64, f64) {
    let y = |label: &str| {
        texts
            .iter()
            .find(|t| t.0 == label && !t.3)
            .unwrap_or_else(|| panic!("no row label {label:?} in {texts:?}"))
            .2
    };
    (y(first), y(last))
}

#[test]
fn figures_quote_their_rows_and_lay_out_one_by_sixty_and_sixty_by_one() {
    let tmp = tempfile::tempdir().unwrap();
    let t5 = t5_without_limit(tmp.path());
    let svg_path = tmp.path().join("a.svg");
    let figure = |source: &str, target: &str, kind: &str| {
        let out = run(&[
            "-m",
            path(&t5),
            source,
            "--target",
            target,
            "--kind",
            kind,
            "--quiet",
            "--svg",
            path(&svg_path),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        fs::read_to_string(&svg_path).unwrap()
    };
    let all = |texts: &[(String, f64, f64, bool)]| {
        texts
            .iter()
            .map(|t| t.0.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };

    // Two target rows (start token and one piece) over 76 source tokens: wide, the row title
    // shortened to its first word and beside the two rows (too short even for that: it starts at
    // the top row rather than running up into the subtitle), the subtitle quoting the target and
    // then the source.
    let svg = figure(LONG, "a", "cross");
    let texts = svg_texts(&svg);
    let (w, h) = svg_size(&svg);
    assert!(w > 3.0 * h, "{w}×{h}");
    let words = all(&texts);
    let (t, s) = (words.find("target: “a”"), words.find("source: “This is"));
    assert!(t.is_some() && s.is_some() && t < s, "{words}");
    // (`▁a` shown as a reader reads it: `a`)
    let (top, bottom) = row_label_span(&texts, "<pad>", "a");
    let title = texts
        .iter()
        .find(|t| t.3 && t.0.starts_with("Target"))
        .expect("a row title");
    assert_eq!(title.0, "Target");
    assert!(
        title.2 >= top - 2.0 && title.2 <= bottom + 2.0,
        "row title centred at y {} for rows centred at {top}..{bottom}",
        title.2
    );

    // 76 target rows over two source tokens: tall, the whole row title centred on the rows,
    // and the colour bar beside the narrow heatmap (the key title runs on under it), so the
    // figure stays narrow.
    let svg = figure("a", LONG, "cross");
    let texts = svg_texts(&svg);
    let (w, h) = svg_size(&svg);
    assert!(h > 2.0 * w && w <= 600.0, "{w}×{h}");
    let (top, bottom) = row_label_span(&texts, "<pad>", ".");
    let title = texts
        .iter()
        .find(|t| t.3 && t.0.starts_with("Target"))
        .expect("a row title");
    assert_eq!(title.0, "Target · decoder (attending from)");
    assert!((title.2 - (top + bottom) / 2.0).abs() <= 10.0, "{title:?}");

    // The decoder's figure quotes the target, which its rows and columns read, not the source.
    let svg = figure("Good morning.", "Ein Satz.", "decoder");
    let words = all(&svg_texts(&svg));
    assert!(words.contains("target: “Ein Satz.”"), "{words}");
    assert!(!words.contains("Good morning"), "{words}");
    let svg = figure("Good morning.", "Ein Satz.", "encoder");
    let words = all(&svg_texts(&svg));
    assert!(words.contains("source: “Good morning.”"), "{words}");
    assert!(!words.contains("Ein Satz"), "{words}");
}

#[test]
fn a_generation_is_quoted_as_generated_and_words_merge_marian_pieces() {
    let tmp = tempfile::tempdir().unwrap();
    let svg = tmp.path().join("a.svg");
    let json = tmp.path().join("a.json");
    let marian = fixture("tiny-marian");
    let out = run(&[
        "-m",
        path(&marian),
        "Good morning.",
        "--generate",
        "5",
        "--kind",
        "decoder",
        "--svg",
        path(&svg),
        "--json",
        path(&json),
        "--quiet",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // stderr: `generated 5 tokens: "…"`; the figure quotes the same text.
    let said = err
        .lines()
        .find_map(|l| l.strip_prefix("generated "))
        .and_then(|l| l.split_once(": "))
        .map(|(_, t)| t.trim_matches('"').to_string())
        .expect("the generation is said");
    let words = svg_texts(&fs::read_to_string(&svg).unwrap())
        .into_iter()
        .map(|t| t.0)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(words.contains("generated: “"), "{words}");
    assert!(words.contains(said.trim()), "{said:?} in {words}");

    // The JSON keeps what was generated (no target), and the figure drawn again from it by
    // `attnviz render` quotes the same text as the run's own.
    let doc: serde_json::Value = serde_json::from_slice(&fs::read(&json).unwrap()).unwrap();
    assert!(doc["target"].is_null(), "{}", doc["target"]);
    assert_eq!(
        doc["generated_text"].as_str().map(str::trim),
        Some(said.trim())
    );
    let again = tmp.path().join("again.svg");
    let out = run(&[
        "render",
        path(&json),
        "--kind",
        "decoder",
        "--svg",
        path(&again),
        "--quiet",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let subtitle = |svg: &Path| {
        svg_texts(&fs::read_to_string(svg).unwrap())
            .into_iter()
            .map(|t| t.0)
            .filter(|t| t.starts_with("generated: "))
            .collect::<Vec<_>>()
    };
    assert!(!subtitle(&svg).is_empty());
    assert_eq!(subtitle(&again), subtitle(&svg));

    // --words on SentencePiece pieces (source.spm and target.spm): both sides merge.
    let mut lens = Vec::new();
    for words in [false, true] {
        let mut args = vec![
            "-m",
            path(&marian),
            "Good morning, my friend.",
            "--target",
            "Guten Morgen, mein Freund.",
            "--quiet",
            "--json",
            path(&json),
        ];
        if words {
            args.push("--words");
        }
        let out = run(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&fs::read(&json).unwrap()).unwrap();
        lens.push((
            doc["cross"]["key_tokens"].as_array().unwrap().len(),
            doc["cross"]["tokens"].as_array().unwrap().len(),
        ));
    }
    assert!(
        lens[1].0 < lens[0].0 && lens[1].1 < lens[0].1,
        "tokens vs words: {lens:?}"
    );
}

#[test]
fn a_target_cut_to_the_decoders_bytes_is_not_called_the_input() {
    // 20 000 bytes of target over a 32-position decoder: cut to its byte limit, then to 32
    // tokens; the source ("Hi") was read whole, so no note speaks of the input.
    let target = "word ".repeat(4000);
    let bart = fixture("tiny-bart");
    let out = run(&["-m", path(&bart), "Hi", "--target", &target, "--quiet"]);
    assert_clean_failure(&out, "the target is 20000 bytes long");
    let out = run(&[
        "-m",
        path(&bart),
        "Hi",
        "--target",
        &target,
        "--truncate",
        "--quiet",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("the target is longer than the decoder could use"),
        "{err}"
    );
    assert!(err.contains("maximum of 32"), "{err}");
    assert!(!err.contains("input"), "{err}");
}
