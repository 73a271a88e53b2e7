//! Synthetic attention values for tests: every builder the workspace's unit tests use. Compiled
//! in every build (hidden from the docs), not behind a feature, so that `cargo test` reuses
//! `cargo build`'s crates (tests/suite/build_sharing.rs).

use super::*;

/// Roles, word ids and surfaces for test labels, standing in for a tokenizer (which is what
/// gives them in real use; see `crate::tokenize`). The convention, for tests only:
/// - a label in brackets or angle brackets is a special token: `[PAD]`/`<pad>` padding, the
///   first unit a sequence start, any other an end (`[CLS] … [SEP]`, `<s> … </s>`);
/// - WordPiece style: `##x` continues the word before it;
/// - byte-level or SentencePiece style (when some label starts with `Ġ` or `▁`): a label
///   starting with the marker starts a word and the others continue it.
///
/// Surfaces are the labels without the marks (`Ġ`/`▁` become a space).
pub fn units_for(tokens: &[&str]) -> Units {
    let is_special = |t: &str| {
        (t.starts_with('[') && t.ends_with(']') && t.len() > 2)
            || (t.starts_with('<') && t.ends_with('>') && t.len() > 2)
    };
    let marker = tokens
        .iter()
        .find_map(|t| ['Ġ', '▁'].into_iter().find(|&m| t.starts_with(m)));
    let mut roles = Vec::new();
    let mut surfaces = Vec::new();
    let mut word_ids = Vec::new();
    let mut word = 0usize;
    let mut prev_ordinary = false;
    for (i, t) in tokens.iter().enumerate() {
        if is_special(t) {
            let lower = t.to_ascii_lowercase();
            roles.push(if lower.contains("pad") {
                Role::Pad
            } else if i == 0 {
                Role::Start
            } else {
                Role::End
            });
            surfaces.push(String::new());
            word_ids.push(None);
            prev_ordinary = false;
            continue;
        }
        let (continues, surface) = match (marker, t.strip_prefix("##")) {
            (_, Some(rest)) => (true, rest.to_string()),
            (Some(m), None) => match t.strip_prefix(m) {
                Some(rest) => (false, format!(" {rest}")),
                None => (prev_ordinary, t.to_string()),
            },
            (None, None) => (false, t.to_string()),
        };
        if !(continues && prev_ordinary) {
            word += 1;
        }
        roles.push(if continues && prev_ordinary {
            Role::Piece
        } else {
            Role::Word
        });
        surfaces.push(surface);
        word_ids.push(Some(word - 1));
        prev_ordinary = true;
    }
    let n = tokens.len();
    Units::tokens(
        tokens.iter().map(|t| t.to_string()).collect(),
        (0..n as u32).collect(),
        vec![0; n],
        vec![0; n],
        roles,
        word_ids,
        surfaces,
    )
}

/// A model description for tests.
pub fn info(layers: usize, heads: usize) -> ModelInfo {
    ModelInfo {
        id: "synthetic".into(),
        revision: None,
        name: None,
        family: "BERT".into(),
        layers,
        heads,
        hidden_size: heads * 4,
        head_dim: 4,
    }
}

/// A small, deterministic attention value for unit tests of analyses and renderers:
/// `layers × heads` heads over `tokens` (roles as [`units_for`] gives them); head `h` of layer
/// `l` puts most of each row on key `(q + l + h) % n`, the rest spread evenly.
pub fn synthetic(tokens: &[&str], layers: usize, heads: usize) -> Attention {
    let n = tokens.len();
    let mut weights = Vec::with_capacity(layers * heads * n * n);
    for l in 0..layers {
        for h in 0..heads {
            for q in 0..n {
                let peak = (q + l + h) % n;
                for k in 0..n {
                    let rest = if n > 1 { 0.3 / (n - 1) as f32 } else { 0.0 };
                    weights.push(if k == peak {
                        0.7 + if n == 1 { 0.3 } else { 0.0 }
                    } else {
                        rest
                    });
                }
            }
        }
    }
    Attention::new(
        info(layers, heads),
        tokens.join(" "),
        None,
        units_for(tokens),
        weights,
    )
    .expect("synthetic attention is consistent")
}

