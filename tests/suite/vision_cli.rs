//! The vision families on the command line: `--image` through every output the picture views
//! cover (terminal, PNG/SVG overlays and grids, JSON's image section), `--query`, and the
//! one-line refusals (text for a vision model, an image for a text model, a file that is not
//! an image, an empty, animated or huge one, a patch off the grid).

use std::path::{Path, PathBuf};

use crate::support::cli::{assert_clean_failure, run, stderr};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn deit() -> String {
    repo()
        .join("tests/fixtures/tiny-deit")
        .display()
        .to_string()
}

fn image(name: &str) -> String {
    repo()
        .join("tests/fixtures/images")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn terminal_view_shows_the_grid_the_picture_and_the_special_tokens() {
    let out = run(&["-m", &deit(), "--image", &image("wide45x37.png")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("query CLS"), "{text}");
    // A 45 × 37 picture resized to 32 × 32 (preprocessor_config.json) was stretched.
    assert!(
        text.contains("4×4 patches of 8px (image 45×37 → 32×32, stretched from 1.22:1 to 1:1)"),
        "{text}"
    );
    assert!(
        text.contains("CLS 0.") && text.contains("DIST 0."),
        "{text}"
    );
    // Four grid lines, each 4 cells of 2 columns, then 3 spaces and 8 columns of picture.
    let grid: Vec<&str> = text.lines().skip(1).take(4).collect();
    assert!(
        grid.iter().all(|l| l.chars().count() == 8 + 3 + 8),
        "{grid:?}"
    );
    let out = run(&[
        "-m",
        &deit(),
        "--image",
        &image("wide45x37.png"),
        "--query",
        "2,3",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("query 2,3"), "{text}");
    let line: Vec<char> = text.lines().nth(3).unwrap().chars().collect();
    assert_eq!(
        line.windows(2).position(|w| w == ['<', '>']),
        Some(6),
        "{text}"
    );
}

#[test]
fn terminal_picture_stretches_a_dim_photo_over_every_shade() {
    // A 32×32 picture whose brightness runs from 8 to 40 of 255, left to right: without the
    // stretch every character of it would be the darkest shade (a blank picture).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dim.png");
    let mut bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut bytes, 32, 32);
        enc.set_color(png::ColorType::Rgb);
        let px: Vec<u8> = (0..32 * 32)
            .flat_map(|i| {
                let v = 8 + (i % 32) as u8;
                [v, v, v]
            })
            .collect();
        enc.write_header().unwrap().write_image_data(&px).unwrap();
    }
    std::fs::write(&path, bytes).unwrap();
    let out = run(&["-m", &deit(), "--image", &path.display().to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    // The picture is the last 8 columns of the 4 grid lines; its left edge dark, right bright.
    let picture: Vec<Vec<char>> = text
        .lines()
        .skip(1)
        .take(4)
        .map(|l| l.chars().skip(8 + 3).collect())
        .collect();
    for line in &picture {
        assert_eq!(line.len(), 8, "{text}");
        assert_eq!(line[0], ' ', "{text}");
        assert_eq!(line[7], '█', "{text}");
    }
}

#[test]
fn figures_and_json_describe_the_picture() {
    let dir = tempfile::tempdir().unwrap();
    let at = |n: &str| dir.path().join(n).display().to_string();
    for (figure, file) in [
        ("head", "h.png"),
        ("layer", "l.png"),
        ("model", "m.png"),
        ("rollout", "r.png"),
    ] {
        let out = run(&[
            "-m",
            &deit(),
            "--image",
            &image("big80x64.png"),
            "--figure",
            figure,
            "--png",
            &at(file),
            "--quiet",
        ]);
        assert!(out.status.success(), "{figure}: {}", stderr(&out));
        let bytes = std::fs::read(at(file)).unwrap();
        let decoded = image::load_from_memory(&bytes).unwrap();
        assert!(decoded.width() > 200 && decoded.height() > 150, "{figure}");
    }
    let out = run(&[
        "-m",
        &deit(),
        "--image",
        &image("big80x64.png"),
        "--svg",
        &at("h.svg"),
        "--json",
        &at("a.json"),
        "--quiet",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let svg = std::fs::read_to_string(at("h.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("data:image/png;base64,"));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(at("a.json")).unwrap()).unwrap();
    let img = &v["image"];
    assert_eq!(img["grid"], serde_json::json!([4, 4]));
    assert_eq!(img["original"], serde_json::json!([80, 64]));
    assert_eq!(img["input"], serde_json::json!([32, 32]));
    assert_eq!(img["preprocessing"]["resize"]["filter"], "bicubic");
    assert_eq!(img["cells"][0]["kind"], "class");
    assert_eq!(img["cells"][1]["kind"], "distillation");
    assert_eq!(
        img["cells"][2],
        serde_json::json!({"kind": "patch", "row": 0, "col": 0})
    );
    assert_eq!(v["tokens"][0], "CLS");
    assert_eq!(v["tokens"][17], "3,3");
}

#[test]
fn bad_images_and_mismatched_inputs_get_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| -> String {
        let p: PathBuf = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.display().to_string()
    };
    let m = deit();
    let run_img = |path: &str| run(&["-m", &m, "--image", path, "--quiet", "--png", "-"]);
    assert_clean_failure(
        &run_img(&write("a.txt", b"hello")),
        "is not a readable image",
    );
    let mut truncated = std::fs::read(image("own32.png")).unwrap();
    truncated.truncate(60);
    assert_clean_failure(
        &run_img(&write("cut.png", &truncated)),
        "is not a readable image",
    );
    // A PNG header that claims 100000 × 100000 pixels: refused from the header alone.
    let mut bomb = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut bomb, 1, 1);
        enc.set_color(png::ColorType::Rgb);
        enc.write_header()
            .unwrap()
            .write_image_data(&[1, 2, 3])
            .unwrap();
    }
    bomb[16..20].copy_from_slice(&100_000u32.to_be_bytes());
    bomb[20..24].copy_from_slice(&100_000u32.to_be_bytes());
    let out = run_img(&write("bomb.png", &bomb));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        !err.contains("panicked") && err.lines().count() == 1,
        "{err}"
    );
    assert!(
        err.contains("not a readable image") || err.contains("more than attnviz decodes"),
        "{err}"
    );
    // A JPEG cut inside its image data: refused (PIL refuses it too), not filled with grey.
    let jpeg = std::fs::read(image("wide45x37.jpg")).unwrap();
    assert_clean_failure(
        &run_img(&write("cut.jpg", &jpeg[..jpeg.len() * 2 / 3])),
        "truncated",
    );
    // A JPEG whose frame header claims 60000 × 60000 pixels: refused from the header alone.
    let mut huge = jpeg.clone();
    let sof = (0..huge.len() - 1)
        .find(|&i| huge[i] == 0xFF && matches!(huge[i + 1], 0xC0 | 0xC2))
        .expect("a frame header");
    huge[sof + 5..sof + 9].copy_from_slice(&[0xEA, 0x60, 0xEA, 0x60]);
    assert_clean_failure(
        &run_img(&write("huge.jpg", &huge)),
        "60000×60000 pixels, more than attnviz decodes",
    );
    // Garbage after a JPEG's first marker: libjpeg's own reason, in one line.
    assert_clean_failure(
        &run_img(&write(
            "bad.jpg",
            &[0xFF, 0xD8, 0xFF, 0x00, 1, 2, 3, 4, 5, 6],
        )),
        "is not a readable image",
    );
    // An animated PNG: which frame to read is not obvious.
    let mut apng = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut apng, 2, 2);
        enc.set_color(png::ColorType::Rgb);
        enc.set_animated(2, 0).unwrap();
        let mut w = enc.write_header().unwrap();
        w.write_image_data(&[0; 12]).unwrap();
        w.write_image_data(&[255; 12]).unwrap();
    }
    assert_clean_failure(&run_img(&write("moving.png", &apng)), "is animated (APNG)");
    assert_clean_failure(
        &run(&[
            "-m",
            &m,
            "--image",
            &image("own32.png"),
            "--query",
            "4,0",
            "--png",
            "-",
            "--quiet",
        ]),
        "outside the 4×4 patch grid",
    );
    assert_clean_failure(
        &run(&["-m", &m, "--image", &image("own32.png"), "--query", "x"]),
        "is not ROW,COL",
    );
    assert_clean_failure(
        &run(&["-m", &m, "a sentence"]),
        "is a vision model (DeiT); give it an image",
    );
    let bert = repo()
        .join("tests/fixtures/tiny-bert")
        .display()
        .to_string();
    assert_clean_failure(
        &run(&["-m", &bert, "--image", &image("own32.png")]),
        "it reads text, not images",
    );
}

#[test]
fn rollout_over_the_picture_takes_head_fusion_and_a_discard_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let at = |n: &str| dir.path().join(n).display().to_string();
    let m = deit();
    let img = image("big80x64.png");
    let mut pictures = Vec::new();
    for (fusion, ratio, file) in [
        ("mean", "0", "mean.png"),
        ("max", "0.9", "max.png"),
        ("min", "0.5", "min.png"),
    ] {
        let out = run(&[
            "-m",
            &m,
            "--image",
            &img,
            "--figure",
            "rollout",
            "--head-fusion",
            fusion,
            "--discard-ratio",
            ratio,
            "--png",
            &at(file),
            "--quiet",
        ]);
        assert!(out.status.success(), "{fusion}: {}", stderr(&out));
        pictures.push(std::fs::read(at(file)).unwrap());
    }
    // The fusions draw different maps (the titles differ too, but so do the overlays' sizes
    // here: compare decoded pixels of the overlay's area only).
    let overlay = |bytes: &[u8]| {
        let img = image::load_from_memory(bytes).unwrap().to_rgb8();
        image::imageops::crop_imm(&img, 8, 40, 440, 440)
            .to_image()
            .into_raw()
    };
    assert_ne!(overlay(&pictures[0]), overlay(&pictures[1]));
    assert_ne!(overlay(&pictures[1]), overlay(&pictures[2]));
    // The plain rollout is mean fusion with nothing discarded: the same overlay.
    let out = run(&[
        "-m",
        &m,
        "--image",
        &img,
        "--figure",
        "rollout",
        "--png",
        &at("plain.png"),
        "--quiet",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        overlay(&std::fs::read(at("plain.png")).unwrap()),
        overlay(&pictures[0])
    );
    assert_clean_failure(
        &run(&[
            "-m",
            &m,
            "--image",
            &img,
            "--figure",
            "rollout",
            "--discard-ratio",
            "1",
            "--png",
            &at("x.png"),
        ]),
        "--discard-ratio 1 is not between 0 and 1",
    );
    assert_clean_failure(
        &run(&[
            "-m",
            &m,
            "--image",
            &img,
            "--head-fusion",
            "max",
            "--png",
            &at("x.png"),
        ]),
        "add --image FILE and --figure rollout",
    );
    assert!(!dir.path().join("x.png").exists());
}

#[test]
fn an_off_grid_query_is_refused_for_every_output() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let out = run(&[
        "-m",
        &deit(),
        "--image",
        &image("own32.png"),
        "--query",
        "2,7",
        "--html",
        &html.display().to_string(),
        "--quiet",
    ]);
    assert_clean_failure(&out, "patch 2,7 is outside the 4×4 patch grid");
    assert!(!html.exists(), "no report is left behind");
}

