//! Hostile chat templates (issue 20, requirement 11), through the CLI: the tiny Qwen2 folder
//! with a template that asks for 100 GB of indent, 4 GB of padding, a value nested deeper than
//! the stack, or endless output. Each run is limited to 1 GiB of address space (`ulimit -v`)
//! and 60 s, so a template without bounds fails here instead of taking the machine down; each
//! must end with exit status 1, one line that names the file and what the template did, and no
//! output written. `scripts/hostile/chat.py` writes the same cases for
//! `scripts/measure-hostile.sh`; `crates/model/src/formats/gguf/chat.rs` tests the limits in process.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use crate::support::cli::copy_model;

fn qwen2() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny-qwen2")
}

/// The tiny Qwen2 model in `dir` with `template` as its chat template.
fn model_with(dir: &Path, template: &str) {
    copy_model(&qwen2(), dir);
    let path = dir.join("tokenizer_config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    config["chat_template"] = template.into();
    fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
}

/// `attnviz -m DIR hi --chat --json OUT` under 1 GiB of address space and 60 s; the output
/// and whether OUT exists afterwards.
fn run_chat(dir: &Path) -> (Output, bool) {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("a.json");
    let output = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1048576; exec timeout 60 \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_attnviz"))
        .arg("-m")
        .arg(dir)
        .args(["hi", "--chat", "--json"])
        .arg(&json)
        .env("HF_HUB_OFFLINE", "1")
        .env("NO_COLOR", "1")
        .env_remove("ATTNVIZ_MODEL")
        .output()
        .expect("sh runs");
    (output, json.exists())
}

/// A list nested `depth` deep, ten levels a loop iteration.
fn nest(depth: usize) -> String {
    format!(
        "{{% set ns = namespace(x=[]) %}}{{% for i in range({}) %}}{{% for j in range({}) %}}\
         {{% set ns.x = [[[[[[[[[[ns.x]]]]]]]]]] %}}{{% endfor %}}{{% endfor %}}",
        (depth / 10_000).max(1),
        (depth / 10).min(1000)
    )
}

#[test]
fn hostile_chat_templates_fail_in_one_line_within_their_bounds() {
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "tojson-indent-1e11",
            "{{ messages | tojson(indent=100000000000) }}".into(),
            "tojson's indent of 100000000000 is more than 64 spaces",
        ),
        (
            "nested-100k-tojson",
            nest(100_000) + "{{ ns.x | tojson }}",
            "it ran out of its fuel of",
        ),
        (
            "nested-10k-tojson",
            nest(10_000) + "{{ ns.x | tojson }}",
            "cannot tojson a value nested more than 128 deep",
        ),
        (
            "nested-10k-print",
            nest(10_000) + "{{ ns.x }}",
            "cannot print a value nested more than 128 deep",
        ),
        (
            "nested-10k-pprint",
            nest(10_000) + "{{ ns.x | pprint }}",
            "cannot pprint a value nested more than 128 deep",
        ),
        (
            "format-width-4e9",
            "{{ '{:>4000000000}'.format('x') }}".into(),
            "str.format asks for widths of 4000000000 characters, more than 65536",
        ),
        (
            "doubling-concat",
            "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s \
             %}{% endfor %}{{ ns.s | length }}"
                .into(),
            "it takes more work or memory than a chat template needs",
        ),
        (
            "output-flood",
            format!(
                "{{% for i in range(1000) %}}{{% for j in range(1000) %}}{}{{% endfor %}}{{% \
                 endfor %}}",
                "x".repeat(100)
            ),
            "it writes more than 1048588 bytes",
        ),
    ];
    for (name, template, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        model_with(dir.path(), &template);
        let (out, wrote) = run_chat(dir.path());
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{name}: not one line: {err}"
        );
        assert!(
            err.starts_with("error: ") && err.contains("tokenizer_config.json: the chat template"),
            "{name}: {err}"
        );
        assert!(err.contains(want), "{name}: expected `{want}` in: {err}");
        assert!(!wrote, "{name}: an output was written");
    }
}

/// A value as deep as the fuel builds, compared and dropped by minijinja's own recursion: the
/// rendering thread's stack holds it (an overflow would abort, exit status 134), and the run
/// goes on to the model.
#[test]
fn the_deepest_value_the_fuel_builds_does_not_overflow_the_stack() {
    for then in ["{{ ns.x == ns.x }}", "{{ messages[0]['content'] }}"] {
        let dir = tempfile::tempdir().unwrap();
        model_with(dir.path(), &(nest(40_000) + then));
        let (out, wrote) = run_chat(dir.path());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{then}: {err}");
        assert!(wrote, "{then}: the JSON is written");
    }
}
