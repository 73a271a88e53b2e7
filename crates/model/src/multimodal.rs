//! The [`Model`] side of the vision-language families: pictures and a prompt through the
//! model's image processor, its vision tower and projector, and its language model, with the
//! language model's attention over the whole sequence (each picture a run of image tokens,
//! labelled by picture and grid cell) and each picture's vision-tower attention.
//!
//! Where the pictures go: the prompt marks each with the model's image token (`<image>` for
//! LLaVA), as transformers' processors read it; a prompt that marks none gets one `<image>` line
//! per picture in front of its text, which is where the checkpoints' chat templates put them.
//! Each mark is then repeated once per image token of its picture, as the processor does.
//! Gemma 3 marks a picture with `<start_of_image>`, which its processor writes out as the
//! picture's whole framed run before tokenizing ([`Framing`]); the mark goes straight before the
//! text when the prompt has none.

use super::{
    EncodeOptions, Encoding, Error, ForwardError, GenerateOptions, InputError, Model,
    SequenceCapture,
};
use crate::attention::image::{Cell, ImageInput, PictureTokens, Tile, Windows};
use crate::attention::{Attention, ModelInfo, Role};
use crate::blocks::network::{Framing, Inserted, Multimodal};
use crate::cancel::Cancel;
use crate::pixels::{ImageSource, PixelsError, Prepared, Tiled};
use crate::tokenize::{self, Encoded};

/// A vision-language model's run: the language model's attention over the prompt with its
/// pictures (and what it generated), and each picture's vision-tower attention.
pub struct MultimodalEncoding {
    /// The language model's, with [`Attention::pictures`] saying which tokens are which
    /// picture's.
    pub encoding: Encoding,
    /// Each picture's vision-tower self-attention (each frame's, for a tiled picture), in the
    /// pictures' order, labelled by patch as a vision model's ([`Attention::image`]), when
    /// [`EncodeOptions::towers`] asked; else empty.
    pub towers: Vec<Attention>,
}

/// One picture, preprocessed and run through the tower.
struct Seen {
    source: String,
    patch: usize,
    prepared: Prepared,
    grid: [usize; 2],
    cells: Vec<Cell>,
    /// Patches per side that one image token covers.
    pool: usize,
    embeddings: Vec<f32>,
    tower: Attention,
    /// Which tile of which picture it is, when the processor tiles pictures.
    tile: Option<Tile>,
}

/// Idefics3's marks around a tile's image tokens (its processor writes them as text).
const AROUND_TILE: &str = "<fake_token_around_image>";
/// Idefics3's mark before the global view's image tokens.
const GLOBAL_VIEW: &str = "<global-img>";

impl Model {
    /// Whether the model reads pictures together with text (a vision-language family).
    pub fn is_multimodal(&self) -> bool {
        self.network.multimodal().is_some()
    }

