//! `cargo build --release`, `cargo test --release` and the wheel's `maturin build --release` share
//! their dependencies: every crate two of them build gets the same features in each (Cargo.toml's
//! feature list under "The same features"). A crate whose features differ is built again, with
//! every crate above it; before this, syn's `visit-mut` (the test build's and the wheel's) and
//! num-complex's `std` (the wheel's) made each of the three builds compile nearly the whole tree.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Each crate of the build `args` selects (`cargo tree` arguments) with its feature sets (two
/// where it is built for the build scripts and macros with other features than for the code).
fn features(args: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "--prefix",
            "none",
            "--format",
            "{p}|{f}",
        ])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut crates: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let Some((package, features)) = line.trim_end_matches(" (*)").split_once('|') else {
            continue;
        };
        // `syn v2.0.119`, `attnviz v0.1.0 (/path)`, `serde_derive v1.0.0 (proc-macro)`.
        let package = package.split(" (").next().unwrap_or(package).to_string();
        crates
            .entry(package)
            .or_default()
            .insert(features.to_string());
    }
    crates
}

#[test]
fn the_test_build_and_the_wheel_build_share_the_first_builds_dependencies() {
    let build = features(&["-p", "attnviz", "-e", "normal,build"]);
    let test = features(&["-p", "attnviz", "-e", "normal,build,dev"]);
    let wheel = features(&["-p", "attnviz-python", "-e", "normal,build"]);
    assert!(build.len() > 100 && build.keys().any(|p| p.starts_with("candle-core ")));
    for (name, other) in [("cargo test", &test), ("maturin build", &wheel)] {
        let differ: Vec<String> = build
            .iter()
            .filter_map(|(package, f)| {
                let g = other.get(package)?;
                (g != f).then(|| format!("{package}: {f:?} / {g:?}"))
            })
            .collect();
        assert!(
            differ.is_empty(),
            "`{name}` builds these with other features than `cargo build` (and so builds them, and \
             everything above them, again); add the features to Cargo.toml's list: {differ:#?}"
        );
    }
}
