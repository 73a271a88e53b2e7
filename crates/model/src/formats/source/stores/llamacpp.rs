//! llama.cpp's download cache (`-hf` downloads): flat files named `ORG_REPO_FILE.gguf`, found by
//! a part of their name.

use std::path::{Path, PathBuf};

use super::{
    cut, existing_roots, gguf_files, plain, Listed, Searched, StoreError, StoreKind, StoreModel,
};

/// How many candidates an ambiguous name lists.
const SHOWN: usize = 8;

fn stem(file: &str) -> &str {
    let cut = file.len().saturating_sub(".gguf".len());
    if file.is_char_boundary(cut) && file[cut..].eq_ignore_ascii_case(".gguf") {
        &file[..cut]
    } else {
        file
    }
}

pub(super) fn resolve(text: &str, folders: &[PathBuf]) -> Result<StoreModel, StoreError> {
    plain(text, &[' ', '+', '@'], 255).map_err(|reason| StoreError::BadName {
        store: StoreKind::LlamaCpp,
        name: cut(text, 200),
        reason,
    })?;
    let roots = existing_roots(StoreKind::LlamaCpp, folders)?;
    let mut all: Vec<(&Path, String)> = Vec::new();
    for root in &roots {
        for file in gguf_files(root).0 {
            if !all.iter().any(|(_, f)| *f == file) {
                all.push((root.as_path(), file));
            }
        }
    }
    let want = stem(text).to_lowercase();
    let exact: Vec<&(&Path, String)> = all
        .iter()
        .filter(|(_, f)| stem(f).to_lowercase() == want)
        .collect();
    let matches: Vec<&(&Path, String)> = if exact.is_empty() {
        all.iter()
            .filter(|(_, f)| stem(f).to_lowercase().contains(&want))
            .collect()
    } else {
        exact
    };
    match matches.as_slice() {
        [(root, file)] => {
            let name = format!("llamacpp:{}", stem(file));
            let mut found = super::lmstudio::checked(root, &root.join(file), &name)?;
            found.store = StoreKind::LlamaCpp;
            Ok(found)
        }
        [] => {
            let hint = if all.is_empty() {
                "; it holds no .gguf file".to_string()
            } else {
                let names: Vec<&str> = all.iter().take(SHOWN).map(|(_, f)| stem(f)).collect();
                let more = all.len().saturating_sub(SHOWN);
                format!(
                    "; it has {}{}",
                    names.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                )
            };
            Err(StoreError::NotFound {
                store: StoreKind::LlamaCpp,
                name: format!("llamacpp:{text}"),
                searched: Searched(roots.into_iter().cloned().collect()),
                hint,
            })
        }
        many => {
            let mut candidates: Vec<String> = many
                .iter()
                .take(SHOWN)
                .map(|(_, f)| format!("llamacpp:{}", stem(f)))
                .collect();
            if many.len() > SHOWN {
                candidates.push(format!("and {} more", many.len() - SHOWN));
            }
            Err(StoreError::Ambiguous {
                store: StoreKind::LlamaCpp,
                name: text.to_string(),
                count: many.len(),
                candidates,
            })
        }
    }
}

/// Every GGUF file in `root`.
pub(super) fn list(root: &Path) -> Vec<Listed> {
    gguf_files(root)
        .0
        .into_iter()
        .map(|file| {
            let name = format!("llamacpp:{}", stem(&file));
            let model = super::lmstudio::checked(root, &root.join(&file), &name).map(|mut m| {
                m.store = StoreKind::LlamaCpp;
                m
            });
            Listed { name, model }
        })
        .collect()
}
