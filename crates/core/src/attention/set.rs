//! The attention of one run: every kind of attention the model has, each an [`Attention`].
//!
//! An encoder-only or decoder-only model (BERT, GPT-2) has one self-attention value. An
//! encoder–decoder (BART, T5, Marian) has three, all from one forward pass:
//!
//! | kind | queries (rows) | keys (columns) | mask | layers × heads |
//! |---|---|---|---|---|
//! | [`AttentionKind::Encoder`] | source units | source units | bidirectional | the encoder's |
//! | [`AttentionKind::Decoder`] | target units | target units | causal | the decoder's |
//! | [`AttentionKind::Cross`] | target units | source units | bidirectional | the decoder's |
//!
//! An [`AttentionSet`] holds them and checks that they fit together: cross-attention's query
//! units *are* the decoder's units and its key units the encoder's (equal field by field: labels,
//! roles, spans, generated flags), the three come from one model (same id, revision, family,
//! hidden size and head size; cross-attention sits in the decoder's layers, with its heads),
//! and all are at the same level (tokens or words) with special tokens kept or excluded alike.
//!
//! **Views of a set.** Every transformation applies to each value on its own, and each side of
//! cross-attention follows the value whose units it shares, so the three stay consistent:
//! - `--words` merges each side by its own words: the encoder's pieces by the source's words, the
//!   decoder's by the target's; cross-attention's rows are merged as the decoder's (rows of a
//!   word averaged) and its columns as the encoder's (columns of a word summed). The same rule as
//!   for self-attention, since the merge is a function of the units alone.
//! - `--no-special` drops each side's special tokens (the source's `<s>`/`</s>`, the decoder's
//!   start token and `</s>`), and each remaining row of every value is renormalised over the
//!   keys it kept; a cross-attention row over the source's ordinary tokens.
//! - Layers and heads are numbered per value: the encoder's from its own count, the decoder's
//!   and cross-attention's from the decoder's. A `--layer`/`--head` selection is checked against
//!   the value being shown (see [`AttentionSet::get`]); a view that offers every kind (the HTML
//!   report) starts each kind at the selection, clamped to that kind's layers and heads.
//!
//! Texts: every value of an encoder–decoder set carries the source (the text the user gave) as
//! its [`Attention::text`] and no pair; the teacher-forced target, when there is one, is
//! [`AttentionSet::target`]; generated target units are flagged in the decoder's units.

use super::{Attention, AttentionKind, MaskKind, ShapeError, ShapeProblem};

/// The attention of one run: one self-attention value, or an encoder–decoder's encoder,
/// decoder and cross-attention values (see the module docs for the checks and for how views
/// apply).
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionSet {
    /// `[one]`, or `[encoder, decoder, cross]`.
    values: Vec<Attention>,
    /// The teacher-forced target text, if any.
    target: Option<String>,
}

/// The kinds an encoder–decoder set holds, in the order views list them.
pub const ENCODER_DECODER_KINDS: [AttentionKind; 3] = [
    AttentionKind::Encoder,
    AttentionKind::Decoder,
    AttentionKind::Cross,
];

/// A kind asked of an [`AttentionSet`] that does not hold it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", kind_error_message(*.asked, .held))]
pub struct KindError {
    /// What was asked.
    pub asked: AttentionKind,
    /// What the set holds.
    pub held: Vec<AttentionKind>,
}

fn kind_error_message(asked: AttentionKind, held: &[AttentionKind]) -> String {
    let names: Vec<&str> = held.iter().map(|k| k.as_str()).collect();
    if held.len() == 1 && held[0] == AttentionKind::SelfAttention {
        format!(
            "no {} attention: this model has one attention, its self-attention (encoder–decoder \
             models have encoder, decoder and cross); ask for no kind",
            asked.as_str()
        )
    } else {
        format!(
            "no {} attention: this attention has {}; choose one of them",
            asked.as_str(),
            names.join(", ")
        )
    }
}