    /// Run `text` with `images` (at least one) through a vision-language model, generating
    /// first when `generate` asks (greedy, with the pictures in the prompt), and capture the
    /// language model's attention over the whole sequence and each picture's tower attention.
    /// Checked between rows while decoding, between layers while running.
    pub fn encode_with_images(
        &self,
        text: &str,
        images: &[ImageSource],
        opts: &EncodeOptions,
        generate: Option<GenerateOptions>,
        progress: &mut (dyn FnMut(usize) + Send),
        cancel: &Cancel,
    ) -> Result<MultimodalEncoding, Error> {
        let mm = self
            .network
            .multimodal()
            .ok_or_else(|| self.image_refusal())?;
        if images.is_empty() {
            return Err(InputError::NoPicture {
                model: self.info.name().to_string(),
            }
            .into());
        }
        let tiled = mm.tiled();
        let framing = mm.framing();
        let every: Vec<usize> = (0..mm.tower_architecture().layers).collect();
        let tower_layers: &[usize] = if opts.towers { &every } else { &[] };
        // Each picture's frames (its tiles and global view, or the picture alone), in order.
        let mut tilings = Vec::with_capacity(images.len());
        let mut seen = Vec::new();
        let crop_words = framing.and_then(|f| f.crops);
        if opts.pan_and_scan && crop_words.is_none() {
            return Err(InputError::PanAndScan {
                model: self.info.name().to_string(),
                asked: true,
            }
            .into());
        }
        for (i, image) in images.iter().enumerate() {
            let frames = self.frames(image, opts.pan_and_scan, cancel)?;
            if frames.whole_first && frames.frames.len() > 1 && crop_words.is_none() {
                return Err(InputError::PanAndScan {
                    model: self.info.name().to_string(),
                    asked: false,
                }
                .into());
            }
            tilings.push(frames.tiles);
            // Under pan-and-scan every picture says which it is, cut or not, so that runs
            // number pictures, not runs.
            let parts = tiled || frames.whole_first;
            let places: Vec<_> = (0..frames.frames.len()).map(|k| frames.at(k)).collect();
            for (prepared, at) in frames.frames.into_iter().zip(places) {
                let tile = parts.then(|| Tile {
                    picture: i + 1,
                    at,
                    of: frames.tiles,
                    crop: frames.whole_first,
                });
                seen.push(self.see(
                    mm,
                    image.name(),
                    prepared,
                    tile,
                    tower_layers,
                    opts.max_memory,
                    cancel,
                )?);
            }
        }
        let image_token = mm.image_token();
        let mark = self
            .tokenizer
            .token(framing.map_or(image_token, |f| f.mark))
            .unwrap_or_else(|| "<image>".to_string());
        let pictures_given = images.len();
        let generate = generate.unwrap_or_default();
        let new = generate.max_new_tokens;
        let longest = self.max_positions();
        let room = longest.saturating_sub(new);
        let marked = |t: &str| t.matches(mark.as_str()).count();
        let prefix_lm = mm.prefix_lm();
        let mut prompt = text.to_string();
        let mut prompt = if generate.chat {
            // As a processor's apply_chat_template: the message as parts, the pictures first
            // unless the prompt marks them, and the template writes their marks.
            if marked(&prompt) == 0 {
                prompt = format!("{}{prompt}", mark.repeat(pictures_given));
            }
            self.chat_prompt_with_images(&prompt, &mark)?
        } else {
            if marked(&prompt) == 0 {
                // Where the chat templates put them: LLaVA's on a line each, Gemma 3's (whose
                // processor frames them with blank lines), PaliGemma's and SmolVLM's straight
                // before the text, Qwen2.5-VL's between its vision marks.
                let line = if framing.is_some() || prefix_lm || tiled {
                    ""
                } else {
                    "\n"
                };
                let one = match mm.wrapping() {
                    Some([open, close]) => {
                        let token = |id: u32| self.tokenizer.token(id).unwrap_or_default();
                        format!("{}{mark}{}", token(open), token(close))
                    }
                    None => format!("{mark}{line}"),
                };
                prompt = format!("{}{prompt}", one.repeat(pictures_given));
            }
            prompt
        };
        if prefix_lm {
            prompt = self.prefix_layout(&prompt, &mark);
        }
        let typed = marked(&prompt);
        if (framing.is_some() || tiled) && typed != pictures_given {
            return Err(InputError::PictureMarks {
                mark,
                marks: typed,
                pictures: pictures_given,
            }
            .into());
        }
        let framed = match framing {
            Some(f) => Some(self.framed(&prompt, &mark, f, image_token, &seen, &tilings)),
            None if tiled => Some(self.tiled_text(&prompt, &mark, &tilings, seen[0].cells.len())),
            None => None,
        };
        let tokenized = framed.as_deref().unwrap_or(&prompt);
        // As the processors tokenize a chat template's prompt (`apply_chat_template(tokenize=
        // True)`): without adding BOS when the template wrote it (Gemma 3), with it otherwise
        // (LLaVA's template writes none).
        let starts = &self.tokenizer.specials().start;
        let template_bos = starts
            .iter()
            .filter_map(|&id| self.tokenizer.token(id))
            .any(|bos| !bos.is_empty() && tokenized.starts_with(&bos));
        let enc = if (generate.chat && template_bos) || prefix_lm {
            self.tokenizer
                .encode_without_specials(tokenized, longest, false)
        } else {
            self.tokenizer.encode(tokenized, None, longest, false)
        }?;
        let count = |id: u32| enc.ids.iter().filter(|&&x| x == id).count();
        // Each picture's runs whole (none cut off, none typed in the prompt).
        let tokens: usize = seen.iter().map(|s| s.cells.len()).sum();
        let whole = count(image_token) == tokens;
        let marks = match framing {
            // Each frame (a picture, or its whole view and its crops) one framed run.
            Some(f) if whole && count(f.mark) == seen.len() => pictures_given,
            Some(_) => 0,
            None if tiled => {
                if whole && image_runs(&enc.ids, image_token) == seen.len() {
                    pictures_given
                } else {
                    0
                }
            }
            None => count(image_token),
        };
        if marks != pictures_given {
            return Err(InputError::PictureMarks {
                mark,
                marks,
                pictures: pictures_given,
            }
            .into());
        }
        let (enc, pictures, mut inserted) = expand(
            enc,
            &seen,
            image_token,
            framing.is_some() || tiled,
            mm.bidirectional_pictures(),
            self.info.hidden_size,
        );
        if enc.ids.len() > room {
            return Err(Error::PromptTooLong {
                tokens: enc.ids.len(),
                new,
                longest,
            });
        }
        let layers = opts.layers.as_ref().map_or(self.info.layers, Vec::len);
        self.check_capture_size(
            &[enc.ids.len() + new],
            opts.capture_query_key,
            layers,
            false,
            opts.max_memory,
        )?;
        let prompt_len = enc.ids.len();
        let prefix = if prefix_lm { prompt_len } else { 0 };
        inserted.prefix = prefix;
        if mm.multimodal_positions() {
            inserted.positions = rope_index(prompt_len, &pictures);
        }
        let (full, generation) = if new > 0 {
            let generation = self.generate_from(&enc.ids, Some(&inserted), new, progress)?;
            let full = self.tokenizer.continuation(&enc, generation.generated());
            (full, Some(generation))
        } else {
            (enc, None)
        };
        let recorded = tokenize::cut_to_bytes(&prompt, tokenize::byte_limit(room)).to_string();
        let generated_from = if generation.is_some() { prompt_len } else { 0 };
        let mut encoding = self.encode_tokens_with(
            &recorded,
            None,
            full,
            opts,
            generated_from,
            None,
            Some(&inserted),
        )?;
        encoding.generation = generation;
        encoding.attention = encoding
            .attention
            .with_pictures(pictures)
            .and_then(|a| a.with_prefix(prefix))
            .map_err(ForwardError::Shape)?;
        let towers = if opts.towers {
            seen.into_iter().map(|s| s.tower).collect()
        } else {
            Vec::new()
        };
        Ok(MultimodalEncoding { encoding, towers })
    }

