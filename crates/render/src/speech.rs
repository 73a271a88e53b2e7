//! What every view of a speech run (Whisper) reads beside the attention: the cross-attention
//! as words × time (each word's row the mean of the decoder rows that write its tokens, over
//! the encoder frames the audio covers), where each word's attention peaks, and the encoder's
//! self-attention over its 1,500 frames pooled into blocks. The recording itself (spectrogram,
//! words, samples) is the run's [`Recording`]; the figures are [`crate::image::speech`], the
//! terminal text [`terminal_words`], the HTML report's tab `assets/report/speech_view.js`.

use crate::attention::{Attention, AttentionKind, HeadSel, Recording};

/// Which cross-attention a words × time view shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpeechHeads {
    /// The mean of the alignment heads' weights: the heads the word timings were read from.
    Alignment,
    /// One head of a layer, or the mean of the layer's heads.
    Head {
        /// Layer, 0-based (its place among the captured layers).
        layer: usize,
        /// Head, or the mean.
        head: HeadSel,
    },
}

/// The words × time matrix of a speech run's cross-attention.
#[derive(Clone, Debug, PartialEq)]
pub struct WordMatrix {
    /// Words (rows).
    pub words: usize,
    /// Encoder frames the audio covers (columns).
    pub frames: usize,
    /// `words × frames`, row-major: word `w`'s row is the mean over the decoder rows that
    /// predict its tokens ([`crate::attention::RecordedWord::predicting_rows`]) of their weights
    /// on frame `f`.
    pub values: Vec<f32>,
    /// What the rows are read from, for titles (`mean of the 6 alignment heads`,
    /// `layer 3 · head 1`).
    pub what: String,
}

/// Why a words × time view cannot be drawn.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpeechViewError {
    /// The attention is not a speech run's cross-attention.
    #[error("the words × time view is drawn from a speech model's cross-attention (Whisper's), with its recording")]
    NotSpeech,
    /// A layer or head outside the attention.
    #[error("layer {layer}, head {head} is not one of the cross-attention's {layers} layers × {heads} heads")]
    Selection {
        /// Layer asked.
        layer: usize,
        /// Head asked.
        head: usize,
        /// Layers there are.
        layers: usize,
        /// Heads per layer.
        heads: usize,
    },
}

/// The recording of `att` when it is a speech run's cross-attention at token level (the level
/// a word's rows are numbered in), with every decoder row kept.
pub fn speech_of(att: &Attention) -> Option<&Recording> {
    let rec = att.recording.as_deref()?;
    let ok = att.kind == AttentionKind::Cross
        && att.level == crate::attention::Level::Token
        && !att.special_excluded
        && rec
            .words
            .iter()
            .all(|w| w.rows.end <= att.n_queries() && w.end_frame <= att.n_keys());
    ok.then_some(rec)
}

/// The cross-attention of `att` as words × time (see [`WordMatrix`]); `att` must be a speech
/// run's token-level cross-attention ([`speech_of`]).
pub fn word_matrix(att: &Attention, which: SpeechHeads) -> Result<WordMatrix, SpeechViewError> {
    let rec = speech_of(att).ok_or(SpeechViewError::NotSpeech)?;
    let (nq, nk) = (att.n_queries(), att.n_keys());
    let frames = rec.frames().min(nk);
    let (layers, heads) = (att.layers(), att.heads());
    let (matrix, what) = match which {
        SpeechHeads::Alignment => {
            let chosen: Vec<(usize, usize)> = rec
                .alignment_heads
                .iter()
                .filter_map(|&(l, h)| {
                    let place = att.layer_numbers().iter().position(|&n| n == l)?;
                    (h < heads).then_some((place, h))
                })
                .collect();
            if chosen.is_empty() {
                (
                    att.head_mean(layers - 1),
                    format!(
                        "layer {} · mean of {heads} heads (no alignment head captured)",
                        att.layer_number(layers - 1)
                    ),
                )
            } else {
                let mut sum = vec![0f64; nq * nk];
                for &(l, h) in &chosen {
                    for (s, &v) in sum.iter_mut().zip(att.head(l, h)) {
                        *s += v as f64;
                    }
                }
                let n = chosen.len() as f64;
                let what = if chosen.len() == 1 {
                    format!(
                        "alignment head (layer {}, head {})",
                        att.layer_number(chosen[0].0),
                        chosen[0].1
                    )
                } else {
                    format!("mean of the {} alignment heads", chosen.len())
                };
                (sum.into_iter().map(|s| (s / n) as f32).collect(), what)
            }
        }
        SpeechHeads::Head { layer, head } => {
            let bad = || SpeechViewError::Selection {
                layer,
                head: match head {
                    HeadSel::Index(h) => h,
                    HeadSel::Mean => 0,
                },
                layers,
                heads,
            };
            if layer >= layers || matches!(head, HeadSel::Index(h) if h >= heads) {
                return Err(bad());
            }
            let what = match head {
                HeadSel::Index(h) => format!("layer {} · head {h}", att.layer_number(layer)),
                HeadSel::Mean => {
                    format!("layer {} · mean of {heads} heads", att.layer_number(layer))
                }
            };
            (att.matrix(layer, head), what)
        }
    };
    let mut values = vec![0f32; rec.words.len() * frames];
    for (w, word) in rec.words.iter().enumerate() {
        let rows = word.predicting_rows();
        let n = rows.len().max(1) as f64;
        for f in 0..frames {
            let s: f64 = rows.clone().map(|r| matrix[r * nk + f] as f64).sum();
            values[w * frames + f] = (s / n) as f32;
        }
    }
    Ok(WordMatrix {
        words: rec.words.len(),
        frames,
        values,
        what,
    })
}

