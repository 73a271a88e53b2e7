//! What value-weighted and norm-aware attention cost beside the plain forward pass: the same
//! input run alternately without and with the value capture (`forward_batch_values`), as wall
//! time and this process's CPU time, and the analysis (`norm_weights`) after it; then the
//! same capture with ALTI's per-layer matrices (`EncodeOptions::alti`, opt-in) for comparison.
//!
//!     cargo bench --bench norm_weights -- [MODEL [TOKENS:REPS ...]]
//!
//! MODEL: `minilm` (default, `.cache/models/all-MiniLM-L6-v2`), `smollm2`
//! (`.cache/models/smollm2`, its GGUF) or a model folder. Defaults `16:20 64:10 128:6`.
//! Prints one line per size with the medians; asserts nothing.

use std::path::PathBuf;
use std::time::Instant;

use attnviz::analysis::norm_weights;
use attnviz::model::{EncodeOptions, Model};

fn cpu_ms() -> f64 {
    // SAFETY: rusage is plain old data; all-zero is a valid value for getrusage to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid, writable rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    assert_eq!(rc, 0, "getrusage");
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    ms(usage.ru_utime) + ms(usage.ru_stime)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let which = args.first().map_or("minilm", String::as_str);
    let model = match which {
        "minilm" => Model::from_dir(&root.join(".cache/models/all-MiniLM-L6-v2")),
        "smollm2" => {
            Model::from_gguf(&root.join(".cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
        }
        dir => Model::from_dir(&PathBuf::from(dir)),
    };
    let model = match model {
        Ok(m) => m,
        Err(e) => {
            println!("norm_weights: cannot load {which}: {e}");
            return;
        }
    };
    let sizes: Vec<(usize, usize)> = if args.len() > 1 {
        args[1..]
            .iter()
            .filter_map(|s| {
                let (n, r) = s.split_once(':')?;
                Some((n.parse().ok()?, r.parse().ok()?))
            })
            .collect()
    } else {
        vec![(16, 20), (64, 10), (128, 6)]
    };
    println!(
        "norm_weights: {which}; medians in ms: plain encode | with value capture | \
         norm_weights; overhead of capture + analysis; with ALTI"
    );
    for (n, reps) in sizes {
        let text = "the cat sat on the mat and looked at the dog ".repeat(n / 4 + 2);
        let opts = |values: bool| EncodeOptions {
            truncate: true,
            capture_values: values,
            ..EncodeOptions::default()
        };
        let with_alti = EncodeOptions {
            alti: true,
            ..opts(true)
        };
        let limit = model.max_positions().min(n);
        let text: String = {
            // Cut the text to about n tokens: whole words until the tokenizer says n.
            let mut words: Vec<&str> = text.split(' ').collect();
            loop {
                let t = words.join(" ");
                let enc = model.encode(&t, None, &opts(false)).expect("encode");
                if enc.attention.len() <= limit || words.len() < 2 {
                    break t;
                }
                words.pop();
            }
        };
        let run = |values: bool| {
            let (w0, c0) = (Instant::now(), cpu_ms());
            let enc = model.encode(&text, None, &opts(values)).expect("encode");
            (w0.elapsed().as_secs_f64() * 1e3, cpu_ms() - c0, enc)
        };
        run(false);
        run(true);
        let tokens = run(false).2.attention.len();
        let (mut pw, mut pc, mut vw, mut vc, mut aw) = (vec![], vec![], vec![], vec![], vec![]);
        let (mut xw, mut xc) = (vec![], vec![]);
        for _ in 0..reps {
            let (w, c, _) = run(false);
            pw.push(w);
            pc.push(c);
            let (w, c, enc) = run(true);
            vw.push(w);
            vc.push(c);
            let t = Instant::now();
            norm_weights(&enc.attention, enc.values.as_ref().expect("values")).expect("weights");
            aw.push(t.elapsed().as_secs_f64() * 1e3);
            let (w0, c0) = (Instant::now(), cpu_ms());
            model.encode(&text, None, &with_alti).expect("encode");
            xw.push(w0.elapsed().as_secs_f64() * 1e3);
            xc.push(cpu_ms() - c0);
        }
        let (xw, xc) = (median(&mut xw), median(&mut xc));
        let (pw, pc, vw, vc, aw) = (
            median(&mut pw),
            median(&mut pc),
            median(&mut vw),
            median(&mut vc),
            median(&mut aw),
        );
        println!(
            "{tokens:>4} tokens: wall {pw:8.1} | {vw:8.1} | {aw:6.1}  (+{:.0}%)   cpu {pc:8.1} | {vc:8.1}  (+{:.0}%)   ALTI wall {xw:8.1} cpu {xc:8.1} ({:.1}×)",
            (vw + aw - pw) / pw * 100.0,
            (vc - pc) / pc * 100.0,
            xw / pw
        );
    }
}