    /// A vision-language model's vision tower alone over `image`: its self-attention at the
    /// layers `opts` asks for (every layer by default), labelled by patch as a vision model's
    /// ([`Attention::image`]); the projector and the language model do not run.
    pub fn encode_tower(
        &self,
        image: &ImageSource,
        opts: &EncodeOptions,
        cancel: &Cancel,
    ) -> Result<Encoding, Error> {
        let mm = self
            .network
            .multimodal()
            .ok_or_else(|| self.image_refusal())?;
        // A tiled picture's tower view is its global view (the whole picture).
        let prepared = self
            .frames(image, false, cancel)?
            .into_whole()
            .ok_or(InputError::NoImageProcessor)?;
        let every: Vec<usize> = (0..mm.tower_architecture().layers).collect();
        let layers = opts.layers.as_deref().unwrap_or(&every);
        if layers.is_empty() {
            return Err(InputError::NoLayers.into());
        }
        let seen = self.see(
            mm,
            image.name(),
            prepared,
            None,
            layers,
            opts.max_memory,
            cancel,
        )?;
        Ok(Encoding {
            attention: seen.tower,
            hidden: Vec::new(),
            truncated_from: None,
            bytes_cut: false,
            generation: None,
            values: None,
            head_outputs: None,
            summary: None,
        })
    }

