//! The journal: every sentence a worker finishes, appended to a file in the output folder as
//! soon as its outputs are in place, so that `--resume` after a kill (`SIGKILL`, a node lost, an
//! out-of-memory kill: anything that leaves no time to write the partial file) skips every
//! sentence whose outputs are complete.
//!
//! The partial file ([`super::partial`]) is the checkpoint: it holds the exact tally of a prefix
//! of the input, and is rewritten every [`super::CHECKPOINT_EVERY`]. At each checkpoint the
//! journal restarts as a new generation (`.corpus_journal.G`) holding only the results the
//! checkpoint does not cover; the older generation is removed once the checkpoint is on disk. So
//! the journal holds about one checkpoint interval of sentences, whatever the size of the run.
//!
//! A record is `length (u32) · CRC-32 (u32) · payload`, little-endian; the payload holds the line,
//! the length and SHA-256 of the input through that line (so a resumed run proves that the line
//! it skips is the one the earlier run read), the output name, the counts and each head's
//! statistics (in the order of [`crate::analysis::Stat::ALL`]) as the bits of their `f64`s (so the
//! sums rebuilt from it are exact, and an undefined statistic stays NaN). Records are not synced
//! one by one: a killed process loses nothing (the kernel holds what was written); after a
//! machine crash a torn or missing tail fails its CRC and those sentences are simply computed
//! again.
//!
//! Reading back is bounded: a record over [`MAX_RECORD`] bytes, or anything after
//! [`MAX_JOURNAL_BYTES`] in all, is not read (those sentences are computed again); a journal that
//! is not a regular file (a FIFO, a device, a link) is refused, never opened for a blocking read;
//! and a record that passes its CRC but holds a number no sentence has (an infinite entropy, a
//! negative share) is refused naming the field, since only an edited file holds one.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufReader, Read, Write};

use super::accumulate::{impossible_value, MAX_ROWS};
use super::damage::{ImpossibleRecord, JournalError};
use super::folder::{OutFolder, Place, JOURNAL_PREFIX};
use super::ledger::Event;
use super::lines::{BadLine, InputDigest};
use super::SentenceCounts;
use crate::analysis::{HeadStats, Stat};

/// Bumped whenever the payload changes (2: ten statistics per head; 3: the input's digest; 4:
/// twelve statistics, the head detectors' two added).
const VERSION: u8 = 4;
const SENTENCE: u8 = 0;
const BAD_ATTENTION: u8 = 1;
/// After a sentence's statistics: its expert load follows (a mixture-of-experts model's).
const EXPERT_LOAD: u8 = 1;
/// Largest record read back (a model of 4,096 heads; anything larger is corrupt).
pub const MAX_RECORD: usize = 4096 * 8 * (1 + Stat::ALL.len()) + 4096;
/// Most bytes of journal read back in all. A journal holds about one checkpoint interval of
/// sentences (a few MB); what lies beyond this is computed again.
pub const MAX_JOURNAL_BYTES: u64 = 256 << 20;

/// A result read back from the journal: what the line came to, and the input's digest through
/// it (checked against the input when a resumed run reads the line again).
#[derive(Clone, Debug)]
pub struct Journaled {
    /// The line's result.
    pub event: Event,
    /// The length and SHA-256 of the input through the end of the line.
    pub digest: InputDigest,
}

/// The journal being appended to.
#[derive(Debug)]
pub struct Journal {
    folder: OutFolder,
    generation: u64,
    file: File,
}

fn name_of(generation: u64) -> String {
    format!("{JOURNAL_PREFIX}{generation}")
}

/// The journal files in `folder`, with their generations, oldest first.
pub fn files(folder: &OutFolder) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    let _ = folder.for_each(Place::Top, |name, _| {
        if let Some(g) = name
            .strip_prefix(JOURNAL_PREFIX)
            .and_then(|g| g.parse().ok())
        {
            out.push((g, name.to_string()));
        }
        Ok(())
    });
    out.sort();
    out
}

