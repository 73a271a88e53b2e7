//! `corpus_partial.json`: the exact state of a run (or a shard of one), for `attnviz merge` and
//! `--resume`.
//!
//! Where `corpus_stats.json` holds means (floating point, for people), the partial file holds the
//! fixed-point sums and every count and list they come from, so partial files add up exactly:
//! merging the N shards of a corpus gives, bit for bit, the statistics of one run over it. With
//! them it records what must agree for that to hold (the run's identity: attnviz version, model
//! and the SHA-256 of its files, options, input format, shard) and how far the run got (`end`,
//! `lines`, and the SHA-256 of the input through that line).
//!
//! A run writes it when it starts, every [`super::CHECKPOINT_EVERY`] while it runs (`"end":
//! "running"`), and when it ends. It always describes a prefix of the input: every line up to
//! `lines` (see [`super::ledger`]). The layout is documented in `docs/corpus.md`.

use std::fs;
use std::path::Path;

use serde_json::{json, Value};

use super::accumulate::CorpusStats;
use super::folder::{read_bounded, OutFolder, Place};
use super::ledger::Tally;
use super::lines::{BadLine, InputDigest};
use super::shard::Shard;
use super::summary::write_fields;
use super::{thousands, BadLines, LISTED_BAD_LINES};
use crate::output::OutputError;

/// Name of the partial-statistics file in the output folder.
pub const PARTIAL_FILE: &str = "corpus_partial.json";
/// `format` of a partial file.
pub const FORMAT: &str = "attnviz-corpus-partial";
/// Version of the layout; bumped on any incompatible change.
/// 2: ten statistics, each with the sentences and rows that define it (`defined`,
/// `defined_rows`). 3: twelve statistics (the head detectors' previous-token and
/// duplicate-token scores added).
pub const FORMAT_VERSION: u64 = 3;
/// Largest partial file read (a real one is tens to hundreds of KB).
pub(crate) const MAX_BYTES: u64 = 64 << 20;

/// Everything that must agree for two partial files to be merged, or for a run to resume
/// another.
#[derive(Clone, Debug, PartialEq)]
pub struct RunIdentity {
    /// attnviz version that wrote it.
    pub attnviz: String,
    /// The model as the summary names it (id, revision, family, shape).
    pub model: Value,
    /// SHA-256 of the model's config, weights and tokenizer files ([`super::provenance`]).
    pub model_files: Value,
    /// The start and end tokens' names, for the statistics table.
    pub token_names: (String, String),
    /// The input's name as given.
    pub input: String,
    /// `text` or `jsonl`.
    pub input_format: String,
    /// `none`, `gzip` or `zstd`.
    pub compression: String,
    /// The options that shape the results (the summary's `options`).
    pub options: Value,
    /// Which shard.
    pub shard: Shard,
    /// Worker threads (the engine's matrix products may round differently with another count).
    pub threads: usize,
    /// The model's induction scores on the head detector's probe, as the summary writes them
    /// (`null`: not measured): a property of the model and the threads, so equal across the
    /// shards of one corpus, and the merge takes them from its files.
    pub induction: Value,
}