/// A 2 × 3 patch grid of 4-pixel patches after a class token (2 layers, 3 heads), over a
/// 12 × 8 picture whose pixels are known, named `source`.
pub fn with_picture(source: &str) -> Attention {
    use crate::attention::image::{Cell, ImageInput, Preprocessing};
    let labels = ["CLS", "0,0", "0,1", "0,2", "1,0", "1,1", "1,2"];
    let att = synthetic(&labels, 2, 3);
    let mut cells = vec![Cell::Class];
    for row in 0..2 {
        for col in 0..3 {
            cells.push(Cell::Patch { row, col });
        }
    }
    let view: Vec<u8> = (0..12 * 8 * 3).map(|i| (i * 7 % 256) as u8).collect();
    att.with_image(ImageInput {
        source: source.into(),
        original: [30, 20],
        input: [12, 8],
        patch: 4,
        grid: [2, 3],
        preprocessing: Preprocessing {
            color: "rgb8".into(),
            resize: None,
            crop: None,
            rescale: Some(1.0 / 255.0),
            normalize: None,
            positions_from: None,
        },
        cells,
        norms: Vec::new(),
        pooling: None,
        windows: None,
        view,
    })
    .expect("the picture fits its tokens")
}

/// A grey 16 × 8 picture of two 8-pixel patches side by side, named `photo.jpg`: a
/// vision-language model's picture for the views' tests.
pub fn two_patch_picture() -> crate::attention::image::ImageInput {
    use crate::attention::image::{Cell, ImageInput, Preprocessing};
    ImageInput {
        source: "photo.jpg".into(),
        original: [16, 8],
        input: [16, 8],
        patch: 8,
        grid: [1, 2],
        preprocessing: Preprocessing {
            color: "rgb8".into(),
            resize: None,
            crop: None,
            rescale: None,
            normalize: None,
            positions_from: None,
        },
        cells: vec![
            Cell::Patch { row: 0, col: 0 },
            Cell::Patch { row: 0, col: 1 },
        ],
        norms: Vec::new(),
        pooling: None,
        windows: None,
        view: vec![128; 16 * 8 * 3],
    }
}

/// [`synthetic`] as a pair: units from `b_start` on are sentence B.
pub fn synthetic_pair(tokens: &[&str], b_start: usize, layers: usize, heads: usize) -> Attention {
    let att = synthetic(tokens, layers, heads);
    let mut units = att.queries().clone();
    for (i, s) in units.segments.iter_mut().enumerate() {
        *s = u32::from(i >= b_start);
    }
    units.type_ids = units.segments.clone();
    att.derive(Level::Token, false, units, None, att.weights().to_vec())
        .expect("same shape")
}

/// [`synthetic`] as a decoder's attention: causal, rotary positions, query head `h` reading
/// key/value head `kv[h]`, and the units from `generated` on generated by the model.
pub fn decoder(tokens: &[&str], layers: usize, kv: Vec<usize>, generated: usize) -> Attention {
    let base = synthetic(tokens, layers, kv.len());
    let mut units = base.queries().clone();
    for g in &mut units.generated[generated..] {
        *g = true;
    }
    base.derive(Level::Token, false, units, None, base.weights().to_vec())
        .expect("same shape")
        .with_mask(MaskKind::Causal)
        .with_positions(PositionScheme::Rotary)
        .with_kv_heads(kv)
        .expect("a head map for every head")
}

/// Weights for tests: `layers × heads` matrices of `nq × nk`; head `h` of layer `l` puts most
/// of row `q` on key `(q + l + h) % visible` (`visible`: the keys the row sees, all of them
/// unless `causal`, then `q + 1`), the rest spread evenly over the other visible keys.
pub fn peaked(layers: usize, heads: usize, nq: usize, nk: usize, causal: bool) -> Vec<f32> {
    let mut weights = Vec::with_capacity(layers * heads * nq * nk);
    for l in 0..layers {
        for h in 0..heads {
            for q in 0..nq {
                let visible = if causal { (q + 1).min(nk) } else { nk };
                let peak = (q + l + h) % visible;
                let rest = if visible > 1 {
                    0.3 / (visible - 1) as f32
                } else {
                    0.0
                };
                for k in 0..nk {
                    weights.push(if k >= visible {
                        0.0
                    } else if k == peak {
                        if visible == 1 {
                            1.0
                        } else {
                            0.7
                        }
                    } else {
                        rest
                    });
                }
            }
        }
    }
    weights
}