#[test]
fn an_unknown_vision_model_type_is_named_not_taken_for_a_missing_tokenizer() {
    let dir = tempfile::tempdir().unwrap();
    let src = repo().join("tests/fixtures/tiny-vit");
    for f in ["model.safetensors", "preprocessor_config.json"] {
        std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
    }
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"model_type": "swin", "architectures": ["SwinModel"], "image_size": 32}"#,
    )
    .unwrap();
    let out = run(&[
        "-m",
        &dir.path().display().to_string(),
        "--image",
        &image("own32.png"),
    ]);
    assert_clean_failure(&out, "model_type 'swin' is not supported");
    assert!(!stderr(&out).contains("tokenizer"), "{}", stderr(&out));
}

fn siglip() -> String {
    repo()
        .join("tests/fixtures/tiny-siglip")
        .display()
        .to_string()
}

/// SigLIP has no class token: every view opens on its attention-pooling head (the probe's
/// attention over the patches, one more attention after the last layer), labelled as such;
/// JSON records it beside the layers, with transformers' weights (make_vision.py).
#[test]
fn siglip_views_show_the_attention_pooling_head() {
    let out = run(&[
        "-m",
        &siglip(),
        "--image",
        &image("own32.png"),
        "--head",
        "2",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("attention-pooling head head 2 · query probe"),
        "{text}"
    );
    assert!(text.contains("no special tokens"), "{text}");
    let out = run(&[
        "-m",
        &siglip(),
        "--image",
        &image("own32.png"),
        "--query",
        "1,2",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("layer 1 mean of heads · query 1,2"), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("a.json");
    let mut args = vec![
        "-m".to_string(),
        siglip(),
        "--image".into(),
        image("own32.png"),
        "--json".into(),
        json.display().to_string(),
        "--quiet".into(),
    ];
    for f in ["head", "layer", "model"] {
        args.extend([
            "--figure".into(),
            f.into(),
            "--png".into(),
            dir.path().join(format!("{f}.png")).display().to_string(),
        ]);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&refs);
        assert!(out.status.success(), "{f}: {}", stderr(&out));
        let png = std::fs::read(dir.path().join(format!("{f}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "{f}");
        args.truncate(7);
    }
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let pooling = &doc["image"]["pooling"];
    assert_eq!(pooling["label"], "attention-pooling head");
    assert_eq!(pooling["query"], "probe");
    assert_eq!(pooling["heads"], 4);
    let got: Vec<f32> = pooling["weights"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
        })
        .collect();
    let reference = candle_core::safetensors::load(
        repo().join("tests/reference/tiny-siglip.safetensors"),
        &candle_core::Device::Cpu,
    )
    .unwrap();
    let want: Vec<f32> = reference["own32.pooling"]
        .flatten_all()
        .and_then(|t| t.to_vec1())
        .unwrap();
    assert_eq!(got.len(), want.len());
    let d = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    // JSON keeps the weights at the export's precision.
    assert!(d <= 1e-4, "the pooling head in JSON differs by {d}");
}

#[test]
fn the_pooling_head_is_refused_where_there_is_none_and_for_rollout() {
    let out = run(&[
        "-m",
        &deit(),
        "--image",
        &image("own32.png"),
        "--query",
        "pool",
    ]);
    assert_clean_failure(&out, "no attention-pooling head");
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("r.png");
    let out = run(&[
        "-m",
        &siglip(),
        "--image",
        &image("own32.png"),
        "--figure",
        "rollout",
        "--png",
        &png.display().to_string(),
        "--quiet",
    ]);
    assert_clean_failure(&out, "pooling head's probe is no token");
    assert!(!png.exists());
}

/// A PNG's pixels, RGB or RGBA as written, with its width and height.
fn pixels(path: &Path) -> (Vec<u8>, u32, u32) {
    let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut px = vec![0u8; reader.output_buffer_size()];
    let info = reader.next_frame(&mut px).unwrap();
    px.truncate(info.buffer_size());
    (px, info.width, info.height)
}

#[test]
fn render_of_an_image_runs_json_or_saved_capture_draws_the_same_views_on_the_picture() {
    let dir = tempfile::tempdir().unwrap();
    let at = |n: &str| dir.path().join(n).display().to_string();
    for (model, picture, json, queries) in [
        (
            deit(),
            image("wide45x37.png"),
            "deit.json",
            vec![None, Some("2,3")],
        ),
        (
            siglip(),
            image("own32.png"),
            "siglip.json",
            vec![None, Some("1,2")],
        ),
    ] {
        let saved = json.replace(".json", ".safetensors");
        let out = run(&["-m", &model, "--image", &picture, "--json", &at(json), "-q"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let out = run(&[
            "-m",
            &model,
            "--image",
            &picture,
            "--save-attention",
            &at(&saved),
            "-q",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        for (query, file) in queries
            .iter()
            .flat_map(|q| [(*q, json.to_string()), (*q, saved.clone())])
        {
            for figure in ["head", "layer", "model"] {
                let mut live = vec!["-m", &model, "--image", &picture];
                let mut again = vec!["render".to_string(), at(&file)];
                if let Some(q) = query {
                    live.extend(["--query", q]);
                    again.extend(["--query".into(), q.into()]);
                }
                let (live_png, again_png) = (at("live.png"), at("again.png"));
                let live_out =
                    run(&[&live[..], &["--figure", figure, "--png", &live_png]].concat());
                let again_args: Vec<&str> = again.iter().map(String::as_str).collect();
                let again_out =
                    run(&[&again_args[..], &["--figure", figure, "--png", &again_png]].concat());
                assert!(live_out.status.success(), "{}", stderr(&live_out));
                assert!(again_out.status.success(), "{}", stderr(&again_out));
                // The terminal view is the same text: the grid, the picture, the special tokens.
                assert_eq!(
                    String::from_utf8_lossy(&live_out.stdout),
                    String::from_utf8_lossy(&again_out.stdout),
                    "{file} {query:?}"
                );
                // The figure is the same picture; the weights' round trip through JSON text
                // moves a few pixels by one level at most.
                let (a, aw, ah) = pixels(Path::new(&live_png));
                let (b, bw, bh) = pixels(Path::new(&again_png));
                assert_eq!((aw, ah), (bw, bh), "{file} {figure} {query:?}");
                let worst = a.iter().zip(&b).map(|(x, y)| x.abs_diff(*y)).max();
                assert!(worst <= Some(1), "{file} {figure} {query:?}: {worst:?}");
            }
        }
    }
    // SigLIP's pooling head comes back: render draws it by default and by name.
    for file in ["siglip.json", "siglip.safetensors"] {
        let out = run(&["render", &at(file), "--query", "pool"]);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("attention-pooling head"),
            "{file}"
        );
    }
    // A picture option on a text run's export is refused in one line.
    let text = at("text.json");
    let out = run(&["-m", &tiny_bert(), "--json", &text, "-q", "hello there"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_clean_failure(
        &run(&["render", &text, "--query", "1,1"]),
        "draw on a picture, and this attention has none",
    );
}

fn tiny_bert() -> String {
    repo()
        .join("tests/fixtures/tiny-bert")
        .display()
        .to_string()
}

fn llava() -> String {
    repo()
        .join("tests/fixtures/tiny-llava")
        .display()
        .to_string()
}

/// Gemma 3 with a picture: `<start_of_image>` becomes the framed run of its 4 pooled image
/// tokens (2 × 2 cells of 16-pixel squares), whose JSON picture says they see each other in
/// full; it reads back with the flag, and LLaVA's pictures have none.
#[test]
fn gemma3_s_pictures_see_themselves_in_full_and_the_json_says_so() {
    let gemma = repo()
        .join("tests/fixtures/tiny-gemma3-vlm")
        .display()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("gemma.json");
    let out = run(&[
        "-m",
        &gemma,
        "--image",
        &image("wide45x37.png"),
        "<start_of_image>What is in this picture?",
        "--quiet",
        "--json",
        &json.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let p = &doc["pictures"][0];
    // `<s> ▁ ↵ ↵ <start_of_image>` first (tests/reference/tiny-gemma3-vlm.json).
    assert_eq!(
        (p["first"].as_u64(), p["count"].as_u64()),
        (Some(5), Some(4))
    );
    assert_eq!(p["bidirectional"], true);
    assert_eq!(p["image"]["grid"], serde_json::json!([2, 2]));
    assert_eq!(p["image"]["patch"], 16);
    let tokens = doc["tokens"].as_array().unwrap();
    assert_eq!(tokens[4], "<start_of_image>");
    assert_eq!(tokens[8], "<img1 1,1>");
    assert_eq!(tokens[9], "<end_of_image>");
    let again = run(&[
        "render",
        &json.display().to_string(),
        "--quiet",
        "--json",
        "-",
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    let back: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(back["pictures"][0]["bidirectional"], true);
    let out = run(&[
        "-m",
        &llava(),
        "--image",
        &image("own32.png"),
        "What is this?",
        "--quiet",
        "--json",
        "-",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["pictures"][0].get("bidirectional").is_none());
    // The terminal's mask note says so for Gemma 3, not for LLaVA.
    let note = "except within a picture: its image tokens see each other in full";
    let shown = |m: &str| {
        let out = run(&["-m", m, "--image", &image("own32.png"), "What is this?"]);
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert!(shown(&gemma).contains(note));
    assert!(!shown(&llava()).contains(note));
}

/// PaliGemma's prompt (its 16 image tokens, BOS, the text and a newline) sees itself in full:
/// the JSON says how many units (`prefix`), `render` reads that back over a sliding window that
/// would otherwise hide those weights, the terminal's mask note says so, and what the model
/// generates stays outside the prefix.
#[test]
fn paligemma_s_prompt_sees_itself_in_full_and_the_json_says_so() {
    let pali = repo()
        .join("tests/fixtures/tiny-paligemma")
        .display()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("pali.json");
    let out = run(&[
        "-m",
        &pali,
        "--image",
        &image("wide45x37.png"),
        "caption en",
        "--generate",
        "3",
        "--quiet",
        "--json",
        &json.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // 16 image tokens, `<s> c a p ti on ▁ en <0x0A>` (tests/reference/tiny-paligemma.json), then
    // the 3 generated ones.
    let tokens = doc["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 25 + 3);
    assert_eq!(doc["prefix"], 25);
    assert_eq!(doc["pictures"][0]["first"], 0);
    assert_eq!(tokens[16], "<s>");
    assert!(doc["layer_masks"][0]["window"].as_u64().unwrap() < 25);
    let again = run(&[
        "render",
        &json.display().to_string(),
        "--quiet",
        "--json",
        "-",
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    let back: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(back["prefix"], 25);
    // Without its prefix the same weights are refused: the window would hide some.
    let mut bare = doc.clone();
    bare.as_object_mut().unwrap().remove("prefix");
    let bare_path = dir.path().join("bare.json");
    std::fs::write(&bare_path, serde_json::to_string(&bare).unwrap()).unwrap();
    let refused = run(&["render", &bare_path.display().to_string(), "--quiet"]);
    assert!(!refused.status.success());
    // The terminal's mask note; LLaVA's run has none.
    let note = "a prefix-LM mask, where they see each other in full";
    let shown = |m: &str, text: &str| {
        let out = run(&["-m", m, "--image", &image("own32.png"), text]);
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert!(shown(&pali, "caption en").contains(note));
    assert!(!shown(&llava(), "What is this?").contains(note));
}

/// Qwen2.5-VL: a prompt without marks gets `<|vision_start|><|image_pad|><|vision_end|>` in
/// front, the pad repeated once per merged token (six for the 84 × 56 px that smart_resize
/// makes of an 80 × 64 picture: 3 × 2 tokens of 28 px); the JSON's picture says so, it
/// generates, and reads back; `--tower` gives the tower's own attention over the 6 × 4 patches,
/// its windowed layers 0 outside each window, its full layer nowhere, and its `image.windows`
/// says which layers are windowed and how large a window is.
#[test]
fn qwen2_5_vl_s_picture_is_its_merged_tokens_between_its_vision_marks() {
    let qwen = repo()
        .join("tests/fixtures/tiny-qwen2_5_vl")
        .display()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("qwen.json");
    let out = run(&[
        "-m",
        &qwen,
        "--image",
        &image("big80x64.png"),
        "describe the red part",
        "--generate",
        "2",
        "--quiet",
        "--json",
        &json.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // tests/reference/tiny-qwen2_5_vl.json's `describe` case: 22 tokens, then 2 generated.
    let tokens = doc["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 22 + 2);
    assert_eq!(tokens[0], "<|vision_start|>");
    assert_eq!(tokens[1], "<img1 0,0>");
    assert_eq!(tokens[6], "<img1 1,2>");
    assert_eq!(tokens[7], "<|vision_end|>");
    let picture = &doc["pictures"][0];
    assert_eq!(
        (picture["first"].clone(), picture["count"].clone()),
        (1.into(), 6.into())
    );
    let image_doc = &picture["image"];
    assert_eq!(image_doc["grid"], serde_json::json!([2, 3]));
    assert_eq!(image_doc["input"], serde_json::json!([84, 56]));
    assert_eq!(image_doc["original"], serde_json::json!([80, 64]));
    assert!(picture.get("bidirectional").is_none());
    assert!(doc.get("prefix").is_none());
    let again = run(&[
        "render",
        &json.display().to_string(),
        "--quiet",
        "--json",
        "-",
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    let out = run(&[
        "-m",
        &qwen,
        "--image",
        &image("big80x64.png"),
        "--tower",
        "--json",
        "-",
        "--full-precision",
        "--quiet",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let tower: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tower["image"]["grid"], serde_json::json!([4, 6]));
    assert_eq!(tower["image"]["cells"][0]["kind"], "patch");
    // Which layers attend within windows of 4 × 4 patches (56 px), and the section reads back.
    let windows = serde_json::json!({"layers": [true, false, true], "side": 4});
    assert_eq!(tower["image"]["windows"], windows);
    let tower_json = dir.path().join("tower.json");
    std::fs::write(&tower_json, &out.stdout).unwrap();
    let back = run(&[
        "render",
        &tower_json.display().to_string(),
        "--quiet",
        "--json",
        "-",
    ]);
    assert!(back.status.success(), "{}", stderr(&back));
    let back: serde_json::Value = serde_json::from_slice(&back.stdout).unwrap();
    assert_eq!(back["image"]["windows"], windows);
    let mut bad = tower.clone();
    bad["image"]["windows"]["layers"] = serde_json::json!([true]);
    let bad_json = dir.path().join("bad.json");
    std::fs::write(&bad_json, serde_json::to_string(&bad).unwrap()).unwrap();
    assert_clean_failure(
        &run(&["render", &bad_json.display().to_string(), "--quiet"]),
        "windows are not one flag per captured layer (3)",
    );
    // The language model's pictures have none (their tokens are the merged ones).
    assert!(image_doc.get("windows").is_none());
    let zeros: Vec<usize> = tower["attention"]
        .as_array()
        .unwrap()
        .iter()
        .map(|layer| {
            layer
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|h| h.as_array().unwrap().iter())
                .flat_map(|r| r.as_array().unwrap().iter())
                .filter(|v| v.as_f64() == Some(0.0))
                .count()
        })
        .collect();
    // 4 heads; a query of the 4 × 4 window misses the 8 patches beside it, one of the 4 × 2
    // window the 16.
    let outside = 4 * (16 * 8 + 8 * 16);
    assert_eq!(zeros, vec![outside, 0, outside]);
}

/// A vision-language model reads TEXT with --image: its image tokens are labelled by picture
/// and grid cell (one band in the terminal's matrix unless expanded), and the JSON's `pictures` says where they are and what the picture was (and
/// reads back); the ids and the attention are the fidelity suite's (`fidelity::multimodal`).
#[test]
fn a_vision_language_model_reads_the_prompt_with_its_picture() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("llava.json");
    let out = run(&[
        "-m",
        &llava(),
        "--image",
        &image("wide45x37.png"),
        "USER: <image>\nWhat is in this picture? ASSISTANT:",
        "--json",
        &json.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The terminal's matrix draws the picture as one band; --expand-pictures, token by token.
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("picture 1 · 4×4: each picture's image tokens as one band"),
        "{shown}"
    );
    assert!(!shown.contains("<img1 0,0>"), "{shown}");
    let expanded = run(&[
        "-m",
        &llava(),
        "--image",
        &image("wide45x37.png"),
        "USER: <image>\nWhat is in this picture? ASSISTANT:",
        "--expand-pictures",
    ]);
    assert!(expanded.status.success(), "{}", stderr(&expanded));
    assert!(String::from_utf8_lossy(&expanded.stdout).contains("<img1 0,0>"));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let pictures = doc["pictures"].as_array().expect("a pictures section");
    assert_eq!(pictures.len(), 1);
    let p = &pictures[0];
    // `<s> ▁ U S E R : ▁` come first (the processor's ids, tests/reference/tiny-llava.json).
    assert_eq!(
        (p["first"].as_u64(), p["count"].as_u64()),
        (Some(8), Some(16))
    );
    assert_eq!(p["image"]["grid"], serde_json::json!([4, 4]));
    assert_eq!(p["image"]["original"], serde_json::json!([45, 37]));
    assert_eq!(p["image"]["source"], "wide45x37.png");
    let tokens = doc["tokens"].as_array().unwrap();
    assert_eq!(tokens[8], "<img1 0,0>");
    assert_eq!(tokens[23], "<img1 3,3>");
    assert!(p["image"]["view_png"]
        .as_str()
        .is_some_and(|s| !s.is_empty()));
    // Read back: `render` draws it again.
    let again = run(&[
        "render",
        &json.display().to_string(),
        "--quiet",
        "--json",
        "-",
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    let back: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(back["pictures"][0]["first"], 8);
    assert_eq!(back["pictures"][0]["image"]["cells"], p["image"]["cells"]);
    // Without a mark, the picture goes before the text.
    let out = run(&[
        "-m",
        &llava(),
        "--image",
        &image("own32.png"),
        "What is this?",
        "--quiet",
        "--json",
        "-",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["pictures"][0]["first"], 1);
}

/// The reference's case `name` (tests/reference/make_llava.py writes it from transformers'
/// processor and model).
fn llava_case(name: &str) -> serde_json::Value {
    let path = repo().join("tests/reference/tiny-llava.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no case {name}"))
        .clone()
}

/// `--image` repeated gives a vision-language model its pictures in order: the processor's
/// ids, and one `pictures` entry for each, where the processor put its image tokens.
#[test]
fn a_vision_language_model_reads_several_pictures_given_by_repeated_image() {
    let case = llava_case("two_images");
    let names: Vec<&str> = case["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let (first, second) = (image(names[0]), image(names[1]));
    let out = run(&[
        "-m",
        &llava(),
        "--image",
        &first,
        "--image",
        &second,
        case["text"].as_str().unwrap(),
        "--quiet",
        "--json",
        "-",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["input_ids"], case["input_ids"]);
    let pictures = doc["pictures"].as_array().expect("a pictures section");
    let runs: Vec<serde_json::Value> = pictures
        .iter()
        .map(|p| serde_json::json!([p["first"], p["count"]]))
        .collect();
    assert_eq!(serde_json::Value::from(runs), case["image_token_runs"]);
    let sources: Vec<&serde_json::Value> = pictures.iter().map(|p| &p["image"]["source"]).collect();
    assert_eq!(sources, [&case["images"][0], &case["images"][1]]);
}

/// `-` reads a vision-language model's prompt from standard input, as it reads a text model's.
#[test]
fn a_vision_language_model_reads_its_prompt_from_standard_input() {
    use std::io::Write;
    use std::process::Stdio;
    let case = llava_case("describe");
    let mut child = crate::support::cli::attnviz()
        .args(["-m", &llava(), "--image"])
        .arg(image(case["images"][0].as_str().unwrap()))
        .args(["-", "--quiet", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(
        child.stdin.take().unwrap(),
        "{}",
        case["text"].as_str().unwrap()
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["input_ids"], case["input_ids"]);
}

#[test]
fn a_vision_language_model_refuses_what_it_cannot_give_yet_in_one_line() {
    let m = llava();
    let pic = image("own32.png");
    assert_clean_failure(
        &run(&[
            "-m",
            &m,
            "--image",
            &pic,
            "USER: <image> <image> two?",
            "--quiet",
        ]),
        "the prompt marks 2 pictures with <image> but 1 was given",
    );
    assert_clean_failure(
        &run(&["-m", &m, "--image", &pic, "hi", "--alti", "--quiet"]),
        "--alti: ALTI is not available with --image (vision and vision-language models) yet",
    );
    assert_clean_failure(
        &run(&["-m", &m, "--image", &pic, "hi", "--lens"]),
        "the logit lens is not available for vision-language models yet",
    );
    // A vision model reads its picture alone, and one.
    assert_clean_failure(
        &run(&["-m", &deit(), "--image", &pic, "a caption"]),
        "it reads the picture alone, not text with it",
    );
    assert_clean_failure(
        &run(&[
            "-m",
            &deit(),
            "--image",
            &pic,
            "--image",
            &image("big80x64.png"),
            "--quiet",
        ]),
        "is a vision model (DeiT), which reads one picture; give one --image",
    );
}

/// `--query N` draws token N's attention to a vision-language model's image tokens over the
/// picture, for a head, a layer's heads and the whole model; a patch or an unknown token is
/// refused in one line.
#[test]
fn a_token_s_attention_is_drawn_over_the_picture_it_read() {
    let dir = tempfile::tempdir().unwrap();
    let m = llava();
    let pic = image("big80x64.png");
    let prompt = "USER: <image>\nWhere is the red part? ASSISTANT:";
    let mut sizes = Vec::new();
    for figure in ["mean", "layer", "model"] {
        let png = dir.path().join(format!("{figure}.png"));
        let out = run(&[
            "-m",
            &m,
            "--image",
            &pic,
            prompt,
            "--png",
            &png.display().to_string(),
            "--figure",
            figure,
            "--query",
            "30",
            "--quiet",
        ]);
        assert!(out.status.success(), "{figure}: {}", stderr(&out));
        let (_, w, h) = pixels(&png);
        sizes.push((w, h));
    }
    // A head's overlay, a layer's 4 heads and the 2 × 4 model grid are different figures.
    assert!(sizes[0] != sizes[1] && sizes[1] != sizes[2], "{sizes:?}");
    // Without --query the matrix over the whole sequence is drawn, not the picture.
    let matrix = dir.path().join("matrix.png");
    let out = run(&[
        "-m",
        &m,
        "--image",
        &pic,
        prompt,
        "--png",
        &matrix.display().to_string(),
        "--quiet",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_ne!(pixels(&matrix).1, sizes[0].0);
    assert_clean_failure(
        &run(&[
            "-m", &m, "--image", &pic, "hi", "--png", "-", "--query", "0,0", "-q",
        ]),
        "a vision-language model's query is a token's number N",
    );
    assert_clean_failure(
        &run(&[
            "-m", &m, "--image", &pic, "hi", "--png", "-", "--query", "999", "-q",
        ]),
        "token 999 is not one of the",
    );
}

/// The terminal view of `--query N` prints where on the picture token N looked, with the row's
/// share on the picture as the JSON's attention gives it (the last layer's mean of heads over
/// the picture's units).
#[test]
fn the_terminal_shows_the_share_of_a_token_s_row_on_the_picture() {
    let m = llava();
    let pic = image("big80x64.png");
    let prompt = "USER: <image>\nWhere is the red part? ASSISTANT:";
    let out = run(&["-m", &m, "--image", &pic, prompt, "--query", "30"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = String::from_utf8_lossy(&out.stdout).to_string();
    let line = shown
        .lines()
        .find(|l| l.contains("the row: picture 1 "))
        .unwrap_or_else(|| panic!("no share line in {shown}"));
    let percent: f64 = line
        .split("picture 1 ")
        .nth(1)
        .and_then(|r| r.split('%').next())
        .and_then(|v| v.parse().ok())
        .expect("a percentage");
    let out = run(&["-m", &m, "--image", &pic, prompt, "--quiet", "--json", "-"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &doc["pictures"][0];
    let (first, count) = (
        p["first"].as_u64().unwrap() as usize,
        p["count"].as_u64().unwrap() as usize,
    );
    let layers = doc["attention"].as_array().unwrap();
    let heads = layers.last().unwrap().as_array().unwrap();
    let mut on = 0f64;
    for head in heads {
        let row = head[30].as_array().unwrap();
        on += row[first..first + count]
            .iter()
            .map(|v| v.as_f64().unwrap())
            .sum::<f64>()
            / heads.len() as f64;
    }
    assert!(
        (on * 100.0 - percent).abs() <= 0.5,
        "the view says {percent}%, the JSON {:.2}%",
        on * 100.0
    );
}

/// `--query generated` after `--generate`: a line per generated token in the terminal (its
/// shares, the patch it looked at most) and a strip of overlays in the figure; without a
/// generation it is refused in one line.
#[test]
fn each_generated_token_s_look_at_the_picture_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let m = llava();
    let pic = image("big80x64.png");
    let prompt = "USER: <image>\nWhere is the red part? ASSISTANT:";
    let png = dir.path().join("strip.png");
    let json = dir.path().join("run.json");
    let out = run(&[
        "-m",
        &m,
        "--image",
        &pic,
        prompt,
        "--generate",
        "6",
        "--query",
        "generated",
        "--png",
        &png.display().to_string(),
        "--json",
        &json.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = String::from_utf8_lossy(&out.stdout).to_string();
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let generated: Vec<usize> = doc["generated"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, g)| g.as_bool() == Some(true))
        .map(|(i, _)| i)
        .collect();
    assert!(!generated.is_empty());
    let lines: Vec<&str> = shown
        .lines()
        .filter(|l| l.contains("picture 1 most at"))
        .collect();
    assert_eq!(lines.len(), generated.len(), "{shown}");
    for (line, u) in lines.iter().zip(&generated) {
        assert!(line.trim_start().starts_with(&u.to_string()), "{line}");
    }
    let (_, w, _) = pixels(&png);
    assert!(
        w > 600,
        "a strip of {} overlays is {w} px wide",
        generated.len()
    );
    assert_clean_failure(
        &run(&["-m", &m, "--image", &pic, prompt, "--query", "generated"]),
        "no token of this run was generated",
    );
}

/// `--tower`: a vision-language model's vision tower alone, as a vision model's run: its
/// attention over the picture's patches and class token at every layer and head equals
/// transformers' (tests/reference/tiny-llava.safetensors, case `describe`), and the picture
/// views draw it; what only the language model gives is refused in one line.
#[test]
fn the_vision_tower_s_own_attention_is_a_vision_model_s_run() {
    let m = llava();
    let pic = image("wide45x37.png");
    let out = run(&[
        "-m",
        &m,
        "--image",
        &pic,
        "--tower",
        "--json",
        "-",
        "--full-precision",
        "--quiet",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["image"]["cells"][0]["kind"], "class");
    assert_eq!(doc["image"]["grid"], serde_json::json!([4, 4]));
    let ours: Vec<f32> = doc["attention"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l.as_array().unwrap().iter())
        .flat_map(|h| h.as_array().unwrap().iter())
        .flat_map(|r| r.as_array().unwrap().iter())
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    let tensors = candle_core::safetensors::load(
        repo().join("tests/reference/tiny-llava.safetensors"),
        &candle_core::Device::Cpu,
    )
    .unwrap();
    let want: Vec<f32> = tensors["describe.vision_attentions"]
        .flatten_all()
        .and_then(|t| t.to_vec1::<f32>())
        .unwrap();
    assert_eq!(ours.len(), want.len(), "3 layers × 4 heads × 17 × 17");
    let d = ours
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(
        d <= 1e-5,
        "the tower's attention differs from transformers' by {d}"
    );
    let shown = run(&["-m", &m, "--image", &pic, "--tower"]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    assert!(String::from_utf8_lossy(&shown.stdout).contains("query CLS"));
    assert_clean_failure(
        &run(&["-m", &m, "--image", &pic, "--tower", "--generate", "3"]),
        "the vision tower reads the picture alone",
    );
    assert_clean_failure(
        &run(&["-m", &m, "--tower", "hi"]),
        "give one --image (0 given)",
    );
}

/// --expand-pictures without a picture is refused in one line that says what to add.
#[test]
fn expand_pictures_without_a_picture_is_refused() {
    let out = run(&["-m", &llava(), "What is this?", "--expand-pictures"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("--expand-pictures") && err.contains("--image FILE"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// SmolVLM splits a picture into tiles plus its global view: a prompt without a mark gets the
/// picture in front (the marked case's ids, `tests/reference/tiny-smolvlm.json`), each tile and
/// the global view is a run of its own labelled by tile (`<img1 r1c2 0,1>`, `<img1 whole 0,0>`),
/// the JSON's pictures say which tile of which picture each run is and read back through
/// `render`, the terminal counts one picture, and `--chat` writes the pictures where the
/// template puts them.
#[test]
fn smolvlm_splits_a_picture_into_tiles_and_says_which_run_is_which() {
    let smol = repo()
        .join("tests/fixtures/tiny-smolvlm")
        .display()
        .to_string();
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("tests/reference/tiny-smolvlm.json")).unwrap(),
    )
    .unwrap();
    let case = |name: &str| {
        reference["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
            .clone()
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("smol.json");
    let out = run(&[
        "-m",
        &smol,
        "--image",
        &image("wide45x37.png"),
        "describe the picture",
        "--json",
        &json.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("picture 1 (20 image tokens, 5 runs: tiles and whole views)"),
        "{shown}"
    );
    assert!(shown.contains("picture 1 · tile 1,2 · 2×2"), "{shown}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["input_ids"], case("marked")["input_ids"]);
    let pictures = doc["pictures"].as_array().unwrap();
    let tiles: Vec<serde_json::Value> = pictures.iter().map(|p| p["tile"].clone()).collect();
    assert_eq!(
        tiles,
        vec![
            serde_json::json!({"picture": 1, "at": [0, 0], "of": [2, 2]}),
            serde_json::json!({"picture": 1, "at": [0, 1], "of": [2, 2]}),
            serde_json::json!({"picture": 1, "at": [1, 0], "of": [2, 2]}),
            serde_json::json!({"picture": 1, "at": [1, 1], "of": [2, 2]}),
            serde_json::json!({"picture": 1, "of": [2, 2]}),
        ]
    );
    let firsts: Vec<u64> = pictures
        .iter()
        .map(|p| p["first"].as_u64().unwrap())
        .collect();
    let runs: Vec<u64> = case("marked")["image_token_runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[0].as_u64().unwrap())
        .collect();
    assert_eq!(firsts, runs);
    let tokens = doc["tokens"].as_array().unwrap();
    assert_eq!(tokens[runs[1] as usize + 1], "<img1 r1c2 0,1>");
    assert_eq!(tokens[runs[4] as usize], "<img1 whole 0,0>");
    // Read back: the same runs and tiles.
    let again = run(&[
        "render",
        &json.display().to_string(),
        "--quiet",
        "--json",
        "-",
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    let back: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(back["pictures"], doc["pictures"]);
    // The chat case: the template's `User:<image>…`, as transformers' processor renders it.
    let chat = run(&[
        "-m",
        &smol,
        "--image",
        &image("tall24x60.png"),
        "What is in it?",
        "--chat",
        "--quiet",
        "--json",
        "-",
    ]);
    assert!(chat.status.success(), "{}", stderr(&chat));
    let doc: serde_json::Value = serde_json::from_slice(&chat.stdout).unwrap();
    assert_eq!(doc["input_ids"], case("chat")["input_ids"]);
    assert_eq!(doc["pictures"][0]["tile"]["of"], serde_json::json!([2, 1]));
}

/// Gemma 3's pan-and-scan: a processor that asks for it (tiny-gemma3-vlm-pas) gives a long
/// picture whole and then as its crops, each a run of its own (the reference's ids, from
/// `make_gemma3_vlm.py --variant pan-and-scan`), labelled `<img1 crop2 …>`, said in the JSON
/// (`tile.crop`) and read back by `render`; `--pan-and-scan` asks for it with the processor's
/// defaults (crops of 256 pixels at least); other models and runs without a picture refuse it in
/// one line.
#[test]
fn gemma3_pan_and_scan_gives_the_whole_picture_then_its_crops() {
    let fixture = |name: &str| {
        repo()
            .join("tests/fixtures")
            .join(name)
            .display()
            .to_string()
    };
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("tests/reference/tiny-gemma3-vlm-pas.json")).unwrap(),
    )
    .unwrap();
    let case = reference["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "tall_and_square")
        .unwrap()
        .clone();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("pas.json");
    let out = run(&[
        "-m",
        &fixture("tiny-gemma3-vlm-pas"),
        "--image",
        &image("tall24x60.png"),
        "--image",
        &image("own32.png"),
        case["text"].as_str().unwrap(),
        "--json",
        &json.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("pictures 1, 2 (20 image tokens, 5 runs: whole views and crops)"),
        "{shown}"
    );
    assert!(shown.contains("picture 1 · crop 3 · 2×2"), "{shown}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["input_ids"], case["input_ids"]);
    let pictures = doc["pictures"].as_array().unwrap();
    let tiles: Vec<serde_json::Value> = pictures.iter().map(|p| p["tile"].clone()).collect();
    assert_eq!(
        tiles,
        vec![
            serde_json::json!({"picture": 1, "of": [3, 1], "crop": true}),
            serde_json::json!({"picture": 1, "at": [0, 0], "of": [3, 1], "crop": true}),
            serde_json::json!({"picture": 1, "at": [1, 0], "of": [3, 1], "crop": true}),
            serde_json::json!({"picture": 1, "at": [2, 0], "of": [3, 1], "crop": true}),
            serde_json::json!({"picture": 2, "of": [0, 0], "crop": true}),
        ]
    );
    let firsts: Vec<u64> = pictures
        .iter()
        .map(|p| p["first"].as_u64().unwrap())
        .collect();
    let runs: Vec<u64> = case["image_token_runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[0].as_u64().unwrap())
        .collect();
    assert_eq!(firsts, runs);
    let tokens = doc["tokens"].as_array().unwrap();
    assert_eq!(tokens[runs[0] as usize], "<img1 whole 0,0>");
    assert_eq!(tokens[runs[2] as usize + 1], "<img1 crop2 0,1>");
    assert_eq!(tokens[runs[4] as usize], "<img2 whole 0,0>");
    let again = run(&[
        "render",
        &json.display().to_string(),
        "--quiet",
        "--json",
        "-",
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    let back: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(back["pictures"], doc["pictures"]);

    // Token 80's look at the picture: its whole view, then its three crops put back together
    // (3 crops of 2 × 2 image tokens, one above the other: a 6 × 2 grid), in the terminal and as
    // a figure of both side by side.
    let png = dir.path().join("look.png");
    let out = run(&[
        "-m",
        &fixture("tiny-gemma3-vlm-pas"),
        "--image",
        &image("tall24x60.png"),
        "Where is it? <start_of_image> Tell me.",
        "--query",
        "80",
        "--png",
        &png.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("picture 1 · whole · layer 2"), "{shown}");
    let stitched = shown
        .split("picture 1 · its crops put together")
        .nth(1)
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(stitched.contains("6×2 patches"), "{shown}");
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png).unwrap()));
    let info = decoder.read_info().unwrap().info().clone();
    // The crops together (448 px high, 149 wide) and the whole view beside them (224 px).
    assert!(info.width > 149 + 224 && info.height > 448 + 52, "{info:?}");

    // --pan-and-scan on a processor that does not ask for it: the defaults, under which a
    // 600 × 300 picture is cut into two crops of 300 × 300 (and the small one is not cut).
    let wide = dir.path().join("wide600x300.png");
    let mut bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut bytes, 600, 300);
        enc.set_color(png::ColorType::Rgb);
        let px: Vec<u8> = (0..600 * 300)
            .flat_map(|i| [(i % 600 / 3) as u8, (i / 600) as u8, 128])
            .collect();
        enc.write_header().unwrap().write_image_data(&px).unwrap();
    }
    std::fs::write(&wide, bytes).unwrap();
    let runs_of = |args: &[&str]| -> Vec<serde_json::Value> {
        let mut all = vec!["-m", "", "--quiet", "--json", "-", "Look: <start_of_image>"];
        let plain = fixture("tiny-gemma3-vlm");
        all[1] = &plain;
        all.extend_from_slice(args);
        let out = run(&all);
        assert!(out.status.success(), "{}", stderr(&out));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        doc["pictures"].as_array().unwrap().clone()
    };
    let wide = wide.display().to_string();
    assert_eq!(runs_of(&["--image", &wide]).len(), 1);
    let cut = runs_of(&["--image", &wide, "--pan-and-scan"]);
    assert_eq!(cut.len(), 3);
    assert_eq!(
        cut[2]["tile"],
        serde_json::json!({"picture": 1, "at": [0, 1], "of": [1, 2], "crop": true})
    );
    assert_eq!(
        runs_of(&["--image", &image("tall24x60.png"), "--pan-and-scan"]).len(),
        1
    );

    let lines = dir.path().join("lines.txt");
    std::fs::write(&lines, "a picture\n").unwrap();
    for (args, says) in [
        (
            vec![
                "-m".to_string(),
                fixture("tiny-smolvlm"),
                "--image".into(),
                image("tall24x60.png"),
                "--pan-and-scan".into(),
                "describe".into(),
            ],
            "only Gemma 3's processor writes them",
        ),
        (
            vec![
                "-m".to_string(),
                fixture("tiny-gemma3-vlm"),
                "--pan-and-scan".into(),
                "describe".into(),
            ],
            "--pan-and-scan cuts pictures into crops; add --image FILE",
        ),
        (
            vec![
                "-m".to_string(),
                fixture("tiny-gemma3-vlm"),
                "--input".into(),
                lines.display().to_string(),
                "--out-dir".into(),
                dir.path().join("corpus").display().to_string(),
                "--pan-and-scan".into(),
            ],
            "--pan-and-scan is for a single input",
        ),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&args);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(err.contains(says), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    assert!(
        !dir.path().join("corpus").exists(),
        "a refused corpus run writes nothing"
    );
}