impl AttentionSet {
    /// A set of one value: the self-attention of an encoder-only or decoder-only model (or a
    /// single kind read back from a file).
    pub fn single(att: Attention) -> AttentionSet {
        AttentionSet {
            values: vec![att],
            target: None,
        }
    }

    /// An encoder–decoder's three values, checked against each other (module docs): `encoder`
    /// and `decoder` are self-attention values of kinds [`AttentionKind::Encoder`] and
    /// [`AttentionKind::Decoder`] (causal), `cross` is built with [`Attention::cross`] over the
    /// decoder's units (queries) and the encoder's (keys). `target` is the teacher-forced target
    /// text, `None` when the decoder generated its units.
    pub fn encoder_decoder(
        encoder: Attention,
        decoder: Attention,
        cross: Attention,
        target: Option<String>,
    ) -> Result<AttentionSet, ShapeError> {
        // The decoder's and cross-attention's rows read the target: they quote it unless they
        // carry a decoder text already (a generation's).
        let quote = |att: Attention| match (&att.target_text, &target) {
            (None, Some(t)) => {
                let t = t.clone();
                att.with_target_text(Some(t))
            }
            _ => att,
        };
        let (decoder, cross) = (quote(decoder), quote(cross));
        let set = AttentionSet {
            values: vec![encoder, decoder, cross],
            target,
        };
        set.check()?;
        Ok(set)
    }

    fn check(&self) -> Result<(), ShapeError> {
        let [enc, dec, cross] = self.values.as_slice() else {
            return Ok(());
        };
        let err = |p: ShapeProblem| Err(ShapeError(p));
        for (att, kind) in [enc, dec, cross].into_iter().zip(ENCODER_DECODER_KINDS) {
            if att.kind != kind {
                return err(ShapeProblem::SetKind {
                    place: kind,
                    kind: att.kind,
                });
            }
        }
        if dec.mask != MaskKind::Causal {
            return err(ShapeProblem::DecoderNotCausal);
        }
        if enc.mask != MaskKind::Bidirectional || cross.mask != MaskKind::Bidirectional {
            return err(ShapeProblem::EncoderNotBidirectional);
        }
        if cross.queries() != dec.queries() {
            return err(ShapeProblem::CrossQueries {
                cross: cross.n_queries(),
                decoder: dec.n_queries(),
            });
        }
        if cross.keys() != enc.queries() {
            return err(ShapeProblem::CrossKeys {
                cross: cross.n_keys(),
                encoder: enc.n_queries(),
            });
        }
        let (m, d, c) = (&enc.model, &dec.model, &cross.model);
        for other in [d, c] {
            if other.id != m.id
                || other.revision != m.revision
                || other.name != m.name
                || other.family != m.family
                || other.hidden_size != m.hidden_size
                || other.head_dim != m.head_dim
            {
                return err(ShapeProblem::DifferentModels);
            }
        }
        if (c.layers, c.heads) != (d.layers, d.heads) {
            return err(ShapeProblem::CrossShape {
                cross_layers: c.layers,
                cross_heads: c.heads,
                decoder_layers: d.layers,
                decoder_heads: d.heads,
            });
        }
        for other in [dec, cross] {
            if other.level != enc.level || other.special_excluded != enc.special_excluded {
                return err(ShapeProblem::DifferentLevels);
            }
            if other.text != enc.text || other.pair != enc.pair {
                return err(ShapeProblem::DifferentTexts);
            }
        }
        if enc.pair.is_some() {
            return err(ShapeProblem::PairInSource);
        }
        Ok(())
    }

    /// Whether the set holds an encoder–decoder's three values.
    pub fn is_encoder_decoder(&self) -> bool {
        self.values.len() == 3
    }

    /// The kinds held, in order: `[self]` (or the single kind), or encoder, decoder, cross.
    pub fn kinds(&self) -> Vec<AttentionKind> {
        self.values.iter().map(|a| a.kind).collect()
    }

