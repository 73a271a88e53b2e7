//! Streaming JSON export of an [`Attention`]. The schema is documented in `docs/json.md`.
//!
//! The attention array is formatted one layer at a time (heads in parallel) and written straight
//! to the output, so even 512 tokens never build one giant string in memory.

use std::io::{self, Write};

use rayon::prelude::*;

mod number;

use crate::analysis::Analysis;
use crate::attention::{Attention, AttentionSet, ModelInfo};
use number::{format_matrix, format_matrix_into};

use crate::doc::{
    image::{ImageDoc, PictureDoc},
    ModelV3Doc, SetMeta, UnitsDoc,
};
use crate::doc::{lines::write_fields, BodyMeta, Header, KeyUnitsDoc, LayerMaskDoc, ModelDoc};
pub use crate::doc::{ENCODER_DECODER_VERSION, FORMAT_VERSION};

/// An optional section of the JSON export (`--json-include`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonSection {
    /// `means[layer][query][key]`: the mean over each layer's heads.
    Means,
    /// `rollout[layer][query][key]`: attention rollout (Abnar & Zuidema 2020) through each layer.
    Rollout,
    /// `head_attribution`: each head's direct logit attribution at the last position (a run of
    /// the model, not the attention: decoders).
    HeadAttribution,
    /// `head_ablation`: the change in the target's log-probability when each head is zeroed
    /// (a run of the model, as `HeadAttribution`).
    HeadAblation,
    /// `alti[layer][query][key]` and `alti_per_layer[layer][query][key]`: ALTI (Ferrando et
    /// al. 2022) through each layer and of each layer alone (a run of the model's value terms).
    Alti,
    /// `value_zeroing[layer][query][key]` and `value_zeroing_per_layer[layer][query][key]`:
    /// value zeroing (Mohebbi et al. 2023) rolled out through each layer and of each layer alone
    /// (a run of the model).
    ValueZeroing,
}

impl JsonSection {
    /// Whether the section comes from a run of the model rather than from its attention.
    pub fn from_model(self) -> bool {
        matches!(
            self,
            JsonSection::HeadAttribution
                | JsonSection::HeadAblation
                | JsonSection::Alti
                | JsonSection::ValueZeroing
        )
    }
}

crate::choice!(JsonSection {
    Means => ("means", "Each layer's mean over its heads"),
    Rollout => ("rollout", "Attention rollout (Abnar & Zuidema 2020) through each layer"),
    HeadAttribution => ("head_attribution", "Each head's direct logit attribution at the last position (decoders)"),
    HeadAblation => ("head_ablation", "The change in the target's log-probability when each head is removed (decoders)"),
    Alti => ("alti", "ALTI (Ferrando et al. 2022): each input token's contribution through each layer"),
    ValueZeroing => ("value_zeroing", "Value zeroing (Mohebbi et al. 2023): each context token's share, rolled out through each layer"),
});

/// How numbers are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JsonOptions {
    /// Write each weight as the shortest decimal that reads back as the same f32, instead of
    /// rounding to 6 significant digits.
    pub full_precision: bool,
}

/// The `model` object of every attnviz JSON file: id, name, revision, family and shape
/// ([`ModelDoc`]).
pub fn model_json(m: &ModelInfo) -> serde_json::Value {
    serde_json::to_value(ModelDoc::of(m)).expect("a model serialises")
}

/// Write `att` as JSON. `extra` holds additional top-level sections (e.g. `("stats", value)`),
/// written after the metadata and before `attention`.
pub fn write_json(
    att: &Attention,
    extra: &[(&str, serde_json::Value)],
    opts: JsonOptions,
    w: &mut dyn Write,
) -> io::Result<()> {
    write_json_with(att, extra, &[], opts, w)
}

/// A section of `n_query × n_key` matrices, one per layer, streamed after `attention` like it:
/// `name: float[layers][n_query][n_key]` (e.g. the layer means, the rollout).
#[derive(Clone, Copy, Debug)]
pub struct MatrixSection<'a> {
    /// Field name.
    pub name: &'a str,
    /// One row-major `n_query × n_key` matrix per layer (row = query).
    pub layers: &'a [Vec<f32>],
}