impl Journal {
    /// Start a new journal generation in `folder` after every existing one, holding `records`.
    pub fn create<'a>(
        folder: &OutFolder,
        records: impl Iterator<Item = (usize, &'a Event, &'a InputDigest)>,
    ) -> io::Result<Journal> {
        let generation = files(folder).last().map_or(0, |(g, _)| g + 1);
        let mut journal = Journal {
            folder: folder.clone(),
            generation,
            file: folder.create_new(Place::Top, &name_of(generation))?,
        };
        journal.write_records(records)?;
        Ok(journal)
    }

    fn write_records<'a>(
        &mut self,
        records: impl Iterator<Item = (usize, &'a Event, &'a InputDigest)>,
    ) -> io::Result<()> {
        let mut buf = Vec::new();
        for (line, event, digest) in records {
            encode(line, event, digest, &mut buf);
        }
        self.file.write_all(&buf)
    }

    /// Append one result (`digest`: the input through its line).
    pub fn append(&mut self, line: usize, event: &Event, digest: &InputDigest) -> io::Result<()> {
        let mut buf = Vec::new();
        encode(line, event, digest, &mut buf);
        self.file.write_all(&buf)
    }

    /// Continue in a new generation that holds `records` (the results a checkpoint being
    /// written does not cover). The older generations stay until [`Journal::remove_older`].
    pub fn restart<'a>(
        &mut self,
        records: impl Iterator<Item = (usize, &'a Event, &'a InputDigest)>,
    ) -> io::Result<()> {
        let generation = self.generation + 1;
        self.file = self.folder.create_new(Place::Top, &name_of(generation))?;
        self.generation = generation;
        self.write_records(records)
    }

    /// Remove the generations before the current one.
    pub fn remove_older(&self) {
        for (g, name) in files(&self.folder) {
            if g < self.generation {
                let _ = self.folder.remove(Place::Top, &name);
            }
        }
    }
}

/// Remove every journal in `folder` (a finished run, or `--force`).
pub fn remove_all(folder: &OutFolder) -> io::Result<()> {
    for (_, name) in files(folder) {
        folder.remove(Place::Top, &name)?;
    }
    Ok(())
}

/// Every result in the journals of `folder` for a model of `layers × heads`, by line. A record
/// that is torn, corrupt or of another shape ends its file's reading (what follows it is
/// computed again). Errors, in words that follow the folder's name: a journal that is not a
/// regular file, or a sound record holding a number no sentence has.
pub fn read_all(
    folder: &OutFolder,
    layers: usize,
    heads: usize,
) -> Result<BTreeMap<usize, Journaled>, JournalError> {
    let mut out = BTreeMap::new();
    let mut budget = MAX_JOURNAL_BYTES;
    for (_, name) in files(folder) {
        let file = match folder.open_regular(Place::Top, &name) {
            Ok(Some(f)) => f,
            Ok(None) => continue,
            Err(source) => return Err(JournalError::Open { name, source }),
        };
        let mut reader = BufReader::new(file.take(budget));
        loop {
            match read_record(&mut reader, layers, heads) {
                Ok(Some((line, journaled, used))) => {
                    budget -= used.min(budget);
                    out.insert(line, journaled);
                }
                Ok(None) => break,
                Err(RecordError::Read(source)) => return Err(JournalError::Read { name, source }),
                Err(RecordError::Impossible { line, what }) => {
                    return Err(JournalError::Impossible { name, line, what })
                }
            }
        }
        if budget == 0 {
            break;
        }
    }
    Ok(out)
}

/// Why a record cannot be read back: the file cannot be read, or a sound record holds a number
/// no sentence has (for the line it is of).
#[derive(Debug)]
enum RecordError {
    Read(io::Error),
    Impossible { line: usize, what: ImpossibleRecord },
}

/// The next record of `r`: `None` at its end or at a record that is torn, fails its CRC or is
/// of another shape; an error for a sound record with impossible numbers, or a failed read.
fn read_record(
    r: &mut impl Read,
    layers: usize,
    heads: usize,
) -> Result<Option<(usize, Journaled, u64)>, RecordError> {
    let mut head = [0u8; 8];
    match r.read_exact(&mut head) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(RecordError::Read(e)),
    }
    let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(head[4..].try_into().expect("4 bytes"));
    if len > MAX_RECORD {
        return Ok(None);
    }
    let mut payload = vec![0u8; len];
    match r.read_exact(&mut payload) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(RecordError::Read(e)),
    }
    if crc32fast::hash(&payload) != crc {
        return Ok(None);
    }
    Ok(decode(&payload, layers, heads)?.map(|(line, j)| (line, j, 8 + len as u64)))
}

