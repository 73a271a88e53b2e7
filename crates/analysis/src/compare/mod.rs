//! Comparing two captures: A − B per layer and head, and how far apart each head's attention is
//! (the Jensen–Shannon distance), ranked.
//!
//! [`compare`] takes two captured values, `a` and `b` (two inputs on one model, one input on two
//! models, or any two exports), and builds a [`Comparison`]:
//!
//! - **Units.** When the two have the same units (one tokenization), row `i` of A is compared
//!   with row `i` of B. Otherwise the units are aligned ([`Alignment`]): the longest common
//!   subsequence of the two lists, tokens matched by label, words by their text in lower case,
//!   special tokens by their role; what had no partner is listed. Two tokenizers (their label
//!   schemes differ, or [`CompareOptions::words`]) are compared at word level: each side's
//!   pieces are merged into words first ([`crate::to_words`]), then the words are
//!   aligned.
//! - **Weights.** Each compared row is A's (and B's) row over the aligned keys. When some keys
//!   had no partner on a side, that side's rows are renormalised over the keys kept, so they
//!   are shares of what the row gives to the keys both inputs have.
//! - **Masks.** Each side keeps its own mask ([`Comparison::a_visible_layer`],
//!   [`Comparison::b_visible_layer`]: a bidirectional encoder sees every key, a causal decoder
//!   the keys up to its own, a sliding window fewer). Only the cells both sides can attend are
//!   compared ([`Comparison::visible_layer`]): where a side can attend keys the other cannot
//!   (a bidirectional model against a causal one), its rows are taken as shares of the keys
//!   both can attend ([`Comparison::a_compared`]), so that A − B measures how the two spread
//!   their attention over the same keys, not what one mask hides.
//! - **Distance.** For each head, each query row with at least two keys both sides can attend
//!   (one key alone leaves nothing to differ in) and some weight on them in both gives the
//!   Jensen–Shannon distance of its two distributions over those keys (each renormalised over
//!   them): `sqrt(JSD)` with `JSD = ½ KL(P‖M) + ½ KL(Q‖M)`, `M = (P + Q) / 2`, in bits, so it
//!   lies in [0, 1]. The head's distance is the mean over those rows. `docs/compare.md` says
//!   what it means and when to trust it.
//! - **Shapes.** Layers and heads are paired by index. Two captures with different numbers of
//!   layers or heads (or of different captured layers) are compared on what they share only
//!   when asked ([`CompareOptions::shared_only`]); otherwise [`CompareError::Shape`].
//!
//! Pure functions of the two values: no model, no files.

mod align;

use serde::Serialize;

pub use align::{Alignment, MAX_ALIGN_CELLS};

use crate::attention::{Attention, AttentionKind, Level, MaskKind, ModelInfo, Units};
use crate::to_words;

/// What [`compare`] may do besides the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompareOptions {
    /// Compare at word level even when both sides come from one tokenizer.
    pub words: bool,
    /// When the two have different numbers of layers or heads (or captured different layers),
    /// compare the layers and heads they share, by index, instead of refusing.
    pub shared_only: bool,
}

/// How the units of A and B were matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The same units on both sides (one tokenization): row `i` against row `i`.
    SameUnits,
    /// Different tokens of one tokenizer, aligned token by token.
    AlignedTokens,
    /// Both sides merged into words, the words aligned (different tokenizers, or asked for).
    Words,
}

impl Basis {
    /// The name in JSON (`same_units`, `aligned_tokens`, `words`).
    pub fn as_str(self) -> &'static str {
        match self {
            Basis::SameUnits => "same_units",
            Basis::AlignedTokens => "aligned_tokens",
            Basis::Words => "words",
        }
    }

    /// For people: "the same tokens", "tokens aligned", "words aligned".
    pub fn describe(self) -> &'static str {
        match self {
            Basis::SameUnits => "the same units",
            Basis::AlignedTokens => "tokens aligned",
            Basis::Words => "words aligned",
        }
    }
}

