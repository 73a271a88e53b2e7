//! The [`Model`] side of the vision families: an image (a file, or pixels already in memory)
//! through the model's image processor and its vision network, and the attention labelled by
//! patch: units `CLS`, `DIST`, `REG0`…, and each patch's `row,col`, with the picture, grid and
//! preprocessing attached ([`crate::attention::image::ImageInput`]).

use std::path::Path;

use super::{EncodeOptions, Encoding, Error, ForwardError, InputError, Model, SequenceCapture};
use crate::attention::image::{Cell, ImageInput, Pooling};
use crate::attention::{Attention, ModelInfo, Role, Units};
use crate::cancel::Cancel;
use crate::pixels::{self, ImageProcessor, ImageSource, PixelsError, Rgb};

/// The image processor in a vision model's folder.
pub fn image_processor(dir: &Path) -> Result<ImageProcessor, Error> {
    ImageProcessor::load(&dir.join("preprocessor_config.json"))
        .map_err(|e| InputError::Image(e).into())
}

impl Model {
    /// Whether the model reads images (a vision family).
    pub fn is_vision(&self) -> bool {
        self.network.vision().is_some()
    }

    /// The model's image processor, for a vision model.
    pub fn image_processor(&self) -> Option<&ImageProcessor> {
        self.image_processor.as_ref()
    }

    /// Decode the image file (or its bytes in memory) `image`, resizing each row as it is decoded
    /// ([`ImageProcessor::prepare_file`]), and run it as [`Model::encode_rgb`] runs a picture.
    pub fn encode_image(
        &self,
        image: impl Into<ImageSource>,
        opts: &EncodeOptions,
    ) -> Result<Encoding, Error> {
        self.encode_image_until(image, opts, &Cancel::new())
    }

    /// [`Model::encode_image`] that stops with [`Error::Cancelled`] once `cancel` is set: the
    /// decoder checks it between rows (a JPEG also between scans), the network between
    /// layers.
    pub fn encode_image_until(
        &self,
        image: impl Into<ImageSource>,
        opts: &EncodeOptions,
        cancel: &Cancel,
    ) -> Result<Encoding, Error> {
        self.vision_or_refuse()?;
        let image = image.into();
        let prepared = self
            .processor()?
            .prepare_until(&image, cancel)
            .map_err(|e| match e {
                PixelsError::Cancelled { .. } => Error::Cancelled,
                e => InputError::Image(e).into(),
            })?;
        self.encode_prepared(prepared, &image.name(), opts, cancel)
    }

    fn processor(&self) -> Result<&ImageProcessor, Error> {
        self.image_processor
            .as_ref()
            .ok_or_else(|| InputError::NoImageProcessor.into())
    }

    fn vision_or_refuse(&self) -> Result<&dyn super::blocks::vision::Vision, Error> {
        self.network.vision().ok_or_else(|| self.image_refusal())
    }

    /// Preprocess `rgb` as the model's `preprocessor_config.json` says and run it, capturing
    /// every layer's and head's attention over the patches; `source` names the picture in the
    /// views.
    pub fn encode_rgb(
        &self,
        rgb: &Rgb,
        source: &str,
        opts: &EncodeOptions,
    ) -> Result<Encoding, Error> {
        self.vision_or_refuse()?;
        let prepared = self.processor()?.prepare(rgb);
        self.encode_prepared(prepared, source, opts, &Cancel::new())
    }

    /// Run a model input made by the image processor.
    fn encode_prepared(
        &self,
        prepared: pixels::Prepared,
        source: &str,
        opts: &EncodeOptions,
        cancel: &Cancel,
    ) -> Result<Encoding, Error> {
        let vision = self.vision_or_refuse()?;
        let p = vision.patch_size();
        if prepared.width < p || prepared.height < p {
            return Err(InputError::SmallerThanPatch {
                width: prepared.width,
                height: prepared.height,
                patch: p,
            }
            .into());
        }
        let grid = [prepared.height / p, prepared.width / p];
        let cells = vision.cells(grid);
        let n = cells.len();
        let arch = self.network.architecture();
        let all: Vec<usize> = (0..arch.layers).collect();
        let layers = opts.layers.clone().unwrap_or(all);
        self.check_layers(&layers)?;
        self.check_capture_size(
            &[n],
            opts.capture_query_key,
            layers.len(),
            false,
            opts.max_memory,
        )?;
        let mut capture = SequenceCapture::for_layers(arch, n, n, opts.capture_query_key, &layers);
        let mut all_norms = Vec::new();
        let hidden = vision
            .forward_pixels(
                &prepared.pixels,
                prepared.width,
                prepared.height,
                &mut capture,
                &mut all_norms,
                cancel,
            )
            .ok_or(Error::Cancelled)?;
        let pooling = vision
            .pooling(&hidden)
            .map(|w| Pooling::new(&w, arch.heads));
        // The captured layers' token norms, as the attention's layers.
        let norms = layers
            .iter()
            .filter_map(|&l| all_norms.get(l).cloned())
            .collect();
        let mut steps = prepared.steps;
        let trained = vision.trained_grid();
        if grid != trained {
            steps.positions_from = Some(trained);
        }
        let units = patch_units(&cells);
        let info = ModelInfo {
            layers: layers.len(),
            ..self.info.clone()
        };
        let image = ImageInput {
            source: source.to_string(),
            original: prepared.original,
            input: [prepared.width, prepared.height],
            patch: p,
            grid,
            preprocessing: steps,
            cells,
            norms,
            pooling,
            windows: None,
            view: prepared.view,
        };
        let query_key =
            capture
                .query_key
                .take()
                .map(|(queries, keys)| crate::attention::QueryKey {
                    queries,
                    keys,
                    scale: None,
                });
        let attention = Attention::new(info, source.to_string(), None, units, capture.probs)
            .and_then(|a| a.with_layer_numbers(layers))
            .and_then(|a| a.with_query_key(query_key))
            .and_then(|a| a.with_image(image))
            .map_err(ForwardError::Shape)?;
        Ok(Encoding {
            attention,
            hidden,
            truncated_from: None,
            bytes_cut: false,
            generation: None,
            values: None,
            head_outputs: None,
            summary: None,
        })
    }
}

/// A vision tower's tokens as units: each labelled by its cell (`CLS`, `DIST`, `REG0`, a
/// patch's `row,col`), the class token the start, the other specials special, each patch a word
/// of its own.
pub(crate) fn patch_units(cells: &[Cell]) -> Units {
    let n = cells.len();
    let labels = cells.iter().map(|c| c.label()).collect();
    let roles = cells
        .iter()
        .map(|c| match c {
            Cell::Class => Role::Start,
            Cell::Patch { .. } => Role::Word,
            _ => Role::Special,
        })
        .collect();
    let mut word = 0;
    let word_ids = cells
        .iter()
        .map(|c| {
            (!c.is_special()).then(|| {
                word += 1;
                word - 1
            })
        })
        .collect();
    let surfaces = cells
        .iter()
        .map(|c| {
            if c.is_special() {
                String::new()
            } else {
                c.label()
            }
        })
        .collect();
    Units::tokens(
        labels,
        Vec::new(),
        vec![0; n],
        vec![0; n],
        roles,
        word_ids,
        surfaces,
    )
}
