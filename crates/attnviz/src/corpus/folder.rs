//! The output folder of a corpus run, which the run owns.
//!
//! The folder itself is the one the user named (a link to it is followed, like any path given
//! on the command line), but nothing *inside* it is reached through a link: every file is
//! created, replaced, read and removed relative to a descriptor of the folder (`openat`,
//! `renameat`, `unlinkat`), with `O_NOFOLLOW`, and new files with `O_EXCL`. So a symbolic link
//! placed in the folder as `corpus_stats.json`, `corpus_partial.json`, `sentences/`, a
//! per-sentence file, a journal or the lock never receives output, even one that appears while
//! the run goes on: a file is written as a new temporary file and renamed over its name, which
//! replaces a link instead of following it, and `sentences/` is held open from the start.
//!
//! Before anything is written, [`OutFolder::check`] refuses in one line a folder in which a name
//! the run writes or reads is a link, a FIFO, a device or anything but a regular file (a folder,
//! for `sentences`): such a folder is reported, not silently mended. Every read of a file in the
//! folder opens it without following links and without blocking (`O_NONBLOCK`: a FIFO never
//! hangs the run, a device is never read), checks that it is a regular file, and is bounded.
//!
//! Temporary files are registered with [`crate::cleanup`], so a second Ctrl-C removes them.

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{CorpusError, PARTIAL_FILE, SENTENCES_DIR, SUMMARY_FILE};
use crate::cleanup::{self, Tracked};
use crate::output::OutputError;

/// The lock file of a running corpus (see [`OutFolder::lock`]).
pub const LOCK_FILE: &str = ".corpus.lock";
/// Names of the journal files start with this (`super::journal`).
pub const JOURNAL_PREFIX: &str = ".corpus_journal.";

/// Where in the output folder a file lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The output folder itself (summary, partial file, journal, lock).
    Top,
    /// Its `sentences/` folder (the per-sentence outputs).
    Sentences,
}

/// What a name in the folder is, without following a link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A folder.
    Folder,
    /// A symbolic link, to this target.
    Link(String),
    /// A named pipe.
    Fifo,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A socket, or anything else.
    Other,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::File => f.write_str("a file"),
            Kind::Folder => f.write_str("a folder"),
            Kind::Link(to) => write!(f, "a symbolic link (to {to})"),
            Kind::Fifo => f.write_str("a FIFO"),
            Kind::CharDevice => f.write_str("a character device"),
            Kind::BlockDevice => f.write_str("a block device"),
            Kind::Other => f.write_str("a socket or another special file"),
        }
    }
}

/// Why `name` (of kind `kind`) cannot be used: what it is and what to do, in words that follow
/// the name.
pub fn not_ours(kind: &Kind) -> String {
    NotOurs(kind.clone()).to_string()
}

/// Something in the output folder that attnviz did not write, by its kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotOurs(pub Kind);

impl fmt::Display for NotOurs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            kind @ Kind::Link(_) => write!(
                f,
                "is {kind}; attnviz writes the files of its output folder itself and never \
                 through a link: remove the link, or give another output folder"
            ),
            kind => write!(
                f,
                "is {kind}, not a file attnviz wrote; remove it, or give another output folder"
            ),
        }
    }
}

/// Why the output folder cannot take this run's files.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FolderProblem {
    /// A name in it that is not a file attnviz wrote.
    #[error("{name} in it {what}")]
    NotOurs {
        /// The name, from the folder (`sentences/000001.json`).
        name: String,
        /// What it is.
        what: NotOurs,
    },
    /// Another run holds its lock.
    #[error(
        "another attnviz run is writing into it; give each run (each shard) its own output folder"
    )]
    Busy,
    /// Another shard's results.
    #[error("it holds the results of shard {theirs}, and this run is shard {ours}; give each shard its own output folder, or start over, replacing them")]
    OtherShard {
        /// The shard whose results it holds.
        theirs: super::Shard,
        /// This run's shard.
        ours: super::Shard,
    },
}

/// The output folder of a run, held open (see the module docs). Cloning shares the descriptors.
#[derive(Clone, Debug)]
pub struct OutFolder {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    top: sys::Dir,
    /// `sentences/`, when it exists (or was made).
    sentences: Option<sys::Dir>,
}

