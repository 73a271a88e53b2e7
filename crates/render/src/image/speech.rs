//! The figures of a speech run (Whisper): the cross-attention drawn over the recording (words
//! × time under a strip of the log-mel spectrogram, each word's time from the alignment boxed
//! on its row, a time axis in seconds), and the encoder's self-attention over its 1,500 frames
//! pooled into blocks of 200 ms, the scale said in the title. The numbers are
//! [`crate::speech`]'s; the recording travels on the attention ([`Attention::recording`]).

use std::io::Write;
use std::path::Path;

use super::layout::{self, LABEL_GAP, LABEL_SIZE, MARGIN, SMALL_SIZE};
use super::scale::Scale;
use super::scene::{frame, Align, Cells, Item, Rect, Scene, Text};
use super::theme::{Palette, Rgb};
use super::{font, paint, ImageError, ImageOptions, Style, SvgError};
use crate::attention::{Attention, AttentionKind, HeadSel, Recording};
use crate::colormap::{Colormap, Ramp};
use crate::output::write_output;
use crate::speech::{pooled_encoder, word_matrix, SpeechHeads, WordMatrix};

/// Widest words × time matrix, in pixels: a frame gets `WIDE / frames` pixels (at least 1, at
/// most [`MAX_FRAME_PX`]).
const WIDE: usize = 1200;
/// Most pixels per encoder frame (a short recording).
const MAX_FRAME_PX: usize = 12;
/// Height of the spectrogram strip, in pixels (at least one per mel bin).
const STRIP: usize = 96;

/// Where the words × time figure put things, for tests: the matrix's top left, pixels per
/// frame and per word, and each word's box (its time, on its row).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WordsLayout {
    pub heat_x: i32,
    pub heat_y: i32,
    pub frame_px: i32,
    pub row_px: i32,
    pub boxes: Vec<Rect>,
}

/// The words × time figure of `att` (a speech run's token-level cross-attention) for `which`
/// heads, as PNG bytes.
pub fn words_png(
    att: &Attention,
    which: SpeechHeads,
    opts: &ImageOptions,
) -> Result<Vec<u8>, ImageError> {
    super::scene_png(&words_scene(att, which, opts)?.0, opts.scale_factor)
}

/// The words × time figure as an SVG document.
pub fn words_svg(
    att: &Attention,
    which: SpeechHeads,
    opts: &ImageOptions,
) -> Result<String, ImageError> {
    svg(&words_scene(att, which, opts)?.0)
}

/// The encoder's pooled self-attention of `att` (a speech run's encoder value) at `layer` and
/// `head`, as PNG bytes.
pub fn pooled_png(
    att: &Attention,
    layer: usize,
    head: HeadSel,
    opts: &ImageOptions,
) -> Result<Vec<u8>, ImageError> {
    super::scene_png(&pooled_scene(att, layer, head, opts)?, opts.scale_factor)
}

/// The encoder's pooled self-attention as an SVG document.
pub fn pooled_svg(
    att: &Attention,
    layer: usize,
    head: HeadSel,
    opts: &ImageOptions,
) -> Result<String, ImageError> {
    svg(&pooled_scene(att, layer, head, opts)?)
}

/// Write `bytes` to `path` atomically (`-`: standard output).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ImageError> {
    write_output(path, |w: &mut dyn Write| w.write_all(bytes))?;
    Ok(())
}

fn svg(scene: &Scene) -> Result<String, ImageError> {
    paint::svg(scene).map_err(|e| match e {
        SvgError::Draw(e) => ImageError::Draw(e),
        SvgError::Font(e) => ImageError::Font(e),
    })
}

fn text(x: i32, y: i32, s: String, size: f64, color: Rgb, align: Align) -> Item {
    Item::Text(Text {
        x,
        y,
        text: s,
        size,
        bold: false,
        color,
        align,
        up: false,
    })
}

