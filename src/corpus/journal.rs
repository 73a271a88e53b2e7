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
//! the output name, the counts and each head's statistics (in the order of
//! [`crate::analysis::Stat::ALL`]) as the bits of their `f64`s (so the sums rebuilt from it are
//! exact, and an undefined statistic stays NaN). Records are not synced one by one: a killed process
//! loses nothing (the kernel holds what was written); after a machine crash a torn or missing
//! tail fails its CRC and those sentences are simply computed again.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::ledger::Event;
use super::lines::BadLine;
use super::SentenceCounts;
use crate::analysis::{HeadStats, Stat};

const PREFIX: &str = ".corpus_journal.";
/// Bumped whenever the payload changes (2: ten statistics per head).
const VERSION: u8 = 2;
const SENTENCE: u8 = 0;
const BAD_ATTENTION: u8 = 1;
/// Largest record read back (a model of 4,096 heads; anything larger is corrupt).
const MAX_RECORD: usize = 4096 * 8 * (1 + Stat::ALL.len()) + 4096;

/// The journal being appended to.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    generation: u64,
    file: File,
}

fn path_of(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("{PREFIX}{generation}"))
}

/// The journal files in `dir`, with their generations, oldest first.
pub fn files(dir: &Path) -> Vec<(u64, PathBuf)> {
    let mut out: Vec<(u64, PathBuf)> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let name = e.file_name();
                    let g = name.to_str()?.strip_prefix(PREFIX)?.parse().ok()?;
                    Some((g, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

impl Journal {
    /// Start a new journal generation in `dir` after every existing one, holding `records`.
    pub fn create<'a>(
        dir: &Path,
        records: impl Iterator<Item = (usize, &'a Event)>,
    ) -> io::Result<Journal> {
        let generation = files(dir).last().map_or(0, |(g, _)| g + 1);
        let mut journal = Journal {
            dir: dir.to_path_buf(),
            generation,
            file: open_new(&path_of(dir, generation))?,
        };
        journal.write_records(records)?;
        Ok(journal)
    }

    fn write_records<'a>(
        &mut self,
        records: impl Iterator<Item = (usize, &'a Event)>,
    ) -> io::Result<()> {
        let mut buf = Vec::new();
        for (line, event) in records {
            encode(line, event, &mut buf);
        }
        self.file.write_all(&buf)
    }

    /// Append one result.
    pub fn append(&mut self, line: usize, event: &Event) -> io::Result<()> {
        let mut buf = Vec::new();
        encode(line, event, &mut buf);
        self.file.write_all(&buf)
    }

    /// Continue in a new generation that holds `records` (the results a checkpoint being
    /// written does not cover). The older generations stay until [`Journal::remove_older`].
    pub fn restart<'a>(
        &mut self,
        records: impl Iterator<Item = (usize, &'a Event)>,
    ) -> io::Result<()> {
        let generation = self.generation + 1;
        self.file = open_new(&path_of(&self.dir, generation))?;
        self.generation = generation;
        self.write_records(records)
    }

    /// Remove the generations before the current one.
    pub fn remove_older(&self) {
        for (g, path) in files(&self.dir) {
            if g < self.generation {
                let _ = fs::remove_file(path);
            }
        }
    }
}

fn open_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(path)
}

/// Remove every journal in `dir` (a finished run, or `--force`).
pub fn remove_all(dir: &Path) -> io::Result<()> {
    for (_, path) in files(dir) {
        match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Every result in the journals of `dir` for a model of `layers × heads`, by line. A record
/// that is torn, corrupt or of another shape ends its file's reading (what follows it is
/// computed again).
pub fn read_all(dir: &Path, layers: usize, heads: usize) -> BTreeMap<usize, Event> {
    let mut out = BTreeMap::new();
    for (_, path) in files(dir) {
        let Ok(bytes) = fs::read(&path) else { continue };
        let mut rest = &bytes[..];
        while let Some((line, event, used)) = decode(rest, layers, heads) {
            out.insert(line, event);
            rest = &rest[used..];
        }
    }
    out
}

fn encode(line: usize, event: &Event, out: &mut Vec<u8>) {
    let mut p = Vec::with_capacity(64);
    p.push(VERSION);
    p.extend_from_slice(&(line as u64).to_le_bytes());
    match event {
        Event::Sentence {
            stats,
            counts,
            name,
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

/// The first record of `bytes` and the bytes it takes, if it is whole and sound.
fn decode(bytes: &[u8], layers: usize, heads: usize) -> Option<(usize, Event, usize)> {
    let mut c = Cursor(bytes);
    let len = c.u32()? as usize;
    let crc = c.u32()?;
    if len > MAX_RECORD {
        return None;
    }
    let payload = c.take(len)?;
    if crc32fast::hash(payload) != crc {
        return None;
    }
    let mut p = Cursor(payload);
    if p.u8()? != VERSION {
        return None;
    }
    let line = usize::try_from(p.u64()?).ok()?;
    let event = match p.u8()? {
        SENTENCE => {
            let name = p.str()?;
            let flags = p.u8()?;
            let tokens = usize::try_from(p.u64()?).ok()?;
            let units = usize::try_from(p.u64()?).ok()?;
            let (l, h) = (p.u32()? as usize, p.u32()? as usize);
            if (l, h) != (layers, heads) {
                return None;
            }
            let mut stats = Vec::with_capacity(l);
            for _ in 0..l {
                let mut row = Vec::with_capacity(h);
                for _ in 0..h {
                    let rows = usize::try_from(p.u64()?).ok()?;
                    let mut v = [0f64; Stat::ALL.len()];
                    for x in &mut v {
                        *x = f64::from_bits(p.u64()?);
                    }
                    let s = HeadStats::from_values(
                        |stat| v[Stat::ALL.iter().position(|&s| s == stat).unwrap_or(0)],
                        rows,
                    );
                    row.push(s);
                }
                stats.push(row);
            }
            Event::Sentence {
                stats,
                counts: SentenceCounts {
                    pair: flags & 1 != 0,
                    truncated: flags & 2 != 0,
                    tokens,
                    units,
                },
                name,
            }
        }
        BAD_ATTENTION => Event::Bad(BadLine::Attention(p.str()?)),
        _ => return None,
    };
    if !p.0.is_empty() {
        return None;
    }
    Some((line, event, 8 + len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::HeadLabel;

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
                },
                Event::Sentence {
                    stats: y,
                    counts: cy,
                    name: ny,
                },
            ) => {
                cx == cy
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

    #[test]
    fn records_round_trip_exactly_and_a_torn_tail_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let bad = Event::Bad(BadLine::Attention("layer 0, head 1: NaN".into()));
        let mut j = Journal::create(dir.path(), [(3, &event(0.5))].into_iter()).unwrap();
        j.append(9, &bad).unwrap();
        j.append(12, &event(2.25)).unwrap();
        let read = read_all(dir.path(), 2, 2);
        assert_eq!(read.keys().copied().collect::<Vec<_>>(), [3, 9, 12]);
        assert!(same(&read[&3], &event(0.5)));
        assert!(same(&read[&9], &bad));
        assert!(same(&read[&12], &event(2.25)));
        // Another model shape reads nothing.
        assert!(read_all(dir.path(), 2, 3).is_empty());
        // A torn last record (a crash mid-write) is dropped; the ones before it stay.
        let path = &files(dir.path())[0].1;
        let len = fs::metadata(path).unwrap().len();
        let f = OpenOptions::new().write(true).open(path).unwrap();
        f.set_len(len - 5).unwrap();
        assert_eq!(read_all(dir.path(), 2, 2).len(), 2);
        // A flipped bit fails the CRC.
        let mut bytes = fs::read(path).unwrap();
        bytes[20] ^= 1;
        fs::write(path, bytes).unwrap();
        assert!(read_all(dir.path(), 2, 2).is_empty());
    }

    #[test]
    fn a_restart_keeps_what_it_is_given_and_pruning_removes_older_generations() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::create(dir.path(), std::iter::empty()).unwrap();
        j.append(1, &event(1.0)).unwrap();
        j.append(2, &event(2.0)).unwrap();
        let keep = event(2.0);
        j.restart([(2, &keep)].into_iter()).unwrap();
        j.append(4, &event(4.0)).unwrap();
        // Before pruning both generations are read (a crash between the two steps).
        assert_eq!(read_all(dir.path(), 2, 2).len(), 3);
        j.remove_older();
        let read = read_all(dir.path(), 2, 2);
        assert_eq!(read.keys().copied().collect::<Vec<_>>(), [2, 4]);
        assert_eq!(files(dir.path()).len(), 1);
        remove_all(dir.path()).unwrap();
        assert!(files(dir.path()).is_empty());
    }
}