/// [`write_json`] followed by `matrices`, each written after `attention`, in the same number
/// format.
pub fn write_json_with(
    att: &Attention,
    extra: &[(&str, serde_json::Value)],
    matrices: &[MatrixSection],
    opts: JsonOptions,
    w: &mut dyn Write,
) -> io::Result<()> {
    w.write_all(b"{")?;
    write_fields(
        &Header::new(FORMAT_VERSION, opts.full_precision),
        w,
        "  ",
        true,
    )?;
    write_body(att, extra, matrices, opts, w, "  ")?;
    w.write_all(b"\n}\n")?;
    Ok(())
}

/// What one kind of an encoder–decoder document carries besides its attention: its `stats`
/// and other sections, and its matrix sections (`means`, `rollout`).
#[derive(Clone, Debug, Default)]
pub struct KindSections<'a> {
    /// Extra fields (`("stats", value)`), written before `attention`.
    pub extra: Vec<(&'a str, serde_json::Value)>,
    /// Matrix sections written after `attention`.
    pub matrices: Vec<MatrixSection<'a>>,
}

/// Write a run's attention: a single value as [`write_json_with`] does (format version 2, the
/// layout every reader of version 2 reads), an encoder–decoder's three values as a version-3
/// document (`docs/json.md`): the shared metadata, `kinds`, then one object per kind
/// (`encoder`, `decoder`, `cross`), each laid out as a version-2 document's body. `sections`
/// has one entry per value of `set`, in its order.
pub fn write_set_json(
    set: &AttentionSet,
    sections: &[KindSections],
    opts: JsonOptions,
    w: &mut dyn Write,
) -> io::Result<()> {
    if sections.len() != set.iter().count() {
        return Err(io::Error::other(format!(
            "{} section lists for {} attentions",
            sections.len(),
            set.iter().count()
        )));
    }
    if !set.is_encoder_decoder() {
        let s = &sections[0];
        return write_json_with(set.primary(), &s.extra, &s.matrices, opts, w);
    }
    let first = set.primary();
    let (enc, dec) = (
        set.encoder().expect("an encoder–decoder set"),
        set.decoder().expect("an encoder–decoder set"),
    );
    let m = &enc.model;
    let meta = SetMeta {
        model: ModelV3Doc {
            id: m.id.clone(),
            name: m.name.clone(),
            revision: m.revision.clone(),
            family: m.family.clone(),
            hidden_size: m.hidden_size,
            head_dim: m.head_dim,
            encoder_layers: enc.layers(),
            encoder_heads: enc.heads(),
            decoder_layers: dec.layers(),
            decoder_heads: dec.heads(),
        },
        text: set.text(),
        target: set.target(),
        generated_text: set.generated_text(),
        level: first.level,
        special_excluded: first.special_excluded,
        kinds: set.kinds(),
    };
    w.write_all(b"{")?;
    write_fields(
        &Header::new(ENCODER_DECODER_VERSION, opts.full_precision),
        w,
        "  ",
        true,
    )?;
    write_fields(&meta, w, "  ", false)?;
    for (att, s) in set.iter().zip(sections) {
        w.write_all(b",\n  ")?;
        serde_json::to_writer(&mut *w, att.kind.as_str()).map_err(io::Error::from)?;
        w.write_all(b": {")?;
        write_body(att, &s.extra, &s.matrices, opts, w, "    ")?;
        w.write_all(b"\n  }")?;
    }
    w.write_all(b"\n}\n")?;
    Ok(())
}

/// Each captured layer's mask as the model ran it: `sliding_window` and its width where the
/// layer has one, the value's mask and `null` otherwise.
fn layer_masks(att: &Attention) -> Vec<LayerMaskDoc> {
    (0..att.layers())
        .map(|l| LayerMaskDoc::new(att.layer_number(l), att.mask, att.window(l)))
        .collect()
}

/// Each row's share on a learned attention sink, `[layers][heads][queries]`, when `att` has
/// them.
fn sink_shares(att: &Attention) -> Option<Vec<Vec<Vec<f32>>>> {
    let shares = att.sink_shares()?;
    let n = att.n_queries().max(1);
    let mut rows = shares.chunks_exact(n).map(<[f32]>::to_vec);
    Some(
        (0..att.layers())
            .map(|_| rows.by_ref().take(att.heads()).collect())
            .collect(),
    )
}

