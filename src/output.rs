//! Where outputs go, and writing them without ever leaving half a file or breaking what the path
//! named.
//!
//! - A regular file (or a new one) is written atomically: a temporary file beside it, then a
//!   rename onto it, so an interrupted run never leaves half a file where an old one stood.
//!   It is not synced to disk unless the caller asks ([`write_output_durable`]): the rename
//!   makes the file atomic against a crash, Ctrl-C or kill of *this process* (readers see the
//!   old file or the whole new one, never a part), which is what a user of a command-line tool
//!   expects; durability against an *OS crash or power loss* costs an fsync (0.65 s for a 411 MB
//!   JSON file in one measurement, more than the forward pass) and is left to the checkpoints
//!   of corpus mode, which `--resume` relies on. Without the sync, an OS crash within the
//!   kernel's writeback delay (about 30 s by default) can leave the old file, or on some file
//!   systems an empty or partly written new one; ext4 (whose default `auto_da_alloc` flushes a
//!   file renamed over an existing one), XFS and btrfs keep the old or the whole new file in
//!   that case when an existing file is replaced.
//! - A symbolic link is followed (chains and relative links too) and its final target is
//!   replaced atomically; the link itself stays a link.
//! - A character or block device (`/dev/null`, a terminal) and a FIFO are written directly: no
//!   temporary file, no rename, so the node is never replaced by a regular file. A FIFO nobody
//!   reads gets [`FIFO_READER_WAIT`] to find a reader, then a clear error instead of a hang.
//! - `-`, and any path that is this process's standard output (`/dev/stdout`,
//!   `/proc/self/fd/1`, the terminal itself), write to standard output.
//! - A folder of outputs (`--report DIR`) is built in a hidden folder beside DIR and moved into
//!   place only once every file in it is written ([`StagedFolder`]).
//!
//! Every temporary file and folder is registered with [`crate::cleanup`], so Ctrl-C removes it.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cleanup::{self, Tracked};

/// How long writing to a FIFO waits for a process to open it for reading.
pub const FIFO_READER_WAIT: Duration = Duration::from_secs(10);

/// Symbolic links followed before giving up (the kernel's own limit is 40).
const MAX_LINKS: usize = 40;

/// Error writing an output file; names the path.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}: {source}", path.display())]
pub struct OutputError {
    /// The file we were writing.
    pub path: PathBuf,
    /// What went wrong.
    #[source]
    pub source: io::Error,
}

