//! Every view of an encoder–decoder's three attentions, on real cross-attention: the tiny random
//! BART, Marian and T5 checkpoints' attentions that transformers computed
//! (`tests/reference/make_families.py`, eager attention), teacher-forced, for a long source
//! over a short target and the reverse. The values are built straight from the reference tensors
//! (no model runs here), so the views are checked on their own.
//!
//! With `ATTNVIZ_LOOK_DIR=DIR` every output is also written into DIR, to look at.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use attnviz::analysis::{self, Analysis, ViewOptions};
use attnviz::attention::{AttentionKind, AttentionSet, MaskKind, Role, Selection, Units};
use attnviz::render::image::{self, FigureSpec, ImageOptions};
use attnviz::render::json::{write_set_json, JsonOptions, KindSections};
use attnviz::render::terminal::{write_view, TerminalOptions};
use attnviz::{Attention, HeadSel, ModelInfo};
use candle_core::{Device, Tensor};
use serde_json::Value;

fn reference(name: &str) -> (Value, HashMap<String, Tensor>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference");
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap())
            .unwrap();
    let tensors =
        candle_core::safetensors::load(dir.join(format!("{name}.safetensors")), &Device::Cpu)
            .unwrap();
    (meta, tensors)
}

use crate::support::data::strings;

/// Units of one side: roles from the special tokens (a special token first in the sequence
/// opens it, padding is padding, any other special token ends it), words from the model's word
/// marker (`Ġ`, `▁`), surfaces from the labels. A stand-in for the tokenizer, good enough to
/// label and merge the views.
fn units(tokens: &[String], specials: &[String], marker: char) -> Units {
    let n = tokens.len();
    let mut roles = Vec::new();
    let mut word_ids = Vec::new();
    let mut surfaces = Vec::new();
    let mut word = 0usize;
    let mut prev = false;
    for (i, t) in tokens.iter().enumerate() {
        if specials.contains(t) {
            roles.push(if t.contains("pad") {
                Role::Pad
            } else if i == 0 {
                Role::Start
            } else {
                Role::End
            });
            word_ids.push(None);
            surfaces.push(String::new());
            prev = false;
            continue;
        }
        let starts = !prev || t.starts_with(marker);
        if starts {
            word += 1;
        }
        roles.push(if starts { Role::Word } else { Role::Piece });
        word_ids.push(Some(word - 1));
        surfaces.push(t.replace(marker, " "));
        prev = true;
    }
    Units::tokens(
        tokens.to_vec(),
        (0..n as u32).collect(),
        vec![0; n],
        vec![0; n],
        roles,
        word_ids,
        surfaces,
    )
}

fn weights(tensors: &HashMap<String, Tensor>, key: &str) -> (Vec<f32>, Vec<usize>) {
    let t = &tensors[key];
    (
        t.flatten_all().unwrap().to_vec1().unwrap(),
        t.dims().to_vec(),
    )
}

/// The three attentions of `case` of the tiny `model`, as one set.
fn reference_set(model: &str, case: &str) -> AttentionSet {
    let (meta, tensors) = reference(model);
    let c = meta["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == case)
        .unwrap();
    let specials: Vec<String> = meta["special_tokens"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "unk_token")
        .map(|(_, v)| v[0].as_str().unwrap().to_string())
        .collect();
    let family = meta["family"].as_str().unwrap();
    let marker = if family == "bart" { 'Ġ' } else { '▁' };
    let source = units(&strings(&c["tokens"]), &specials, marker);
    let target = units(&strings(&c["decoder_tokens"]), &specials, marker);
    let (enc_w, enc_dims) = weights(&tensors, &format!("{case}.encoder.attentions"));
    let (dec_w, dec_dims) = weights(&tensors, &format!("{case}.decoder.attentions"));
    let (cross_w, _) = weights(&tensors, &format!("{case}.cross.attentions"));
    let info = |dims: &[usize]| ModelInfo {
        id: format!("tiny-{family}"),
        revision: None,
        name: None,
        family: family.to_uppercase(),
        layers: dims[0],
        heads: dims[1],
        hidden_size: 32,
        head_dim: 32 / dims[1],
    };
    let text = c["text"].as_str().unwrap().to_string();
    let encoder = Attention::new(info(&enc_dims), text.clone(), None, source.clone(), enc_w)
        .unwrap()
        .with_kind(AttentionKind::Encoder)
        .unwrap();
    let decoder = Attention::new(info(&dec_dims), text.clone(), None, target.clone(), dec_w)
        .unwrap()
        .with_kind(AttentionKind::Decoder)
        .unwrap()
        .with_mask(MaskKind::Causal);
    let cross = Attention::cross(info(&dec_dims), text, None, target, source, cross_w).unwrap();
    let goal = c["target"].as_str().map(String::from);
    AttentionSet::encoder_decoder(encoder, decoder, cross, goal).unwrap()
}

fn look_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("ATTNVIZ_LOOK_DIR")?);
    std::fs::create_dir_all(&dir).unwrap();
    Some(dir)
}