/// The metadata of `att`'s version-2 body, before its sections and `attention` array: the
/// model, kind, mask, layer numbers and masks, texts, what the weights are, and every per-unit
/// field (queries, and keys for cross-attention). A saved capture's metadata holds it for each
/// kind (`crate::save`).
pub fn body_meta(att: &Attention) -> BodyMeta<'_> {
    // A vision model's picture: the patch grid, what each token is, the image's size and the
    // preprocessing applied (`docs/json.md`).
    // With the pixels the model saw, so that `render` draws on the picture without the file.
    let image = att
        .image
        .as_ref()
        .map(|image| ImageDoc::of(image, view_png(image)));
    // A vision-language model's pictures: where each one's image tokens are among the units.
    let spans = &att.queries().spans;
    let pictures = att
        .pictures
        .iter()
        .filter_map(|p| {
            let first = spans.iter().position(|s| s.start == p.first)?;
            Some(PictureDoc {
                first,
                count: p.image.cells.len(),
                image: ImageDoc::of(&p.image, view_png(&p.image)),
                bidirectional: p.bidirectional,
                tile: p.tile,
            })
        })
        .collect();
    BodyMeta {
        model: ModelDoc::of(&att.model),
        kind: att.kind,
        mask: att.mask,
        positions: att.positions,
        sink: att.sink(),
        kv_heads: att.kv_heads(),
        kv_head: att.kv_head(),
        layer_numbers: att.layer_numbers().into(),
        layer_masks: layer_masks(att),
        text: &att.text,
        pair: att.pair.as_deref(),
        level: att.level,
        special_excluded: att.special_excluded,
        attention_holds: att.holds,
        image,
        pictures,
        // In units: those that start inside the prefix's tokens.
        prefix: spans.iter().filter(|s| s.start < att.prefix).count(),
        router: att.router.as_deref().map(crate::doc::router::RouterDoc::of),
        non_softmax: att
            .non_softmax
            .as_ref()
            .map(crate::doc::mixing::NonSoftmaxDoc::of),
        sink_shares: sink_shares(att),
        queries: UnitsDoc::of(att.queries(), att.level),
        keys: (!att.is_square()).then(|| KeyUnitsDoc::of(att.keys(), att.level)),
    }
}

/// One value's fields (everything a version-2 document holds after its header), at `indent`,
/// each preceded by a comma except the first: the model, kind, mask, units, `extra`, the
/// attention and `matrices`.
fn write_body(
    att: &Attention,
    extra: &[(&str, serde_json::Value)],
    matrices: &[MatrixSection],
    opts: JsonOptions,
    w: &mut dyn Write,
    indent: &str,
) -> io::Result<()> {
    // The header, if any, came before: every field here follows a comma, except in a nested
    // object, which opens with its first field.
    let nested = indent.len() > 2;
    write_fields(&body_meta(att), w, indent, nested)?;
    write_fields(&Extra(extra), w, indent, false)?;
    let inner = format!("{indent}  ");
    let deeper = format!("{indent}    ");
    write!(w, ",\n{indent}\"attention\": [")?;
    let (nq, n) = (att.n_queries(), att.n_keys());
    // Each head's text goes into a buffer kept from layer to layer (fresh megabytes per head
    // would cost a page fault per 4 KB), and the pool formats layer l + 1 while this thread
    // writes layer l: writing (a copy into the page cache, or into a pipe) then costs no time
    // of its own.
    let fill = |layer: usize, bufs: &mut Vec<Vec<u8>>| {
        bufs.resize_with(att.heads(), Vec::new);
        bufs.par_iter_mut().enumerate().for_each(|(h, buf)| {
            format_matrix_into(buf, att.head(layer, h), n, opts.full_precision)
        });
    };
    let (mut current, mut spare) = (Vec::new(), Vec::new());
    if att.layers() > 0 {
        fill(0, &mut current);
    }
    for layer in 0..att.layers() {
        let more = layer + 1 < att.layers();
        let written = std::thread::scope(|scope| {
            let ahead = more.then(|| scope.spawn(|| fill(layer + 1, &mut spare)));
            let written = write_layer(w, layer, &current, &inner, &deeper);
            if let Some(ahead) = ahead {
                ahead.join().expect("formatting a layer does not panic");
            }
            written
        });
        written?;
        std::mem::swap(&mut current, &mut spare);
    }
    write!(w, "\n{indent}]")?;
    for section in matrices {
        if section.layers.iter().any(|m| m.len() != nq * n) {
            return Err(io::Error::other(format!(
                "the {} matrices are not {nq} × {n}",
                section.name
            )));
        }
        write!(w, ",\n{indent}")?;
        serde_json::to_writer(&mut *w, section.name).map_err(io::Error::from)?;
        w.write_all(b": [")?;
        let formatted: Vec<Vec<u8>> = section
            .layers
            .par_iter()
            .map(|m| format_matrix(m, n, opts.full_precision))
            .collect();
        for (l, buf) in formatted.iter().enumerate() {
            write!(w, "{}\n{inner}", if l == 0 { "" } else { "," })?;
            w.write_all(buf)?;
        }
        write!(w, "\n{indent}]")?;
    }
    Ok(())
}