/// Why two captures could not be compared. Each displays as one line that says what to do.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompareError {
    /// Different numbers of layers or heads, and comparing the shared ones was not asked for.
    #[error("A has {a_layers} layers × {a_heads} heads and B {b_layers} × {b_heads}; compare only the layers and heads they share (by index), or compare two captures of one model")]
    Shape {
        /// A's captured layers.
        a_layers: usize,
        /// A's heads per layer.
        a_heads: usize,
        /// B's captured layers.
        b_layers: usize,
        /// B's heads per layer.
        b_heads: usize,
    },
    /// The same number of layers, but not the same layers of the model.
    #[error("A holds layers {a} and B layers {b} of their models; capture the same layers, or compare them by index")]
    LayerNumbers {
        /// A's layer numbers, for people (`0, 5, 10–12`).
        a: String,
        /// B's.
        b: String,
    },
    /// One side holds attention probabilities and the other a weighting's shares (or two
    /// weightings): their distances would measure the weighting, not the heads.
    #[error("A holds {a} attention and B {b}; their distances would measure the weighting, not the heads: compare two exports of one weighting")]
    Weightings {
        /// What A's weights are (`raw`, `value-weighted`, `norm-aware`).
        a: &'static str,
        /// What B's are.
        b: &'static str,
    },
    /// Two kinds of attention (self-attention against cross-attention).
    #[error("A holds {a} attention and B {b} attention; compare two of one kind")]
    Kinds {
        /// A's kind.
        a: &'static str,
        /// B's kind.
        b: &'static str,
    },
    /// No unit of one side has a partner on the other.
    #[error("A and B have no {side} in common ({a} and {b} units), so there is nothing to compare; compare two inputs that share words")]
    NothingAligned {
        /// `queries` or `keys`.
        side: &'static str,
        /// A's units.
        a: usize,
        /// B's units.
        b: usize,
    },
    /// The inputs differ over too long a stretch to align.
    #[error("A has {a} units and B {b}, and aligning where they differ would need {cells} cells, more than {MAX_ALIGN_CELLS}; compare shorter inputs")]
    TooLong {
        /// A's units.
        a: usize,
        /// B's units.
        b: usize,
        /// The cells the alignment needed.
        cells: usize,
    },
}

/// One side of a comparison: what it came from, and its units at the level compared.
#[derive(Clone, Debug, PartialEq)]
pub struct Side {
    /// The model (as the capture records it: its layers and heads are the capture's own).
    pub model: ModelInfo,
    /// Sentence A of its input.
    pub text: String,
    /// Sentence B, if any.
    pub pair: Option<String>,
    /// The model's number of each captured layer.
    pub layer_numbers: Vec<usize>,
    /// The query units at the level compared (all of them, paired or not).
    pub queries: Units,
    /// The key units at the level compared.
    pub keys: Units,
    /// Which cells its queries could not see.
    pub mask: MaskKind,
    /// What its weights are (the same on both sides: [`compare`] refuses two).
    pub holds: crate::attention::Holds,
    /// Each captured layer's sliding window (`None`: none).
    pub windows: Vec<Option<usize>>,
}

impl Side {
    fn of(att: &Attention) -> Side {
        Side {
            model: att.model.clone(),
            text: att.text.clone(),
            pair: att.pair.clone(),
            layer_numbers: att.layer_numbers().to_vec(),
            queries: att.queries().clone(),
            keys: att.keys().clone(),
            mask: att.mask,
            holds: att.holds,
            windows: (0..att.layers()).map(|l| att.window(l)).collect(),
        }
    }