/// An encoder–decoder's three values for tests: the encoder over `source` (`enc_layers` layers),
/// the causal decoder over `target` and cross-attention (`dec_layers` layers), `heads` heads
/// each, weights from [`peaked`]; target units from `generated` on are flagged as generated
/// (`target.len()`: none, and the set carries the target text).
pub fn encoder_decoder(
    source: &[&str],
    target: &[&str],
    enc_layers: usize,
    dec_layers: usize,
    heads: usize,
    generated: usize,
) -> AttentionSet {
    let (ns, nt) = (source.len(), target.len());
    let mut model = info(enc_layers, heads);
    model.family = "BART".into();
    let text = source.join(" ");
    let src = units_for(source);
    let mut tgt = units_for(target);
    for g in &mut tgt.generated[generated.min(nt)..] {
        *g = true;
    }
    let encoder = Attention::new(
        model.clone(),
        text.clone(),
        None,
        src.clone(),
        peaked(enc_layers, heads, ns, ns, false),
    )
    .and_then(|a| a.with_kind(AttentionKind::Encoder))
    .expect("encoder");
    model.layers = dec_layers;
    let decoder = Attention::new(
        model.clone(),
        text.clone(),
        None,
        tgt.clone(),
        peaked(dec_layers, heads, nt, nt, true),
    )
    .and_then(|a| a.with_kind(AttentionKind::Decoder))
    .expect("decoder")
    .with_mask(MaskKind::Causal);
    let cross = Attention::cross(
        model,
        text,
        None,
        tgt,
        src,
        peaked(dec_layers, heads, nt, ns, false),
    )
    .expect("cross");
    let target_text = (generated >= nt).then(|| target.join(" "));
    AttentionSet::encoder_decoder(encoder, decoder, cross, target_text).expect("consistent")
}

/// An attention value over `tokens` with `layers × heads` heads; in every head, query `q` puts all
/// its weight on key `peak(l, h, q)`. Tokens from `b_start` on are sentence B.
pub fn one_hot(
    tokens: &[&str],
    layers: usize,
    heads: usize,
    b_start: Option<usize>,
    peak: impl Fn(usize, usize, usize) -> usize,
) -> Attention {
    let n = tokens.len();
    let mut weights = vec![0f32; layers * heads * n * n];
    for l in 0..layers {
        for h in 0..heads {
            for q in 0..n {
                weights[((l * heads + h) * n + q) * n + peak(l, h, q)] = 1.0;
            }
        }
    }
    let type_ids: Vec<u32> = (0..n)
        .map(|i| u32::from(b_start.is_some_and(|b| i >= b)))
        .collect();
    let mut units = units_for(tokens);
    // Every unit a word of its own (the figures' tests count cells, not words).
    units.word_ids = (0..n).map(Some).collect();
    units.type_ids = type_ids.clone();
    units.segments = type_ids;
    Attention::new(
        ModelInfo {
            id: "test-model".into(),
            revision: None,
            name: None,
            family: "BERT".into(),
            layers,
            heads,
            hidden_size: heads * 4,
            head_dim: 4,
        },
        tokens.join(" "),
        b_start.map(|_| "second".to_string()),
        units,
        weights,
    )
    .unwrap()
}

/// `att` as a causal model's attention with `heads / group` key/value heads (neighbouring heads
/// share one) and the units from `generated` on generated.
pub fn as_decoder(att: Attention, group: usize, generated: usize) -> Attention {
    let heads = att.heads();
    let mut units = att.queries().clone();
    for g in &mut units.generated[generated..] {
        *g = true;
    }
    att.derive(att.level, false, units, None, att.weights().to_vec())
        .unwrap()
        .with_mask(MaskKind::Causal)
        .with_kv_heads((0..heads).map(|h| h / group).collect())
        .unwrap()
}