/// Counter for temporary names, unique within the process (`O_EXCL` makes them unique on disk).
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl OutFolder {
    /// Create (if missing) and open the folder `path`, and its `sentences/` folder: made when
    /// `with_sentences`, else opened only if it exists. A `sentences` that is a link, or not a
    /// folder, is refused.
    pub fn open(path: &Path, with_sentences: bool) -> Result<OutFolder, CorpusError> {
        let out_err = |source| CorpusError::OutDir {
            path: path.to_path_buf(),
            source,
        };
        if path.exists() && !path.is_dir() {
            return Err(out_err(io::Error::other("it is a file; give a folder")));
        }
        std::fs::create_dir_all(path).map_err(out_err)?;
        let top = sys::Dir::open(path).map_err(out_err)?;
        if with_sentences {
            match top.mkdir(SENTENCES_DIR) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                    return Err(CorpusError::OutDir {
                        path: path.join(SENTENCES_DIR),
                        source: e,
                    })
                }
                _ => {}
            }
        }
        let refuse = |kind: &Kind| CorpusError::Folder {
            path: path.to_path_buf(),
            reason: FolderProblem::NotOurs {
                name: SENTENCES_DIR.into(),
                what: NotOurs(kind.clone()),
            },
        };
        let sentences = match top.kind(SENTENCES_DIR).map_err(out_err)? {
            None => None,
            Some(Kind::Folder) => Some(top.subdir(SENTENCES_DIR).map_err(|e| {
                // Replaced by something else since the look: say what it is now.
                match top.kind(SENTENCES_DIR) {
                    Ok(Some(kind)) if kind != Kind::Folder => refuse(&kind),
                    _ => CorpusError::OutDir {
                        path: path.join(SENTENCES_DIR),
                        source: e,
                    },
                }
            })?),
            Some(kind) => return Err(refuse(&kind)),
        };
        Ok(OutFolder {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                top,
                sentences,
            }),
        })
    }

    /// The folder as given.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The path of `name` in `place`, for messages.
    pub fn path_of(&self, place: Place, name: &str) -> PathBuf {
        match place {
            Place::Top => self.inner.path.join(name),
            Place::Sentences => self.inner.path.join(SENTENCES_DIR).join(name),
        }
    }

    /// Whether the folder has (or made) `sentences/`.
    pub fn has_sentences(&self) -> bool {
        self.inner.sentences.is_some()
    }

    fn dir(&self, place: Place) -> io::Result<&sys::Dir> {
        match place {
            Place::Top => Ok(&self.inner.top),
            Place::Sentences => self.inner.sentences.as_ref().ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("there is no {SENTENCES_DIR} folder"),
                )
            }),
        }
    }

    /// What `name` in `place` is (`None`: nothing of that name), without following a link.
    pub fn kind(&self, place: Place, name: &str) -> io::Result<Option<Kind>> {
        match place {
            Place::Sentences if self.inner.sentences.is_none() => Ok(None),
            _ => self.dir(place)?.kind(name),
        }
    }

    /// Whether `name` in `place` is a regular file (not a link) that is not empty.
    pub fn has_nonempty_file(&self, place: Place, name: &str) -> bool {
        check_name(name).is_ok()
            && self
                .dir(place)
                .ok()
                .and_then(|d| d.file_len(name))
                .is_some_and(|n| n > 0)
    }

    /// Refuse, in one line, a folder in which a name this run writes or reads is a link, a FIFO,
    /// a device or a socket: the summary, the partial file, the lock, a journal, and every name
    /// in `sentences/` for which `output_name` holds (a per-sentence output's name). A regular
    /// file is what the run expects; a folder cannot receive a file (writing over it fails,
    /// naming it, when the run gets there).
    pub fn check(&self, output_name: impl Fn(&str) -> bool) -> Result<(), CorpusError> {
        let refuse = |place: Place, name: &str, kind: &Kind| CorpusError::Folder {
            path: self.path().to_path_buf(),
            reason: FolderProblem::NotOurs {
                name: match place {
                    Place::Top => name.to_string(),
                    Place::Sentences => format!("{SENTENCES_DIR}/{name}"),
                },
                what: NotOurs(kind.clone()),
            },
        };
        let io_err = |source| CorpusError::OutDir {
            path: self.path().to_path_buf(),
            source,
        };
        let fine = |kind: &Kind| matches!(kind, Kind::File | Kind::Folder);
        for name in [SUMMARY_FILE, PARTIAL_FILE, LOCK_FILE] {
            match self.kind(Place::Top, name).map_err(io_err)? {
                Some(kind) if !fine(&kind) => return Err(refuse(Place::Top, name, &kind)),
                _ => {}
            }
        }
        let mut found = None;
        self.for_each(Place::Top, |name, kind| {
            if found.is_none() && name.starts_with(JOURNAL_PREFIX) && !fine(&kind) {
                found = Some((name.to_string(), kind));
            }
            Ok(())
        })
        .map_err(io_err)?;
        if self.has_sentences() {
            self.for_each(Place::Sentences, |name, kind| {
                if found.is_none() && output_name(name) && !fine(&kind) {
                    found = Some((format!("{SENTENCES_DIR}/{name}"), kind));
                }
                Ok(())
            })
            .map_err(io_err)?;
        }
        match found {
            Some((name, kind)) => Err(CorpusError::Folder {
                path: self.path().to_path_buf(),
                reason: FolderProblem::NotOurs {
                    name,
                    what: NotOurs(kind),
                },
            }),
            None => Ok(()),
        }
    }

    /// Call `f` with the name and kind of every entry of `place` (`.` and `..` left out).
    pub fn for_each(
        &self,
        place: Place,
        f: impl FnMut(&str, Kind) -> io::Result<()>,
    ) -> io::Result<()> {
        match place {
            Place::Sentences if self.inner.sentences.is_none() => Ok(()),
            _ => self.dir(place)?.for_each(f),
        }
    }

    /// Write `name` in `place` with `write`, atomically: into a new temporary file (`O_EXCL`,
    /// never through a link), then renamed over `name` (which replaces whatever has that name,
    /// a link included, without following it). `durable`: synced to disk before the rename.
    pub fn write<F>(
        &self,
        place: Place,
        name: &str,
        durable: bool,
        write: F,
    ) -> Result<(), OutputError>
    where
        F: FnOnce(&mut dyn Write) -> io::Result<()>,
    {
        let path = self.path_of(place, name);
        let err = |source| OutputError {
            path: path.clone(),
            source,
        };
        check_name(name).map_err(err)?;
        let dir = self.dir(place).map_err(err)?;
        let temp = Temp::create(dir, self.path_of(place, ""), name).map_err(err)?;
        let mut w = BufWriter::with_capacity(1 << 20, &temp.file);
        write(&mut w).map_err(err)?;
        w.flush().map_err(err)?;
        drop(w);
        if durable {
            temp.file.sync_all().map_err(err)?;
        }
        temp.commit(name).map_err(|e| match dir.kind(name) {
            Ok(Some(Kind::Folder)) => err(io::Error::other(
                "a folder of that name is in the way; move it",
            )),
            _ => err(e),
        })
    }

    /// Create `name` in `place` anew for writing (a journal): whatever had the name is removed
    /// first (a link, not its target), and the file is made with `O_EXCL`.
    pub fn create_new(&self, place: Place, name: &str) -> io::Result<File> {
        check_name(name)?;
        let dir = self.dir(place)?;
        match dir.unlink(name) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        dir.create_excl(name)
    }

    /// Open the regular file `name` in `place` for reading (`None`: it does not exist). A
    /// link, FIFO, device or folder of that name is an error that says what it is.
    pub fn open_regular(&self, place: Place, name: &str) -> io::Result<Option<File>> {
        check_name(name)?;
        if place == Place::Sentences && !self.has_sentences() {
            return Ok(None);
        }
        let dir = self.dir(place)?;
        match dir.open_read(name) {
            Ok((file, Kind::File)) => Ok(Some(file)),
            Ok((_, kind)) => Err(io::Error::other(not_ours(&kind))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            // O_NOFOLLOW fails on a link (ELOOP): say what it is.
            Err(e) => match dir.kind(name) {
                Ok(Some(kind)) if !matches!(kind, Kind::File) => {
                    Err(io::Error::other(not_ours(&kind)))
                }
                _ => Err(e),
            },
        }
    }

    /// Read the regular file `name` in `place` whole, refusing one over `max` bytes (`None`: it
    /// does not exist).
    pub fn read_regular(&self, place: Place, name: &str, max: u64) -> io::Result<Option<Vec<u8>>> {
        let Some(file) = self.open_regular(place, name)? else {
            return Ok(None);
        };
        read_bounded(file, max).map(Some)
    }

    /// Remove `name` from `place` (a link itself, never its target); a missing name is not an
    /// error.
    pub fn remove(&self, place: Place, name: &str) -> io::Result<()> {
        check_name(name)?;
        if place == Place::Sentences && !self.has_sentences() {
            return Ok(());
        }
        match self.dir(place)?.unlink(name) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Take the folder's lock for the length of a run (see [`FolderLock`]).
    pub fn lock(&self) -> Result<FolderLock, CorpusError> {
        let dir = &self.inner.top;
        let refuse = |kind: &Kind| CorpusError::Folder {
            path: self.path().to_path_buf(),
            reason: FolderProblem::NotOurs {
                name: LOCK_FILE.into(),
                what: NotOurs(kind.clone()),
            },
        };
        let file = match dir.open_lock(LOCK_FILE) {
            Ok((file, Kind::File)) => file,
            Ok((_, kind)) => return Err(refuse(&kind)),
            Err(e) => {
                return Err(match dir.kind(LOCK_FILE) {
                    Ok(Some(kind)) if !matches!(kind, Kind::File) => refuse(&kind),
                    _ => CorpusError::OutDir {
                        path: self.path().to_path_buf(),
                        source: e,
                    },
                })
            }
        };
        match sys::try_lock(&file) {
            Ok(true) => Ok(FolderLock {
                folder: self.clone(),
                _file: file,
            }),
            Ok(false) => Err(CorpusError::Folder {
                path: self.path().to_path_buf(),
                reason: FolderProblem::Busy,
            }),
            Err(e) => Err(CorpusError::OutDir {
                path: self.path().to_path_buf(),
                source: e,
            }),
        }
    }

    /// Flush the file system of the per-sentence files to disk (they are renamed into place
    /// without a sync each; one sync per checkpoint makes them durable before it counts them).
    pub fn sync(&self) {
        let dir = self.inner.sentences.as_ref().unwrap_or(&self.inner.top);
        dir.sync_file_system();
    }
}

/// An exclusive lock on an output folder for the length of a run, so that two runs (two shards
/// given the same `--out-dir` by mistake) cannot write into one folder at once. The lock file
/// (`DIR/.corpus.lock`) is removed when the run ends; the kernel releases the lock of a killed
/// run.
#[derive(Debug)]
pub struct FolderLock {
    folder: OutFolder,
    _file: File,
}

impl Drop for FolderLock {
    fn drop(&mut self) {
        let _ = self.folder.remove(Place::Top, LOCK_FILE);
    }
}

/// Names are single path components that attnviz made: never empty, `.`, `..`, nor holding a
/// separator or NUL.
fn check_name(name: &str) -> io::Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(io::Error::other(format!(
            "{name:?} is not a file name in the output folder"
        )));
    }
    Ok(())
}