    /// Its mask for people: `bidirectional`, `causal`, `causal with a sliding window of 4096
    /// tokens` (in some layers: `… in layers 0, 2`).
    pub fn mask_words(&self) -> String {
        let mut s = self.mask.as_str().to_string();
        let windowed: Vec<(usize, usize)> = (0..self.windows.len())
            .filter_map(|l| self.windows[l].map(|w| (l, w)))
            .collect();
        let Some(&(_, size)) = windowed.first() else {
            return s;
        };
        if windowed.iter().all(|&(_, w)| w == size) {
            s.push_str(&format!(" with a sliding window of {size} tokens"));
        } else {
            s.push_str(" with sliding windows");
        }
        if windowed.len() < self.windows.len() {
            let numbers: Vec<usize> = windowed
                .iter()
                .map(|&(l, _)| self.layer_numbers.get(l).copied().unwrap_or(l))
                .collect();
            s.push_str(&format!(
                " in layer{} {}",
                if numbers.len() > 1 { "s" } else { "" },
                crate::attention::layer_list(&numbers)
            ));
        }
        s
    }
}

/// One head and its distance, for the ranking.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct HeadDistance {
    /// Layer index (0-based, into the compared layers).
    pub layer: usize,
    /// Head, 0-based.
    pub head: usize,
    /// Jensen–Shannon distance in [0, 1].
    pub distance: f64,
    /// Query rows it is the mean over.
    pub rows: usize,
}

/// Two captures compared: see the [module docs](self).
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// A's side.
    pub a: Side,
    /// B's side.
    pub b: Side,
    /// Which attention both hold.
    pub kind: AttentionKind,
    /// Tokens or words.
    pub level: Level,
    /// How the units were matched.
    pub basis: Basis,
    /// How the query units (rows) were paired.
    pub queries: Alignment,
    /// How the key units (columns) were paired (the queries' pairing for self-attention).
    pub keys: Alignment,
    /// Layers compared (pairs by index).
    pub layers: usize,
    /// Heads compared per layer.
    pub heads: usize,
    /// Whether A and B differ in layers or heads, and only what they share is compared.
    pub shared_only: bool,
    a_weights: Vec<f32>,
    b_weights: Vec<f32>,
    /// `[layers, n_query, n_key]`: whether A's queries can attend the cell.
    a_visible: Vec<bool>,
    /// `[layers, n_query, n_key]`: whether B's queries can attend the cell.
    b_visible: Vec<bool>,
    /// `[layers, n_query, n_key]`: whether the cell is visible on both sides.
    visible: Vec<bool>,
    /// `[layers × heads]`: the distance, NaN where no row could be compared.
    distance: Vec<f64>,
    /// `[layers × heads]`: rows compared.
    rows: Vec<usize>,
}

