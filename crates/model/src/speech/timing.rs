//! Word timings from the cross-attention, as openai-whisper's `find_alignment`
//! (`whisper/timing.py`) computes them with `word_timestamps=True`: the alignment heads'
//! attention over the frames, z-scored along the tokens, median-filtered along the frames,
//! averaged over the heads, and aligned by dynamic time warping on the negative matrix; the
//! words split as its tokenizer's `split_to_word_tokens` splits them (on spaces and
//! punctuation); each word starts at the frame where the path reaches its first token and ends
//! where it reaches the next word's. One encoder frame is 20 ms. Then, as its
//! `add_word_timestamps` does, punctuation is merged into the words beside it
//! ([`merge_punctuations`]): an opening mark into the word after it, a closing mark into the word
//! before it, so "," and "." get no words of their own. openai-whisper's later adjustments of
//! times at sentence and segment boundaries (a heuristic clamp to twice the median word length)
//! are not applied: the times stay those of the alignment path.

use rayon::prelude::*;
use serde::Serialize;

/// Seconds per encoder frame (openai-whisper's `TOKENS_PER_SECOND` is 50).
pub const FRAME_SECONDS: f64 = 0.02;

/// The median filter's width (openai-whisper's `medfilt_width`).
pub const MEDIAN_WIDTH: usize = 7;

/// One word's place in the audio.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WordTiming {
    /// The word as decoded (with its leading space).
    pub word: String,
    /// Its tokens' ids.
    pub tokens: Vec<u32>,
    /// Its tokens' rows in the decoder's input (`first..end`).
    pub rows: [usize; 2],
    /// The encoder frame where it starts (× 0.02 s).
    pub start_frame: usize,
    /// The encoder frame where it ends.
    pub end_frame: usize,
    /// Start in seconds from the window's start.
    pub start: f64,
    /// End in seconds from the window's start.
    pub end: f64,
}

/// openai-whisper's default `prepend_punctuations`: marks merged into the word after them.
pub const PREPENDED: &str = "\"'\u{201c}\u{bf}([{-";

/// openai-whisper's default `append_punctuations`: marks merged into the word before them.
pub const APPENDED: &str = "\"'.\u{3002},\u{ff0c}!\u{ff01}?\u{ff1f}:\u{ff1a}\u{201d})]}\u{3001}";

/// What the alignment reads.
pub struct AlignmentInput<'a> {
    /// The decoder's cross-attention `[layers, heads, tokens, source]`, of a teacher-forced run
    /// over the prompt (its `sot` tokens, then `<|notimestamps|>`), the text tokens and the
    /// end-of-text token.
    pub cross: &'a [f32],
    /// `[layers, heads, tokens, source]`.
    pub shape: [usize; 4],
    /// `(layer, head)` pairs to average.
    pub heads: &'a [(usize, usize)],
    /// The prompt's tokens before `<|notimestamps|>` (openai's `sot_sequence`).
    pub sot_len: usize,
    /// The text tokens (after `<|notimestamps|>`, before the end-of-text token).
    pub text: &'a [u32],
    /// The end-of-text token; ids from it on are special.
    pub eot: u32,
    /// The frames the audio covers (at most `source`).
    pub frames: usize,
}

/// The heads openai-whisper uses when a model names none: every head of the second half of the
/// decoder's layers.
pub fn default_heads(layers: usize, heads: usize) -> Vec<(usize, usize)> {
    (layers / 2..layers)
        .flat_map(|l| (0..heads).map(move |h| (l, h)))
        .collect()
}

