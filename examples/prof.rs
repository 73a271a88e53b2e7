use attnviz::model::Model;
use std::time::Instant;
fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(128);
    let reps: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    attnviz::threads::configure(None);
    let m = Model::from_gguf(std::path::Path::new(
        "/work/wt/gguf/.cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    ))
    .unwrap();
    let ids: Vec<u32> = (0..n).map(|i| 1000 + (37 * i as u32) % 40000).collect();
    let types = vec![0u32; n];
    m.forward(&ids, &types, false).unwrap();
    let mut t = vec![];
    for _ in 0..reps {
        let s = Instant::now();
        let out = m.forward(&ids, &types, false).unwrap();
        std::hint::black_box(&out);
        t.push(s.elapsed().as_secs_f64() * 1e3);
    }
    t.sort_by(f64::total_cmp);
    eprintln!("n={n}: median {:.1} ms min {:.1} ms", t[t.len() / 2], t[0]);
}
