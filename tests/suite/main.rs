//! The integration test suite, in one binary: linking one test executable against candle and
//! tokenizers instead of one per file is most of what a cold `cargo test --release` costs.
//!
//! Tests that change the process environment live in binaries of their own
//! (`tests/hub_environment.rs`, `tests/thread_count.rs`), because the tests here run in parallel
//! threads of one process.

pub mod fidelity;
mod support;

mod alti;
mod analysis_reference;
mod build_sharing;
mod chat_templates;
mod cli;
mod cli_decoders;
mod cli_families;
mod cli_seq2seq;
mod cli_whisper;
mod corpus;
mod corpus_hostile;
mod corpus_shards;
mod corpus_targets;
mod detectors;
mod diff;
mod display_labels;
mod encdec_views;
mod engine_formats;
mod engine_minilm;
mod engine_oracle;
mod engine_source;
mod engine_tokenize;
mod engine_weights;
mod fonts_in_browsers;
mod gguf_files;
mod gguf_smollm2;
mod gguf_surfaces;
mod hostile;
mod hostile_families;
mod hostile_model_files;
mod html_report;
mod images_minilm;
mod images_without_system_fonts;
mod input_bounds;
mod interrupts;
mod json_schema;
mod lens;
mod lens_attribution;
mod mmproj_cli;
mod model_stores;
mod norm_weights;
mod output_folders;
mod output_targets;
mod paths_in_outputs;
mod pictures_hostile;
mod render;
mod render_hostile;
mod report_and_json_sections;
mod save_render;
mod serve;
mod serve_audio;
mod summarised;
mod terminal_hygiene;
mod test_scripts;
mod tokenizer_roles;
mod typed_errors;
mod value_zeroing;
mod vision_cli;
mod windowed_stats;
mod word_merge;