/// Compare `a` with `b` (see the [module docs](self)).
pub fn compare(
    a: &Attention,
    b: &Attention,
    opts: CompareOptions,
) -> Result<Comparison, CompareError> {
    if a.kind != b.kind {
        return Err(CompareError::Kinds {
            a: a.kind.as_str(),
            b: b.kind.as_str(),
        });
    }
    if a.holds != b.holds {
        return Err(CompareError::Weightings {
            a: a.holds.as_str(),
            b: b.holds.as_str(),
        });
    }
    let counts_differ = a.layers() != b.layers() || a.heads() != b.heads();
    if counts_differ && !opts.shared_only {
        return Err(CompareError::Shape {
            a_layers: a.layers(),
            a_heads: a.heads(),
            b_layers: b.layers(),
            b_heads: b.heads(),
        });
    }
    if !counts_differ && a.layer_numbers() != b.layer_numbers() && !opts.shared_only {
        return Err(CompareError::LayerNumbers {
            a: crate::attention::layer_list(a.layer_numbers()),
            b: crate::attention::layer_list(b.layer_numbers()),
        });
    }
    let words = opts.words
        || a.level == Level::Word
        || b.level == Level::Word
        || two_tokenizers(a.queries(), b.queries())
        || two_tokenizers(a.keys(), b.keys());
    let (a, b) = if words {
        (
            std::borrow::Cow::Owned(to_words(a)),
            std::borrow::Cow::Owned(to_words(b)),
        )
    } else {
        (std::borrow::Cow::Borrowed(a), std::borrow::Cow::Borrowed(b))
    };
    let level = if words { Level::Word } else { Level::Token };
    let queries = pair_units(a.queries(), b.queries(), level, "queries")?;
    let keys = if a.is_square() && b.is_square() {
        queries.clone()
    } else {
        pair_units(a.keys(), b.keys(), level, "keys")?
    };
    let basis = if words {
        Basis::Words
    } else if queries.is_complete() && keys.is_complete() {
        Basis::SameUnits
    } else {
        Basis::AlignedTokens
    };
    let layers = a.layers().min(b.layers());
    let heads = a.heads().min(b.heads());
    let (qa, qb) = (queries.a_units(), queries.b_units());
    let (ka, kb) = (keys.a_units(), keys.b_units());
    let (nq, nk) = (qa.len(), ka.len());
    let sees = |att: &Attention, qs: &[usize], ks: &[usize]| -> Vec<bool> {
        let mut out = Vec::with_capacity(layers * nq * nk);
        for l in 0..layers {
            for &q in qs {
                out.extend(ks.iter().map(|&k| !att.is_masked_in(l, q, k)));
            }
        }
        out
    };
    let (a_visible, b_visible) = (sees(&a, &qa, &ka), sees(&b, &qb, &kb));
    let visible: Vec<bool> = a_visible
        .iter()
        .zip(&b_visible)
        .map(|(&x, &y)| x && y)
        .collect();
    let a_weights = restrict(&a, layers, heads, &qa, &ka, !keys.only_a.is_empty());
    let b_weights = restrict(&b, layers, heads, &qb, &kb, !keys.only_b.is_empty());
    let mut distance = vec![f64::NAN; layers * heads];
    let mut rows = vec![0usize; layers * heads];
    let size = nq * nk;
    for l in 0..layers {
        let vis = &visible[l * size..(l + 1) * size];
        for h in 0..heads {
            let at = (l * heads + h) * size;
            let (da, db) = (&a_weights[at..at + size], &b_weights[at..at + size]);
            let (mut sum, mut n) = (0f64, 0usize);
            for q in 0..nq {
                let r = q * nk..(q + 1) * nk;
                if let Some(d) = row_distance(&da[r.clone()], &db[r.clone()], &vis[r]) {
                    sum += d;
                    n += 1;
                }
            }
            rows[l * heads + h] = n;
            if n > 0 {
                distance[l * heads + h] = sum / n as f64;
            }
        }
    }
    Ok(Comparison {
        a: Side::of(&a),
        b: Side::of(&b),
        kind: a.kind,
        level,
        basis,
        queries,
        keys,
        layers,
        heads,
        shared_only: counts_differ || a.layer_numbers() != b.layer_numbers(),
        a_weights,
        b_weights,
        a_visible,
        b_visible,
        visible,
        distance,
        rows,
    })
}

/// Whether the units come from two kinds of tokenizer (WordPiece against byte-level BPE, …):
/// their tokens cannot be matched one by one. Labels of no known kind (arrays from elsewhere)
/// are taken to be of the other side's.
fn two_tokenizers(a: &Units, b: &Units) -> bool {
    use crate::attention::LabelScheme::Plain;
    a.scheme != b.scheme && a.scheme != Plain && b.scheme != Plain
}

/// Pair the units of one side, or say why they cannot be.
fn pair_units(
    a: &Units,
    b: &Units,
    level: Level,
    side: &'static str,
) -> Result<Alignment, CompareError> {
    let key =
        |u: &Units| -> Vec<String> { (0..u.len()).map(|i| align::unit_key(u, i, level)).collect() };
    let (ka, kb) = (key(a), key(b));
    let al = if ka == kb {
        Alignment::identity(ka.len())
    } else {
        let cells = align::table_cells(&ka, &kb);
        if cells > MAX_ALIGN_CELLS {
            return Err(CompareError::TooLong {
                a: ka.len(),
                b: kb.len(),
                cells,
            });
        }
        align::align(&ka, &kb)
    };
    if al.pairs.is_empty() {
        return Err(CompareError::NothingAligned {
            side,
            a: ka.len(),
            b: kb.len(),
        });
    }
    Ok(al)
}

