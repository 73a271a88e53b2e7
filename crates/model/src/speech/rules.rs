//! Whisper's decoding rules on each step's logits, as transformers' logits processors apply
//! them in `WhisperForConditionalGeneration.generate` (greedy): `SuppressTokensAtBegin` (the
//! first generated token), `SuppressTokens` (every step) and, with timestamps,
//! `WhisperTimeStampLogitsProcessor`.

use super::settings::SpeechSettings;

/// The rules for one generation after a prompt of `begin` tokens.
#[derive(Clone, Debug)]
pub struct Rules {
    /// Ids before the first generated one (the prompt).
    pub begin: usize,
    /// Never generated.
    pub suppress: Vec<u32>,
    /// Never generated first.
    pub begin_suppress: Vec<u32>,
    /// With timestamps: `<|notimestamps|>`, the end-of-text token (the first id after the text
    /// tokens) and the latest first timestamp, in steps.
    pub timestamps: Option<TimestampRules>,
}

/// `WhisperTimeStampLogitsProcessor`'s settings.
#[derive(Clone, Copy, Debug)]
pub struct TimestampRules {
    /// `<|notimestamps|>`; timestamps are the ids after it.
    pub no_timestamps: u32,
    /// The end-of-text token (text tokens are the ids below it).
    pub eot: u32,
    /// `max_initial_timestamp_index`.
    pub max_initial: Option<usize>,
}

impl Rules {
    /// The rules `settings` give after a prompt of `begin` tokens, with timestamps or not.
    pub fn new(settings: &SpeechSettings, begin: usize, timestamps: bool, eot: u32) -> Rules {
        Rules {
            begin,
            suppress: settings.suppress_tokens.clone(),
            begin_suppress: settings.begin_suppress_tokens.clone(),
            timestamps: settings
                .no_timestamps
                .filter(|_| timestamps)
                .map(|no_timestamps| TimestampRules {
                    no_timestamps,
                    eot,
                    max_initial: settings.max_initial_timestamp_index,
                }),
        }
    }

    /// Whether the rules only forbid tokens, whatever the logits: without timestamps. (The
    /// timestamp rule compares the timestamps' total probability with the text's.)
    pub fn masks_only(&self) -> bool {
        self.timestamps.is_none()
    }

    /// Apply the rules to the logits of the token after `ids`.
    pub fn apply(&self, ids: &[u32], logits: &mut [f32]) {
        let mut block = |id: u32| {
            if let Some(x) = logits.get_mut(id as usize) {
                *x = f32::NEG_INFINITY;
            }
        };
        if ids.len() == self.begin {
            self.begin_suppress.iter().for_each(|&id| block(id));
        }
        self.suppress.iter().for_each(|&id| block(id));
        if let Some(t) = self.timestamps {
            t.apply(
                &ids[self.begin.min(ids.len())..],
                ids.len() == self.begin,
                logits,
            );
        }
    }
}

impl TimestampRules {
    /// transformers' `WhisperTimeStampLogitsProcessor.__call__` for one sequence: `seq` the
    /// generated ids so far, `first` whether nothing is generated yet.
    fn apply(&self, seq: &[u32], first: bool, logits: &mut [f32]) {
        let vocab = logits.len();
        let begin = (self.no_timestamps as usize + 1).min(vocab);
        let eot = (self.eot as usize).min(vocab);
        let ninf = f32::NEG_INFINITY;
        logits[self.no_timestamps as usize] = ninf;
        let is_ts = |id: u32| id as usize >= begin;
        let n = seq.len();
        let last_was = n >= 1 && is_ts(seq[n - 1]);
        let penultimate_was = n < 2 || is_ts(seq[n - 2]);
        if last_was {
            if penultimate_was {
                logits[begin..].fill(ninf);
            } else {
                logits[..eot].fill(ninf);
            }
        }
        let timestamps: Vec<u32> = seq.iter().copied().filter(|&id| is_ts(id)).collect();
        let mut last = begin;
        if let Some(&t) = timestamps.last() {
            last = if last_was && !penultimate_was {
                t as usize
            } else {
                t as usize + 1
            };
        }
        logits[begin..last.clamp(begin, vocab)].fill(ninf);
        if first {
            logits[..begin].fill(ninf);
            if let Some(m) = self.max_initial {
                let allowed = begin + m;
                if allowed + 1 < vocab {
                    logits[allowed + 1..].fill(ninf);
                }
            }
        }
        // If the timestamps together are likelier than any text token, a timestamp it is.
        let max = logits.iter().copied().fold(ninf, f32::max);
        if max == ninf {
            return;
        }
        let sum: f32 = logits.iter().map(|&x| (x - max).exp()).sum();
        let log_z = max + sum.ln();
        let ts_max = logits[begin..].iter().copied().fold(ninf, f32::max);
        let ts_logprob = if ts_max == ninf {
            ninf
        } else {
            let s: f32 = logits[begin..].iter().map(|&x| (x - ts_max).exp()).sum();
            ts_max + s.ln() - log_z
        };
        let text_max = logits[..begin].iter().copied().fold(ninf, f32::max) - log_z;
        if ts_logprob > text_max {
            logits[..begin].fill(ninf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(timestamps: bool) -> Rules {
        let settings = SpeechSettings {
            no_timestamps: Some(10),
            suppress_tokens: vec![3],
            begin_suppress_tokens: vec![1],
            ..SpeechSettings::default()
        };
        Rules::new(&settings, 2, timestamps, 8)
    }

    #[test]
    fn suppression_first_and_always() {
        let r = rules(false);
        let mut logits = vec![0.0; 20];
        r.apply(&[0, 9], &mut logits);
        assert_eq!(logits[1], f32::NEG_INFINITY);
        assert_eq!(logits[3], f32::NEG_INFINITY);
        let mut logits = vec![0.0; 20];
        r.apply(&[0, 9, 5], &mut logits);
        assert_eq!(logits[1], 0.0, "only the first generated token");
        assert_eq!(logits[3], f32::NEG_INFINITY);
        assert_eq!(logits[10], 0.0, "no timestamp rules without timestamps");
    }

    #[test]
    fn timestamps_come_in_pairs_and_never_go_back() {
        let r = rules(true);
        // First: a timestamp, none after <|0.00|> + max_initial (none set here).
        let mut logits = vec![0.0; 20];
        r.apply(&[0, 9], &mut logits);
        assert!(logits[..11].iter().all(|&x| x == f32::NEG_INFINITY));
        assert_eq!(logits[11], 0.0);
        // After text then one timestamp: text is out (a closing timestamp or the end).
        let mut logits = vec![0.0; 20];
        r.apply(&[0, 9, 12, 4, 14], &mut logits);
        assert!(logits[..8].iter().all(|&x| x == f32::NEG_INFINITY));
        assert!(logits[11..14].iter().all(|&x| x == f32::NEG_INFINITY));
        assert_eq!(logits[14], 0.0, "the same timestamp may close the pair");
        // After a pair: no timestamp.
        let mut logits = vec![5.0; 20];
        r.apply(&[0, 9, 12, 4, 14, 14], &mut logits);
        assert!(logits[11..].iter().all(|&x| x == f32::NEG_INFINITY));
        assert_eq!(logits[4], 5.0);
    }
}