    /// `prompt` as PaliGemma's processor lays it out: BOS after the last picture's `mark`, and
    /// a newline at the end.
    fn prefix_layout(&self, prompt: &str, mark: &str) -> String {
        let bos = self
            .tokenizer
            .specials()
            .start
            .iter()
            .min()
            .and_then(|&id| self.tokenizer.token(id))
            .unwrap_or_default();
        let after = prompt.rfind(mark).map_or(0, |at| at + mark.len());
        format!("{}{bos}{}\n", &prompt[..after], &prompt[after..])
    }

    /// `prompt` with each `mark` written out as the processor frames a picture's image tokens
    /// (Gemma 3's `full_image_sequence`); a picture cut into crops (`tilings`) as its whole
    /// view's run and its crops' runs, in the processor's words ([`Framing::crops`]).
    fn framed(
        &self,
        prompt: &str,
        mark: &str,
        framing: Framing,
        image_token: u32,
        seen: &[Seen],
        tilings: &[[usize; 2]],
    ) -> String {
        let token = |id: u32| self.tokenizer.token(id).unwrap_or_default();
        let (image, close) = (token(image_token), token(framing.close));
        let around = framing.around;
        let mut out = String::with_capacity(prompt.len());
        let mut frames = seen.iter();
        let mut run = || {
            let n = frames.next().map_or(0, |s| s.cells.len());
            format!("{around}{mark}{}{close}{around}", image.repeat(n))
        };
        let mut parts = prompt.split(mark);
        out.push_str(parts.next().unwrap_or_default());
        for (i, part) in parts.enumerate() {
            let [rows, cols] = tilings.get(i).copied().unwrap_or_default();
            match framing.crops {
                Some([whole, crops]) if rows * cols > 0 => {
                    out.push_str(&format!("{whole}{}{crops}", run()));
                    let runs: Vec<String> = (0..rows * cols).map(|_| run()).collect();
                    out.push_str(&runs.join(" "));
                }
                _ => out.push_str(&run()),
            }
            out.push_str(part);
        }
        out
    }

    /// Decode and preprocess one picture: the frames the tower reads (its tiles and global
    /// view, when the processor tiles pictures; the whole picture and its crops, under
    /// pan-and-scan, which `pan_and_scan` turns on; else the picture alone).
    fn frames(
        &self,
        image: &ImageSource,
        pan_and_scan: bool,
        cancel: &Cancel,
    ) -> Result<Tiled, Error> {
        let processor = self
            .image_processor
            .as_ref()
            .ok_or(InputError::NoImageProcessor)?;
        let asked;
        let processor = if pan_and_scan && processor.pan_and_scan.is_none() {
            asked = crate::pixels::ImageProcessor {
                pan_and_scan: Some(crate::pixels::PanAndScan::DEFAULT),
                ..processor.clone()
            };
            &asked
        } else {
            processor
        };
        processor
            .prepare_tiles_until(image, cancel)
            .map_err(|e| match e {
                PixelsError::Cancelled { .. } => Error::Cancelled,
                e => InputError::Image(e).into(),
            })
    }

    /// `prompt` with each `mark` written out as Idefics3's processor writes a tiled picture:
    /// per row of tiles, each tile's run of `per_tile` image tokens behind
    /// `<fake_token_around_image><row_r_col_c>`, a newline after each row, then a newline and
    /// the global view's run between `<fake_token_around_image><global-img>` and
    /// `<fake_token_around_image>` (the global view alone, so framed, when it was not split).
    fn tiled_text(
        &self,
        prompt: &str,
        mark: &str,
        tilings: &[[usize; 2]],
        per_tile: usize,
    ) -> String {
        let run = mark.repeat(per_tile);
        let mut out = String::with_capacity(prompt.len());
        let mut parts = prompt.split(mark);
        out.push_str(parts.next().unwrap_or_default());
        for (part, &[rows, cols]) in parts.zip(tilings) {
            if rows * cols > 0 {
                for r in 1..=rows {
                    for c in 1..=cols {
                        out.push_str(&format!("{AROUND_TILE}<row_{r}_col_{c}>{run}"));
                    }
                    out.push('\n');
                }
                out.push('\n');
            }
            out.push_str(&format!(
                "{AROUND_TILE}{GLOBAL_VIEW}{run}{AROUND_TILE}{part}"
            ));
        }
        out
    }