fn encode(line: usize, event: &Event, digest: &InputDigest, out: &mut Vec<u8>) {
    let mut p = Vec::with_capacity(64);
    p.push(VERSION);
    p.extend_from_slice(&(line as u64).to_le_bytes());
    p.extend_from_slice(&digest.bytes.to_le_bytes());
    p.extend_from_slice(&digest.sha256().unwrap_or([0; 32]));
    match event {
        Event::Sentence {
            stats,
            counts,
            name,
            load,
        } => {
            p.push(SENTENCE);
            put_str(&mut p, name);
            p.push(u8::from(counts.pair) | (u8::from(counts.truncated) << 1));
            p.extend_from_slice(&(counts.tokens as u64).to_le_bytes());
            p.extend_from_slice(&(counts.units as u64).to_le_bytes());
            let heads = stats.first().map_or(0, Vec::len);
            p.extend_from_slice(&(stats.len() as u32).to_le_bytes());
            p.extend_from_slice(&(heads as u32).to_le_bytes());
            for s in stats.iter().flatten() {
                p.extend_from_slice(&(s.rows as u64).to_le_bytes());
                for v in values(s) {
                    p.extend_from_slice(&v.to_bits().to_le_bytes());
                }
            }
            // A mixture-of-experts model's expert load, after the statistics (absent: none).
            if let Some(load) = load {
                p.push(EXPERT_LOAD);
                p.extend_from_slice(&(load.experts as u32).to_le_bytes());
                p.extend_from_slice(&(load.top_k as u32).to_le_bytes());
                p.extend_from_slice(&load.tokens.to_le_bytes());
                p.extend_from_slice(&(load.layers.len() as u32).to_le_bytes());
                for (&layer, row) in load.layers.iter().zip(&load.load) {
                    p.extend_from_slice(&(layer as u32).to_le_bytes());
                    for &c in row {
                        p.extend_from_slice(&c.to_le_bytes());
                    }
                }
            }
        }
        Event::Bad(bad) => {
            p.push(BAD_ATTENTION);
            put_str(&mut p, &bad.to_string());
        }
    }
    out.extend_from_slice(&(p.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&p).to_le_bytes());
    out.extend_from_slice(&p);
}

fn put_str(p: &mut Vec<u8>, s: &str) {
    p.extend_from_slice(&(s.len() as u32).to_le_bytes());
    p.extend_from_slice(s.as_bytes());
}

/// The statistics in the order of [`Stat::ALL`].
fn values(s: &HeadStats) -> [f64; Stat::ALL.len()] {
    Stat::ALL.map(|stat| stat.value(s))
}

/// Reads a record's payload front to back; `None` past its end.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn str(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

