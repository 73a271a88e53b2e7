//! `attnviz models`: the library's catalog of this machine's models ([`attnviz::model::catalog`])
//! as a table, or as the JSON listing of `schema/models.schema.json`.

use std::io::{self, Write};

use attnviz::doc::models::{
    ListedModel, ModelsListing, SearchedStore, Store, MODELS_FORMAT, MODELS_VERSION,
};
use attnviz::model::catalog::{self, Entry, Listing, Origin};
use attnviz::model::{format_bytes, Hub, Stores};
use attnviz::render::term::escape_controls;

use super::cli::ModelsArgs;
use super::error::Error;
use super::words;

/// List, and print the table or the JSON.
pub fn run(args: &ModelsArgs) -> Result<(), Error> {
    let listing = catalog::list(&Stores::from_env(), &Hub::from_env(), args.verify);
    let mut out = io::stdout().lock();
    let written = if args.json {
        let doc = document(&listing);
        serde_json::to_writer_pretty(&mut out, &doc)
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        out.write_all(table(&listing).as_bytes())
    };
    match written {
        Ok(()) => Ok(()),
        // A reader that stopped early (`| head`) is not an error.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::Usage(format!("cannot write the listing: {e}"))),
    }
}

fn store_of(origin: Origin) -> Store {
    use attnviz::model::StoreKind as K;
    match origin {
        Origin::Store(K::Ollama) => Store::Ollama,
        Origin::Store(K::LmStudio) => Store::Lmstudio,
        Origin::Store(K::LlamaCpp) => Store::Llamacpp,
        Origin::HuggingFace => Store::Huggingface,
    }
}

fn reason(e: &Entry) -> Option<String> {
    e.verdict.as_ref().err().map(words::model)
}

/// The listing as `attnviz models --json` writes it.
pub fn document(listing: &Listing) -> ModelsListing {
    let path = |p: &std::path::Path| p.display().to_string();
    ModelsListing {
        format: MODELS_FORMAT.to_string(),
        format_version: MODELS_VERSION,
        stores: listing
            .searched
            .iter()
            .map(|s| SearchedStore {
                store: store_of(s.origin),
                folders: s.folders.iter().map(|p| path(p)).collect(),
                found: s.found.iter().map(|p| path(p)).collect(),
            })
            .collect(),
        models: listing
            .entries
            .iter()
            .map(|e| ListedModel {
                name: e.name.clone(),
                store: store_of(e.origin),
                revision: e.revision.clone(),
                path: e.path.as_deref().map(path),
                family: e.family.clone(),
                size_bytes: e.size,
                quantization: e.quantization.clone(),
                runnable: e.verdict.is_ok(),
                reason: reason(e),
                template: e.layers.template.clone(),
                parameters: e
                    .layers
                    .parameters
                    .as_deref()
                    .and_then(|p| serde_json::from_str(p).ok()),
                system: e.layers.system.clone(),
                projector: e.projector,
            })
            .collect(),
    }
}

/// The table: one row per model (name as `-m` takes it, family, size, quantization, whether it
/// runs), the reason under a model that does not, and for each store where it looked.
pub fn table(listing: &Listing) -> String {
    let mut out = String::new();
    for origin in Origin::ALL {
        let searched = listing.searched.iter().find(|s| s.origin == origin);
        let rows: Vec<&Entry> = listing
            .entries
            .iter()
            .filter(|e| e.origin == origin)
            .collect();
        let folders = searched.map_or(Vec::new(), |s| {
            s.folders
                .iter()
                .map(|p| escape_controls(&p.display().to_string()).into_owned())
                .collect()
        });
        let found = searched.map_or(Vec::new(), |s| s.found.clone());
        if rows.is_empty() {
            let where_ = if folders.is_empty() {
                "no folder to look in (HOME is not set)".to_string()
            } else if found.is_empty() {
                format!("no folder: looked in {}", folders.join(", "))
            } else {
                format!(
                    "no model in {}",
                    found
                        .iter()
                        .map(|p| escape_controls(&p.display().to_string()).into_owned())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            out.push_str(&format!("{}: {where_}\n\n", origin.program()));
            continue;
        }
        let shown_in: Vec<String> = found
            .iter()
            .map(|p| escape_controls(&p.display().to_string()).into_owned())
            .collect();
        out.push_str(&format!(
            "{} ({}): {} model{}\n",
            origin.program(),
            shown_in.join(", "),
            rows.len(),
            if rows.len() == 1 { "" } else { "s" }
        ));
        let cells: Vec<[String; 5]> = rows
            .iter()
            .map(|e| {
                let mut name = e.name.clone();
                if let Some(rev) = e.revision.as_deref().filter(|r| *r != "main") {
                    name.push_str(&format!(" @{rev}"));
                }
                [
                    escape_controls(&name).into_owned(),
                    escape_controls(e.family.as_deref().unwrap_or("-")).into_owned(),
                    e.size.map_or("-".into(), format_bytes),
                    escape_controls(e.quantization.as_deref().unwrap_or("-")).into_owned(),
                    if e.verdict.is_ok() { "yes" } else { "no" }.to_string(),
                ]
            })
            .collect();
        let header = ["NAME", "FAMILY", "SIZE", "QUANT", "RUNS"].map(String::from);
        let mut widths = header.clone().map(|h| h.chars().count());
        for row in &cells {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |row: &[String; 5]| {
            let mut l = String::from("  ");
            for (i, (c, w)) in row.iter().zip(widths).enumerate() {
                l.push_str(c);
                if i + 1 < row.len() {
                    l.push_str(&" ".repeat(w - c.chars().count() + 2));
                }
            }
            l.push('\n');
            l
        };
        out.push_str(&line(&header));
        for (row, e) in cells.iter().zip(&rows) {
            out.push_str(&line(row));
            if let Some(why) = reason(e) {
                out.push_str(&format!("      {}\n", escape_controls(&why)));
            }
            if e.layers.template.is_some() || e.layers.parameters.is_some() {
                let mut has = Vec::new();
                if let Some(t) = &e.layers.template {
                    has.push(format!("template ({})", size_words(t.len())));
                }
                if let Some(p) = &e.layers.parameters {
                    has.push(format!("parameters {}", escape_controls(&cut(p, 80))));
                }
                if e.layers.system.is_some() {
                    has.push("system prompt".into());
                }
                out.push_str(&format!("      Ollama layers: {}\n", has.join(", ")));
            }
        }
        out.push('\n');
    }
    out
}

/// A small text's size: bytes below a kilobyte.
fn size_words(n: usize) -> String {
    if n < 1000 {
        format!("{n} bytes")
    } else {
        format_bytes(n as u64)
    }
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}
