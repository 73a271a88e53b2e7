//! `Model::load` reads the standard Hugging Face variables from the environment. One test in its
//! own binary, because it changes the process environment.

#[path = "suite/support/mod.rs"]
mod support;

use attnviz::model::{EncodeOptions, Model};
use support::engine::*;

#[test]
fn load_honours_hf_hub_cache_offline_and_hf_home() {
    let cache = tempfile::tempdir().unwrap();
    let root = cache.path().join("models--someone--minilm");
    let commit = "fedcba9876543210fedcba9876543210fedcba98";
    let snapshot = root.join("snapshots").join(commit);
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(root.join("refs")).unwrap();
    std::fs::write(root.join("refs/main"), commit).unwrap();
    for f in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::os::unix::fs::symlink(minilm_dir().join(f), snapshot.join(f)).unwrap();
    }
    std::env::set_var("HF_HUB_CACHE", cache.path());
    std::env::set_var("HF_HUB_OFFLINE", "1");
    // A port just released: nothing answers there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::env::set_var("HF_ENDPOINT", format!("http://127.0.0.1:{port}"));
    let model = Model::load("someone/minilm", "main").unwrap();
    let out = model
        .encode("From the cache.", None, &EncodeOptions::default())
        .unwrap();
    assert_eq!(out.attention.model.id, "someone/minilm");

    // Not cached and offline: the message names the cache folder from the environment.
    let err = Model::load("someone/other", "main")
        .err()
        .unwrap()
        .to_string();
    assert_one_line(&err);
    assert!(
        err.contains(&cache.path().display().to_string()) && err.contains("HF_HUB_OFFLINE"),
        "{err}"
    );

    // Without HF_HUB_CACHE, HF_HOME/hub is searched.
    std::env::remove_var("HF_HUB_CACHE");
    let home = tempfile::tempdir().unwrap();
    std::env::set_var("HF_HOME", home.path());
    let err = Model::load("someone/minilm", "main")
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains(&home.path().join("hub").display().to_string()),
        "{err}"
    );
}