impl RunIdentity {
    /// The first difference that forbids combining run `a` (this one) with run `b` (merge:
    /// other shards of one corpus; resume, `same_shard`: the same shard again), in words that
    /// name the runs by `labels` and say which value differs; `None` when they agree.
    pub fn conflict(
        &self,
        b: &RunIdentity,
        labels: (&str, &str),
        same_shard: bool,
    ) -> Option<String> {
        let (la, lb) = labels;
        if self.attnviz != b.attnviz {
            return Some(format!(
                "{la} is from attnviz {}, {lb} from attnviz {}",
                self.attnviz, b.attnviz
            ));
        }
        if let Some(d) = super::provenance::difference(&self.model_files, &b.model_files) {
            return Some(format!("{la} and {lb} used {d}"));
        }
        let empty = serde_json::Map::new();
        let (oa, ob) = (
            self.options.as_object().unwrap_or(&empty),
            b.options.as_object().unwrap_or(&empty),
        );
        let keys = oa.keys().chain(ob.keys().filter(|k| !oa.contains_key(*k)));
        for key in keys {
            let (va, vb) = (
                oa.get(key).unwrap_or(&Value::Null),
                ob.get(key).unwrap_or(&Value::Null),
            );
            if va != vb {
                return Some(format!(
                    "{la} was run with {key} = {va}, {lb} with {key} = {vb}"
                ));
            }
        }
        if self.induction != b.induction {
            return Some(format!(
                "{la} and {lb} measured different induction scores on the model's probe: run \
                 every shard with the same attnviz and --threads"
            ));
        }
        if self.shard.count != b.shard.count {
            return Some(format!(
                "{la} is shard {}, {lb} shard {}: merge the shards of one split",
                self.shard, b.shard
            ));
        }
        if same_shard && self.shard != b.shard {
            return Some(format!(
                "{la} is shard {}, {lb} shard {}",
                self.shard, b.shard
            ));
        }
        None
    }
}

/// A partial file, read back.
#[derive(Clone, Debug)]
pub struct Partial {
    /// What run wrote it.
    pub identity: RunIdentity,
    /// `running`, `complete`, `interrupted`, `stopped` or `failed`.
    pub end: String,
    /// Why it stopped or failed.
    pub end_reason: Option<String>,
    /// Lines of this shard among `tally.lines`.
    pub lines_in_shard: usize,
    /// The exact state through line `tally.lines`.
    pub tally: Tally,
}

/// Write the partial file into `folder` (atomically, and synced to disk: it is the checkpoint
/// `--resume` continues from, so it must not outlive an OS crash that loses what it counts).
pub fn write(
    folder: &OutFolder,
    identity: &RunIdentity,
    tally: &Tally,
    end: &str,
    end_reason: Option<&str>,
) -> Result<(), OutputError> {
    let fields = fields(identity, tally, end, end_reason);
    folder.write(Place::Top, PARTIAL_FILE, true, |w| {
        write_fields(&fields, &["sums"], w)
    })
}

/// Lines of `shard` among lines `1..=lines`.
pub fn lines_in_shard(shard: Shard, lines: usize) -> usize {
    if lines < shard.index {
        0
    } else {
        (lines - shard.index) / shard.count + 1
    }
}

fn fields(
    id: &RunIdentity,
    tally: &Tally,
    end: &str,
    end_reason: Option<&str>,
) -> Vec<(&'static str, Value)> {
    let s = &tally.stats;
    vec![
        ("format", json!(FORMAT)),
        ("format_version", json!(FORMAT_VERSION)),
        ("attnviz", json!(id.attnviz)),
        (
            "shard",
            json!({"index": id.shard.index, "count": id.shard.count}),
        ),
        ("model", id.model.clone()),
        ("model_files", id.model_files.clone()),
        (
            "token_names",
            json!({"start": id.token_names.0, "end": id.token_names.1}),
        ),
        ("input", json!(id.input)),
        ("input_format", json!(id.input_format)),
        ("compression", json!(id.compression)),
        ("options", id.options.clone()),
        ("threads", json!(id.threads)),
        ("induction", id.induction.clone()),
        ("end", json!(end)),
        ("end_reason", json!(end_reason)),
        ("lines", json!(tally.lines)),
        ("input_bytes", json!(tally.digest.bytes)),
        ("input_sha256", json!(tally.digest.hex())),
        (
            "lines_in_shard",
            json!(lines_in_shard(id.shard, tally.lines)),
        ),
        ("sentences", json!(s.sentences)),
        ("skipped", json!(tally.bad.count)),
        ("pairs", json!(s.pairs)),
        ("truncated", json!(s.truncated)),
        ("tokens", json!(s.tokens)),
        ("units", json!(s.units)),
        ("truncated_lines", json!(tally.truncated_lines)),
        ("bad_lines", bad_lines_json(&tally.bad)),
        ("sums", s.sums_json()),
    ]
}