impl OutputError {
    fn new(path: &Path, source: io::Error) -> Self {
        OutputError {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// A node that is written in place rather than replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    /// A named pipe.
    Fifo,
    /// A character device (`/dev/null`, a terminal).
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A regular file reached through `/proc/<pid>/fd/N` (`/dev/stderr` redirected to a file):
    /// renaming onto it would not reach the open file, so it is truncated and written.
    ProcFd,
}

/// Where an output path leads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// This process's standard output (`-`, `/dev/stdout`, …).
    Stdout,
    /// A device, FIFO or `/proc` descriptor, written directly through `path`.
    Direct {
        /// The path as given (opening it follows any links).
        path: PathBuf,
        /// What it is.
        node: Node,
        /// Device and inode numbers, to recognise the same node under two names.
        id: (u64, u64),
    },
    /// A regular file, existing or not: `target` is the path after following symbolic links;
    /// it is replaced atomically.
    File {
        /// The final target.
        target: PathBuf,
    },
}

impl Destination {
    /// Where `path` leads: `-` and standard output's own file are [`Destination::Stdout`];
    /// devices and FIFOs are written directly; anything else is a regular file, with symbolic
    /// links followed to their final target. A folder, a socket, a link loop or a missing
    /// folder on the way is an error.
    pub fn of(path: &Path) -> Result<Destination, OutputError> {
        let err = |e| OutputError::new(path, e);
        if path == Path::new("-") {
            return Ok(Destination::Stdout);
        }
        // What the path finally names, with every link (magic /proc links included) followed
        // by the kernel.
        match fs::metadata(path) {
            Ok(meta) => {
                if is_stdout(&meta) && !meta.is_dir() {
                    return Ok(Destination::Stdout);
                }
                if let Some(node) = special_node(&meta) {
                    return Ok(Destination::Direct {
                        path: path.to_path_buf(),
                        node,
                        id: node_id(&meta),
                    });
                }
                if meta.is_dir() {
                    return Err(err(io::Error::other("it is a folder; give a file name")));
                }
                if !meta.is_file() {
                    return Err(err(io::Error::other(
                        "it is a socket or another special file; give a file name",
                    )));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(err(e)),
        }
        let (target, through_proc) = follow_links(path).map_err(err)?;
        if through_proc {
            if let Ok(meta) = fs::metadata(path) {
                return Ok(Destination::Direct {
                    path: path.to_path_buf(),
                    node: Node::ProcFd,
                    id: node_id(&meta),
                });
            }
        }
        Ok(Destination::File { target })
    }

    /// What two outputs must not share: `None` for nodes that can take any number of writes
    /// (character and block devices other than standard output).
    pub fn identity(&self) -> Option<Identity> {
        match self {
            Destination::Stdout => Some(Identity::Stdout),
            Destination::Direct {
                node: Node::CharDevice | Node::BlockDevice,
                ..
            } => None,
            Destination::Direct { id, .. } => Some(Identity::Node(*id)),
            Destination::File { target } => Some(Identity::File(absolute(target))),
        }
    }
}

/// What makes two outputs the same (see [`Destination::identity`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Identity {
    /// Standard output.
    Stdout,
    /// A FIFO or `/proc` descriptor, by device and inode.
    Node((u64, u64)),
    /// A regular file, by its absolute path with symbolic links resolved.
    File(PathBuf),
}

#[cfg(unix)]
fn node_id(meta: &fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn node_id(_: &fs::Metadata) -> (u64, u64) {
    (0, 0)
}

#[cfg(unix)]
fn special_node(meta: &fs::Metadata) -> Option<Node> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_fifo() {
        Some(Node::Fifo)
    } else if t.is_char_device() {
        Some(Node::CharDevice)
    } else if t.is_block_device() {
        Some(Node::BlockDevice)
    } else {
        None
    }
}

#[cfg(not(unix))]
fn special_node(_: &fs::Metadata) -> Option<Node> {
    None
}

/// Whether `meta` describes the file open as this process's standard output.
#[cfg(unix)]
fn is_stdout(meta: &fs::Metadata) -> bool {
    // SAFETY: fstat fills a zeroed stat struct for descriptor 1; a failure (closed stdout)
    // leaves it unused.
    let st = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(libc::STDOUT_FILENO, &mut st) != 0 {
            return false;
        }
        st
    };
    node_id(meta) == (st.st_dev as u64, st.st_ino as u64)
}

#[cfg(not(unix))]
fn is_stdout(_: &fs::Metadata) -> bool {
    false
}

/// Follow `path`'s symbolic links (a chain, relative ones against their own folder) to the
/// path that is finally written. Returns it, and whether the chain went through `/proc` (whose
/// fd links cannot be renamed onto).
fn follow_links(path: &Path) -> io::Result<(PathBuf, bool)> {
    let mut current = path.to_path_buf();
    let mut through_proc = false;
    for _ in 0..MAX_LINKS {
        through_proc |= current.starts_with("/proc");
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = fs::read_link(&current)?;
                current = if link.is_absolute() {
                    link
                } else {
                    parent_of(&current).join(link)
                };
            }
            Ok(_) => return Ok((current, through_proc)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((current, through_proc)),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!(
        "more than {MAX_LINKS} symbolic links in a row (a loop?)"
    )))
}