/// `1.5 s`, `2 s`.
fn tick_label(s: f64) -> String {
    let t = format!("{s:.1}");
    format!("{} s", t.strip_suffix(".0").unwrap_or(&t))
}

/// The step between time ticks: the first of 0.1, 0.2, 0.5, 1, 2, 5, 10 s at least 70 pixels
/// apart.
fn tick_step(px_per_second: f64) -> f64 {
    [0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .find(|s| s * px_per_second >= 70.0)
        .unwrap_or(10.0)
}

/// The style every speech figure shares: the options' colours, `subtitle` and `notes`.
fn style(opts: &ImageOptions, scale: super::ColorScale, subtitle: String, notes: String) -> Style {
    Style {
        ramp: Ramp::new(opts.colormap, opts.theme),
        scale,
        palette: Palette::of(opts.theme),
        subtitle,
        notes,
        masked: None,
        layer_masked: Vec::new(),
        layer_numbers: Vec::new(),
        caption: crate::WEIGHT_CAPTION,
        sinks: None,
    }
}

/// The spectrogram's colours: magma, or viridis when the attention is drawn in magma.
fn spectrogram_ramp(opts: &ImageOptions) -> Ramp {
    let map = if opts.colormap == Colormap::Magma {
        Colormap::Viridis
    } else {
        Colormap::Magma
    };
    Ramp::new(map, super::Theme::Light)
}

/// The spectrogram's `cols × rows` pixel colours over the first `frames` encoder frames:
/// highest bin at the top, each pixel column the mean of the mel frames it covers, scaled
/// between the strip's lowest and highest value.
fn spectrogram_cells(
    rec: &Recording,
    frames: usize,
    cols: usize,
    rows: usize,
    ramp: &Ramp,
) -> Vec<Rgb> {
    let bins = rec.mel_bins.max(1);
    // The mel frames the `frames` encoder frames cover.
    let mel = ((frames as f64 * rec.frame_seconds / rec.mel_seconds).round() as usize)
        .clamp(1, rec.mel_frames.max(1));
    let (lo, hi) = rec
        .mel
        .iter()
        .filter(|v| v.is_finite())
        .fold((f32::MAX, f32::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    let span = if hi > lo { hi - lo } else { 1.0 };
    let mut colors = Vec::with_capacity(cols * rows);
    for r in 0..rows {
        // Row 0 is the top: the highest bin.
        let bin = bins - 1 - (r * bins / rows).min(bins - 1);
        for c in 0..cols {
            let (m0, m1) = (
                c * mel / cols,
                ((c + 1) * mel / cols).max(c * mel / cols + 1),
            );
            let m1 = m1.min(rec.mel_frames);
            let v = if rec.mel_frames == 0 || m0 >= m1 {
                lo
            } else {
                (m0..m1).map(|m| rec.mel_at(bin, m)).sum::<f32>() / (m1 - m0) as f32
            };
            colors.push(ramp.at(((v - lo) / span).clamp(0.0, 1.0)));
        }
    }
    colors
}

/// The name of `att`'s model as figures give it.
fn model_of(att: &Attention) -> String {
    super::model_name(att.model.name.as_deref().unwrap_or(&att.model.id))
}

/// Lay out the words × time figure (module docs).
pub(crate) fn words_scene(
    att: &Attention,
    which: SpeechHeads,
    opts: &ImageOptions,
) -> Result<(Scene, WordsLayout), ImageError> {
    let m: WordMatrix = word_matrix(att, which)?;
    let rec = att
        .recording
        .as_deref()
        .expect("word_matrix checked the recording");
    let frames = m.frames.max(1);
    let frame_px = (WIDE / frames).clamp(1, MAX_FRAME_PX);
    let w = (frames * frame_px) as i32;
    let words = m.words;
    let (row_px, row_font) = if words > 60 {
        (14, SMALL_SIZE)
    } else {
        (20, LABEL_SIZE)
    };
    let (scale_kind, why) = opts
        .scale
        .resolve([m.values.as_slice()], (words, frames), "frame");
    let transcript = att.target_text.as_deref().unwrap_or("");
    let subtitle = format!(
        "“{}”{}{}, {}–{}",
        super::quote(transcript, 400),
        layout::SUBTITLE_PARTS,
        font::label(&rec.name, 80),
        seconds2(rec.window_start),
        seconds2(rec.window_start + rec.window_seconds)
    );
    let mut notes = vec![
        "rows: the words, each the mean of the decoder rows that write its tokens".to_string(),
        "boxes: each word's time from the alignment heads (dynamic time warping, as openai-whisper's word timestamps)".to_string(),
    ];
    // A recording read back from a JSON export has no spectrogram: the JSON does not carry it.
    let has_mel = rec.mel_bins > 0 && rec.mel_frames > 0;
    notes.push(if has_mel {
        "top: the log-mel spectrogram the encoder read".to_string()
    } else {
        "no spectrogram: the JSON export does not carry it; run the model on the recording to draw it".to_string()
    });
    if let Some(why) = why {
        notes.push(format!("square-root colour scale: {why}"));
    }
    let style = style(
        opts,
        scale_kind,
        subtitle,
        format!("({})", notes.join("; ")),
    );
    let pal = style.palette;
    let title = format!(
        "{} · cross-attention over the recording · {}",
        model_of(att),
        m.what
    );

    let labels: Vec<String> = rec
        .words
        .iter()
        .map(|w| {
            font::label(
                &crate::attention::display::escape_invisible(w.word.trim()),
                18,
            )
        })
        .collect();
    let label_w = labels
        .iter()
        .map(|l| font::width(l, row_font, false) as i32)
        .chain([font::width("log-mel", SMALL_SIZE, false) as i32])
        .max()
        .unwrap_or(0);
    let heat_x = MARGIN + label_w + LABEL_GAP + 4;
    let scale = Scale::up_to(&m.values, scale_kind);
    let bar_x = heat_x + w + 28;
    let width = (bar_x + layout::colorbar_width(&scale) + MARGIN)
        .max(layout::title_width(&title).min(1600))
        .max(560);
    let (mut items, top) = layout::title_block(&title, &style, width, &pal);

    // The spectrogram strip.
    let strip_rows = if has_mel { STRIP.max(rec.mel_bins) } else { 0 };
    let strip_cell_h = 1u32;
    let strip_h = strip_rows as i32;
    if has_mel {
        items.push(Item::Cells(Cells {
            x: heat_x,
            y: top,
            rows: strip_rows,
            cols: w as usize,
            cell_w: 1,
            cell_h: strip_cell_h,
            colors: spectrogram_cells(rec, frames, w as usize, strip_rows, &spectrogram_ramp(opts)),
            hatch: None,
        }));
        items.extend(frame(
            Rect::new(heat_x, top, heat_x + w, top + strip_h),
            pal.frame,
        ));
        items.push(text(
            heat_x - LABEL_GAP - 4,
            top + strip_h / 2,
            "log-mel".into(),
            SMALL_SIZE,
            pal.muted,
            Align::End,
        ));
        items.push(text(
            heat_x - LABEL_GAP - 4,
            top + 8,
            "8 kHz".into(),
            11.0,
            pal.muted,
            Align::End,
        ));
    }

    // The words × time matrix.
    let heat_y = if has_mel { top + strip_h + 8 } else { top };
    let h = words as i32 * row_px;
    items.push(Item::Cells(Cells {
        x: heat_x,
        y: heat_y,
        rows: words,
        cols: frames,
        cell_w: frame_px as u32,
        cell_h: row_px as u32,
        colors: scale.colors(&style.ramp, &m.values),
        hatch: None,
    }));
    items.extend(frame(
        Rect::new(heat_x, heat_y, heat_x + w, heat_y + h),
        pal.frame,
    ));
    let mut boxes = Vec::with_capacity(words);
    for (i, word) in rec.words.iter().enumerate() {
        let y = heat_y + i as i32 * row_px;
        items.push(text(
            heat_x - LABEL_GAP - 4,
            y + row_px / 2,
            labels[i].clone(),
            row_font,
            pal.text,
            Align::End,
        ));
        let (s, e) = (
            word.start_frame.min(frames),
            word.end_frame.min(frames).max(word.start_frame.min(frames)),
        );
        let r = Rect::new(
            heat_x + (s * frame_px) as i32,
            y + 1,
            heat_x + (e * frame_px) as i32,
            y + row_px - 1,
        );
        boxes.push(r);
        if r.x1 > r.x0 {
            // A white box with a black halo reads on every colour of every map.
            items.extend(frame(
                Rect::new(r.x0 - 1, r.y0 - 1, r.x1 + 1, r.y1 + 1),
                Rgb(0, 0, 0),
            ));
            items.extend(frame(r, Rgb(0xff, 0xff, 0xff)));
        }
        // The word's start on the spectrogram.
        if has_mel {
            items.push(Item::Fill(
                Rect::new(r.x0, top + strip_h - 6, r.x0 + 1, top + strip_h),
                Rgb(0xff, 0xff, 0xff),
            ));
        }
    }

    // The time axis, in seconds from the recording's start.
    let px_per_second = frame_px as f64 / rec.frame_seconds;
    let step = tick_step(px_per_second);
    let axis_y = heat_y + h + 1;
    let mut k = (rec.window_start / step).ceil() as i64;
    loop {
        let t = k as f64 * step;
        let x = heat_x + ((t - rec.window_start) * px_per_second).round() as i32;
        if x > heat_x + w {
            break;
        }
        items.push(Item::Fill(
            Rect::new(x, axis_y, x + 1, axis_y + 5),
            pal.frame,
        ));
        items.push(text(
            x,
            axis_y + 14,
            tick_label(t),
            SMALL_SIZE,
            pal.text,
            Align::Middle,
        ));
        k += 1;
    }
    let axis_title_y = axis_y + 38;
    items.push(text(
        heat_x + w / 2,
        axis_title_y,
        format!(
            "time (one column = {} ms)",
            (rec.frame_seconds * 1000.0).round()
        ),
        layout::AXIS_TITLE_SIZE,
        pal.text,
        Align::Middle,
    ));
    let bar_h = h.max(layout::MIN_BAR_HEIGHT);
    items.extend(layout::colorbar(
        bar_x,
        heat_y,
        bar_h,
        &scale,
        &style.ramp,
        &format!("{}{}", crate::WEIGHT_CAPTION, scale.caption_suffix()),
        &pal,
    ));
    let bottom = (axis_title_y + 14).max(heat_y + bar_h);
    let scene = Scene {
        width: width as u32,
        height: (bottom + MARGIN) as u32,
        background: pal.background,
        title,
        items,
    };
    Ok((
        scene,
        WordsLayout {
            heat_x,
            heat_y,
            frame_px: frame_px as i32,
            row_px,
            boxes,
        },
    ))
}

/// Lay out the pooled encoder figure: the blocks as square cells (about 600 pixels a side),
/// both axes in seconds from the recording's start, a dashed line on each where the audio ends
/// and the encoder's padding begins, a colour bar.
fn pooled_scene(
    att: &Attention,
    layer: usize,
    head: HeadSel,
    opts: &ImageOptions,
) -> Result<Scene, ImageError> {
    let rec = match (att.kind, att.recording.as_deref()) {
        (AttentionKind::Encoder, Some(rec)) if att.level == crate::attention::Level::Token => rec,
        _ => return Err(crate::speech::SpeechViewError::NotSpeech.into()),
    };
    att.model
        .check_selection(crate::attention::Selection::new(layer, head))?;
    let (values, m, block) = pooled_encoder(att, layer, head);
    let ms = (block as f64 * rec.frame_seconds * 1000.0).round();
    let number = att.layer_number(layer);
    let which = match head {
        HeadSel::Index(h) => format!("head {h}"),
        HeadSel::Mean => format!("mean of {} heads", att.heads()),
    };
    let title = format!(
        "{} · encoder · layer {number} · {which} · pooled: 1 cell = {ms} ms",
        model_of(att)
    );
    let (scale_kind, _) = opts.scale.resolve([values.as_slice()], (m, m), "block");
    let audio_end = rec.window_seconds + rec.window_start;
    let notes = format!(
        "(each cell: the weight a block of {block} query frames gives a block of {block} key \
         frames, summed over the keys and averaged over the queries, so a row sums to 1; \
         dashed: the audio ends at {}, the encoder reads padding after it{})",
        seconds2(audio_end),
        if scale_kind == super::ColorScale::Sqrt {
            "; square-root colour scale"
        } else {
            ""
        }
    );
    let subtitle = format!(
        "{}, {}–{}",
        font::label(&rec.name, 80),
        seconds2(rec.window_start),
        seconds2(audio_end)
    );
    let style = style(opts, scale_kind, subtitle, notes);
    let pal = style.palette;
    let cell = (600 / m.max(1)).clamp(2, 24) as i32;
    let side = cell * m as i32;
    let label_w = font::width("30 s", SMALL_SIZE, false) as i32;
    let heat_x = MARGIN + layout::AXIS_TITLE_SIZE as i32 + 12 + label_w + LABEL_GAP + 6;
    let scale = Scale::up_to(&values, scale_kind);
    let bar_x = heat_x + side + 28;
    let width = (bar_x + layout::colorbar_width(&scale) + MARGIN)
        .max(layout::title_width(&title).min(1400))
        .max(560);
    let (mut items, top) = layout::title_block(&title, &style, width, &pal);
    let heat_y = top + 4;
    items.push(Item::Cells(Cells {
        x: heat_x,
        y: heat_y,
        rows: m,
        cols: m,
        cell_w: cell as u32,
        cell_h: cell as u32,
        colors: scale.colors(&style.ramp, &values),
        hatch: None,
    }));
    items.extend(frame(
        Rect::new(heat_x, heat_y, heat_x + side, heat_y + side),
        pal.frame,
    ));
    // Seconds to pixels along either side.
    let per_second = cell as f64 / (block as f64 * rec.frame_seconds);
    let at = |t: f64| ((t - rec.window_start) * per_second).round() as i32;
    // The audio's end: a dashed white line on each axis.
    let end = at(audio_end);
    if end < side {
        let mut d = 0;
        while d < side {
            let len = 6.min(side - d);
            items.push(Item::Fill(
                Rect::new(heat_x + end, heat_y + d, heat_x + end + 1, heat_y + d + len),
                Rgb(0xff, 0xff, 0xff),
            ));
            items.push(Item::Fill(
                Rect::new(heat_x + d, heat_y + end, heat_x + d + len, heat_y + end + 1),
                Rgb(0xff, 0xff, 0xff),
            ));
            d += 12;
        }
    }
    let step = tick_step(per_second);
    let total = m as f64 * block as f64 * rec.frame_seconds;
    let mut k = (rec.window_start / step).ceil() as i64;
    loop {
        let t = k as f64 * step;
        if t > rec.window_start + total + 1e-9 {
            break;
        }
        let p = at(t);
        items.push(Item::Fill(
            Rect::new(heat_x + p, heat_y + side, heat_x + p + 1, heat_y + side + 5),
            pal.frame,
        ));
        items.push(text(
            heat_x + p,
            heat_y + side + 14,
            tick_label(t),
            SMALL_SIZE,
            pal.text,
            Align::Middle,
        ));
        items.push(Item::Fill(
            Rect::new(heat_x - 5, heat_y + p, heat_x, heat_y + p + 1),
            pal.frame,
        ));
        items.push(text(
            heat_x - 8,
            heat_y + p,
            tick_label(t),
            SMALL_SIZE,
            pal.text,
            Align::End,
        ));
        k += 1;
    }
    let below = heat_y + side + 38;
    items.push(text(
        heat_x + side / 2,
        below,
        "key frames (attended to)".into(),
        layout::AXIS_TITLE_SIZE,
        pal.text,
        Align::Middle,
    ));
    items.push(Item::Text(Text {
        x: MARGIN + layout::AXIS_TITLE_SIZE as i32 / 2,
        y: heat_y + side / 2,
        text: "query frames (attending from)".into(),
        size: layout::AXIS_TITLE_SIZE,
        bold: false,
        color: pal.text,
        align: Align::Middle,
        up: true,
    }));
    let bar_h = side.max(layout::MIN_BAR_HEIGHT);
    items.extend(layout::colorbar(
        bar_x,
        heat_y,
        bar_h,
        &scale,
        &style.ramp,
        &format!("{}{}", crate::WEIGHT_CAPTION, scale.caption_suffix()),
        &pal,
    ));
    let bottom = (below + 14).max(heat_y + bar_h);
    Ok(Scene {
        width: width as u32,
        height: (bottom + MARGIN) as u32,
        background: pal.background,
        title,
        items,
    })
}

/// `9.96 s`.
fn seconds2(s: f64) -> String {
    format!("{s:.2} s")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::fixtures;

    #[test]
    fn word_boxes_stand_where_the_timings_say_on_the_time_axis() {
        let set = fixtures::speech(&[(" Hello", 2, 10, 30), (" world", 1, 30, 55)], 300, 2.0);
        let cross = set.iter().nth(2).unwrap();
        let (scene, lay) =
            words_scene(cross, SpeechHeads::Alignment, &ImageOptions::default()).unwrap();
        let rec = cross.recording.as_deref().unwrap();
        // The tick labelled "1 s" stands where one second is.
        let tick = scene
            .texts()
            .find(|t| t.text == "1 s")
            .expect("a tick at 1 s");
        let per_second = lay.frame_px as f64 / rec.frame_seconds;
        assert_eq!(tick.x, lay.heat_x + per_second.round() as i32);
        for (i, w) in rec.words.iter().enumerate() {
            let b = lay.boxes[i];
            // On the axis: the box's edges at the word's start and end seconds.
            let at = |f: usize| lay.heat_x + (rec.frame_time(f) * per_second).round() as i32;
            assert_eq!(
                (b.x0, b.x1),
                (at(w.start_frame), at(w.end_frame)),
                "word {i}"
            );
            // On its own row.
            assert!(b.y0 > lay.heat_y + i as i32 * lay.row_px);
            assert!(b.y1 < lay.heat_y + (i as i32 + 1) * lay.row_px);
        }
        // Every text inside the figure.
        let canvas = Rect::new(0, 0, scene.width as i32, scene.height as i32);
        for t in scene.texts() {
            assert!(canvas.contains(&t.bounds()), "{:?} outside", t.text);
        }
        words_png(
            cross,
            SpeechHeads::Head {
                layer: 0,
                head: HeadSel::Index(1),
            },
            &ImageOptions::default(),
        )
        .unwrap();
        assert!(
            words_svg(cross, SpeechHeads::Alignment, &ImageOptions::default())
                .unwrap()
                .starts_with("<svg")
        );
        let enc = set.iter().next().unwrap();
        let svg = pooled_svg(enc, 0, HeadSel::Mean, &ImageOptions::default()).unwrap();
        assert!(svg.contains("pooled: 1 cell = 40 ms"), "{}", &svg[..400]);
        // Not a speech value: refused in words.
        let dec = set.iter().nth(1).unwrap();
        assert!(words_png(dec, SpeechHeads::Alignment, &ImageOptions::default()).is_err());
    }
}