/// An attention whose weights are the softmax of random query/key vectors, like the encoder's.
pub fn softmax_of_random(n: usize, layers: usize, heads: usize, d: usize) -> Attention {
    let mut seed = 0x2545_f491_u64;
    let mut rnd = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % 20_000) as f32 / 10_000.0 - 1.0
    };
    let total = layers * heads * n * d;
    let queries: Vec<f32> = (0..total).map(|_| 3.0 * rnd()).collect();
    let keys: Vec<f32> = (0..total).map(|_| 3.0 * rnd()).collect();
    let mut weights = Vec::with_capacity(layers * heads * n * n);
    for lh in 0..layers * heads {
        for q in 0..n {
            let qv = &queries[(lh * n + q) * d..][..d];
            let scores: Vec<f32> = (0..n)
                .map(|k| {
                    let kv = &keys[(lh * n + k) * d..][..d];
                    qv.iter().zip(kv).map(|(a, b)| a * b).sum::<f32>() / (d as f32).sqrt()
                })
                .collect();
            let top = scores.iter().cloned().fold(f32::MIN, f32::max);
            let z: f32 = scores.iter().map(|s| (s - top).exp()).sum();
            weights.extend(scores.iter().map(|s| (s - top).exp() / z));
        }
    }
    let mut tokens = vec!["[CLS]".to_string()];
    tokens.extend((1..n - 1).map(|i| format!("w{i}")));
    tokens.push("[SEP]".into());
    let refs: Vec<&str> = tokens.iter().map(String::as_str).collect();
    let units = units_for(&refs);
    Attention::new(
        ModelInfo {
            id: "test/vectors".into(),
            revision: None,
            name: None,
            family: "BERT".into(),
            layers,
            heads,
            hidden_size: heads * d,
            head_dim: d,
        },
        "w1 w2".into(),
        None,
        units,
        weights,
    )
    .and_then(|a| {
        a.with_query_key(Some(QueryKey {
            queries,
            keys,
            scale: None,
        }))
    })
    .unwrap()
}

/// A causal value over `tokens`, `heads` heads over `kv` key/value heads, each query
/// putting 0.6 on the first token and the rest evenly on the others it sees; the units from
/// `generated` on generated.
pub fn sink_causal(tokens: &[&str], heads: usize, kv: usize, generated: usize) -> Attention {
    let n = tokens.len();
    let base = synthetic(tokens, 1, heads);
    let row = |q: usize| {
        (0..n)
            .map(move |k| match (q, k) {
                (0, 0) => 1.0,
                (_, 0) => 0.6,
                (q, k) if k <= q => 0.4 / q as f32,
                _ => 0.0,
            })
            .collect::<Vec<f32>>()
    };
    let weights: Vec<f32> = (0..heads).flat_map(|_| (0..n).flat_map(row)).collect();
    let mut units = base.queries().clone();
    for g in &mut units.generated[generated..] {
        *g = true;
    }
    Attention::new(base.model.clone(), base.text.clone(), None, units, weights)
        .unwrap()
        .with_mask(MaskKind::Causal)
        .with_kv_heads((0..heads).map(|h| h * kv / heads).collect())
        .unwrap()
}

/// `layers × heads` heads over `n` tokens whose rows come from a small deterministic generator,
/// so layers don't commute (the synthetic value's shifted diagonals do).
pub fn irregular(layers: usize, heads: usize, n: usize) -> Attention {
    let base = synthetic(&vec!["x"; n], layers, heads);
    let mut state = 12345u64;
    let mut weights = Vec::new();
    for _ in 0..layers * heads * n {
        let row: Vec<f32> = (0..n)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                ((state >> 33) % 1000) as f32 + 1.0
            })
            .collect();
        let sum: f32 = row.iter().sum();
        weights.extend(row.iter().map(|w| w / sum));
    }
    Attention::new(
        base.model.clone(),
        base.text.clone(),
        None,
        base.queries().clone(),
        weights,
    )
    .unwrap()
}

