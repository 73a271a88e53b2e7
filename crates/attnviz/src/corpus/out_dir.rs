//! The output folder: where each sentence's files go, what an earlier run left, and what a run
//! removes before it starts.

use super::*;

/// Where line `line`'s output of kind `ext` goes: `DIR/sentences/000042.ext` (at least six
/// digits, so names sort in line order up to 999,999 lines).
pub fn sentence_path(out_dir: &Path, line: usize, ext: &str) -> PathBuf {
    sentence_file(out_dir, &ids::line_name(line), ext)
}

/// Where the output of kind `ext` named `name` (a line number's name, or a JSON Lines id) goes:
/// `DIR/sentences/NAME.ext`.
pub fn sentence_file(out_dir: &Path, name: &str, ext: &str) -> PathBuf {
    out_dir.join(SENTENCES_DIR).join(format!("{name}.{ext}"))
}

/// Create and open the output folder, and refuse it (before the model loads) if a name the run
/// writes or reads in it is a link, a FIFO, a device, or anything but a regular file (see
/// [`folder`]).
pub(super) fn prepare_out_dir(
    out_dir: &Path,
    per_sentence: &[PerSentence],
) -> Result<OutFolder, CorpusError> {
    let folder = OutFolder::open(out_dir, !per_sentence.is_empty())?;
    folder.check(is_output_name)?;
    Ok(folder)
}

/// Whether `name` (in `sentences/`) is the name of a per-sentence output: `NAME.ext` with NAME
/// a line number or a JSON Lines id and `ext` one of [`PER_SENTENCE_EXTENSIONS`].
pub(super) fn is_output_name(name: &str) -> bool {
    match name.rsplit_once('.') {
        Some((stem, ext)) => PER_SENTENCE_EXTENSIONS.contains(&ext) && ids::Id::parse(stem).is_ok(),
        None => false,
    }
}

/// How many entries `DIR/sentences/` holds (an earlier run's outputs; the app layer refuses
/// to mix two runs unless `--force`). A `sentences` that is a link is not looked into (the run
/// refuses it, saying so).
pub fn earlier_run_files(out_dir: &Path) -> usize {
    let dir = out_dir.join(SENTENCES_DIR);
    if !fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return 0;
    }
    fs::read_dir(dir).map_or(0, |rd| rd.count())
}

/// `--force`: remove an earlier run's per-sentence files (named by line number, as this mode
/// writes them, or its temporary files) and its summary. Anything else in the folder stays.
pub(super) fn remove_earlier_run(folder: &OutFolder) -> Result<(), CorpusError> {
    let err = |path: PathBuf| move |source| CorpusError::OutDir { path, source };
    let mut ours = Vec::new();
    folder
        .for_each(Place::Sentences, |name, kind| {
            // Our outputs are NAME.ext with NAME a line number or a JSON Lines id, or our
            // temporary files (.NAME.ext.XXXXXX.tmp).
            let temporary = name.starts_with('.') && name.ends_with(".tmp");
            if kind == folder::Kind::File && (is_output_name(name) || temporary) {
                ours.push(name.to_string());
            }
            Ok(())
        })
        .map_err(err(folder.path_of(Place::Sentences, "")))?;
    for name in ours {
        folder
            .remove(Place::Sentences, &name)
            .map_err(err(folder.path_of(Place::Sentences, &name)))?;
    }
    for name in [SUMMARY_FILE, PARTIAL_FILE] {
        if folder.kind(Place::Top, name).ok().flatten() == Some(folder::Kind::File) {
            folder
                .remove(Place::Top, name)
                .map_err(err(folder.path_of(Place::Top, name)))?;
        }
    }
    journal::remove_all(folder).map_err(err(folder.path().to_path_buf()))?;
    Ok(())
}

/// `--resume`: remove the temporary files a killed run left in `DIR/sentences/` (a kill that
/// leaves no time to clean up: `SIGKILL`, a lost node).
pub(super) fn remove_temporaries(folder: &OutFolder) -> Result<(), CorpusError> {
    let mut temporaries = Vec::new();
    let _ = folder.for_each(Place::Sentences, |name, kind| {
        if name.starts_with('.') && name.ends_with(".tmp") && kind == folder::Kind::File {
            temporaries.push(name.to_string());
        }
        Ok(())
    });
    for name in temporaries {
        folder
            .remove(Place::Sentences, &name)
            .map_err(|source| CorpusError::OutDir {
                path: folder.path_of(Place::Sentences, &name),
                source,
            })?;
    }
    Ok(())
}

/// Extensions of the per-sentence files this mode writes, or will (`--force` removes them).
pub(super) const PER_SENTENCE_EXTENSIONS: [&str; 4] = ["json", "png", "svg", "html"];