/// The first `layers × heads` matrices of `att` over query units `qs` and key units `ks`, each
/// row renormalised over the keys kept when `renormalise` (some keys were dropped); a row with
/// nothing left stays zero.
fn restrict(
    att: &Attention,
    layers: usize,
    heads: usize,
    qs: &[usize],
    ks: &[usize],
    renormalise: bool,
) -> Vec<f32> {
    let nk_all = att.n_keys();
    let mut out = Vec::with_capacity(layers * heads * qs.len() * ks.len());
    for l in 0..layers {
        for h in 0..heads {
            let m = att.head(l, h);
            for &q in qs {
                let row = &m[q * nk_all..(q + 1) * nk_all];
                let start = out.len();
                out.extend(ks.iter().map(|&k| row[k]));
                if renormalise {
                    let sum: f64 = out[start..].iter().map(|&w| w as f64).sum();
                    if sum > 0.0 {
                        out[start..]
                            .iter_mut()
                            .for_each(|w| *w = (*w as f64 / sum) as f32);
                    }
                }
            }
        }
    }
    out
}

/// The Jensen–Shannon distance (base 2) of two rows over the cells `visible` in both, each
/// renormalised over them; `None` when fewer than two cells are visible (one key alone holds
/// the whole of both rows: they cannot differ, and counting the row would call it equal) or
/// either row has no weight there.
pub fn row_distance(a: &[f32], b: &[f32], visible: &[bool]) -> Option<f64> {
    let (mut sa, mut sb, mut cells) = (0f64, 0f64, 0usize);
    for ((&x, &y), &v) in a.iter().zip(b).zip(visible) {
        if v {
            sa += x as f64;
            sb += y as f64;
            cells += 1;
        }
    }
    if cells < 2 || !(sa > 0.0 && sb > 0.0) {
        return None;
    }
    let mut jsd = 0f64;
    for ((&x, &y), &v) in a.iter().zip(b).zip(visible) {
        if !v {
            continue;
        }
        let (p, q) = (x as f64 / sa, y as f64 / sb);
        let m = 0.5 * (p + q);
        if p > 0.0 {
            jsd += 0.5 * p * (p / m).log2();
        }
        if q > 0.0 {
            jsd += 0.5 * q * (q / m).log2();
        }
    }
    Some(jsd.clamp(0.0, 1.0).sqrt())
}

impl Comparison {
    /// Rows compared: the paired query units.
    pub fn n_queries(&self) -> usize {
        self.queries.pairs.len()
    }

    /// Columns compared: the paired key units.
    pub fn n_keys(&self) -> usize {
        self.keys.pairs.len()
    }

    fn head_range(&self, layer: usize, head: usize) -> std::ops::Range<usize> {
        assert!(
            layer < self.layers && head < self.heads,
            "head out of range"
        );
        let size = self.n_queries() * self.n_keys();
        let at = (layer * self.heads + head) * size;
        at..at + size
    }

    /// A's matrix of `layer`/`head` over the paired units, `n_queries × n_keys` row-major.
    pub fn a_head(&self, layer: usize, head: usize) -> &[f32] {
        &self.a_weights[self.head_range(layer, head)]
    }

    /// B's matrix of `layer`/`head`, as [`Comparison::a_head`].
    pub fn b_head(&self, layer: usize, head: usize) -> &[f32] {
        &self.b_weights[self.head_range(layer, head)]
    }

    /// A's matrix of `layer`/`head` as it is compared with B's: only the cells both sides can
    /// attend (0 elsewhere), and each row where A can attend keys B cannot renormalised over
    /// those cells (its shares of the keys both can attend). Where the masks agree, A's own
    /// values.
    pub fn a_compared(&self, layer: usize, head: usize) -> Vec<f32> {
        compared(
            self.a_head(layer, head),
            self.a_visible_layer(layer),
            self.visible_layer(layer),
            self.n_keys(),
        )
    }