/// The `bad_lines` object of the summary and the partial file.
pub fn bad_lines_json(bad: &BadLines) -> Value {
    json!({
        "count": bad.count,
        "by_kind": bad.by_kind,
        "listed": bad.listed.iter().map(|(line, bad)| json!({
            "line": line, "kind": bad.kind(), "reason": bad.to_string(),
        })).collect::<Vec<_>>(),
    })
}

/// Read the partial file at `path` (a path given on the command line: a link to it is
/// followed). It is opened without blocking and must be a regular file (a FIFO or a device is
/// refused at once) of at most 64 MiB. Errors say what is wrong in one line (without the path,
/// which the caller adds).
pub fn read(path: &Path) -> Result<Partial, String> {
    let mut opts = fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let file = opts.open(path).map_err(|e| e.to_string())?;
    if !file.metadata().map_err(|e| e.to_string())?.is_file() {
        return Err("not a file".into());
    }
    parse_bytes(&read_bounded(file, MAX_BYTES).map_err(|e| e.to_string())?)
}

/// Read the partial file of the run in `folder`, if there is one (see [`OutFolder`]: never
/// through a link, never blocking).
pub fn read_in(folder: &OutFolder) -> Result<Option<Partial>, String> {
    match folder.read_regular(Place::Top, PARTIAL_FILE, MAX_BYTES) {
        Ok(Some(bytes)) => parse_bytes(&bytes).map(Some),
        Ok(None) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// A partial file's bytes, parsed and checked.
pub fn parse_bytes(bytes: &[u8]) -> Result<Partial, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8 ({e})"))?;
    let v: Value = serde_json::from_str(text).map_err(|e| {
        // One field per line: name the field the error is in (a number out of range, NaN).
        let field = text
            .lines()
            .nth(e.line().saturating_sub(1))
            .and_then(|l| l.trim_start().strip_prefix('"'))
            .and_then(|l| l.split_once('"'))
            .map_or(String::new(), |(key, _)| format!(", in \"{key}\""));
        format!("not JSON ({e}{field})")
    })?;
    parse(&v)
}

fn parse(v: &Value) -> Result<Partial, String> {
    if v["format"] != FORMAT {
        return Err(match v["format"].as_str() {
            Some("attnviz-corpus-stats") => "this is a corpus summary (corpus_stats.json); merge \
                the partial files (corpus_partial.json) beside them"
                .into(),
            _ => format!("not an attnviz partial-statistics file (no \"format\": \"{FORMAT}\")"),
        });
    }
    if v["format_version"].as_u64() != Some(FORMAT_VERSION) {
        return Err(format!(
            "format version {} (this attnviz reads {FORMAT_VERSION}); merge with the attnviz \
             that wrote it",
            v["format_version"]
        ));
    }
    let str_of = |key: &str| {
        v[key]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("no \"{key}\" string"))
    };
    let num = |v: &Value, key: &str| {
        v.as_u64()
            .map(|n| n as usize)
            .ok_or_else(|| format!("\"{key}\" is not a whole number"))
    };
    let shard = Shard::new(
        num(&v["shard"]["index"], "shard.index")?,
        num(&v["shard"]["count"], "shard.count")?,
    )?;
    let identity = RunIdentity {
        attnviz: str_of("attnviz")?,
        model: v["model"].clone(),
        model_files: v["model_files"].clone(),
        token_names: (
            v["token_names"]["start"].as_str().unwrap_or("").to_string(),
            v["token_names"]["end"].as_str().unwrap_or("").to_string(),
        ),
        input: str_of("input")?,
        input_format: str_of("input_format")?,
        compression: str_of("compression")?,
        options: v["options"].clone(),
        shard,
        threads: num(&v["threads"], "threads")?,
        induction: v["induction"].clone(),
    };
    let counts = ["sentences", "pairs", "truncated", "tokens", "units"]
        .iter()
        .map(|k| {
            v[*k]
                .as_u64()
                .ok_or_else(|| format!("\"{k}\" is not a whole number"))
        })
        .collect::<Result<Vec<u64>, String>>()?;
    let stats = CorpusStats::from_sums_json(&v["sums"], counts.try_into().expect("five counts"))?;
    let mut bad = BadLines {
        count: num(&v["bad_lines"]["count"], "bad_lines.count")?,
        ..BadLines::default()
    };
    if let Some(map) = v["bad_lines"]["by_kind"].as_object() {
        for (kind, n) in map {
            let k = BadLine::kind_named(kind)
                .ok_or_else(|| format!("unknown bad-line kind \"{kind}\""))?;
            bad.by_kind.insert(k, num(n, "bad_lines.by_kind")?);
        }
    }
    for item in v["bad_lines"]["listed"].as_array().into_iter().flatten() {
        let kind = item["kind"].as_str().and_then(BadLine::kind_named);
        let kind = kind.ok_or_else(|| format!("unknown bad-line kind {}", item["kind"]))?;
        bad.listed.push((
            num(&item["line"], "bad_lines.listed.line")?,
            BadLine::Recorded {
                kind,
                reason: item["reason"].as_str().unwrap_or("").to_string(),
            },
        ));
    }
    let truncated_lines = v["truncated_lines"]
        .as_array()
        .ok_or("no \"truncated_lines\"")?
        .iter()
        .map(|l| num(l, "truncated_lines"))
        .collect::<Result<Vec<_>, _>>()?;
    let lines = num(&v["lines"], "lines")?;
    if identity.threads == 0 {
        return Err("\"threads\" is 0".into());
    }
    let tally = Tally {
        stats,
        lines,
        digest: InputDigest::recorded(
            str_of("input_sha256")?,
            v["input_bytes"].as_u64().ok_or("no \"input_bytes\"")?,
        ),
        bad,
        truncated_lines,
    };
    let partial = Partial {
        identity,
        end: str_of("end")?,
        end_reason: v["end_reason"].as_str().map(str::to_string),
        lines_in_shard: num(&v["lines_in_shard"], "lines_in_shard")?,
        tally,
    };
    check_counts(&partial)?;
    Ok(partial)
}