/// The folder holding `path` (`.` for a bare file name).
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// `path` made absolute and free of `.`, `..` and symbolic links in the part that exists, so
/// `x`, `./x` and `/cwd/x` (or a link to it) compare equal.
pub fn absolute(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut existing = path.to_path_buf();
    loop {
        if let Ok(canon) = fs::canonicalize(&existing) {
            let mut out = canon;
            for part in missing.iter().rev() {
                out.push(part);
            }
            return out;
        }
        let Some(name) = existing.file_name().map(|n| n.to_os_string()) else {
            break;
        };
        missing.push(name);
        existing = parent_of(&existing).to_path_buf();
    }
    // Nothing of it exists (or it ends in `..`): lexical clean-up against the working folder.
    let base = std::env::current_dir().unwrap_or_default();
    let mut out = PathBuf::new();
    for c in base.join(path).components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// A file being written. Nothing appears at the destination until [`AtomicFile::commit`];
/// dropping it without committing removes the temporary file.
pub struct AtomicFile {
    path: PathBuf,
    target: PathBuf,
    // Written through the plain file, so write errors name the output, not the temporary path.
    file: BufWriter<File>,
    // Declared after `file` (closed first) and before `tracked`: the temporary file is deleted
    // before it is unregistered.
    temp: tempfile::TempPath,
    tracked: Tracked,
}

impl AtomicFile {
    /// Start writing the regular file `path` (following symbolic links to their target). The
    /// temporary file lives in the target's folder, so the final rename never crosses file
    /// systems. A device, FIFO or standard output is an error here; [`write_output`] handles
    /// those.
    pub fn create(path: &Path) -> Result<Self, OutputError> {
        match Destination::of(path)? {
            Destination::File { target } => Self::create_at(path, target),
            _ => Err(OutputError::new(
                path,
                io::Error::other("not a regular file; attnviz can only replace regular files here"),
            )),
        }
    }

    fn create_at(path: &Path, target: PathBuf) -> Result<Self, OutputError> {
        let err = |e| OutputError::new(path, e);
        let dir = parent_of(&target);
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (temp, tracked) = cleanup::create_tracked(
            || {
                tempfile::Builder::new()
                    .prefix(&format!(".{name}."))
                    .suffix(".tmp")
                    .tempfile_in(dir)
            },
            |t: &tempfile::NamedTempFile| t.path(),
        )
        .map_err(err)?;
        let (file, temp) = temp.into_parts();
        Ok(AtomicFile {
            path: path.to_path_buf(),
            target,
            file: BufWriter::with_capacity(1 << 20, file),
            temp,
            tracked,
        })
    }

    /// The destination path, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file itself, what was written through [`Write`] flushed to it: for a
    /// writer that places bytes at offsets (a saved capture's header, after its data).
    pub fn file(&mut self) -> io::Result<&File> {
        self.file.flush()?;
        Ok(self.file.get_ref())
    }

    /// Flush and rename the temporary file onto the destination, without syncing it to disk
    /// (see the module docs for the guarantee that gives).
    pub fn commit(self) -> Result<(), OutputError> {
        self.finish(false)
    }

    /// Flush, sync to disk and rename: the file survives an OS crash or power loss once this
    /// returns. For checkpoints that a later run relies on (`--resume`).
    pub fn commit_durable(self) -> Result<(), OutputError> {
        self.finish(true)
    }

    fn finish(self, sync: bool) -> Result<(), OutputError> {
        let AtomicFile {
            path,
            target,
            file,
            temp,
            tracked,
        } = self;
        let err = |source| OutputError::new(&path, source);
        let file = file.into_inner().map_err(|e| err(e.into_error()))?;
        if sync {
            file.sync_all().map_err(err)?;
        }
        drop(file);
        // tempfile creates files 0600: keep the mode of the file being replaced, else make it
        // an ordinary document.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&target)
                .ok()
                .filter(|m| m.is_file())
                .map_or(0o644, |m| m.permissions().mode() & 0o7777);
            let _ = fs::set_permissions(&temp, fs::Permissions::from_mode(mode));
        }
        tracked
            .commit(|| temp.persist(&target))
            .map_err(|e| err(e.error))?;
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Write a whole output with `write`: atomically for a regular file (not synced to disk: see
/// the module docs), directly for a device or FIFO, to standard output for `-`. A reader that
/// stops early (`| head`) is not an error.
pub fn write_output<F>(path: &Path, write: F) -> Result<(), OutputError>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    write_output_with(path, false, write)
}

/// [`write_output`], and a regular file is synced to disk before it is renamed into place (see
/// [`AtomicFile::commit_durable`]): for checkpoints that a later run relies on.
pub fn write_output_durable<F>(path: &Path, write: F) -> Result<(), OutputError>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    write_output_with(path, true, write)
}

fn write_output_with<F>(path: &Path, sync: bool, write: F) -> Result<(), OutputError>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    let err = |source| OutputError::new(path, source);
    match Destination::of(path)? {
        Destination::Stdout => {
            let stdout = io::stdout();
            let mut lock = BufWriter::new(stdout.lock());
            quiet_broken_pipe(write(&mut lock).and_then(|_| lock.flush())).map_err(err)
        }
        Destination::Direct { node, .. } => {
            let file = open_direct(path, node, FIFO_READER_WAIT).map_err(err)?;
            let mut w = BufWriter::with_capacity(1 << 16, file);
            quiet_broken_pipe(write(&mut w).and_then(|_| w.flush())).map_err(err)
        }
        Destination::File { target } => {
            let mut file = AtomicFile::create_at(path, target)?;
            write(&mut file).map_err(err)?;
            file.finish(sync)
        }
    }
}