    /// B's matrix of `layer`/`head` as it is compared with A's (see [`Comparison::a_compared`]).
    pub fn b_compared(&self, layer: usize, head: usize) -> Vec<f32> {
        compared(
            self.b_head(layer, head),
            self.b_visible_layer(layer),
            self.visible_layer(layer),
            self.n_keys(),
        )
    }

    /// A − B for `layer`/`head`, row-major: [`Comparison::a_compared`] less
    /// [`Comparison::b_compared`], 0 in cells either side cannot attend.
    pub fn diff(&self, layer: usize, head: usize) -> Vec<f32> {
        self.a_compared(layer, head)
            .iter()
            .zip(self.b_compared(layer, head))
            .map(|(&x, y)| x - y)
            .collect()
    }

    /// Whether cell `query`, `key` of `layer` is visible on both sides.
    pub fn is_visible(&self, layer: usize, query: usize, key: usize) -> bool {
        self.visible_layer(layer)[query * self.n_keys() + key]
    }

    fn layer_range(&self, layer: usize) -> std::ops::Range<usize> {
        let size = self.n_queries() * self.n_keys();
        layer * size..(layer + 1) * size
    }

    /// `layer`'s visibility, `n_queries × n_keys` row-major: visible on both sides (the cells
    /// compared).
    pub fn visible_layer(&self, layer: usize) -> &[bool] {
        &self.visible[self.layer_range(layer)]
    }

    /// `layer`'s visibility on A's side alone (A's own mask), as [`Comparison::visible_layer`].
    pub fn a_visible_layer(&self, layer: usize) -> &[bool] {
        &self.a_visible[self.layer_range(layer)]
    }

    /// `layer`'s visibility on B's side alone (B's own mask).
    pub fn b_visible_layer(&self, layer: usize) -> &[bool] {
        &self.b_visible[self.layer_range(layer)]
    }

    /// Whether A and B can attend different cells (a bidirectional model against a causal one,
    /// a sliding window on one side): each is then drawn with its own mask, and only the cells
    /// both can attend are compared.
    pub fn masks_differ(&self) -> bool {
        self.a_visible != self.b_visible
    }

    /// The Jensen–Shannon distance of `layer`/`head`; `None` when no query row could be
    /// compared.
    pub fn distance(&self, layer: usize, head: usize) -> Option<f64> {
        let d = self.distance[layer * self.heads + head];
        (!d.is_nan()).then_some(d)
    }

    /// How many query rows the distance of `layer`/`head` is the mean over.
    pub fn rows(&self, layer: usize, head: usize) -> usize {
        self.rows[layer * self.heads + head]
    }

    /// Every head with a distance, farthest apart first (ties by layer, then head).
    pub fn ranked(&self) -> Vec<HeadDistance> {
        let mut out: Vec<HeadDistance> = (0..self.layers)
            .flat_map(|l| (0..self.heads).map(move |h| (l, h)))
            .filter_map(|(l, h)| {
                self.distance(l, h).map(|distance| HeadDistance {
                    layer: l,
                    head: h,
                    distance,
                    rows: self.rows(l, h),
                })
            })
            .collect();
        out.sort_by(|x, y| {
            y.distance
                .total_cmp(&x.distance)
                .then(x.layer.cmp(&y.layer))
                .then(x.head.cmp(&y.head))
        });
        out
    }

    /// The largest distance of any head (0 when none could be compared).
    pub fn max_distance(&self) -> f64 {
        self.ranked().first().map_or(0.0, |h| h.distance)
    }

    /// The mean of each head's distance over the heads of `layer` that have one.
    pub fn layer_distance(&self, layer: usize) -> Option<f64> {
        let d: Vec<f64> = (0..self.heads)
            .filter_map(|h| self.distance(layer, h))
            .collect();
        (!d.is_empty()).then(|| d.iter().sum::<f64>() / d.len() as f64)
    }

