//! A deterministic synthetic English corpus for the corpus-mode benchmark: sentences built from
//! a small grammar and word list with a fixed-seed xorshift generator, so every run (and every
//! machine) sees the same 10,000 lines. Lengths vary like ordinary prose: mostly 10–45 word
//! pieces, one line in 40 much longer, one in 7 a tab-separated pair. Rare words and names split
//! into several word pieces; punctuation, numbers and quotes appear as in real text.

const DETS: &[&str] = &[
    "the", "a", "this", "that", "every", "one", "our", "their", "some",
];
const ADJS: &[&str] = &[
    "old",
    "quiet",
    "bright",
    "careful",
    "enormous",
    "tiny",
    "unbelievably slow",
    "green",
    "anxious",
    "forgotten",
    "wooden",
    "electric",
    "hungry",
    "polite",
    "mysterious",
    "crooked",
    "magnificent",
    "ordinary",
    "frozen",
    "restless",
];
const NOUNS: &[&str] = &[
    "fox",
    "dog",
    "teacher",
    "river",
    "engineer",
    "village",
    "committee",
    "violin",
    "garden",
    "train",
    "letter",
    "mountain",
    "photographer",
    "algorithm",
    "cathedral",
    "kettle",
    "market",
    "lighthouse",
    "student",
    "neighbour",
    "bicycle",
    "library",
    "storm",
    "parliament",
    "orchard",
    "microscope",
    "sailor",
    "window",
    "archive",
    "festival",
];
const NAMES: &[&str] = &[
    "Anna",
    "Kaczmarek",
    "Oluwaseun",
    "Margaret",
    "Tomasz",
    "Ingrid",
    "Rajesh",
    "Siobhan",
    "Pierre",
    "Xiaoling",
];
const VERBS: &[&str] = &[
    "watched",
    "followed",
    "repaired",
    "admired",
    "ignored",
    "photographed",
    "visited",
    "painted",
    "described",
    "remembered",
    "questioned",
    "carried",
    "discovered",
    "misunderstood",
    "borrowed",
    "celebrated",
    "measured",
    "abandoned",
];
const PREPS: &[&str] = &[
    "near", "behind", "under", "across", "beside", "without", "towards", "inside", "after",
    "before",
];
const ADVS: &[&str] = &[
    "slowly",
    "yesterday",
    "again",
    "reluctantly",
    "quite happily",
    "at dawn",
    "in silence",
    "every morning",
    "without hesitation",
];
const LINKS: &[&str] = &[
    "because", "while", "although", "and", "but", "so", "until", "when", "whereas",
];

/// xorshift64*: small, fast and the same everywhere.
pub struct Rng(u64);

impl Rng {
    /// A generator with a fixed seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, words: &[&'a str]) -> &'a str {
        words[self.below(words.len())]
    }

    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

fn noun_phrase(r: &mut Rng, out: &mut Vec<String>) {
    if r.chance(5) {
        out.push(r.pick(NAMES).to_string());
        return;
    }
    out.push(r.pick(DETS).to_string());
    if r.chance(2) {
        out.push(r.pick(ADJS).to_string());
    }
    out.push(r.pick(NOUNS).to_string());
}

fn clause(r: &mut Rng, out: &mut Vec<String>) {
    noun_phrase(r, out);
    out.push(r.pick(VERBS).to_string());
    noun_phrase(r, out);
    if r.chance(2) {
        out.push(r.pick(PREPS).to_string());
        noun_phrase(r, out);
    }
    if r.chance(3) {
        out.push(r.pick(ADVS).to_string());
    }
    if r.chance(8) {
        out.push(format!("{} times", 2 + r.below(1998)));
    }
}

/// One sentence of `clauses` clauses, capitalised and punctuated.
fn sentence(r: &mut Rng, clauses: usize) -> String {
    let mut words = Vec::new();
    for i in 0..clauses {
        if i > 0 {
            if r.chance(2) {
                let last = words.pop().unwrap_or_default();
                words.push(format!("{last},"));
            }
            words.push(r.pick(LINKS).to_string());
        }
        clause(r, &mut words);
    }
    let mut s = words.join(" ");
    if r.chance(10) {
        s = format!("\"{s}\"");
    }
    let end = match r.below(10) {
        0 => "?",
        1 => "!",
        2 => "...",
        _ => ".",
    };
    s.push_str(end);
    let mut chars = s.chars();
    match chars.next() {
        Some('"') => {
            let rest: String = chars.collect();
            let mut c = rest.chars();
            let first = c
                .next()
                .map(|f| f.to_uppercase().collect::<String>())
                .unwrap_or_default();
            format!("\"{first}{}", c.as_str())
        }
        Some(f) => format!("{}{}", f.to_uppercase(), chars.as_str()),
        None => s,
    }
}

/// The next line of the corpus: a sentence, or (one in 7) a tab-separated pair.
pub fn line(r: &mut Rng) -> String {
    let clauses = if r.chance(40) {
        5 + r.below(6)
    } else {
        1 + r.below(3)
    };
    let a = sentence(r, clauses);
    if r.chance(7) {
        let clauses = 1 + r.below(2);
        let b = sentence(r, clauses);
        format!("{a}\t{b}")
    } else {
        a
    }
}

/// The first `n` lines of the corpus, newline-terminated.
pub fn corpus(n: usize) -> String {
    let mut r = Rng::new(0x5EED_C0A9_0B05);
    let mut out = String::new();
    for _ in 0..n {
        out.push_str(&line(&mut r));
        out.push('\n');
    }
    out
}