    /// Run one frame of the picture `source` through the tower (capturing its attention at
    /// `layers`, none when empty, refused when that would take more than `max_memory`) and
    /// the projector.
    #[allow(clippy::too_many_arguments)]
    fn see(
        &self,
        mm: &dyn Multimodal,
        source: String,
        prepared: Prepared,
        tile: Option<Tile>,
        layers: &[usize],
        max_memory: Option<u64>,
        cancel: &Cancel,
    ) -> Result<Seen, Error> {
        let tower = mm.tower();
        let p = tower.patch_size();
        if prepared.width < p || prepared.height < p {
            return Err(InputError::SmallerThanPatch {
                width: prepared.width,
                height: prepared.height,
                patch: p,
            }
            .into());
        }
        let grid = [prepared.height / p, prepared.width / p];
        let tower_cells = tower.cells(grid);
        let n = tower_cells.len();
        let arch = mm.tower_architecture();
        if let Some(&l) = layers.iter().find(|&&l| l >= arch.layers) {
            return Err(InputError::LayerOutOfRange {
                layer: l,
                model: format!("{}'s vision tower", self.info.name()),
                layers: arch.layers,
            }
            .into());
        }
        if layers.windows(2).any(|w| w[0] >= w[1]) {
            return Err(InputError::LayersOutOfOrder {
                layers: layers.to_vec(),
            }
            .into());
        }
        // The tower's capture, `layers × heads × n²` weights: a 896-pixel picture's 4,096
        // patches over 27 layers of 16 heads would be 29 GB.
        let budget = max_memory.unwrap_or_else(crate::default_capture_budget);
        let needs = [layers.len(), arch.heads, n, n, 4]
            .iter()
            .try_fold(1u64, |acc, &x| acc.checked_mul(x as u64));
        if needs.is_none_or(|b| b > budget) {
            return Err(Error::TooBig(crate::CaptureTooBig {
                capture: crate::Capture::SelfAttention {
                    layers: layers.len(),
                    heads: arch.heads,
                    tokens: n,
                    mixing: None,
                },
                needs,
                budget,
                budget_given: max_memory.is_some(),
            }));
        }
        let mut capture = SequenceCapture::for_layers(arch, n, n, false, layers);
        let embeddings = mm
            .image_embeddings(
                &prepared.pixels,
                prepared.width,
                prepared.height,
                &mut capture,
                cancel,
            )
            .ok_or(Error::Cancelled)?;
        let info = ModelInfo {
            family: arch.family.to_string(),
            layers: layers.len(),
            heads: arch.heads,
            hidden_size: arch.hidden_size,
            head_dim: arch.head_dim,
            ..self.info.clone()
        };
        let mut steps = prepared.steps.clone();
        if tower.learned_positions() && grid != tower.trained_grid() {
            steps.positions_from = Some(tower.trained_grid());
        }
        let tower_image = ImageInput {
            source: source.clone(),
            original: prepared.original,
            input: [prepared.width, prepared.height],
            patch: p,
            grid,
            preprocessing: steps,
            cells: tower_cells.clone(),
            norms: Vec::new(),
            pooling: None,
            windows: tower.windows().map(|(side, all)| Windows {
                side,
                layers: layers.iter().map(|&l| all[l]).collect(),
            }),
            view: prepared.view.clone(),
        };
        let units = crate::vision::patch_units(&tower_cells);
        let tower_attention = Attention::new(info, source.clone(), None, units, capture.probs)
            .and_then(|a| a.with_layer_numbers(layers.to_vec()))
            .and_then(|a| a.with_image(tower_image))
            .map_err(ForwardError::Shape)?;
        Ok(Seen {
            source,
            patch: p,
            cells: mm.image_cells(grid),
            pool: mm.pooling(),
            prepared,
            grid,
            embeddings,
            tower: tower_attention,
            tile,
        })
    }
}

/// How many runs of `token` `ids` holds.
fn image_runs(ids: &[u32], token: u32) -> usize {
    ids.iter()
        .enumerate()
        .filter(|&(i, &id)| id == token && (i == 0 || ids[i - 1] != token))
        .count()
}

