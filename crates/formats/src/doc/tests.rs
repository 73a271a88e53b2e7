use std::collections::BTreeSet;
use std::path::PathBuf;

use super::*;

/// The repository's `schema/` folder.
fn schema_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schema")
}

/// The schemas in `schema/` are the ones the types generate: a change to a document's types
/// that is not committed as its schema fails here. `ATTNVIZ_WRITE_SCHEMAS=1` writes them.
#[test]
fn committed_schemas_are_the_generated_ones() {
    let dir = schema_dir();
    let write = std::env::var_os("ATTNVIZ_WRITE_SCHEMAS").is_some();
    let files = schema_files();
    for (name, text) in &files {
        let path = dir.join(name);
        if write {
            std::fs::write(&path, text).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == *text,
            "schema/{name} is not what the types generate; run \
             `ATTNVIZ_WRITE_SCHEMAS=1 cargo test --release -p attnviz-formats committed_schemas` \
             and commit it"
        );
    }
    // And no schema of a document attnviz no longer writes.
    let on_disk: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".schema.json"))
        .collect();
    let generated: BTreeSet<String> = files.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(on_disk, generated);
}

/// Every property a schema names, with those of the objects it flattens in.
fn properties(schema: &serde_json::Value) -> BTreeSet<String> {
    schema["properties"]
        .as_object()
        .expect("an object schema")
        .keys()
        .cloned()
        .collect()
}

/// The reader knows every field the attention documents' schemas name, so a field the writer
/// gains cannot go unread (the sections it skips it names too).
#[test]
fn the_reader_reads_every_field_the_attention_schemas_name() {
    let reads: BTreeSet<&str> = crate::import::json::doc_fields().iter().copied().collect();
    assert!(reads.contains("attention_holds"), "{reads:?}");
    let all = schemas();
    let mut missing = Vec::new();
    for (name, schema) in &all[..2] {
        for p in properties(schema) {
            // Read back from `tokens` and `label_scheme`, never trusted as written; and the
            // sections every view recomputes, skipped as unknown fields.
            let rebuilt = p.ends_with("display")
                || p.ends_with("sentence_b_start")
                || p == "sink"
                || p == "kv_heads"
                || p == "numbering"
                || p == "precision"
                || p == "kinds"
                || matches!(
                    p.as_str(),
                    "head_attribution"
                        | "head_ablation"
                        | "logit_lens"
                        | "speech"
                        | "alti"
                        | "alti_per_layer"
                        | "value_zeroing"
                        | "value_zeroing_per_layer"
                );
            if !rebuilt && !reads.contains(p.as_str()) {
                missing.push(format!("{name}: {p}"));
            }
        }
    }
    assert!(missing.is_empty(), "the reader skips {missing:?}");
}

/// The schemas say what `attention` holds, and name the model's title.
#[test]
fn the_attention_schemas_require_what_attention_holds() {
    for (name, schema) in &schemas()[..1] {
        let required: Vec<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert!(required.contains(&"attention_holds"), "{name}");
        assert!(required.contains(&"attention"), "{name}");
    }
    let holds = serde_json::to_value(schemars::schema_for!(Holds)).unwrap();
    let text = holds.to_string();
    for v in ["raw", "value-weighted", "norm-aware"] {
        assert!(text.contains(&format!("\"{v}\"")), "{text}");
    }
}

/// A schema's title names the document, not a command line that writes it: the formats are the
/// library's, read and written from Python too, and name no CLI flag.
#[test]
fn no_schema_title_names_a_cli_flag() {
    for (name, schema) in schemas() {
        let title = schema["title"].as_str().expect("every schema has a title");
        let flag = title
            .match_indices("--")
            .any(|(at, _)| title[at + 2..].starts_with(|c: char| c.is_ascii_lowercase()));
        assert!(!flag, "schema/{name}'s title names a flag: {title}");
    }
}