/// A record's payload, if it is of this version and shape (`Ok(None)` if not); an error names
/// a number no sentence has.
fn decode(
    payload: &[u8],
    layers: usize,
    heads: usize,
) -> Result<Option<(usize, Journaled)>, RecordError> {
    let mut p = Cursor(payload);
    let Some((line, digest, kind)) = (|| {
        if p.u8()? != VERSION {
            return None;
        }
        let line = usize::try_from(p.u64()?).ok()?;
        let bytes = p.u64()?;
        let sha: [u8; 32] = p.take(32)?.try_into().ok()?;
        Some((line, InputDigest::from_sha256(&sha, bytes), p.u8()?))
    })() else {
        return Ok(None);
    };
    let event = match kind {
        SENTENCE => match decode_sentence(&mut p, line, layers, heads)? {
            Some(e) => e,
            None => return Ok(None),
        },
        BAD_ATTENTION => match p.str() {
            Some(s) => Event::Bad(BadLine::Attention(s)),
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    if !p.0.is_empty() {
        return Ok(None);
    }
    Ok(Some((line, Journaled { event, digest })))
}

/// A sentence's expert load as [`encode`] writes it after the statistics; `None`: cut short
/// or larger than any router.
fn decode_load(p: &mut Cursor) -> Option<attnviz_formats::doc::router::ExpertLoadDoc> {
    let experts = p.u32()? as usize;
    let top_k = p.u32()? as usize;
    let tokens = p.u64()?;
    let layers = p.u32()? as usize;
    if experts > 1 << 16 || layers > 1 << 12 || tokens > MAX_ROWS {
        return None;
    }
    let mut numbers = Vec::with_capacity(layers);
    let mut load = Vec::with_capacity(layers);
    for _ in 0..layers {
        numbers.push(p.u32()? as usize);
        load.push(
            (0..experts)
                .map(|_| p.u64())
                .collect::<Option<Vec<u64>>>()?,
        );
    }
    Some(attnviz_formats::doc::router::ExpertLoadDoc {
        experts,
        top_k,
        tokens,
        layers: numbers,
        load,
    })
}

fn decode_sentence(
    p: &mut Cursor,
    line: usize,
    layers: usize,
    heads: usize,
) -> Result<Option<Event>, RecordError> {
    let Some((name, flags, tokens, units)) = (|| {
        let name = p.str()?;
        let flags = p.u8()?;
        let tokens = p.u64()?;
        let units = p.u64()?;
        let (l, h) = (p.u32()? as usize, p.u32()? as usize);
        ((l, h) == (layers, heads)).then_some((name, flags, tokens, units))
    })() else {
        return Ok(None);
    };
    let refuse = |what| RecordError::Impossible { line, what };
    if tokens > MAX_ROWS || units > tokens {
        return Err(refuse(ImpossibleRecord::Counts { tokens, units }));
    }
    if super::ids::Id::parse(&name).is_err() {
        return Err(refuse(ImpossibleRecord::Name {
            name: crate::tokenize::cut_to_bytes(&name, 40).to_string(),
        }));
    }
    let mut stats = Vec::with_capacity(layers);
    for layer in 0..layers {
        let mut row = Vec::with_capacity(heads);
        for head in 0..heads {
            let Some(rows) = p.u64() else {
                return Ok(None);
            };
            if rows > MAX_ROWS {
                return Err(refuse(ImpossibleRecord::Rows { layer, head, rows }));
            }
            let mut v = [0f64; Stat::ALL.len()];
            for (x, stat) in v.iter_mut().zip(Stat::ALL) {
                let Some(bits) = p.u64() else {
                    return Ok(None);
                };
                *x = f64::from_bits(bits);
                if let Some(value) = impossible_value(stat, *x) {
                    return Err(refuse(ImpossibleRecord::Value { value, layer, head }));
                }
            }
            row.push(HeadStats::from_values(
                |stat| v[Stat::ALL.iter().position(|&s| s == stat).unwrap_or(0)],
                rows as usize,
            ));
        }
        stats.push(row);
    }
    let load = match p.u8() {
        None => None,
        Some(EXPERT_LOAD) => match decode_load(p) {
            Some(l) if l.is_consistent() => Some(l),
            _ => return Ok(None),
        },
        Some(_) => return Ok(None),
    };
    Ok(Some(Event::Sentence {
        load,
        stats,
        counts: SentenceCounts {
            pair: flags & 1 != 0,
            truncated: flags & 2 != 0,
            tokens: tokens as usize,
            units: units as usize,
        },
        name,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::HeadLabel;
    use std::fs;

    fn event(v: f64) -> Event {
        let mut s = HeadStats {
            entropy: v,
            entropy_norm: v / 3.0,
            distance: f64::NAN,
            to_start: 0.1,
            to_end: 0.2,
            to_first: 0.45,
            to_punct: 1e-300,
            to_self: 0.3,
            to_prev: 0.7,
            to_next: 0.0,
            prev_token_score: 0.65,
            duplicate_token_score: 0.05,
            rows: 12,
            label: HeadLabel::None,
        };
        s.label = HeadLabel::classify(&s);
        Event::Sentence {
            stats: vec![vec![s, s], vec![s, s]],
            counts: SentenceCounts {
                pair: true,
                truncated: false,
                tokens: 14,
                units: 12,
            },
            name: "doc-7".into(),
            // A mixture-of-experts model's: 14 tokens × top 2 in each of two routed layers.
            load: Some(attnviz_formats::doc::router::ExpertLoadDoc {
                experts: 3,
                top_k: 2,
                tokens: 14,
                layers: vec![1, 3],
                load: vec![vec![10, 10, 8], vec![28, 0, 0]],
            }),
        }
    }

    fn same(a: &Event, b: &Event) -> bool {
        // NaN != NaN: compare the bits.
        match (a, b) {
            (
                Event::Sentence {
                    stats: x,
                    counts: cx,
                    name: nx,
                    load: lx,
                },
                Event::Sentence {
                    stats: y,
                    counts: cy,
                    name: ny,
                    load: ly,
                },
            ) => {
                lx == ly
                    && cx == cy
                    && nx == ny
                    && x.iter().flatten().zip(y.iter().flatten()).all(|(s, t)| {
                        s.rows == t.rows
                            && s.label == t.label
                            && Stat::ALL
                                .iter()
                                .all(|st| st.value(s).to_bits() == st.value(t).to_bits())
                    })
            }
            _ => a == b,
        }
    }

    fn digest(n: u64) -> InputDigest {
        InputDigest::from_sha256(&[n as u8; 32], n)
    }

    fn read(folder: &OutFolder, layers: usize, heads: usize) -> BTreeMap<usize, Journaled> {
        read_all(folder, layers, heads).unwrap()
    }

    #[test]
    fn records_round_trip_exactly_and_a_torn_tail_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let folder = OutFolder::open(dir.path(), false).unwrap();
        let bad = Event::Bad(BadLine::Attention("layer 0, head 1: NaN".into()));
        let first = event(0.5);
        let d3 = digest(3);
        let mut j = Journal::create(&folder, [(3, &first, &d3)].into_iter()).unwrap();
        j.append(9, &bad, &digest(9)).unwrap();
        j.append(12, &event(2.25), &digest(12)).unwrap();
        let back = read(&folder, 2, 2);
        assert_eq!(back.keys().copied().collect::<Vec<_>>(), [3, 9, 12]);
        assert!(same(&back[&3].event, &event(0.5)));
        assert!(same(&back[&9].event, &bad));
        assert!(same(&back[&12].event, &event(2.25)));
        assert_eq!(back[&12].digest, digest(12));
        assert_eq!(back[&3].digest, d3);
        // Another model shape reads nothing.
        assert!(read(&folder, 2, 3).is_empty());
        // A torn last record (a crash mid-write) is dropped; the ones before it stay.
        let path = dir.path().join(&files(&folder)[0].1);
        let len = fs::metadata(&path).unwrap().len();
        let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len - 5).unwrap();
        assert_eq!(read(&folder, 2, 2).len(), 2);
        // A flipped bit fails the CRC.
        let mut bytes = fs::read(&path).unwrap();
        bytes[20] ^= 1;
        fs::write(&path, bytes).unwrap();
        assert!(read(&folder, 2, 2).is_empty());
    }

    #[test]
    fn a_restart_keeps_what_it_is_given_and_pruning_removes_older_generations() {
        let dir = tempfile::tempdir().unwrap();
        let folder = OutFolder::open(dir.path(), false).unwrap();
        let mut j = Journal::create(&folder, std::iter::empty()).unwrap();
        j.append(1, &event(1.0), &digest(1)).unwrap();
        j.append(2, &event(2.0), &digest(2)).unwrap();
        let keep = event(2.0);
        let d2 = digest(2);
        j.restart([(2, &keep, &d2)].into_iter()).unwrap();
        j.append(4, &event(4.0), &digest(4)).unwrap();
        // Before pruning both generations are read (a crash between the two steps).
        assert_eq!(read(&folder, 2, 2).len(), 3);
        j.remove_older();
        let back = read(&folder, 2, 2);
        assert_eq!(back.keys().copied().collect::<Vec<_>>(), [2, 4]);
        assert_eq!(files(&folder).len(), 1);
        remove_all(&folder).unwrap();
        assert!(files(&folder).is_empty());
    }

    #[test]
    fn a_sound_record_with_an_impossible_number_is_refused_naming_it() {
        for (field, value) in [
            ("entropy", f64::INFINITY),
            ("to_self", -0.5),
            ("distance", 1e300),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let folder = OutFolder::open(dir.path(), false).unwrap();
            let mut e = event(1.0);
            if let Event::Sentence { stats, .. } = &mut e {
                let s = &mut stats[1][0];
                match field {
                    "entropy" => s.entropy = value,
                    "to_self" => s.to_self = value,
                    _ => s.distance = value,
                }
            }
            let mut j = Journal::create(&folder, std::iter::empty()).unwrap();
            j.append(7, &e, &digest(7)).unwrap();
            let err = read_all(&folder, 2, 2).unwrap_err().to_string();
            assert!(
                err.contains(&format!("line 7: {field} is {value}"))
                    && err.contains("layer 1, head 0"),
                "{err}"
            );
            assert_eq!(err.lines().count(), 1);
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_journal_that_is_a_fifo_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let folder = OutFolder::open(dir.path(), false).unwrap();
        let c =
            std::ffi::CString::new(dir.path().join(".corpus_journal.4").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path in our temporary folder.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read_all(&folder, 2, 2).unwrap_err().to_string();
        assert!(err.contains(".corpus_journal.4 is a FIFO"), "{err}");
        // Writing never goes into it either: a new generation is made after it, and removing
        // the journals removes the FIFO itself.
        let mut j = Journal::create(&folder, std::iter::empty()).unwrap();
        j.append(1, &event(1.0), &digest(1)).unwrap();
        assert_eq!(files(&folder).last().unwrap().1, ".corpus_journal.5");
        remove_all(&folder).unwrap();
        assert!(files(&folder).is_empty());
    }
}