/// The alignment matrix `[rows, frames]` (rows: `<|notimestamps|>` and the text tokens): each
/// head's weights z-scored along the tokens (population std, as `torch.std_mean(unbiased=False)`),
/// median-filtered along the frames, averaged over the heads.
pub fn alignment_matrix(input: &AlignmentInput<'_>) -> (Vec<f32>, usize, usize) {
    let [_, heads, tokens, source] = input.shape;
    let frames = input.frames.min(source);
    // Each head on a task of its own; their results are added in the heads' order.
    let filtered: Vec<Vec<f32>> = input
        .heads
        .par_iter()
        .map(|&(l, h)| {
            let head = &input.cross[(l * heads + h) * tokens * source..][..tokens * source];
            let mut w: Vec<f32> = (0..tokens)
                .flat_map(|t| head[t * source..][..frames].iter().copied())
                .collect();
            for f in 0..frames {
                let column = (0..tokens).map(|t| w[t * frames + f] as f64);
                let mean = column.clone().sum::<f64>() / tokens as f64;
                let var = column.map(|x| (x - mean) * (x - mean)).sum::<f64>() / tokens as f64;
                let (mean, std) = (mean as f32, var.sqrt() as f32);
                for t in 0..tokens {
                    let x = &mut w[t * frames + f];
                    *x = (*x - mean) / std;
                }
            }
            (0..tokens)
                .flat_map(|t| median_filter(&w[t * frames..][..frames], MEDIAN_WIDTH))
                .collect()
        })
        .collect();
    let mut sum = vec![0f32; tokens * frames];
    for head in &filtered {
        for (s, x) in sum.iter_mut().zip(head) {
            *s += x;
        }
    }
    let n = input.heads.len() as f32;
    let first = input.sot_len;
    let rows = tokens.saturating_sub(first + 1);
    let matrix = sum[first * frames..][..rows * frames]
        .iter()
        .map(|&x| x / n)
        .collect();
    (matrix, rows, frames)
}

/// openai-whisper's `median_filter`: reflect padding (the edge not repeated), the middle of
/// each sorted window; a row no longer than half the width is left as it is.
pub fn median_filter(x: &[f32], width: usize) -> Vec<f32> {
    let pad = width / 2;
    let n = x.len();
    if n <= pad {
        return x.to_vec();
    }
    let at = |i: isize| -> f32 {
        let i = if i < 0 {
            -i
        } else if i >= n as isize {
            2 * (n as isize - 1) - i
        } else {
            i
        };
        x[i as usize]
    };
    let mut window = vec![0f32; width];
    (0..n)
        .map(|i| {
            for (k, w) in window.iter_mut().enumerate() {
                *w = at(i as isize + k as isize - pad as isize);
            }
            window.sort_by(f32::total_cmp);
            window[pad]
        })
        .collect()
}

/// openai-whisper's `dtw_cpu` and `backtrace` over `x` `[n, m]` (costs kept in f32, as its
/// numpy arrays): the path's token and frame indices, from (0, 0) to (n−1, m−1).
pub fn dtw(x: &[f64], n: usize, m: usize) -> (Vec<usize>, Vec<usize>) {
    let w = m + 1;
    let mut cost = vec![f32::INFINITY; (n + 1) * w];
    let mut trace = vec![-1i8; (n + 1) * w];
    cost[0] = 0.0;
    for j in 1..=m {
        for i in 1..=n {
            let c0 = cost[(i - 1) * w + j - 1];
            let c1 = cost[(i - 1) * w + j];
            let c2 = cost[i * w + j - 1];
            let (c, t) = if c0 < c1 && c0 < c2 {
                (c0, 0)
            } else if c1 < c0 && c1 < c2 {
                (c1, 1)
            } else {
                (c2, 2)
            };
            cost[i * w + j] = (x[(i - 1) * m + j - 1] + c as f64) as f32;
            trace[i * w + j] = t;
        }
    }
    trace[..w].fill(2);
    for i in 0..=n {
        trace[i * w] = 1;
    }
    let (mut i, mut j) = (n, m);
    let mut path = Vec::with_capacity(n + m);
    while i > 0 || j > 0 {
        path.push((i - 1, j - 1));
        match trace[i * w + j] {
            0 => {
                i -= 1;
                j -= 1;
            }
            1 => i -= 1,
            _ => j -= 1,
        }
    }
    path.reverse();
    path.into_iter().unzip()
}