/// Read `file` to the end, refusing more than `max` bytes (a damaged or hostile file), without
/// holding more than `max + 1` of them.
pub fn read_bounded(file: impl Read, max: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(io::Error::other(format!(
            "over {} bytes, far more than attnviz writes there",
            crate::corpus::thousands(max)
        )));
    }
    Ok(bytes)
}

/// A temporary file being written in a folder; removed when dropped uncommitted.
struct Temp<'a> {
    dir: &'a sys::Dir,
    name: String,
    // Dropped after the body of `drop` removed the file, and `tracked` after it: the file is
    // gone from disk before it is unregistered from the signal cleanup.
    file: File,
    tracked: Option<Tracked>,
}

impl<'a> Temp<'a> {
    fn create(dir: &'a sys::Dir, dir_path: PathBuf, name: &str) -> io::Result<Temp<'a>> {
        let pid = std::process::id();
        let mut last = None;
        for _ in 0..100 {
            let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
            let temp = format!(".{name}.{pid}-{n}.tmp");
            let res = cleanup::create_tracked(
                || dir.create_excl(&temp).map(|f| (f, dir_path.join(&temp))),
                |t: &(File, PathBuf)| t.1.as_path(),
            );
            match res {
                Ok(((file, _), tracked)) => {
                    return Ok(Temp {
                        dir,
                        name: temp,
                        file,
                        tracked: Some(tracked),
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free temporary name")))
    }

    /// Rename the temporary file over `name`, under the cleanup's lock.
    fn commit(mut self, name: &str) -> io::Result<()> {
        let tracked = self.tracked.take().expect("committed once");
        let res = tracked.commit(|| self.dir.rename(&self.name, name));
        if res.is_ok() {
            self.name.clear();
        }
        res
    }
}

impl Drop for Temp<'_> {
    fn drop(&mut self) {
        if !self.name.is_empty() {
            let _ = self.dir.unlink(&self.name);
        }
    }
}

#[cfg(unix)]
mod sys {
    //! The folder operations, relative to a descriptor of the folder.

    use std::fs::File;
    use std::io;
    use std::os::fd::OwnedFd;
    use std::path::Path;

    use rustix::fs::{self as rfs, AtFlags, FileType, FlockOperation, Mode, OFlags};

    use super::Kind;

    /// An open folder.
    #[derive(Debug)]
    pub struct Dir(OwnedFd);

    const READ_DIR: OFlags = OFlags::RDONLY
        .union(OFlags::DIRECTORY)
        .union(OFlags::CLOEXEC);
    const NEW_FILE: OFlags = OFlags::CREATE
        .union(OFlags::EXCL)
        .union(OFlags::WRONLY)
        .union(OFlags::NOFOLLOW)
        .union(OFlags::CLOEXEC);
    const FILE_MODE: u32 = 0o644;

    fn kind_of(ft: FileType, link: impl FnOnce() -> String) -> Kind {
        match ft {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Folder,
            FileType::Symlink => Kind::Link(link()),
            FileType::Fifo => Kind::Fifo,
            FileType::CharacterDevice => Kind::CharDevice,
            FileType::BlockDevice => Kind::BlockDevice,
            _ => Kind::Other,
        }
    }

    impl Dir {
        /// Open the folder `path` (following links: it is the path the user gave).
        pub fn open(path: &Path) -> io::Result<Dir> {
            Ok(Dir(rfs::open(path, READ_DIR, Mode::empty())?))
        }

        /// Open the sub-folder `name`, refusing a link.
        pub fn subdir(&self, name: &str) -> io::Result<Dir> {
            Ok(Dir(rfs::openat(
                &self.0,
                name,
                READ_DIR | OFlags::NOFOLLOW,
                Mode::empty(),
            )?))
        }

        pub fn mkdir(&self, name: &str) -> io::Result<()> {
            Ok(rfs::mkdirat(&self.0, name, Mode::from_raw_mode(0o755))?)
        }

        pub fn kind(&self, name: &str) -> io::Result<Option<Kind>> {
            match rfs::statat(&self.0, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => Ok(Some(kind_of(
                    FileType::from_raw_mode(st.st_mode as _),
                    || self.link_target(name),
                ))),
                Err(rustix::io::Errno::NOENT) => Ok(None),
                Err(e) => Err(e.into()),
            }
        }

        /// The length of `name` if it is a regular file (not followed if a link).
        pub fn file_len(&self, name: &str) -> Option<u64> {
            let st = rfs::statat(&self.0, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
            (FileType::from_raw_mode(st.st_mode as _) == FileType::RegularFile)
                .then_some(st.st_size as u64)
        }

        fn link_target(&self, name: &str) -> String {
            rfs::readlinkat(&self.0, name, Vec::new())
                .map(|t| t.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "?".into())
        }

        pub fn for_each(&self, mut f: impl FnMut(&str, Kind) -> io::Result<()>) -> io::Result<()> {
            let dir = rfs::Dir::read_from(&self.0)?;
            for entry in dir {
                let entry = entry?;
                let Ok(name) = entry.file_name().to_str() else {
                    // Not UTF-8: not a name attnviz writes or reads.
                    continue;
                };
                if name == "." || name == ".." {
                    continue;
                }
                let kind = match entry.file_type() {
                    // A link's target is read for the message; an unknown type is looked up.
                    FileType::Unknown | FileType::Symlink => match self.kind(name)? {
                        Some(k) => k,
                        None => continue,
                    },
                    ft => kind_of(ft, String::new),
                };
                f(name, kind)?;
            }
            Ok(())
        }

        pub fn create_excl(&self, name: &str) -> io::Result<File> {
            let fd = rfs::openat(&self.0, name, NEW_FILE, Mode::from_raw_mode(FILE_MODE))?;
            Ok(File::from(fd))
        }

        /// Open `name` for reading without following a link and without blocking on a FIFO;
        /// returns the file and what it is.
        pub fn open_read(&self, name: &str) -> io::Result<(File, Kind)> {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            let fd = rfs::openat(&self.0, name, flags, Mode::empty())?;
            let kind = fd_kind(&fd)?;
            if matches!(kind, Kind::File) {
                // Regular files never block; clear the flag for good measure.
                rfs::fcntl_setfl(&fd, OFlags::empty())?;
            }
            Ok((File::from(fd), kind))
        }

        /// Open (creating it if missing) the lock file `name` for writing, without following a
        /// link and without blocking on a FIFO.
        pub fn open_lock(&self, name: &str) -> io::Result<(File, Kind)> {
            let flags = OFlags::CREATE
                | OFlags::WRONLY
                | OFlags::NOFOLLOW
                | OFlags::NONBLOCK
                | OFlags::CLOEXEC;
            let fd = rfs::openat(&self.0, name, flags, Mode::from_raw_mode(FILE_MODE))?;
            let kind = fd_kind(&fd)?;
            Ok((File::from(fd), kind))
        }

        pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
            Ok(rfs::renameat(&self.0, from, &self.0, to)?)
        }

        pub fn unlink(&self, name: &str) -> io::Result<()> {
            Ok(rfs::unlinkat(&self.0, name, AtFlags::empty())?)
        }

        pub fn sync_file_system(&self) {
            #[cfg(target_os = "linux")]
            let _ = rfs::syncfs(&self.0);
            #[cfg(not(target_os = "linux"))]
            rfs::sync();
        }
    }

    fn fd_kind(fd: &OwnedFd) -> io::Result<Kind> {
        let st = rfs::fstat(fd)?;
        Ok(kind_of(FileType::from_raw_mode(st.st_mode as _), || {
            "?".into()
        }))
    }

    /// Take an exclusive advisory lock on `file` without waiting: `false` when another process
    /// holds it.
    pub fn try_lock(file: &File) -> io::Result<bool> {
        match rfs::flock(file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(not(unix))]
mod sys {
    //! Elsewhere the folder is reached by path, each name checked (without following links)
    //! just before it is used; without descriptor-relative calls a link that appears between
    //! the check and the use is not caught.

    use std::fs::{self, File, OpenOptions};
    use std::io;
    use std::path::{Path, PathBuf};

    use super::Kind;

    #[derive(Debug)]
    pub struct Dir(PathBuf);

    fn kind_at(path: &Path) -> io::Result<Option<Kind>> {
        match fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => Ok(Some(Kind::Link(
                fs::read_link(path)
                    .map(|t| t.display().to_string())
                    .unwrap_or_else(|_| "?".into()),
            ))),
            Ok(m) if m.is_file() => Ok(Some(Kind::File)),
            Ok(m) if m.is_dir() => Ok(Some(Kind::Folder)),
            Ok(_) => Ok(Some(Kind::Other)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    impl Dir {
        pub fn open(path: &Path) -> io::Result<Dir> {
            Ok(Dir(path.to_path_buf()))
        }
        pub fn subdir(&self, name: &str) -> io::Result<Dir> {
            match kind_at(&self.0.join(name))? {
                Some(Kind::Folder) => Ok(Dir(self.0.join(name))),
                _ => Err(io::Error::other("not a folder")),
            }
        }
        pub fn mkdir(&self, name: &str) -> io::Result<()> {
            fs::create_dir(self.0.join(name))
        }
        pub fn kind(&self, name: &str) -> io::Result<Option<Kind>> {
            kind_at(&self.0.join(name))
        }
        pub fn file_len(&self, name: &str) -> Option<u64> {
            let m = fs::symlink_metadata(self.0.join(name)).ok()?;
            m.is_file().then_some(m.len())
        }
        pub fn for_each(&self, mut f: impl FnMut(&str, Kind) -> io::Result<()>) -> io::Result<()> {
            for entry in fs::read_dir(&self.0)? {
                let entry = entry?;
                let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                    continue;
                };
                if let Some(kind) = kind_at(&entry.path())? {
                    f(&name, kind)?;
                }
            }
            Ok(())
        }
        pub fn create_excl(&self, name: &str) -> io::Result<File> {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(self.0.join(name))
        }
        pub fn open_read(&self, name: &str) -> io::Result<(File, Kind)> {
            let path = self.0.join(name);
            match kind_at(&path)? {
                Some(Kind::File) => Ok((File::open(path)?, Kind::File)),
                Some(kind) => Err(io::Error::other(super::not_ours(&kind))),
                None => Err(io::ErrorKind::NotFound.into()),
            }
        }
        pub fn open_lock(&self, name: &str) -> io::Result<(File, Kind)> {
            let path = self.0.join(name);
            match kind_at(&path)? {
                None | Some(Kind::File) => {}
                Some(kind) => return Err(io::Error::other(super::not_ours(&kind))),
            }
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(path)?;
            Ok((file, Kind::File))
        }
        pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
            fs::rename(self.0.join(from), self.0.join(to))
        }
        pub fn unlink(&self, name: &str) -> io::Result<()> {
            fs::remove_file(self.0.join(name))
        }
        pub fn sync_file_system(&self) {}
    }

    pub fn try_lock(_file: &File) -> io::Result<bool> {
        Ok(true)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path in our temporary folder.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn writes_replace_a_link_instead_of_following_it() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victim.txt");
        fs::write(&victim, "keep").unwrap();
        let out = tmp.path().join("out");
        let folder = OutFolder::open(&out, true).unwrap();
        // A link planted after the folder was checked (a race): the write replaces it.
        symlink(&victim, out.join("corpus_stats.json")).unwrap();
        symlink(&victim, out.join("sentences/000001.json")).unwrap();
        folder
            .write(Place::Top, "corpus_stats.json", true, |w| {
                w.write_all(b"new")
            })
            .unwrap();
        folder
            .write(Place::Sentences, "000001.json", false, |w| {
                w.write_all(b"s1")
            })
            .unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(
            fs::read_to_string(out.join("corpus_stats.json")).unwrap(),
            "new"
        );
        let meta = fs::symlink_metadata(out.join("sentences/000001.json")).unwrap();
        assert!(meta.is_file());
        // No temporary file left in either folder.
        let names = |d: &Path| -> Vec<String> {
            let mut v: Vec<String> = fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names(&out), ["corpus_stats.json", "sentences"]);
        assert_eq!(names(&out.join("sentences")), ["000001.json"]);
        // A failed write leaves nothing behind.
        let e = folder
            .write(Place::Top, "x.json", false, |w| {
                w.write_all(b"half")?;
                Err(io::Error::other("disk full"))
            })
            .unwrap_err();
        assert!(e.to_string().contains("x.json"), "{e}");
        assert_eq!(names(&out), ["corpus_stats.json", "sentences"]);
    }

    #[test]
    fn the_folder_held_open_is_written_even_if_its_name_is_swapped_for_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        let folder = OutFolder::open(&out, true).unwrap();
        // sentences/ moved away and replaced by a link to another folder.
        let elsewhere = tmp.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        fs::rename(out.join("sentences"), tmp.path().join("moved")).unwrap();
        symlink(&elsewhere, out.join("sentences")).unwrap();
        folder
            .write(Place::Sentences, "000001.json", false, |w| {
                w.write_all(b"x")
            })
            .unwrap();
        assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
        assert!(tmp.path().join("moved/000001.json").is_file());
        // Opening the folder again refuses the link.
        let e = OutFolder::open(&out, true).unwrap_err().to_string();
        assert!(e.contains("sentences in it is a symbolic link"), "{e}");
    }

    #[test]
    fn names_that_are_not_regular_files_are_refused_in_one_line() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        fs::create_dir_all(out.join("sentences")).unwrap();
        let ours = |n: &str| n.ends_with(".json");
        let check = || {
            OutFolder::open(&out, true)
                .and_then(|f| f.check(ours))
                .map_err(|e| e.to_string())
        };
        assert_eq!(check(), Ok(()));
        mkfifo(&out.join(".corpus_journal.3"));
        let e = check().unwrap_err();
        assert!(e.contains(".corpus_journal.3 in it is a FIFO"), "{e}");
        assert_eq!(e.lines().count(), 1);
        fs::remove_file(out.join(".corpus_journal.3")).unwrap();
        symlink("/nonexistent", out.join("sentences/doc-1.json")).unwrap();
        let e = check().unwrap_err();
        assert!(
            e.contains("sentences/doc-1.json in it is a symbolic link (to /nonexistent)"),
            "{e}"
        );
        // A link that is not one of our names is left alone.
        fs::remove_file(out.join("sentences/doc-1.json")).unwrap();
        symlink("/nonexistent", out.join("sentences/notes.txt")).unwrap();
        assert_eq!(check(), Ok(()));
        // A folder is not refused here: writing over it fails when the run gets there.
        fs::create_dir(out.join("corpus_partial.json")).unwrap();
        assert_eq!(check(), Ok(()));
        let e = folder_write_error(&out);
        assert!(e.contains("corpus_partial.json"), "{e}");
    }

    fn folder_write_error(out: &Path) -> String {
        let folder = OutFolder::open(out, true).unwrap();
        let e = folder
            .write(Place::Top, "corpus_partial.json", false, |w| {
                w.write_all(b"x")
            })
            .unwrap_err()
            .to_string();
        // The temporary file is gone.
        let left = fs::read_dir(out)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".tmp")
            })
            .count();
        assert_eq!(left, 0);
        e
    }

    #[test]
    fn reads_never_block_on_a_fifo_nor_follow_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        let folder = OutFolder::open(&out, false).unwrap();
        mkfifo(&out.join("pipe"));
        let start = std::time::Instant::now();
        let e = folder.read_regular(Place::Top, "pipe", 100).unwrap_err();
        assert!(e.to_string().contains("is a FIFO"), "{e}");
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
        let target = tmp.path().join("t.txt");
        fs::write(&target, "secret").unwrap();
        symlink(&target, out.join("link")).unwrap();
        let e = folder.read_regular(Place::Top, "link", 100).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        fs::write(out.join("big"), vec![b'x'; 101]).unwrap();
        let e = folder.read_regular(Place::Top, "big", 100).unwrap_err();
        assert!(e.to_string().contains("over 100 bytes"), "{e}");
        fs::write(out.join("ok"), "fine").unwrap();
        assert_eq!(
            folder.read_regular(Place::Top, "ok", 100).unwrap().unwrap(),
            b"fine"
        );
        assert!(folder
            .read_regular(Place::Top, "none", 100)
            .unwrap()
            .is_none());
        // The lock refuses a FIFO at once (no reader: opening it for writing would block).
        mkfifo(&out.join(LOCK_FILE));
        let e = folder.lock().unwrap_err().to_string();
        assert!(e.contains(".corpus.lock in it is a FIFO"), "{e}");
        fs::remove_file(out.join(LOCK_FILE)).unwrap();
        symlink(&target, out.join(LOCK_FILE)).unwrap();
        let e = folder.lock().unwrap_err().to_string();
        assert!(e.contains(".corpus.lock in it is a symbolic link"), "{e}");
        assert_eq!(fs::read_to_string(&target).unwrap(), "secret");
        fs::remove_file(out.join(LOCK_FILE)).unwrap();
        let lock = folder.lock().unwrap();
        assert!(
            folder.lock().is_err(),
            "a second lock in this process is refused"
        );
        drop(lock);
        assert!(!out.join(LOCK_FILE).exists());
    }
}