/// A body's extra sections (`stats`, …), written as fields after its metadata.
struct Extra<'a>(&'a [(&'a str, serde_json::Value)]);

impl serde::Serialize for Extra<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (name, value) in self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// One layer of the `attention` array: its heads' formatted matrices.
fn write_layer(
    w: &mut dyn Write,
    layer: usize,
    heads: &[Vec<u8>],
    inner: &str,
    deeper: &str,
) -> io::Result<()> {
    write!(w, "{}\n{inner}[", if layer == 0 { "" } else { "," })?;
    for (h, buf) in heads.iter().enumerate() {
        write!(w, "{}\n{deeper}", if h == 0 { "" } else { "," })?;
        w.write_all(buf)?;
    }
    write!(w, "\n{inner}]")
}

/// The matrix sections `include` asks for, from `analysis` (`None` when it is missing).
pub fn json_sections<'a>(
    include: &[JsonSection],
    analysis: Option<&'a Analysis>,
) -> Option<Vec<MatrixSection<'a>>> {
    let mut out = Vec::new();
    for section in include.iter().filter(|s| !s.from_model()) {
        let a = analysis?;
        let (name, layers) = match section {
            JsonSection::Means => ("means", &a.layer_means),
            JsonSection::Rollout => ("rollout", &a.rollout),
            JsonSection::HeadAttribution
            | JsonSection::HeadAblation
            | JsonSection::Alti
            | JsonSection::ValueZeroing => continue,
        };
        if !out.iter().any(|s: &MatrixSection| s.name == name) {
            out.push(MatrixSection { name, layers });
        }
    }
    Some(out)
}

/// The picture the model saw (`view`, `input` pixels RGB) as a base64 PNG; `None` when there is
/// none (an image view that was not kept).
fn view_png(image: &crate::attention::image::ImageInput) -> Option<String> {
    use base64::Engine;
    let [w, h] = image.input;
    if w == 0 || h == 0 || image.view.len() != w * h * 3 {
        return None;
    }
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w as u32, h as u32);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.write_header()
            .ok()?
            .write_image_data(&image.view)
            .ok()?;
    }
    Some(base64::engine::general_purpose::STANDARD.encode(out))
}

#[cfg(test)]
mod tests {
    use super::number::{pow10, push_6sig, push_full};
    use super::*;
    use crate::attention::fixtures::synthetic;