/// Sum `n × n` values (row-major) over blocks of `block × block` cells: an `m × m` matrix,
/// `m = ceil(n / block)`, the last block of each side holding what is left. Each cell is its
/// block's sum, added in f64 and rounded once to f32.
pub fn pool_square(values: &[f32], n: usize, block: usize) -> Vec<f32> {
    assert_eq!(values.len(), n * n, "pool_square: {n} × {n} values");
    let block = block.max(1);
    let m = n.div_ceil(block);
    let mut sums = vec![0f64; m * m];
    for q in 0..n {
        let out = &mut sums[(q / block) * m..(q / block + 1) * m];
        for (k, &v) in values[q * n..(q + 1) * n].iter().enumerate() {
            out[k / block] += v as f64;
        }
    }
    sums.into_iter().map(|s| s as f32).collect()
}

/// The frames per block that pool an encoder's `n` frames to about 150 (10 for Whisper's
/// 1,500: one cell 200 ms); 1 for 150 frames or fewer.
pub fn pool_block(n: usize) -> usize {
    n.div_ceil(150).max(1)
}

/// The encoder's self-attention of `att` (an encoder value of a speech run) at `layer`/`head`,
/// pooled over blocks of [`pool_block`] frames: each cell the block's sum divided by the block
/// (the mean over its queries of the weight they give its keys, so a row still sums to 1).
/// Returns the pooled matrix, its side and the block.
pub fn pooled_encoder(att: &Attention, layer: usize, head: HeadSel) -> (Vec<f32>, usize, usize) {
    let n = att.n_queries();
    let block = pool_block(n);
    let pooled = pool_square(&att.matrix(layer, head), n, block);
    let m = n.div_ceil(block);
    // The last block may be short: divide each row of blocks by its own query count.
    let out = pooled
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let q = i / m;
            let count = (n - q * block).min(block);
            v / count as f32
        })
        .collect();
    (out, m, block)
}