/// `enc` with each image token repeated once per token of its picture (or, `framed`, each run
/// of image tokens the processor wrote taken as one picture's), labelled by picture and grid
/// cell, each a word of its own; the pictures' runs (`bidirectional` where their tokens see
/// each other in full), and the rows that get the pictures' embeddings.
fn expand(
    enc: Encoded,
    seen: &[Seen],
    image_token: u32,
    framed: bool,
    bidirectional: bool,
    hidden: usize,
) -> (Encoded, Vec<PictureTokens>, Inserted) {
    let mut out = Encoded {
        tokens: Vec::new(),
        ids: Vec::new(),
        type_ids: Vec::new(),
        segments: Vec::new(),
        roles: Vec::new(),
        special: Vec::new(),
        word_ids: Vec::new(),
        surfaces: Vec::new(),
        truncated_from: enc.truncated_from,
        bytes_cut: enc.bytes_cut,
    };
    let mut pictures = Vec::with_capacity(seen.len());
    let mut inserted = Inserted::default();
    let mut next = seen.iter();
    // Word ids stay ascending: those after a picture move by the words it added.
    let mut added = 0;
    let mut at = 0;
    while at < enc.ids.len() {
        let i = at;
        let run = if framed {
            enc.ids[i..]
                .iter()
                .take_while(|&&id| id == image_token)
                .count()
        } else {
            1
        };
        at += run.max(1);
        if enc.ids[i] != image_token {
            out.tokens.push(enc.tokens[i].clone());
            out.ids.push(enc.ids[i]);
            out.type_ids.push(enc.type_ids[i]);
            out.segments.push(enc.segments[i]);
            out.roles.push(enc.roles[i]);
            out.special.push(enc.special[i]);
            out.word_ids.push(enc.word_ids[i].map(|w| w + added));
            out.surfaces.push(enc.surfaces[i].clone());
            continue;
        }
        let Some(s) = next.next() else { continue };
        let first = out.ids.len();
        let base = out.word_ids.iter().flatten().max().map_or(0, |w| w + 1);
        let run = PictureTokens {
            first,
            image: ImageInput {
                source: s.source.clone(),
                original: s.prepared.original,
                input: [s.prepared.width, s.prepared.height],
                patch: s.patch * s.pool,
                grid: [s.grid[0] / s.pool, s.grid[1] / s.pool],
                preprocessing: s.prepared.steps.clone(),
                cells: s.cells.clone(),
                norms: Vec::new(),
                pooling: None,
                windows: None,
                view: s.prepared.view.clone(),
            },
            bidirectional,
            tile: s.tile,
        };
        let prefix = run.token_prefix(pictures.len());
        for (k, cell) in s.cells.iter().enumerate() {
            let label = format!("<{prefix} {}>", cell.label());
            out.tokens.push(label.clone());
            out.ids.push(image_token);
            out.type_ids.push(enc.type_ids[i]);
            out.segments.push(enc.segments[i]);
            out.roles.push(Role::Word);
            out.special.push(false);
            out.word_ids.push(Some(base + k));
            out.surfaces.push(label);
            inserted.rows.push(first + k);
        }
        inserted.values.extend_from_slice(&s.embeddings);
        added += s.cells.len();
        pictures.push(run);
    }
    debug_assert_eq!(inserted.values.len(), inserted.rows.len() * hidden);
    (out, pictures, inserted)
}

/// M-RoPE's positions of a prompt of `len` tokens with `pictures` in it (transformers'
/// `get_rope_index` for still pictures): text counts on by one; a picture's tokens, a grid of
/// `[rows, cols]`, sit at `start + (0, row, col)` (temporal, height, width) where `start` is
/// the next text position, and the text after it goes on from `start + max(rows, cols)`.
fn rope_index(len: usize, pictures: &[PictureTokens]) -> Vec<[usize; 3]> {
    let mut out = Vec::with_capacity(len);
    let mut next = 0;
    let mut pictures = pictures.iter().peekable();
    while out.len() < len {
        match pictures.peek() {
            Some(p) if p.first == out.len() => {
                let [rows, cols] = p.image.grid;
                for i in 0..rows * cols {
                    out.push([next, next + i / cols, next + i % cols]);
                }
                next += rows.max(cols);
                pictures.next();
            }
            _ => {
                out.push([next; 3]);
                next += 1;
            }
        }
    }
    out.truncate(len);
    out
}
