//! LM Studio's models folder: `PUBLISHER/MODEL/FILE.gguf`, a vision-language model's projector
//! beside it as `mmproj-*.gguf`. The folder is `downloadsFolder` in `~/.lmstudio/settings.json`
//! when the user moved it.

use std::path::{Path, PathBuf};

use super::{
    cut, gguf_files, inside, is_gguf, plain, FileProblem, Listed, OllamaLayers, Searched,
    StoreError, StoreKind, StoreModel, MAX_LISTED,
};
use super::{existing_roots, Cause, NameProblem};

/// The folder `settings.json` names as `downloadsFolder`, if it names an absolute one.
pub(super) fn downloads_folder(settings: &Path) -> Option<PathBuf> {
    let text = crate::small_file::read_text(settings, 1 << 20, "").ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    let folder = PathBuf::from(json.get("downloadsFolder")?.as_str()?);
    folder.is_absolute().then_some(folder)
}

/// Publisher, model and file (if given) of `PUBLISHER/MODEL[/FILE]`.
fn parse(text: &str) -> Result<(&str, &str, Option<&str>), NameProblem> {
    let parts: Vec<&str> = text.split('/').collect();
    let (publisher, model, file) = match parts.as_slice() {
        [p, m] => (*p, *m, None),
        [p, m, f] => (*p, *m, Some(*f)),
        _ => {
            return Err(NameProblem::Parts(
                "it needs two or three parts (PUBLISHER/MODEL[/FILE])",
            ))
        }
    };
    for part in [Some(publisher), Some(model), file].into_iter().flatten() {
        plain(part, &[' ', '+', '@'], 255)?;
    }
    Ok((publisher, model, file))
}

pub(super) fn resolve(text: &str, folders: &[PathBuf]) -> Result<StoreModel, StoreError> {
    let (publisher, model, file) = parse(text).map_err(|reason| StoreError::BadName {
        store: StoreKind::LmStudio,
        name: cut(text, 200),
        reason,
    })?;
    let roots = existing_roots(StoreKind::LmStudio, folders)?;
    let not_found = |hint: String| StoreError::NotFound {
        store: StoreKind::LmStudio,
        name: format!("lmstudio:{text}"),
        searched: Searched(roots.iter().map(|r| r.to_path_buf()).collect()),
        hint,
    };
    let Some((root, dir)) = roots.iter().find_map(|root| {
        let dir = root.join(publisher).join(model);
        dir.is_dir().then_some((root.as_path(), dir))
    }) else {
        return Err(not_found(String::new()));
    };
    let (files, projector) = gguf_files(&dir);
    let (chosen, passed_over) = match file {
        Some(f) => {
            let with_ext = if f.to_ascii_lowercase().ends_with(".gguf") {
                f.to_string()
            } else {
                format!("{f}.gguf")
            };
            if !dir.join(&with_ext).exists()
                && std::fs::symlink_metadata(dir.join(&with_ext)).is_err()
            {
                let hint = if files.is_empty() {
                    String::new()
                } else {
                    format!("; {publisher}/{model} has {}", files.join(", "))
                };
                return Err(not_found(hint));
            }
            (with_ext, Vec::new())
        }
        None => {
            let mut files = files.into_iter();
            let first = files
                .next()
                .ok_or_else(|| not_found(format!("; {publisher}/{model} holds no .gguf file")))?;
            (first, files.collect())
        }
    };
    let name = format!("lmstudio:{publisher}/{model}/{chosen}");
    let mut found = checked(root, &dir.join(&chosen), &name)?;
    found.passed_over = passed_over;
    found.projector = projector.and_then(|p| inside(root, &dir.join(p)).ok());
    Ok(found)
}

/// The GGUF file at `path` in the store at `root`, checked.
pub(super) fn checked(root: &Path, path: &Path, name: &str) -> Result<StoreModel, StoreError> {
    let bad = |problem| StoreError::File {
        name: name.to_string(),
        what: "GGUF file",
        path: path.to_path_buf(),
        problem,
    };
    let real = inside(root, path).map_err(bad)?;
    if !is_gguf(&real).map_err(bad)? {
        return Err(bad(FileProblem::NotGguf));
    }
    let size = std::fs::metadata(&real)
        .map_err(|e| bad(FileProblem::Unreadable(Cause::of(e))))?
        .len();
    Ok(StoreModel {
        store: StoreKind::LmStudio,
        name: name.to_string(),
        gguf: real,
        size,
        sha256: None,
        projector: None,
        layers: OllamaLayers::default(),
        passed_over: Vec::new(),
    })
}

/// Every `PUBLISHER/MODEL/FILE.gguf` under `root`.
pub(super) fn list(root: &Path) -> Vec<Listed> {
    let mut out = Vec::new();
    let subdirs = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .take(MAX_LISTED)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        v.sort();
        v
    };
    for publisher in subdirs(root) {
        for model in subdirs(&root.join(&publisher)) {
            let dir = root.join(&publisher).join(&model);
            let (files, projector) = gguf_files(&dir);
            for file in files {
                let name = format!("lmstudio:{publisher}/{model}/{file}");
                let found = checked(root, &dir.join(&file), &name).map(|mut m| {
                    m.projector = projector
                        .as_ref()
                        .and_then(|p| inside(root, &dir.join(p)).ok());
                    m
                });
                out.push(Listed { name, model: found });
                if out.len() >= MAX_LISTED {
                    return out;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_publisher_model_and_maybe_file() {
        assert_eq!(
            parse("lmstudio-community/Qwen2.5-0.5B-GGUF"),
            Ok(("lmstudio-community", "Qwen2.5-0.5B-GGUF", None))
        );
        assert_eq!(parse("a/b/c.gguf"), Ok(("a", "b", Some("c.gguf"))));
        for bad in ["a", "a/b/c/d", "../b", "a/..", "a//b", "a/b/.."] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