fn terminal(att: &Attention, head: HeadSel) -> String {
    let mut out = Vec::new();
    let layer = att.layers() - 1;
    write_view(
        att,
        Selection::new(layer, head),
        &TerminalOptions::default(),
        &mut out,
    )
    .unwrap();
    String::from_utf8(out).unwrap()
}

const CASES: [(&str, &str); 6] = [
    ("tiny-bart", "long_source"),
    ("tiny-bart", "long_target"),
    ("tiny-marian", "long_source"),
    ("tiny-marian", "long_target"),
    ("tiny-t5", "long_source"),
    ("tiny-t5", "long_target"),
];

#[test]
fn every_view_of_real_cross_attention() {
    let look = look_dir();
    for (model, case) in CASES {
        let set = reference_set(model, case);
        let cross = set.cross().unwrap();
        let (nt, ns) = (cross.n_queries(), cross.n_keys());
        // Terminal: an alignment line per target token, each within 80 columns.
        let text = terminal(cross, HeadSel::Mean);
        let aligned = text
            .lines()
            .filter(|l| {
                l.contains(" → ") && l.trim_start().starts_with(|c: char| c.is_ascii_digit())
            })
            .count();
        assert_eq!(aligned, nt, "{model} {case}:\n{text}");
        for line in text.lines() {
            assert!(
                unicode_width::UnicodeWidthStr::width(line) <= 80,
                "{model} {case}: {line}"
            );
        }
        let mut all_text = text.clone();
        for kind in [AttentionKind::Encoder, AttentionKind::Decoder] {
            all_text.push('\n');
            all_text.push_str(&terminal(set.kind(kind).unwrap(), HeadSel::Index(0)));
        }
        // Images: every figure of every kind, PNG and SVG; cross figures are target × source.
        let opts = ImageOptions::default();
        for att in &set {
            for (name, figure) in FigureSpec::all(att.layers() - 1, HeadSel::Index(1), None) {
                let png = image::render_png(att, &figure, &opts).unwrap();
                let svg = image::render_svg(att, &figure, &opts).unwrap();
                if att.kind == AttentionKind::Cross && name == "head" {
                    let (w, h) = image::figure_size(att, &figure, &opts).unwrap();
                    // The long side lies along its axis: a long source makes the figure wide, a
                    // long target tall.
                    if ns > 2 * nt {
                        assert!(w > h, "{model} {case}: {w}×{h}");
                    } else {
                        assert!(h > w / 2, "{model} {case}: {w}×{h}");
                    }
                    assert!(svg.contains("Source · encoder (attended to)"));
                    // In full along tall rows, shortened along short ones.
                    assert!(
                        svg.contains("Target · decoder (attending from)")
                            || (ns > 2 * nt && svg.contains(">\nTarget")),
                        "{model} {case}"
                    );
                }
                if let Some(dir) = &look {
                    let stem = format!("{model}-{case}-{}-{name}", att.kind.as_str());
                    std::fs::write(dir.join(format!("{stem}.png")), &png).unwrap();
                    std::fs::write(dir.join(format!("{stem}.svg")), &svg).unwrap();
                }
            }
        }
        // JSON version 3 with every kind, and the alignment figures of cross-attention.
        let analyses: Vec<Analysis> = set.iter().map(Analysis::compute).collect();
        let sections: Vec<KindSections> = analyses
            .iter()
            .map(|a| KindSections {
                extra: vec![("stats", serde_json::to_value(a.stats_section()).unwrap())],
                matrices: Vec::new(),
            })
            .collect();
        let mut json = Vec::new();
        write_set_json(&set, &sections, JsonOptions::default(), &mut json).unwrap();
        let doc: Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(doc["format_version"], 3);
        assert_eq!(doc["cross"]["key_tokens"], doc["encoder"]["tokens"]);
        let share = &doc["cross"]["stats"]["alignment"]["argmax_share"];
        assert_eq!(share.as_array().unwrap().len(), cross.layers());
        // Word level merges both sides; the set stays consistent.
        let words = analysis::view_set(
            &set,
            ViewOptions {
                words: true,
                no_special: true,
            },
        )
        .unwrap();
        let wc = words.cross().unwrap();
        assert!(wc.n_keys() < ns && wc.n_queries() < nt, "{model} {case}");
        let word_text = terminal(wc, HeadSel::Mean);
        if let Some(dir) = &look {
            let stem = format!("{model}-{case}");
            std::fs::write(dir.join(format!("{stem}-terminal.txt")), &all_text).unwrap();
            std::fs::write(dir.join(format!("{stem}-words-terminal.txt")), &word_text).unwrap();
            std::fs::write(dir.join(format!("{stem}.json")), &json).unwrap();
            let png = image::render_png(
                wc,
                &FigureSpec::Head {
                    layer: wc.layers() - 1,
                    head: HeadSel::Mean,
                },
                &opts,
            )
            .unwrap();
            std::fs::write(dir.join(format!("{stem}-words-cross-mean.png")), png).unwrap();
        }
    }
}
