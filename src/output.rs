//! Atomic output files: write to a temporary file beside the target, then rename it into place,
//! so an interrupted run never leaves half a file where an old one stood.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

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

/// A file being written. Nothing appears at the destination until [`AtomicFile::commit`];
/// dropping it without committing removes the temporary file.
pub struct AtomicFile {
    path: PathBuf,
    temp: BufWriter<tempfile::NamedTempFile>,
}

impl AtomicFile {
    /// Start writing `path`. The temporary file lives in the same folder, so the final rename
    /// never crosses file systems.
    pub fn create(path: &Path) -> Result<Self, OutputError> {
        let err = |source| OutputError {
            path: path.to_path_buf(),
            source,
        };
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if path.is_dir() {
            return Err(err(io::Error::other("it is a folder; give a file name")));
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(err)?;
        Ok(AtomicFile {
            path: path.to_path_buf(),
            temp: BufWriter::with_capacity(1 << 20, temp),
        })
    }

    /// The destination path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flush, sync and rename the temporary file onto the destination.
    pub fn commit(self) -> Result<(), OutputError> {
        self.finish(true)
    }

    /// Flush and rename without syncing to disk first. An interrupted or killed process still
    /// never leaves half a file at the destination; only an OS crash or power loss soon after
    /// could leave it empty. For many small files (corpus mode), where a sync per file would
    /// cost as much as computing it.
    pub fn commit_unsynced(self) -> Result<(), OutputError> {
        self.finish(false)
    }

    fn finish(self, sync: bool) -> Result<(), OutputError> {
        let path = self.path;
        let err = |source| OutputError {
            path: path.clone(),
            source,
        };
        let temp = self.temp.into_inner().map_err(|e| err(e.into_error()))?;
        if sync {
            temp.as_file().sync_all().map_err(err)?;
        }
        // tempfile creates files 0600; outputs are ordinary documents.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = fs::set_permissions(temp.path(), fs::Permissions::from_mode(0o644));
        }
        temp.persist(&path).map_err(|e| err(e.error))?;
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.temp.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.temp.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.temp.flush()
    }
}

/// Write a whole output with `write`, atomically. `-` means standard output.
pub fn write_output<F>(path: &Path, write: F) -> Result<(), OutputError>
where
    F: FnOnce(&mut dyn Write) -> io::Result<()>,
{
    if path == Path::new("-") {
        let stdout = io::stdout();
        let mut lock = BufWriter::new(stdout.lock());
        return match write(&mut lock).and_then(|_| lock.flush()) {
            // A reader that stops early (`| head`) is not an error.
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
            other => other.map_err(|source| OutputError {
                path: path.to_path_buf(),
                source,
            }),
        };
    }
    let mut file = AtomicFile::create(path)?;
    write(&mut file).map_err(|source| OutputError {
        path: path.to_path_buf(),
        source,
    })?;
    file.commit()
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
}