/// Refuse counts no run writes (a damaged or edited file), naming the field. A partial file
/// describes the lines `1..=lines` exactly: each of the shard's lines among them is a sentence
/// or a bad line, each line takes at least one byte of input, and the listed lines are among
/// them.
fn check_counts(p: &Partial) -> Result<(), String> {
    let t = &p.tally;
    let shard = p.identity.shard;
    let own = lines_in_shard(shard, t.lines);
    if t.lines as u64 > t.digest.bytes {
        return Err(format!(
            "\"lines\" is {}, but \"input_bytes\" is {}: every line takes at least one byte",
            thousands(t.lines as u64),
            thousands(t.digest.bytes)
        ));
    }
    if p.lines_in_shard != own {
        return Err(format!(
            "\"lines_in_shard\" is {}, but shard {shard} has {} of the first {} lines",
            thousands(p.lines_in_shard as u64),
            thousands(own as u64),
            thousands(t.lines as u64)
        ));
    }
    let accounted = t.stats.sentences.checked_add(t.bad.count as u64);
    if accounted != Some(own as u64) {
        return Err(format!(
            "\"sentences\" ({}) and \"bad_lines.count\" ({}) do not add up to the {} lines of \
             shard {shard} among the first {} (\"lines\"): each line is a sentence or a bad line",
            thousands(t.stats.sentences),
            thousands(t.bad.count as u64),
            thousands(own as u64),
            thousands(t.lines as u64)
        ));
    }
    let by_kind = t
        .bad
        .by_kind
        .values()
        .try_fold(0usize, |a, &n| a.checked_add(n));
    if by_kind != Some(t.bad.count) {
        return Err(format!(
            "\"bad_lines.by_kind\" does not add up to \"bad_lines.count\" ({})",
            thousands(t.bad.count as u64)
        ));
    }
    let listed_ok = |name: &str, lines: &mut dyn Iterator<Item = usize>, most: usize| {
        let mut n = 0;
        for line in lines {
            n += 1;
            if !shard.owns(line) || line > t.lines {
                return Err(format!(
                    "\"{name}\" lists line {line}, which is not one of the {} lines of shard \
                     {shard} among the first {}",
                    thousands(own as u64),
                    thousands(t.lines as u64)
                ));
            }
        }
        if n > most {
            return Err(format!(
                "\"{name}\" lists {n} lines, more than the {most} it can hold"
            ));
        }
        Ok(())
    };
    listed_ok(
        "bad_lines.listed",
        &mut t.bad.listed.iter().map(|(l, _)| *l),
        t.bad.count.min(LISTED_BAD_LINES),
    )?;
    listed_ok(
        "truncated_lines",
        &mut t.truncated_lines.iter().copied(),
        (t.stats.truncated as usize).min(LISTED_BAD_LINES),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{HeadLabel, HeadStats};
    use crate::corpus::ledger::Event;
    use crate::corpus::SentenceCounts;

    pub(crate) fn identity(shard: Shard) -> RunIdentity {
        RunIdentity {
            attnviz: "0.1.0".into(),
            model: json!({"id": "m", "layers": 1, "heads": 2}),
            model_files: json!({"config": {"file": "config.json", "bytes": 2, "sha256": "ab"},
                "weights": [], "tokenizer": []}),
            token_names: ("[CLS]".into(), "[SEP]".into()),
            input: "in.txt".into(),
            input_format: "text".into(),
            compression: "none".into(),
            options: json!({"words": false, "truncate": true}),
            shard,
            threads: 2,
            induction: Value::Null,
        }
    }

    #[test]
    fn a_partial_file_reads_back_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let folder = OutFolder::open(dir.path(), false).unwrap();
        let path = dir.path().join(PARTIAL_FILE);
        let mut tally = Tally::new(1, 2);
        let s = HeadStats {
            entropy: 0.3,
            entropy_norm: 0.1,
            distance: 1.25,
            to_start: 0.5,
            to_end: 0.25,
            to_first: f64::NAN,
            to_punct: 0.0,
            to_self: 0.1,
            to_prev: 0.2,
            to_next: 0.7,
            prev_token_score: 0.2,
            duplicate_token_score: 0.1,
            rows: 5,
            label: HeadLabel::PositionalNext,
        };
        let counts = SentenceCounts {
            pair: true,
            truncated: true,
            tokens: 7,
            units: 5,
        };
        tally.apply(
            3,
            &Event::Sentence {
                stats: vec![vec![s, s]],
                counts,
                name: "000003".into(),
            },
        );
        tally.apply(6, &Event::Bad(BadLine::Tabs { count: 2 }));
        tally.lines = 7;
        tally.digest = InputDigest::recorded("ab".repeat(32), 70);
        let shard = Shard::new(3, 3).unwrap();
        write(&folder, &identity(shard), &tally, "complete", None).unwrap();
        let back = read(&path).unwrap();
        assert_eq!(back.identity, identity(shard));
        assert_eq!(back.end, "complete");
        assert_eq!(back.tally.stats, tally.stats);
        assert_eq!(back.tally.lines, 7);
        assert_eq!(back.lines_in_shard, 2); // lines 3 and 6
        assert_eq!(back.tally.truncated_lines, [3]);
        assert_eq!(back.tally.bad.count, 1);
        assert_eq!(back.tally.bad.listed[0].0, 6);
        assert_eq!(back.tally.bad.listed[0].1.kind(), "tabs");
        assert_eq!(
            back.tally.bad.listed[0].1.to_string(),
            BadLine::Tabs { count: 2 }.to_string()
        );
        assert_eq!(back.tally.digest, tally.digest);
    }

    #[test]
    fn lines_in_shard_counts_the_round_robin_lines() {
        for count in 1..5 {
            for index in 1..=count {
                let shard = Shard::new(index, count).unwrap();
                for lines in 0..15 {
                    let want = (1..=lines).filter(|&l| shard.owns(l)).count();
                    assert_eq!(lines_in_shard(shard, lines), want);
                }
            }
        }
    }

    #[test]
    fn conflicts_name_what_differs() {
        let labels = ("a.json", "b.json");
        let a = identity(Shard::new(1, 3).unwrap());
        let mut b = identity(Shard::new(2, 3).unwrap());
        assert_eq!(a.conflict(&b, labels, false), None);
        let e = a.conflict(&b, labels, true).unwrap();
        assert_eq!(e, "a.json is shard 1/3, b.json shard 2/3");
        b.options["words"] = json!(true);
        let e = a.conflict(&b, labels, false).unwrap();
        assert_eq!(
            e,
            "a.json was run with words = false, b.json with words = true"
        );
        b.options = json!({"words": false, "truncate": true, "extra": 1});
        let e = a.conflict(&b, labels, false).unwrap();
        assert!(e.contains("extra = null"), "{e}");
        let mut c = identity(Shard::new(2, 4).unwrap());
        assert!(a.conflict(&c, labels, false).unwrap().contains("2/4"));
        c.attnviz = "9.9.9".into();
        let e = a.conflict(&c, labels, false).unwrap();
        assert!(e.contains("b.json from attnviz 9.9.9"), "{e}");
    }

    #[test]
    fn counts_no_run_writes_are_refused_naming_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let folder = OutFolder::open(dir.path(), false).unwrap();
        let mut tally = Tally::new(1, 2);
        tally.apply(1, &Event::Bad(BadLine::Empty));
        tally.apply(2, &Event::Bad(BadLine::Tabs { count: 3 }));
        tally.lines = 2;
        tally.digest = InputDigest::recorded("ab".repeat(32), 10);
        write(&folder, &identity(Shard::WHOLE), &tally, "complete", None).unwrap();
        let path = dir.path().join(PARTIAL_FILE);
        let good: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert!(parse(&good).is_ok());
        for (field, value, words) in [
            (
                "lines",
                json!(1_000_000_000_000_000_000u64),
                "\"lines\" is 1,000,000,000,000,000,000",
            ),
            (
                "lines",
                json!(3),
                "\"lines_in_shard\" is 2, but shard 1/1 has 3",
            ),
            ("lines_in_shard", json!(5), "\"lines_in_shard\" is 5"),
            (
                "sentences",
                json!(4),
                "\"sentences\" (4) and \"bad_lines.count\" (2) do not add up",
            ),
            ("threads", json!(0), "\"threads\" is 0"),
            (
                "truncated_lines",
                json!([1]),
                "\"truncated_lines\" lists 1 lines",
            ),
        ] {
            let mut v = good.clone();
            v[field] = value;
            let e = parse(&v).unwrap_err();
            assert!(e.contains(words), "{field}: {e}");
        }
        let mut v = good.clone();
        v["bad_lines"]["listed"][0]["line"] = json!(9);
        let e = parse(&v).unwrap_err();
        assert!(e.contains("\"bad_lines.listed\" lists line 9"), "{e}");
        let mut v = good.clone();
        v["bad_lines"]["by_kind"]["empty"] = json!(5);
        assert!(parse(&v).unwrap_err().contains("by_kind"));
        // A number JSON cannot hold: the field is named from the line it is on.
        let text = fs::read_to_string(&path)
            .unwrap()
            .replace("\"tokens\": 0", "\"tokens\": 1e999");
        let e = parse_bytes(text.as_bytes()).unwrap_err();
        assert!(
            e.starts_with("not JSON") && e.ends_with("in \"tokens\")"),
            "{e}"
        );
    }

    #[test]
    fn unreadable_files_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.json");
        std::fs::write(&p, "{\"format\": \"attnviz-corpus-stats\"}").unwrap();
        assert!(read(&p).unwrap_err().contains("corpus_partial.json"));
        std::fs::write(&p, "nope").unwrap();
        assert!(read(&p).unwrap_err().starts_with("not JSON"));
        std::fs::write(
            &p,
            format!("{{\"format\": \"{FORMAT}\", \"format_version\": 99}}"),
        )
        .unwrap();
        assert!(read(&p).unwrap_err().contains("format version 99"));
        assert!(read(dir.path()).unwrap_err().contains("not a file"));
    }
}