/// openai-whisper's `split_tokens_on_spaces` (over `split_tokens_on_unicode`): tokens grouped
/// into subwords that decode to whole characters, then into words at a leading space, a
/// punctuation mark or a special token (ids from `eot` on).
pub fn split_words(
    tokens: &[u32],
    eot: u32,
    decode: &dyn Fn(&[u32]) -> String,
) -> (Vec<String>, Vec<Vec<u32>>) {
    const REPLACEMENT: char = '\u{fffd}';
    let full: Vec<char> = decode(tokens).chars().collect();
    let (mut subwords, mut subword_tokens) = (Vec::new(), Vec::new());
    let mut current = Vec::new();
    let mut offset = 0;
    for &token in tokens {
        current.push(token);
        let decoded = decode(&current);
        let chars: Vec<char> = decoded.chars().collect();
        let complete = match chars.iter().position(|&c| c == REPLACEMENT) {
            None => true,
            Some(i) => full.get(offset + i) == Some(&REPLACEMENT),
        };
        if complete {
            offset += chars.len();
            subwords.push(decoded);
            subword_tokens.push(std::mem::take(&mut current));
        }
    }
    let (mut words, mut word_tokens): (Vec<String>, Vec<Vec<u32>>) = (Vec::new(), Vec::new());
    for (subword, ids) in subwords.into_iter().zip(subword_tokens) {
        let special = ids[0] >= eot;
        let with_space = subword.starts_with(' ');
        let trimmed = subword.trim();
        let punctuation = is_punctuation_run(trimmed);
        if special || with_space || punctuation || words.is_empty() {
            words.push(subword);
            word_tokens.push(ids);
        } else {
            let last = words.len() - 1;
            words[last].push_str(&subword);
            word_tokens[last].extend(ids);
        }
    }
    (words, word_tokens)
}

/// Python's `s in string.punctuation`: `s` a substring of the ASCII punctuation string (the
/// empty string included).
fn is_punctuation_run(s: &str) -> bool {
    const PUNCTUATION: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
    PUNCTUATION.contains(s)
}

/// Word timings from `input`: the alignment matrix, DTW, the word split, then the punctuation
/// merged into the words beside it ([`merge_punctuations`] with openai-whisper's defaults);
/// `decode` decodes token ids (special tokens kept).
pub fn find_alignment(
    input: &AlignmentInput<'_>,
    decode: &dyn Fn(&[u32]) -> String,
) -> Vec<WordTiming> {
    let (matrix, rows, frames) = alignment_matrix(input);
    if rows == 0 || frames == 0 {
        return Vec::new();
    }
    let negative: Vec<f64> = matrix.iter().map(|&x| -(x as f64)).collect();
    let (text_indices, time_indices) = dtw(&negative, rows, frames);
    let mut with_eot = input.text.to_vec();
    with_eot.push(input.eot);
    let (words, word_tokens) = split_words(&with_eot, input.eot, decode);
    if word_tokens.len() <= 1 {
        return Vec::new();
    }
    // The frame where the path first reaches each row.
    let jump_frames: Vec<usize> = (0..text_indices.len())
        .filter(|&k| k == 0 || text_indices[k] != text_indices[k - 1])
        .map(|k| time_indices[k])
        .collect();
    let mut boundaries = vec![0usize];
    for t in &word_tokens[..word_tokens.len() - 1] {
        boundaries.push(boundaries.last().unwrap() + t.len());
    }
    // The rows of the text tokens in the decoder's input: after the sot tokens and
    // <|notimestamps|>.
    let first_text = input.sot_len + 1;
    let aligned = words
        .into_iter()
        .zip(word_tokens)
        .take(boundaries.len() - 1)
        .enumerate()
        .filter_map(|(w, (word, tokens))| {
            let start_frame = *jump_frames.get(boundaries[w])?;
            let end_frame = *jump_frames.get(boundaries[w + 1])?;
            Some(WordTiming {
                word,
                rows: [first_text + boundaries[w], first_text + boundaries[w + 1]],
                tokens,
                start_frame,
                end_frame,
                start: start_frame as f64 * FRAME_SECONDS,
                end: end_frame as f64 * FRAME_SECONDS,
            })
        })
        .collect();
    merge_punctuations(aligned, PREPENDED, APPENDED)
}