    /// Every value, in the order of [`AttentionSet::kinds`].
    pub fn iter(&self) -> std::slice::Iter<'_, Attention> {
        self.values.iter()
    }

    /// The value a view shows when the user names no kind: cross-attention for an
    /// encoder–decoder (the alignment of output to input, what these models are looked at
    /// for), the only value otherwise.
    pub fn primary(&self) -> &Attention {
        self.values.last().expect("a set holds at least one value")
    }

    /// The value of `kind`, if the set holds it.
    pub fn kind(&self, kind: AttentionKind) -> Option<&Attention> {
        self.values.iter().find(|a| a.kind == kind)
    }

    /// The value of `kind` (`None`: [`AttentionSet::primary`]), or an error naming the kinds the
    /// set holds, worded for `--kind`.
    pub fn get(&self, kind: Option<AttentionKind>) -> Result<&Attention, KindError> {
        match kind {
            None => Ok(self.primary()),
            Some(kind) => self.kind(kind).ok_or_else(|| KindError {
                asked: kind,
                held: self.kinds(),
            }),
        }
    }

    /// The encoder's self-attention (encoder–decoder sets only).
    pub fn encoder(&self) -> Option<&Attention> {
        self.kind(AttentionKind::Encoder)
    }

    /// The decoder's causal self-attention (encoder–decoder sets only).
    pub fn decoder(&self) -> Option<&Attention> {
        self.kind(AttentionKind::Decoder)
    }

    /// Cross-attention, decoder units over encoder units (encoder–decoder sets only).
    pub fn cross(&self) -> Option<&Attention> {
        self.kind(AttentionKind::Cross)
    }

    /// The self-attention value of a single-value set.
    pub fn single_value(&self) -> Option<&Attention> {
        (self.values.len() == 1).then(|| &self.values[0])
    }

    /// The teacher-forced target text (encoder–decoder sets run with a target).
    pub fn target(&self) -> Option<&str> {
        self.target.as_deref()
    }

    /// What the decoder generated (decoded), when it generated its units instead of reading a
    /// teacher-forced target: the decoder value's [`Attention::target_text`].
    pub fn generated_text(&self) -> Option<&str> {
        match self.values.as_slice() {
            [_, dec, _] if self.target.is_none() => dec.target_text.as_deref(),
            _ => None,
        }
    }

    /// The values, moved out (one, or the encoder's, decoder's and cross-attention).
    pub fn into_values(self) -> Vec<Attention> {
        self.values
    }

    /// The same set with display texts by the rules of the tokenizers that made its units
    /// ([`Attention::relabel`]): `source` for an encoder–decoder's source units (and for the one
    /// value of other models), `target` for its target units.
    pub fn relabel(self, source: super::LabelScheme, target: super::LabelScheme) -> AttentionSet {
        let values = self
            .values
            .into_iter()
            .map(|a| match a.kind {
                AttentionKind::Decoder => a.relabel(target, target),
                AttentionKind::Cross => a.relabel(target, source),
                _ => a.relabel(source, source),
            })
            .collect();
        AttentionSet {
            values,
            target: self.target,
        }
    }

    /// The source text: what the user gave (every value's [`Attention::text`]).
    pub fn text(&self) -> &str {
        &self.values[0].text
    }

    /// The same set with the recording a speech model heard on every value, checked against
    /// the set: an encoder–decoder's, each word's rows inside the decoder's tokens and its
    /// frames inside the encoder's.
    pub fn with_recording(mut self, recording: super::Recording) -> Result<Self, ShapeError> {
        let problem = |why: String| Err(ShapeError(ShapeProblem::Recording(why)));
        if let Err(e) = recording.check() {
            return problem(e.to_string());
        }
        let [enc, dec, _] = self.values.as_slice() else {
            return problem("a recording belongs to an encoder–decoder's attention".into());
        };
        let (tokens, frames) = (dec.queries().token_count(), enc.queries().token_count());
        if let Some(w) = recording
            .words
            .iter()
            .find(|w| w.rows.end > tokens || w.end_frame > frames)
        {
            return problem(format!(
                "the word {:?} has rows {:?} and frames {}..{}, outside the decoder's {tokens} \
                 tokens or the encoder's {frames} frames",
                w.word, w.rows, w.start_frame, w.end_frame
            ));
        }
        let recording = std::sync::Arc::new(recording);
        for v in &mut self.values {
            v.recording = Some(recording.clone());
        }
        Ok(self)
    }

    /// The recording a speech model heard, if the set is a speech run's.
    pub fn recording(&self) -> Option<&super::Recording> {
        self.values[0].recording.as_deref()
    }

    /// Apply `f` to every value (a view: words, special tokens excluded) and check that the
    /// results still fit together. `f` must treat units by their own fields only (as
    /// `attnviz::analysis::view` does), so that cross-attention's sides change exactly as the
    /// encoder's and decoder's units do.
    pub fn try_map<E: From<ShapeError>>(
        &self,
        mut f: impl FnMut(&Attention) -> Result<Attention, E>,
    ) -> Result<AttentionSet, E> {
        let values = self.values.iter().map(&mut f).collect::<Result<_, E>>()?;
        let set = AttentionSet {
            values,
            target: self.target.clone(),
        };
        set.check()?;
        Ok(set)
    }
}