/// A speech run's set (Whisper-like): `frames` encoder frames labelled by their time, a
/// decoder reading `<|startoftranscript|>`, `<|notimestamps|>`, each word's tokens and
/// `<|endoftext|>`, two layers of two heads, and a recording of `seconds` whose words are
/// `(word, tokens, start_frame, end_frame)`. Each row predicting one of a word's tokens puts
/// 0.7 of its weight on the frame in the middle of the word's time, the rest spread evenly;
/// the alignment heads are layer 1's.
pub fn speech(words: &[(&str, usize, usize, usize)], frames: usize, seconds: f64) -> AttentionSet {
    let (layers, heads) = (2, 2);
    let mut labels: Vec<String> = vec!["<|startoftranscript|>".into(), "<|notimestamps|>".into()];
    let mut recorded = Vec::new();
    for (word, tokens, start, end) in words {
        let first = labels.len();
        for t in 0..*tokens {
            labels.push(format!("Ġ{}{t}", word.trim()));
        }
        recorded.push(super::RecordedWord {
            word: word.to_string(),
            rows: first..labels.len(),
            start_frame: *start,
            end_frame: *end,
        });
    }
    labels.push("<|endoftext|>".into());
    let nt = labels.len();
    let target: Vec<&str> = labels.iter().map(String::as_str).collect();
    let frame_labels: Vec<String> = (0..frames)
        .map(|f| format!("{:.2}s", f as f64 * 0.02))
        .collect();
    let source: Vec<&str> = frame_labels.iter().map(String::as_str).collect();
    let mut model = info(layers, heads);
    model.family = "Whisper".into();
    let (src, tgt) = (units_for(&source), units_for(&target));
    let encoder = Attention::new(
        model.clone(),
        String::new(),
        None,
        src.clone(),
        peaked(layers, heads, frames, frames, false),
    )
    .and_then(|a| a.with_kind(AttentionKind::Encoder))
    .expect("encoder");
    let decoder = Attention::new(
        model.clone(),
        String::new(),
        None,
        tgt.clone(),
        peaked(layers, heads, nt, nt, true),
    )
    .and_then(|a| a.with_kind(AttentionKind::Decoder))
    .expect("decoder")
    .with_mask(MaskKind::Causal);
    let mut cross = vec![1.0 / frames as f32; layers * heads * nt * frames];
    for w in &recorded {
        let peak = (w.start_frame + w.end_frame) / 2;
        for r in w.predicting_rows() {
            for lh in 0..layers * heads {
                let row = &mut cross[(lh * nt + r) * frames..][..frames];
                row.fill(0.3 / (frames - 1) as f32);
                row[peak] = 0.7;
            }
        }
    }
    let cross = Attention::cross(model, String::new(), None, tgt, src, cross)
        .expect("cross")
        .with_target_text(Some(
            words
                .iter()
                .map(|w| w.0)
                .collect::<String>()
                .trim()
                .to_string(),
        ));
    let mel_frames = (seconds / 0.01).round() as usize;
    let mel_bins = 8;
    let recording = super::Recording {
        name: "<b>talk</b>.wav".into(),
        window_start: 0.0,
        window_seconds: seconds,
        frame_seconds: 0.02,
        mel_seconds: 0.01,
        mel_bins,
        mel_frames,
        mel: (0..mel_bins * mel_frames)
            .map(|i| ((i % mel_frames) as f32 * 0.1).sin() * (i / mel_frames) as f32 / 8.0)
            .collect(),
        words: recorded,
        alignment_heads: vec![(1, 0), (1, 1)],
        samples: (0..(seconds * 16_000.0) as usize)
            .map(|i| (i as f32 * 0.05).sin() * 0.5)
            .collect(),
        sample_rate: 16_000,
    };
    AttentionSet::encoder_decoder(encoder, decoder, cross, None)
        .expect("consistent")
        .with_recording(recording)
        .expect("the recording fits")
}
