//! What the server keeps of its latest runs and comparisons, in memory only, for the frame's
//! first load and "Save report": at most [`KEPT_REPORTS`] of them and at most a byte budget
//! (`--keep-memory`), the oldest dropped first. The newest is always kept, whatever its size:
//! the page that asked for it loads it next.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;

use attnviz::attention::{Attention, AttentionSet};

use super::guard;

/// How many runs and comparisons are kept at most, whatever their size.
pub const KEPT_REPORTS: usize = 16;

/// A run (its report is written only when asked for) or a comparison (its page, written), with
/// the name a download gets.
pub enum Kept {
    /// A run's attention and its About panel's settings; the name "Save report" gives it.
    Run {
        set: AttentionSet,
        settings: Vec<(String, String)>,
        filename: String,
    },
    /// A comparison page, written; served as it is, without a copy.
    Page { html: Bytes, filename: String },
}

impl Kept {
    /// The name "Save report" gives the file.
    pub fn filename(&self) -> &str {
        match self {
            Kept::Run { filename, .. } | Kept::Page { filename, .. } => filename,
        }
    }

    /// The memory it holds, in bytes: a run's weights, its query and key vectors, its picture
    /// and its labels (the weights are nearly all of it); a page's bytes.
    pub fn bytes(&self) -> u64 {
        match self {
            Kept::Run { set, settings, .. } => {
                let settings: usize = settings.iter().map(|(k, v)| k.len() + v.len()).sum();
                set.iter().map(attention_bytes).sum::<u64>() + settings as u64
            }
            Kept::Page { html, filename } => (html.len() + filename.len()) as u64,
        }
    }
}

/// The memory one attention holds, in bytes.
fn attention_bytes(att: &Attention) -> u64 {
    let floats = att.weights().len()
        + att
            .query_key
            .as_ref()
            .map_or(0, |qk| qk.queries.len() + qk.keys.len());
    let picture = att.image.as_deref().map_or(0, |image| {
        image.view.len() + 4 * image.norms.iter().map(Vec::len).sum::<usize>()
    });
    let of = |units: &attnviz::attention::Units| -> usize {
        units
            .labels
            .iter()
            .chain(&units.surfaces)
            .map(String::len)
            .sum()
    };
    // Self-attention's keys are its queries.
    let keys = if std::ptr::eq(att.queries(), att.keys()) {
        0
    } else {
        of(att.keys())
    };
    let labels = of(att.queries()) + keys;
    (4 * floats + picture + labels + att.text.len()) as u64
}

/// Kept runs and pages by id, the newest last; memory only.
pub struct Reports {
    all: Mutex<VecDeque<(String, Arc<Kept>, u64)>>,
    /// The most bytes the kept runs and pages may hold together (the newest excepted).
    budget: u64,
}

impl Reports {
    /// Nothing kept yet, within `budget` bytes.
    pub fn new(budget: u64) -> Reports {
        Reports {
            all: Mutex::new(VecDeque::new()),
            budget,
        }
    }

    fn all(&self) -> std::sync::MutexGuard<'_, VecDeque<(String, Arc<Kept>, u64)>> {
        self.all.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keep `kept` under a new random id (`None`: the system gave no random bytes), dropping
    /// the oldest while there are more than [`KEPT_REPORTS`] or they hold more than the budget.
    pub fn put(&self, kept: Kept) -> Option<String> {
        let id = guard::new_token().ok()?;
        let bytes = kept.bytes();
        let mut all = self.all();
        all.push_back((id.clone(), Arc::new(kept), bytes));
        let mut total: u64 = all.iter().map(|(_, _, b)| b).sum();
        while all.len() > 1 && (all.len() > KEPT_REPORTS || total > self.budget) {
            if let Some((_, _, b)) = all.pop_front() {
                total -= b;
            }
        }
        Some(id)
    }

    /// The run or page kept under `id`.
    pub fn get(&self, id: &str) -> Option<Arc<Kept>> {
        self.all()
            .iter()
            .find(|(k, _, _)| k == id)
            .map(|(_, r, _)| Arc::clone(r))
    }

    /// How many are kept.
    pub fn len(&self) -> usize {
        self.all().len()
    }

    /// The bytes they hold.
    pub fn bytes(&self) -> u64 {
        self.all().iter().map(|(_, _, b)| b).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(i: usize, size: usize) -> Kept {
        let mut html = vec![0u8; size];
        html[0] = i as u8;
        Kept::Page {
            html: Bytes::from(html),
            filename: String::new(),
        }
    }

    fn first_byte(kept: &Kept) -> u8 {
        let Kept::Page { html, .. } = kept else {
            panic!("a page was kept")
        };
        html[0]
    }

    #[test]
    fn the_newest_sixteen_are_kept_within_the_budget() {
        let reports = Reports::new(256 << 20);
        let ids: Vec<String> = (0..KEPT_REPORTS + 2)
            .map(|i| reports.put(page(i, 1)).unwrap())
            .collect();
        assert_eq!(reports.len(), KEPT_REPORTS);
        assert!(reports.get(&ids[0]).is_none() && reports.get(&ids[1]).is_none());
        let last = reports.get(ids.last().unwrap()).unwrap();
        assert_eq!(first_byte(&last), (KEPT_REPORTS + 1) as u8);
        assert!(reports.get("../../etc/passwd").is_none());
    }

    #[test]
    fn the_oldest_go_first_when_the_bytes_pass_the_budget() {
        let reports = Reports::new(1000);
        let a = reports.put(page(0, 400)).unwrap();
        let b = reports.put(page(1, 400)).unwrap();
        assert_eq!((reports.len(), reports.bytes()), (2, 800));
        // 1,200 bytes with the third: the oldest goes.
        let c = reports.put(page(2, 400)).unwrap();
        assert!(reports.get(&a).is_none());
        assert!(reports.get(&b).is_some() && reports.get(&c).is_some());
        assert_eq!(reports.bytes(), 800);
        // One larger than the budget is kept alone: the page that asked for it loads it next.
        let d = reports.put(page(3, 5000)).unwrap();
        assert_eq!(reports.len(), 1);
        assert_eq!(first_byte(&reports.get(&d).unwrap()), 3);
        // And goes as soon as a newer one comes.
        let e = reports.put(page(4, 10)).unwrap();
        assert!(reports.get(&d).is_none() && reports.get(&e).is_some());
        assert_eq!(reports.bytes(), 10);
    }

    #[test]
    fn a_run_counts_its_weights() {
        use attnviz::attention::{ModelInfo, Role, Units};
        // 2 layers × 3 heads × 4 × 4 weights: 384 bytes of floats.
        let (layers, heads, n) = (2, 3, 4);
        let model = ModelInfo {
            id: "m".into(),
            revision: None,
            name: None,
            family: "BERT".into(),
            layers,
            heads,
            hidden_size: 12,
            head_dim: 4,
        };
        let labels: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
        let units = Units::tokens(
            labels.clone(),
            vec![0; n],
            vec![0; n],
            vec![0; n],
            vec![Role::Word; n],
            vec![None; n],
            labels,
        );
        let weights = vec![1.0 / n as f32; layers * heads * n * n];
        let att = Attention::new(model, "text".into(), None, units, weights).unwrap();
        let kept = Kept::Run {
            set: AttentionSet::single(att),
            settings: vec![("model".into(), "m".into())],
            filename: "f".into(),
        };
        // The weights, the 4 labels and their surfaces (2 bytes each), the text and the
        // settings.
        assert_eq!(kept.bytes(), 384 + 16 + 4 + 6);
    }
}