impl<'a> IntoIterator for &'a AttentionSet {
    type Item = &'a Attention;
    type IntoIter = std::slice::Iter<'a, Attention>;

    fn into_iter(self) -> Self::IntoIter {
        self.values.iter()
    }
}

impl From<Attention> for AttentionSet {
    fn from(att: Attention) -> Self {
        AttentionSet::single(att)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::fixtures::{encoder_decoder, peaked, synthetic, units_for};

    fn parts(set: &AttentionSet) -> (Attention, Attention, Attention) {
        (
            set.encoder().unwrap().clone(),
            set.decoder().unwrap().clone(),
            set.cross().unwrap().clone(),
        )
    }

    #[test]
    fn encoder_decoder_set_holds_three_kinds_by_name() {
        let set = encoder_decoder(
            &["<s>", "Ġa", "Ġcat", "</s>"],
            &["</s>", "Ġeine"],
            2,
            3,
            2,
            2,
        );
        assert!(set.is_encoder_decoder());
        assert_eq!(set.kinds(), ENCODER_DECODER_KINDS);
        let (enc, dec, cross) = parts(&set);
        assert_eq!((enc.layers(), dec.layers(), cross.layers()), (2, 3, 3));
        assert_eq!(cross.n_queries(), 2);
        assert_eq!(cross.n_keys(), 4);
        assert_eq!(set.primary().kind, AttentionKind::Cross);
        assert_eq!(set.get(None).unwrap().kind, AttentionKind::Cross);
        assert_eq!(
            set.get(Some(AttentionKind::Encoder)).unwrap().kind,
            AttentionKind::Encoder
        );
        assert_eq!(set.target(), Some("</s> Ġeine"));
        assert_eq!(set.text(), "<s> Ġa Ġcat </s>");
        let err = set.get(Some(AttentionKind::SelfAttention)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no self attention: this attention has encoder, decoder, cross; choose one of them"
        );
        assert_eq!(set.iter().count(), 3);
        assert!(set.single_value().is_none());
    }

    #[test]
    fn single_set_holds_the_self_attention() {
        let att = synthetic(&["[CLS]", "a", "[SEP]"], 1, 1);
        let set = AttentionSet::from(att.clone());
        assert!(!set.is_encoder_decoder());
        assert_eq!(set.kinds(), [AttentionKind::SelfAttention]);
        assert_eq!(set.primary(), &att);
        assert_eq!(set.single_value(), Some(&att));
        assert!(set.cross().is_none());
        let err = set.get(Some(AttentionKind::Cross)).unwrap_err();
        assert_eq!(
            (err.asked, err.held.as_slice()),
            (
                AttentionKind::Cross,
                [AttentionKind::SelfAttention].as_slice()
            )
        );
        assert!(err.to_string().contains("ask for no kind"), "{err}");
    }

    #[test]
    fn cross_sides_must_be_the_decoder_and_encoder_units() {
        let set = encoder_decoder(&["<s>", "Ġa", "</s>"], &["</s>", "Ġx", "Ġy"], 1, 1, 1, 3);
        let (enc, dec, cross) = parts(&set);
        // Keys that are not the encoder's units (one label differs).
        let mut keys = cross.keys().clone();
        keys.labels[1] = "Ġb".into();
        let other = Attention::cross(
            cross.model.clone(),
            cross.text.clone(),
            None,
            cross.queries().clone(),
            keys,
            cross.weights().to_vec(),
        )
        .unwrap();
        let err = AttentionSet::encoder_decoder(enc.clone(), dec.clone(), other, None).unwrap_err();
        assert!(err.to_string().contains("keys"), "{err}");
        // Queries that are not the decoder's units: the encoder's in their place.
        let swapped = Attention::cross(
            cross.model.clone(),
            cross.text.clone(),
            None,
            enc.queries().clone(),
            enc.queries().clone(),
            peaked(1, 1, 3, 3, false),
        )
        .unwrap();
        let err =
            AttentionSet::encoder_decoder(enc.clone(), dec.clone(), swapped, None).unwrap_err();
        assert!(err.to_string().contains("queries"), "{err}");
        // Kinds in the wrong places.
        let err = AttentionSet::encoder_decoder(dec.clone(), enc.clone(), cross.clone(), None)
            .unwrap_err();
        assert!(err.to_string().contains("kind"), "{err}");
        // A decoder without its causal mask.
        let open = dec.clone().with_mask(MaskKind::Bidirectional);
        let err =
            AttentionSet::encoder_decoder(enc.clone(), open, cross.clone(), None).unwrap_err();
        assert!(err.to_string().contains("causal"), "{err}");
    }

    #[test]
    fn the_three_come_from_one_model_and_cross_has_the_decoders_layers() {
        let set = encoder_decoder(&["<s>", "Ġa", "</s>"], &["</s>", "Ġx"], 2, 1, 1, 2);
        let (enc, dec, cross) = parts(&set);
        let mut other = enc.clone();
        other.model.id = "another".into();
        let err =
            AttentionSet::encoder_decoder(other, dec.clone(), cross.clone(), None).unwrap_err();
        assert!(err.to_string().contains("different models"), "{err}");
        // Cross-attention with the encoder's layer count (2) instead of the decoder's (1).
        let mut model = cross.model.clone();
        model.layers = 2;
        let deep = Attention::cross(
            model,
            cross.text.clone(),
            None,
            cross.queries().clone(),
            cross.keys().clone(),
            peaked(2, 1, 2, 3, false),
        )
        .unwrap();
        let err = AttentionSet::encoder_decoder(enc.clone(), dec.clone(), deep, None).unwrap_err();
        assert!(err.to_string().contains("decoder's layers"), "{err}");
        // Different source texts.
        let mut moved = enc.clone();
        moved.text = "something else".into();
        let err = AttentionSet::encoder_decoder(moved, dec, cross, None).unwrap_err();
        assert!(err.to_string().contains("source texts"), "{err}");
    }

    #[test]
    fn try_map_checks_the_results() {
        let set = encoder_decoder(&["<s>", "Ġa", "</s>"], &["</s>", "Ġx"], 1, 1, 1, 2);
        let same = set.try_map(|a| Ok::<_, ShapeError>(a.clone())).unwrap();
        assert_eq!(same, set);
        // A map that changes the decoder's units but not cross-attention's rows is refused.
        let broken = set.try_map(|a| {
            if a.kind == AttentionKind::Decoder {
                let units = units_for(&["</s>", "Ġz"]);
                a.derive(a.level, false, units, None, a.weights().to_vec())
            } else {
                Ok(a.clone())
            }
        });
        assert!(broken.is_err());
    }
}