/// The terminal's view of a speech run: each word with its time, and a strip of where its
/// alignment attention peaks. The strip has `cols` columns over the audio (the time axis above
/// it); a word's box (its time from the alignment) is `─`, the frame where its row of `m`
/// peaks `█` (inside its box) or `▲` (outside it, where the alignment disagrees with the
/// plain peak), and within `width` characters.
pub fn terminal_words(rec: &Recording, m: &WordMatrix, width: usize) -> String {
    use std::fmt::Write;
    let words: Vec<String> = rec
        .words
        .iter()
        .map(|w| crate::attention::display::escape_invisible(w.word.trim()))
        .map(|w| w.chars().take(14).collect())
        .collect();
    let word_w = words
        .iter()
        .map(|w| w.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let times_w = 15; // "12.34–12.56 s  "
    let cols = width.saturating_sub(word_w + times_w + 3).clamp(10, 120);
    let frames = m.frames.max(1);
    let seconds = frames as f64 * rec.frame_seconds;
    let col_of = |f: usize| (f * cols / frames).min(cols - 1);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Words over the recording: {}, {:.2}–{:.2} s",
        crate::attention::display::escape_invisible(&rec.name),
        rec.window_start,
        rec.window_start + rec.window_seconds,
    );
    let _ = writeln!(
        out,
        "(cross-attention: {}; one column = {:.2} s)",
        m.what,
        seconds / cols as f64
    );
    // The time axis: a tick and its second every few columns.
    let mut axis = vec![' '; cols];
    let step = [0.5, 1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .find(|s| cols as f64 * s / seconds >= 8.0)
        .unwrap_or(10.0);
    let mut t = 0.0;
    while t < seconds {
        let c = (t / seconds * cols as f64) as usize;
        let label = format!("|{}", trim_seconds(rec.window_start + t));
        for (i, ch) in label.chars().enumerate() {
            if c + i < cols {
                axis[c + i] = ch;
            }
        }
        t += step;
    }
    let _ = writeln!(
        out,
        "{:word_w$} {:times_w$} {}",
        "",
        "",
        axis.iter().collect::<String>()
    );
    for (w, word) in rec.words.iter().enumerate() {
        let mut strip = vec!['·'; cols];
        let (s, e) = (word.start_frame.min(frames), word.end_frame.min(frames));
        strip[col_of(s)..=col_of(e.saturating_sub(1).max(s))].fill('─');
        let row = &m.values[w * frames..(w + 1) * frames];
        let peak = row
            .iter()
            .enumerate()
            .fold((0, f32::MIN), |b, (i, &v)| if v > b.1 { (i, v) } else { b })
            .0;
        strip[col_of(peak)] = if (s..e.max(s + 1)).contains(&peak) {
            '█'
        } else {
            '▲'
        };
        let times = format!(
            "{:.2}–{:.2} s",
            rec.frame_time(word.start_frame),
            rec.frame_time(word.end_frame)
        );
        let _ = writeln!(
            out,
            "{:word_w$} {:times_w$} {}",
            words[w],
            times,
            strip.iter().collect::<String>()
        );
    }
    let _ = writeln!(
        out,
        "─ the word's time (alignment, DTW)  █ its attention's peak  ▲ a peak outside it"
    );
    out
}

/// `1.5` for 1.5 seconds, `2` for 2.
fn trim_seconds(s: f64) -> String {
    let t = format!("{s:.1}");
    t.strip_suffix(".0").map(str::to_string).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny random generator (xorshift), so the test needs no crate.
    fn random(n: usize, mut seed: u64) -> Vec<f32> {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed % 10_000) as f32 / 10_000.0
            })
            .collect()
    }

    #[test]
    fn pooling_sums_each_block_as_a_naive_loop_does() {
        for (n, block) in [(1500, 10), (37, 5), (10, 3), (4, 4), (5, 1)] {
            let values = random(n * n, 0x9e37_79b9 + n as u64);
            let pooled = pool_square(&values, n, block);
            let m = n.div_ceil(block);
            assert_eq!(pooled.len(), m * m);
            for bq in 0..m {
                for bk in 0..m {
                    let mut s = 0f64;
                    for q in bq * block..((bq + 1) * block).min(n) {
                        for k in bk * block..((bk + 1) * block).min(n) {
                            s += values[q * n + k] as f64;
                        }
                    }
                    assert_eq!(
                        pooled[bq * m + bk],
                        s as f32,
                        "n {n} block {block} ({bq}, {bk})"
                    );
                }
            }
            // Nothing lost: the total is the total.
            let total: f64 = values.iter().map(|&v| v as f64).sum();
            let pooled_total: f64 = pooled.iter().map(|&v| v as f64).sum();
            assert!((total - pooled_total).abs() < 1e-6 * total.max(1.0));
        }
        assert_eq!(pool_block(1500), 10);
        assert_eq!(pool_block(100), 1);
    }

    #[test]
    fn the_terminal_gives_each_word_its_time_and_peak_within_80_columns() {
        let set = crate::attention::fixtures::speech(
            &[
                (" Hello", 2, 10, 30),
                (" there", 1, 30, 55),
                (" friend", 3, 60, 90),
            ],
            300,
            2.0,
        );
        let cross = set.iter().nth(2).unwrap();
        let m = word_matrix(cross, SpeechHeads::Alignment).unwrap();
        // Each word's row peaks where the fixture put it: the middle of its time.
        for (w, word) in cross.recording.as_deref().unwrap().words.iter().enumerate() {
            let row = &m.values[w * m.frames..(w + 1) * m.frames];
            let peak = (0..m.frames)
                .max_by(|&a, &b| row[a].total_cmp(&row[b]))
                .unwrap();
            assert_eq!(peak, (word.start_frame + word.end_frame) / 2);
        }
        let text = terminal_words(cross.recording.as_deref().unwrap(), &m, 80);
        for line in text.lines() {
            assert!(line.chars().count() <= 80, "{line:?}");
        }
        assert!(text.contains("Hello  0.20–0.60 s"), "{text}");
        // Every peak inside its word's box (the last line is the key).
        let rows: Vec<&str> = text.lines().filter(|l| l.contains(" s ")).collect();
        assert_eq!(rows.len(), 3, "{text}");
        for row in rows {
            assert_eq!(row.matches('█').count(), 1, "{row}");
            assert!(!row.contains('▲'), "{row}");
        }
    }
}