/// openai-whisper's `merge_punctuations` over `words` (in order), with `prepended` and
/// `appended` as its arguments: from the end backwards, a word that starts with a space and whose
/// trimmed text is a substring of `prepended` is put in front of the next word kept; then from
/// the start, a word that is a substring of `appended` is put after the word before it, unless
/// that one ends with a space. A merged word keeps the times of the word it joins; its tokens and
/// rows grow to cover both. The words emptied by a merge are dropped.
pub fn merge_punctuations(
    words: Vec<WordTiming>,
    prepended: &str,
    appended: &str,
) -> Vec<WordTiming> {
    fn join(first: &mut WordTiming, second: &WordTiming, into_first: bool) {
        let tokens: Vec<u32> = first.tokens.iter().chain(&second.tokens).copied().collect();
        let word = format!("{}{}", first.word, second.word);
        let rows = [
            first.rows[0].min(second.rows[0]),
            first.rows[1].max(second.rows[1]),
        ];
        if into_first {
            first.word = word;
            first.tokens = tokens;
            first.rows = rows;
        } else {
            *first = WordTiming {
                word,
                tokens,
                rows,
                ..second.clone()
            };
        }
    }
    let mut words = words;
    if words.len() >= 2 {
        let mut j = words.len() - 1;
        for i in (0..words.len() - 1).rev() {
            let previous = &words[i];
            if previous.word.starts_with(' ') && prepended.contains(previous.word.trim()) {
                let mut merged = previous.clone();
                join(&mut merged, &words[j], false);
                words[j] = merged;
                words[i].word.clear();
                words[i].tokens.clear();
            } else {
                j = i;
            }
        }
        let mut i = 0;
        for j in 1..words.len() {
            if !words[i].word.ends_with(' ') && appended.contains(words[j].word.as_str()) {
                let following = words[j].clone();
                if !following.word.is_empty() {
                    join(&mut words[i], &following, true);
                }
                words[j].word.clear();
                words[j].tokens.clear();
            } else {
                i = j;
            }
        }
    }
    // openai-whisper keeps the words that are not empty.
    words.retain(|w| !w.word.is_empty());
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_filter_reflects_at_the_edges() {
        // Width 3: [x1, x0, x1] at the start, [x3, x4, x3] at the end.
        assert_eq!(
            median_filter(&[5.0, 1.0, 3.0, 2.0, 4.0], 3),
            vec![1.0, 3.0, 2.0, 3.0, 2.0]
        );
        assert_eq!(median_filter(&[1.0, 2.0, 3.0], 7), vec![1.0, 2.0, 3.0]);
    }

    #[test]
    fn dtw_follows_the_cheap_diagonal() {
        // A cost matrix whose zeros run down a staircase: the path must take it.
        let x = [0.0, 0.0, 9.0, 9.0, 9.0, 9.0, 0.0, 9.0, 9.0, 9.0, 9.0, 0.0];
        let (t, f) = dtw(&x, 3, 4);
        assert_eq!(t, vec![0, 0, 1, 2]);
        assert_eq!(f, vec![0, 1, 2, 3]);
    }

    #[test]
    fn words_split_on_spaces_and_punctuation() {
        let vocab = ["Hel", "lo", " wor", "ld", ",", " you", "<eot>"];
        let decode = |ids: &[u32]| ids.iter().map(|&i| vocab[i as usize]).collect::<String>();
        let (words, tokens) = split_words(&[0, 1, 2, 3, 4, 5, 6], 6, &decode);
        assert_eq!(words, vec!["Hello", " world", ",", " you", "<eot>"]);
        assert_eq!(
            tokens,
            vec![vec![0, 1], vec![2, 3], vec![4], vec![5], vec![6]]
        );
    }
}