/// A reader that closed its end early (`| head`, a FIFO reader that stopped) is not an error.
fn quiet_broken_pipe(res: io::Result<()>) -> io::Result<()> {
    match res {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Open a device, FIFO or `/proc` descriptor for writing, in place. A FIFO with no reader is
/// retried until one appears or `wait` has passed.
#[cfg(unix)]
pub fn open_direct(path: &Path, node: Node, wait: Duration) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut opts = fs::OpenOptions::new();
    opts.write(true);
    match node {
        // Truncate like a shell's `>`; no rename can reach the open file behind the link.
        Node::ProcFd => {
            opts.truncate(true);
        }
        // Non-blocking open: a FIFO without a reader fails at once (ENXIO) instead of
        // blocking forever, and a device never waits for a carrier.
        _ => {
            opts.custom_flags(libc::O_NONBLOCK);
        }
    }
    let start = Instant::now();
    let mut told = false;
    let file = loop {
        match opts.open(path) {
            Ok(f) => break f,
            Err(e) if node == Node::Fifo && e.raw_os_error() == Some(libc::ENXIO) => {
                if start.elapsed() >= wait {
                    return Err(io::Error::other(format!(
                        "it is a FIFO and no process opened it for reading within {} s; start \
                         the reader first (e.g. `cat {} &`)",
                        wait.as_secs(),
                        path.display()
                    )));
                }
                if !told && !wait.is_zero() {
                    told = true;
                    let _ = crate::render::term::write_message(
                        &mut io::stderr(),
                        &format!(
                            "note: waiting up to {} s for a reader on the FIFO {}",
                            wait.as_secs(),
                            path.display()
                        ),
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
    };
    if node != Node::ProcFd {
        // Back to blocking writes, so a slow reader slows us down instead of failing us.
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        // SAFETY: fcntl on a descriptor we own, clearing one status flag.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
            }
        }
    }
    Ok(file)
}

/// Elsewhere devices and FIFOs are opened plainly.
#[cfg(not(unix))]
pub fn open_direct(path: &Path, _node: Node, _wait: Duration) -> io::Result<File> {
    fs::OpenOptions::new().write(true).open(path)
}

/// A folder of outputs (`--report DIR`) built in a hidden temporary folder beside its target
/// and moved into place by [`StagedFolder::commit`] only when every file is written: a full
/// disk, an error or Ctrl-C never leaves a partial folder. Dropping it removes the temporary
/// folder.
///
/// When the target does not exist, the whole folder is renamed into place (atomic). When it
/// exists (an earlier report, or any folder), the new files are renamed into it one by one,
/// replacing files of the same names and leaving other files alone; renames need no disk space,
/// so this step cannot run out of it.
pub struct StagedFolder {
    path: PathBuf,
    target: PathBuf,
    // Declared before `tracked`: the folder is removed before it is unregistered.
    staging: tempfile::TempDir,
    tracked: Tracked,
}

impl StagedFolder {
    /// Start building the folder `path` (following symbolic links). Its parent folders are
    /// created if missing; an existing file at `path` is an error.
    pub fn create(path: &Path) -> Result<Self, OutputError> {
        let err = |e| OutputError::new(path, e);
        let (target, _) = follow_links(path).map_err(err)?;
        match fs::metadata(&target) {
            Ok(m) if !m.is_dir() => {
                return Err(err(io::Error::other("it is a file; give a folder")));
            }
            _ => {}
        }
        let parent = parent_of(&target);
        fs::create_dir_all(parent).map_err(err)?;
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "report".into());
        let (staging, tracked) = cleanup::create_tracked_folder(
            || {
                tempfile::Builder::new()
                    .prefix(&format!(".{name}."))
                    .suffix(".tmp")
                    .tempdir_in(parent)
            },
            |t: &tempfile::TempDir| t.path(),
        )
        .map_err(err)?;
        Ok(StagedFolder {
            path: path.to_path_buf(),
            target,
            staging,
            tracked,
        })
    }

    /// Where to write the folder's files now.
    pub fn staging(&self) -> &Path {
        self.staging.path()
    }

    /// The folder as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `err` about a file in the staging folder, told about the same file in the folder as
    /// given (the user never typed the hidden staging name).
    pub fn rename_error(&self, mut err: OutputError) -> OutputError {
        if let Ok(rest) = err.path.strip_prefix(self.staging.path()) {
            err.path = self.path.join(rest);
        }
        err
    }

    /// Move the finished files into place (see the type's docs); returns their final paths,
    /// under the folder as given.
    pub fn commit(self) -> Result<Vec<PathBuf>, OutputError> {
        let StagedFolder {
            path,
            target,
            staging,
            tracked,
        } = self;
        let err = |e| OutputError::new(&path, e);
        let mut names: Vec<_> = fs::read_dir(staging.path())
            .map_err(err)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<io::Result<_>>()
            .map_err(err)?;
        names.sort();
        if fs::symlink_metadata(&target).is_err() {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let _ = fs::set_permissions(staging.path(), fs::Permissions::from_mode(0o755));
            }
            let staged = staging.path().to_path_buf();
            tracked
                .commit(|| fs::rename(&staged, &target))
                .map_err(err)?;
            // The folder is in place; nothing is left to remove.
            let _ = staging.keep();
        } else {
            // Refuse before moving anything when a file would land on a folder.
            for name in &names {
                if target.join(name).is_dir() {
                    return Err(OutputError::new(
                        &path.join(name),
                        io::Error::other("a folder of that name is in the way; move it"),
                    ));
                }
            }
            tracked
                .commit(|| -> io::Result<()> {
                    for name in &names {
                        fs::rename(staging.path().join(name), target.join(name))?;
                    }
                    Ok(())
                })
                .map_err(err)?;
            // `staging` (now empty) is removed as it drops.
        }
        Ok(names.iter().map(|n| path.join(n)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_replaces_and_failure_keeps_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        fs::write(&path, "old").unwrap();
        let res = write_output(&path, |w| {
            w.write_all(b"half")?;
            Err(io::Error::other("interrupted"))
        });
        assert!(res.is_err());
        assert_eq!(fs::read_to_string(&path).unwrap(), "old");
        // no temporary file left behind
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        write_output(&path, |w| w.write_all(b"new")).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
    }

    #[test]
    fn missing_folder_is_an_error_naming_the_path() {
        let err =
            write_output(Path::new("/nonexistent-dir/x.json"), |w| w.write_all(b"x")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent-dir/x.json"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn symlink_chains_are_followed_and_stay_links() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let real_dir = dir.path().join("real");
        fs::create_dir(&real_dir).unwrap();
        let target = real_dir.join("target.json");
        fs::write(&target, "old").unwrap();
        // link2 -> link1 (relative) -> real/target.json (relative to its own folder)
        symlink("real/target.json", dir.path().join("link1")).unwrap();
        symlink("link1", dir.path().join("link2")).unwrap();
        let link2 = dir.path().join("link2");
        assert_eq!(
            Destination::of(&link2).unwrap(),
            Destination::File {
                target: dir.path().join("real/target.json")
            }
        );
        write_output(&link2, |w| w.write_all(b"new")).unwrap();
        assert!(fs::symlink_metadata(&link2)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(fs::symlink_metadata(dir.path().join("link1"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
        // no temporary file beside the link or the target
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 3);
        assert_eq!(fs::read_dir(&real_dir).unwrap().count(), 1);

        // A dangling link creates its target.
        symlink("real/new.json", dir.path().join("dangling")).unwrap();
        write_output(&dir.path().join("dangling"), |w| w.write_all(b"x")).unwrap();
        assert_eq!(fs::read_to_string(real_dir.join("new.json")).unwrap(), "x");

        // A loop is an error, not a hang.
        symlink("loop-b", dir.path().join("loop-a")).unwrap();
        symlink("loop-a", dir.path().join("loop-b")).unwrap();
        let e = Destination::of(&dir.path().join("loop-a")).unwrap_err();
        assert!(e.to_string().contains("symbolic links"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_written_in_place_and_one_without_reader_fails_in_bounded_time() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path in our temporary folder.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            Destination::of(&fifo).unwrap(),
            Destination::Direct {
                node: Node::Fifo,
                ..
            }
        ));
        let start = Instant::now();
        let e = open_direct(&fifo, Node::Fifo, Duration::from_millis(200)).unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(e.to_string().contains("no process opened it"), "{e}");

        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read_to_string(fifo).unwrap())
        };
        write_output(&fifo, |w| w.write_all(b"through the pipe")).unwrap();
        assert_eq!(reader.join().unwrap(), "through the pipe");
        use std::os::unix::fs::FileTypeExt;
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "no temp file");
    }

    #[test]
    fn same_file_under_two_spellings_has_one_identity() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("x.json");
        let b = dir.path().join(".").join("sub/../x.json");
        fs::create_dir(dir.path().join("sub")).unwrap();
        let id = |p: &Path| Destination::of(p).unwrap().identity();
        assert_eq!(id(&a), id(&b));
        assert_ne!(id(&a), id(&dir.path().join("y.json")));
        assert_eq!(id(Path::new("-")), Some(Identity::Stdout));
    }

    #[test]
    fn a_staged_folder_appears_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("report");
        // Dropped before commit: nothing at the target, nothing beside it.
        let staged = StagedFolder::create(&target).unwrap();
        fs::write(staged.staging().join("a.txt"), "a").unwrap();
        drop(staged);
        assert!(!target.exists());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);

        // Committed into a new folder.
        let staged = StagedFolder::create(&target).unwrap();
        fs::write(staged.staging().join("a.txt"), "a1").unwrap();
        let written = staged.commit().unwrap();
        assert_eq!(written, [target.join("a.txt")]);
        assert_eq!(fs::read_to_string(target.join("a.txt")).unwrap(), "a1");

        // Into an existing folder: same names replaced, other files kept.
        fs::write(target.join("mine.txt"), "keep").unwrap();
        let staged = StagedFolder::create(&target).unwrap();
        fs::write(staged.staging().join("a.txt"), "a2").unwrap();
        staged.commit().unwrap();
        assert_eq!(fs::read_to_string(target.join("a.txt")).unwrap(), "a2");
        assert_eq!(fs::read_to_string(target.join("mine.txt")).unwrap(), "keep");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no staging left"
        );
    }
}