    /// How a view labels compared row `i`: A's label, and B's after a `/` when it reads
    /// differently (`[CLS]/<s>`, `The/the`).
    pub fn query_label(&self, i: usize, raw: bool) -> String {
        let (qa, qb) = self.queries.pairs[i];
        both_labels(&self.a.queries, qa, &self.b.queries, qb, raw)
    }

    /// How a view labels compared column `i` (see [`Comparison::query_label`]).
    pub fn key_label(&self, i: usize, raw: bool) -> String {
        let (ka, kb) = self.keys.pairs[i];
        both_labels(&self.a.keys, ka, &self.b.keys, kb, raw)
    }

    /// Every compared row's label ([`Comparison::query_label`]), a label that repeats followed
    /// by its position among the compared rows in subscript digits (`the₁`, `the₄`), as the
    /// views name them.
    pub fn query_labels(&self, raw: bool) -> Vec<String> {
        let labels: Vec<String> = (0..self.n_queries())
            .map(|i| self.query_label(i, raw))
            .collect();
        crate::attention::display::positioned(&labels, &(0..labels.len()).collect::<Vec<_>>())
    }

    /// Every compared column's label, as [`Comparison::query_labels`].
    pub fn key_labels(&self, raw: bool) -> Vec<String> {
        let labels: Vec<String> = (0..self.n_keys()).map(|i| self.key_label(i, raw)).collect();
        crate::attention::display::positioned(&labels, &(0..labels.len()).collect::<Vec<_>>())
    }

    /// The model layer numbers of compared layer `layer` on A's and B's side.
    pub fn layer_numbers(&self, layer: usize) -> (usize, usize) {
        (self.a.layer_numbers[layer], self.b.layer_numbers[layer])
    }

    /// How a view names compared layer `layer`: `3`, or `3/5` when the sides' numbers differ.
    pub fn layer_name(&self, layer: usize) -> String {
        match self.layer_numbers(layer) {
            (x, y) if x == y => x.to_string(),
            (x, y) => format!("{x}/{y}"),
        }
    }

    /// Whether the comparison is square (self-attention on both sides).
    pub fn is_square(&self) -> bool {
        self.kind.is_self()
    }

    /// The query units of A with no partner in B, as a view names them.
    pub fn unmatched_a(&self, raw: bool) -> Vec<String> {
        let shown = self.a.queries.shown(raw);
        self.queries
            .only_a
            .iter()
            .map(|&i| shown[i].clone())
            .collect()
    }

    /// The query units of B with no partner in A, as a view names them.
    pub fn unmatched_b(&self, raw: bool) -> Vec<String> {
        let shown = self.b.queries.shown(raw);
        self.queries
            .only_b
            .iter()
            .map(|&i| shown[i].clone())
            .collect()
    }
}

/// `weights` (`n_key` columns) over the cells visible in `both` (0 elsewhere), each row
/// renormalised over them where `own` sees cells `both` does not.
fn compared(weights: &[f32], own: &[bool], both: &[bool], nk: usize) -> Vec<f32> {
    let mut out: Vec<f32> = weights
        .iter()
        .zip(both)
        .map(|(&w, &v)| if v { w } else { 0.0 })
        .collect();
    let nk = nk.max(1);
    for ((row, own), both) in out.chunks_mut(nk).zip(own.chunks(nk)).zip(both.chunks(nk)) {
        if own.iter().zip(both).all(|(&o, &b)| o == b) {
            continue;
        }
        let sum: f64 = row.iter().map(|&w| w as f64).sum();
        if sum > 0.0 {
            row.iter_mut().for_each(|w| *w = (*w as f64 / sum) as f32);
        }
    }
    out
}

fn both_labels(a: &Units, i: usize, b: &Units, j: usize, raw: bool) -> String {
    let (x, y) = (&a.shown(raw)[i], &b.shown(raw)[j]);
    if x == y {
        x.clone()
    } else {
        format!("{x}/{y}")
    }
}

#[cfg(test)]
mod tests;