    /// The digit-by-digit formatter `push_6sig` replaced, as it was: the reference for its bytes.
    ///
    /// Written into a small stack buffer and appended once, and rounded with an add and a truncating
    /// cast rather than `f64::round` (a libm call on the baseline target): the product rounded is
    /// below 2²⁴, where `⌊y + 0.5⌋` is exactly `round(y)` (adding 0.5 is exact there). 2.5× faster,
    /// same bytes.
    fn push_6sig_reference(out: &mut Vec<u8>, v: f32) {
        if !v.is_finite() {
            out.extend_from_slice(b"null");
            return;
        }
        if v == 0.0 {
            out.push(b'0');
            return;
        }
        // At most "-0.0000dddddd" (13 bytes) or "-d.ddddde-45" (12).
        let mut buf = [0u8; 16];
        let mut len = 0;
        let mut put = |b: u8| {
            buf[len] = b;
            len += 1;
        };
        if v < 0.0 {
            put(b'-');
        }
        let x = (v as f64).abs();
        // Decimal exponent from the binary one (log10 2 ≈ 0.30103), off by at most one for normal
        // numbers; subnormals (tiny attention weights do occur) take log10.
        let bits = (v.to_bits() >> 23) & 0xff;
        let mut exp = if bits == 0 {
            x.log10().floor() as i32
        } else {
            // ⌊e·log10 2⌋ in integers (78913 / 2¹⁸ ≈ log10 2; exact for |e| < 1650).
            ((bits as i32 - 127) * 78_913) >> 18
        };
        let round = |y: f64| (y + 0.5) as u64;
        let mut mant = round(x * pow10(5 - exp));
        // Settle on exactly six digits; also catches rounding that carries into a seventh.
        for _ in 0..4 {
            if mant >= 1_000_000 {
                exp += 1;
            } else if mant < 100_000 {
                exp -= 1;
            } else {
                break;
            }
            mant = round(x * pow10(5 - exp));
        }
        let mut digits = [0u8; 6];
        let mut m = mant;
        for d in digits.iter_mut().rev() {
            *d = b'0' + (m % 10) as u8;
            m /= 10;
        }
        let sig = 6 - digits.iter().rev().take_while(|&&d| d == b'0').count();
        let digits = &digits[..sig.max(1)];
        if (-5..0).contains(&exp) {
            // 0.000ddd
            put(b'0');
            put(b'.');
            for _ in 0..(-exp - 1) {
                put(b'0');
            }
            digits.iter().for_each(|&d| put(d));
        } else if (0..6).contains(&exp) {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                digits.iter().for_each(|&d| put(d));
                for _ in digits.len()..int_len {
                    put(b'0');
                }
            } else {
                digits[..int_len].iter().for_each(|&d| put(d));
                put(b'.');
                digits[int_len..].iter().for_each(|&d| put(d));
            }
        } else {
            put(digits[0]);
            if digits.len() > 1 {
                put(b'.');
                digits[1..].iter().for_each(|&d| put(d));
            }
            put(b'e');
            if exp < 0 {
                put(b'-');
            }
            let e = exp.unsigned_abs();
            if e >= 10 {
                put(b'0' + (e / 10 % 10) as u8);
            }
            put(b'0' + (e % 10) as u8);
        }
        out.extend_from_slice(&buf[..len]);
    }

    fn fmt6(v: f32) -> String {
        let mut out = Vec::new();
        push_6sig(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn six_significant_digits_agree_with_std_formatting() {
        // The reference is Rust's own correctly rounded `{:.5e}`; ours must read back to within
        // one unit in the sixth digit of it and never carry more than six digits.
        let mut state = 0x2545F4914F6CDD1Du64;
        let mut values = vec![
            1.0f32,
            0.5,
            0.1,
            0.999_999_9,
            1e-7,
            9.999_995e-6,
            123456.7,
            2.5e-12,
        ];
        for _ in 0..20000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mant = (state >> 40) as f32 / (1u64 << 24) as f32;
            let exp = (state % 16) as i32;
            values.push(mant * 10f32.powi(-exp));
        }
        for v in values {
            let ours = fmt6(v);
            let back: f64 = ours
                .parse()
                .unwrap_or_else(|_| panic!("{ours} is not a number"));
            let reference: f64 = format!("{:.5e}", v as f64).parse().unwrap();
            let unit = 10f64.powi((reference.abs().log10().floor() as i32) - 5);
            assert!(
                (back - reference).abs() <= unit * 1.000001,
                "{v}: ours {ours}, std {reference}"
            );
            let sig: usize = ours
                .split('e')
                .next()
                .unwrap()
                .trim_start_matches(['0', '.'])
                .chars()
                .filter(char::is_ascii_digit)
                .count();
            assert!(sig <= 6, "{v} -> {ours} has {sig} digits");
        }
        assert_eq!(fmt6(1.0), "1");
        assert_eq!(fmt6(0.25), "0.25");
        assert_eq!(fmt6(0.0), "0");
    }

    #[test]
    fn six_digit_bytes_match_the_digit_by_digit_formatter() {
        // Every notation and edge: zeros, signs, carries into a seventh digit, subnormals, the
        // plain/exponent boundaries, and a spread of random values over all exponents.
        let mut values = vec![
            1.0f32,
            -1.0,
            0.5,
            0.1,
            0.999_999_9,
            9.999_995e-6,
            1e-5,
            9.99999e-6,
            1e-4,
            123456.7,
            999_999.5,
            1e6,
            1e-6,
            2.5e-12,
            1e-40,
            -3.4e38,
            1e-45,
            100.0,
            120.5,
            0.000_123,
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            values.push(f32::from_bits((state >> 32) as u32));
            values.push(
                (state >> 40) as f32 / (1u64 << 24) as f32 * 10f32.powi(-((state % 12) as i32)),
            );
        }
        for v in values {
            let (mut ours, mut reference) = (Vec::new(), Vec::new());
            push_6sig(&mut ours, v);
            push_6sig_reference(&mut reference, v);
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                String::from_utf8(reference).unwrap(),
                "{v:e} ({:#x})",
                v.to_bits()
            );
        }
    }

    #[test]
    fn full_precision_round_trips_exactly() {
        let mut buf = ryu::Buffer::new();
        for v in [1.0f32, 0.1, 1.234_567_9e-9, 0.333_333_34] {
            let mut out = Vec::new();
            push_full(&mut out, v, &mut buf);
            let back: f32 = std::str::from_utf8(&out).unwrap().parse().unwrap();
            assert_eq!(back, v);
        }
    }

    #[test]
    fn export_parses_and_matches_the_weights() {
        let att = synthetic(&["[CLS]", "the", "\"odd\"", "tok</script>", "[SEP]"], 2, 3);
        for full in [false, true] {
            let mut out = Vec::new();
            let extra = [("stats", serde_json::json!({"x": 1}))];
            write_json(
                &att,
                &extra,
                JsonOptions {
                    full_precision: full,
                },
                &mut out,
            )
            .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
            assert_eq!(v["format_version"], FORMAT_VERSION);
            assert_eq!(v["model"]["layers"], 2);
            assert_eq!(v["tokens"][3], "tok</script>");
            assert_eq!(v["stats"]["x"], 1);
            let a = &v["attention"];
            assert_eq!(a.as_array().unwrap().len(), 2);
            for l in 0..2 {
                assert_eq!(a[l].as_array().unwrap().len(), 3);
                for h in 0..3 {
                    for q in 0..5 {
                        for k in 0..5 {
                            let got = a[l][h][q][k].as_f64().unwrap() as f32;
                            let want = att.weight(l, h, q, k);
                            let tol = if full { 0.0 } else { want.abs() * 5.1e-6 };
                            assert!(
                                (got - want).abs() <= tol,
                                "[{l}][{h}][{q}][{k}] {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn matrix_sections_follow_the_attention_with_their_shape() {
        let att = synthetic(&["[CLS]", "a", "b", "[SEP]"], 2, 3);
        let means = crate::analysis::layer_means(&att);
        let rollout = crate::analysis::rollout(&att);
        let mut out = Vec::new();
        let sections = [
            MatrixSection {
                name: "means",
                layers: &means,
            },
            MatrixSection {
                name: "rollout",
                layers: &rollout,
            },
        ];
        write_json_with(&att, &[], &sections, JsonOptions::default(), &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
        for (name, values) in [("means", &means), ("rollout", &rollout)] {
            let got = v[name].as_array().unwrap();
            assert_eq!(got.len(), 2, "{name}: one matrix per layer");
            for (l, m) in values.iter().enumerate() {
                for q in 0..4 {
                    for k in 0..4 {
                        let g = got[l][q][k].as_f64().unwrap() as f32;
                        let want = m[q * 4 + k];
                        assert!(
                            (g - want).abs() <= want.abs() * 5.1e-6,
                            "{name}[{l}][{q}][{k}]"
                        );
                    }
                }
            }
        }
        // The mean of a layer is the mean of its heads, from the attention itself.
        let a = &v["attention"][1];
        let mean01: f64 = (0..3).map(|h| a[h][0][1].as_f64().unwrap()).sum::<f64>() / 3.0;
        assert!((v["means"][1][0][1].as_f64().unwrap() - mean01).abs() < 1e-5);

        let wrong = [vec![0.0f32; 3]];
        let bad = [MatrixSection {
            name: "bad",
            layers: &wrong,
        }];
        let e = write_json_with(&att, &[], &bad, JsonOptions::default(), &mut Vec::new());
        assert!(e.is_err());
    }

    #[test]
    fn encoder_decoder_is_version_3_with_one_object_per_kind() {
        let set = crate::attention::fixtures::encoder_decoder(
            &["<s>", "Ġa", "Ġcat", "</s>"],
            &["</s>", "Ġeine", "ĠKatze"],
            2,
            3,
            2,
            3,
        );
        let analyses: Vec<crate::analysis::Analysis> =
            set.iter().map(crate::analysis::Analysis::compute).collect();
        let sections: Vec<KindSections> = analyses
            .iter()
            .map(|a| KindSections {
                extra: vec![("stats", serde_json::to_value(a.stats_section()).unwrap())],
                matrices: vec![MatrixSection {
                    name: "means",
                    layers: &a.layer_means,
                }],
            })
            .collect();
        let mut out = Vec::new();
        write_set_json(&set, &sections, JsonOptions::default(), &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
        assert_eq!(v["format_version"], 3);
        assert_eq!(
            v["kinds"],
            serde_json::json!(["encoder", "decoder", "cross"])
        );
        assert_eq!(v["model"]["encoder_layers"], 2);
        assert_eq!(v["model"]["decoder_layers"], 3);
        assert_eq!(v["target"], "</s> Ġeine ĠKatze");
        // No top-level attention: a version-2 reader cannot mistake the document for one kind.
        assert!(v.get("attention").is_none());
        for att in &set {
            let o = &v[att.kind.as_str()];
            assert_eq!(o["kind"], att.kind.as_str());
            assert_eq!(o["mask"], att.mask.as_str());
            assert_eq!(o["model"]["layers"], att.layers());
            assert_eq!(
                o["tokens"],
                serde_json::json!(att.queries().labels),
                "{:?}",
                att.kind
            );
            let a = &o["attention"];
            assert_eq!(a.as_array().unwrap().len(), att.layers());
            for l in 0..att.layers() {
                for h in 0..att.heads() {
                    for q in 0..att.n_queries() {
                        for k in 0..att.n_keys() {
                            let got = a[l][h][q][k].as_f64().unwrap() as f32;
                            let want = att.weight(l, h, q, k);
                            assert!((got - want).abs() <= want.abs() * 5.1e-6);
                        }
                    }
                }
            }
            assert_eq!(o["means"].as_array().unwrap().len(), att.layers());
        }
        let cross = &v["cross"];
        assert_eq!(cross["key_tokens"], v["encoder"]["tokens"]);
        assert_eq!(cross["tokens"], v["decoder"]["tokens"]);
        assert_eq!(cross["attention"][0][0].as_array().unwrap().len(), 3);
        assert_eq!(cross["attention"][0][0][0].as_array().unwrap().len(), 4);
        let align = &cross["stats"]["alignment"];
        assert_eq!(align["argmax_share"].as_array().unwrap().len(), 3);
        assert!(v["encoder"]["stats"].get("alignment").is_none());
        assert!(v["decoder"]["stats"]["to_next"][0][0].is_null());
        // One section list per kind.
        let e = write_set_json(
            &set,
            &sections[..2],
            JsonOptions::default(),
            &mut Vec::new(),
        );
        assert!(e.is_err());
    }

    #[test]
    fn a_single_kind_set_writes_the_version_2_document_byte_for_byte() {
        let att = synthetic(&["[CLS]", "a", "b", "[SEP]"], 2, 2);
        let stats = [("stats", serde_json::json!({"x": 1}))];
        let mut plain = Vec::new();
        write_json_with(&att, &stats, &[], JsonOptions::default(), &mut plain).unwrap();
        let mut via_set = Vec::new();
        let sections = [KindSections {
            extra: stats.to_vec(),
            matrices: Vec::new(),
        }];
        let set = AttentionSet::single(att);
        write_set_json(&set, &sections, JsonOptions::default(), &mut via_set).unwrap();
        assert_eq!(plain, via_set);
        let text = String::from_utf8(plain).unwrap();
        assert!(text.starts_with(
            "{\n  \"format\": \"attnviz-attention\",\n  \"format_version\": 2,\n  \"numbering\""
        ));
        assert!(
            text.contains(",\n  \"attention\": [\n    [\n      [["),
            "{text}"
        );
        assert!(text.ends_with("]\n  ]\n}\n"), "{text}");
    }

    #[test]
    fn version_2_describes_units_by_role_and_the_attention_by_kind() {
        let att = crate::attention::fixtures::synthetic_pair(
            &["<s>", "ĠA", "b", "</s>", "</s>", "ĠC", "</s>"],
            4,
            1,
            2,
        );
        let mut out = Vec::new();
        write_json(&att, &[], JsonOptions::default(), &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["format_version"], 2);
        assert_eq!(v["model"]["family"], "BERT");
        assert_eq!(v["kind"], "self");
        assert_eq!(v["mask"], "bidirectional");
        assert_eq!(v["kv_heads"], 2);
        assert_eq!(v["kv_head"], serde_json::json!([0, 1]));
        assert_eq!(
            v["roles"],
            serde_json::json!(["start", "word", "piece", "end", "end", "word", "end"])
        );
        assert_eq!(
            v["special"],
            serde_json::json!([true, false, false, true, true, false, true])
        );
        assert_eq!(v["segments"], serde_json::json!([0, 0, 0, 0, 1, 1, 1]));
        assert_eq!(v["sentence_b_start"], 4);
        assert_eq!(v["surfaces"][1], " A");
        assert_eq!(v["generated"][0], false);
        assert!(
            v.get("key_tokens").is_none(),
            "self-attention has one list of units"
        );
        let words = crate::analysis::to_words(&att);
        let mut out = Vec::new();
        write_json(&words, &[], JsonOptions::default(), &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["tokens"][1], "Ab");
        assert!(v.get("input_ids").is_none());
    }

    #[test]
    fn a_decoder_value_gives_its_mask_positions_sink_kv_map_and_generated_units() {
        let tokens = ["ĠThe", "Ġcat", "Ġsat", "."];
        let att = crate::attention::fixtures::decoder(&tokens, 1, vec![0, 0, 1, 1], 2);
        let base = crate::attention::fixtures::synthetic(&tokens, 1, 4);
        let section =
            serde_json::to_value(crate::analysis::Analysis::compute(&att).stats_section()).unwrap();
        let mut out = Vec::new();
        write_json(
            &att,
            &[("stats", section)],
            JsonOptions::default(),
            &mut out,
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["mask"], "causal");
        assert_eq!(v["positions"], "rotary");
        assert_eq!(v["sink"], 0);
        assert_eq!(v["kv_heads"], 2);
        assert_eq!(v["kv_head"], serde_json::json!([0, 0, 1, 1]));
        assert_eq!(
            v["generated"],
            serde_json::json!([false, false, true, true])
        );
        // Causal statistics: a share to the sink, no next-token share (null).
        assert!(v["stats"]["to_first"][0][0].is_number());
        assert!(v["stats"]["to_next"][0][0].is_null());
        // A bidirectional value has no sink, and absolute positions.
        let mut out = Vec::new();
        write_json(&base, &[], JsonOptions::default(), &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert!(v["sink"].is_null());
        assert_eq!(v["positions"], "absolute");
    }

    #[test]
    fn cross_attention_names_its_keys_and_is_not_square() {
        use crate::attention::fixtures::{info, units_for};
        let q = units_for(&["<s>", "Ġein"]);
        let k = units_for(&["<s>", "Ġa", "Ġcat", "</s>"]);
        let att = Attention::cross(info(1, 1), "a cat".into(), None, q, k, vec![0.25; 8]).unwrap();
        let mut out = Vec::new();
        write_json(&att, &[], JsonOptions::default(), &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["kind"], "cross");
        assert_eq!(v["tokens"].as_array().unwrap().len(), 2);
        assert_eq!(v["key_tokens"].as_array().unwrap().len(), 4);
        assert_eq!(v["key_roles"][3], "end");
        assert_eq!(v["attention"][0][0].as_array().unwrap().len(), 2);
        assert_eq!(v["attention"][0][0][1].as_array().unwrap().len(), 4);
    }
}
