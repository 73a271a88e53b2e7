//! A vision-language model's attention drawn on the picture it read: one token's attention to
//! the picture's image tokens ([`Attention::pictures`]) laid out on their patch grid and
//! overlaid on the picture, with how much of the row went to the picture, to the text and to
//! the sink written beside it, so that an overlay of a row that barely looks at the picture is
//! not mistaken for one that does. The overlays, grids and colour bars are the vision views'
//! ([`super::picture`]).

use super::canvas::{Canvas, Look};
use super::picture::{
    head_row, heading, heading_width, heads_grid, overlay, own_scale_bar, pair_overlay,
    single_overlay, PictureSpec, Query,
};
use super::ImageError;
use crate::attention::image::{PictureTokens, PictureView};
use crate::attention::{Attention, HeadSel};

fn refuse(why: String) -> ImageError {
    ImageError::Draw(super::paint::DrawError(why))
}

/// The unit `query` names in a vision-language model's attention: a token's number, or by
/// default the last unit (the one whose next token the model predicts, or the last it
/// generated).
pub fn query_unit(att: &Attention, query: Query) -> Result<usize, ImageError> {
    let n = att.n_queries();
    match query {
        Query::Token(u) if u < n => Ok(u),
        Query::Token(u) => Err(refuse(format!(
            "token {u} is not one of the {n} tokens (numbered from 0)"
        ))),
        Query::Cls => Ok(n - 1),
        Query::Generated => att.first_generated().ok_or_else(|| {
            refuse("no token of this run was generated; generate some, or pick a token N".into())
        }),
        Query::Patch(..) | Query::Pool => Err(refuse(
            "a vision-language model's query is a token's number N (as the views number the \
             tokens), not a patch or pool"
                .into(),
        )),
    }
}

/// One row over the keys, as the picture's tokens' weights in the order of its cells.
fn picture_row(att: &Attention, picture: &PictureTokens, row: &[f32]) -> Vec<f32> {
    let tokens = picture.tokens();
    let mut out = vec![0f32; picture.image.cells.len()];
    for (k, s) in att.keys().spans.iter().enumerate() {
        if tokens.contains(&s.start) {
            out[s.start - tokens.start] += row[k];
        }
    }
    out
}

/// One row over the keys, as the weights of a picture view's cells (its tokens', in order).
fn view_row(att: &Attention, view: &PictureView, row: &[f32]) -> Vec<f32> {
    let at: std::collections::HashMap<usize, usize> = view
        .tokens
        .iter()
        .enumerate()
        .map(|(i, &t)| (t, i))
        .collect();
    let mut out = vec![0f32; view.tokens.len()];
    for (k, s) in att.keys().spans.iter().enumerate() {
        if let Some(&i) = at.get(&s.start) {
            out[i] += row[k];
        }
    }
    out
}

/// Where a row's weight went: to each picture, to the sink, and to the rest (the text). Every
/// view that states a row's shares (the titles, the terminal, the strip of shares per layer)
/// reads this.
#[derive(Clone, Debug, PartialEq)]
pub struct Shares {
    /// Each picture's share, in order.
    pub pictures: Vec<f32>,
    /// The sink's label and share, under a causal mask.
    pub sink: Option<(String, f32)>,
    /// The rest of the row: the text's share.
    pub text: f32,
}

impl Shares {
    /// The shares of `row` (a row over `att`'s keys).
    pub fn of(att: &Attention, row: &[f32]) -> Shares {
        // Per picture: a tiled picture's runs (its tiles and global view) together.
        let mut pictures: Vec<f32> = Vec::new();
        for (i, p) in att.pictures.iter().enumerate() {
            let k = p.picture(i);
            if pictures.len() <= k {
                pictures.resize(k + 1, 0.0);
            }
            pictures[k] += picture_row(att, p, row).iter().sum::<f32>();
        }
        // A sink that is a picture's own first token (PaliGemma's prompt starts with its
        // picture) is counted in the picture's share, not a second time.
        let in_picture = |s: usize| {
            let token = att.keys().spans.get(s).map_or(s, |span| span.start);
            att.pictures.iter().any(|p| p.tokens().contains(&token))
        };
        let sink = att.sink().filter(|&s| !in_picture(s)).map(|s| {
            (
                att.keys().display.get(s).cloned().unwrap_or_default(),
                row.get(s).copied().unwrap_or(0.0),
            )
        });
        let taken = pictures.iter().sum::<f32>() + sink.as_ref().map_or(0.0, |s| s.1);
        let text = (row.iter().sum::<f32>() - taken).max(0.0);
        Shares {
            pictures,
            sink,
            text,
        }
    }

    /// The parts in drawing order, each with its label: the pictures, the sink, the text.
    pub fn parts(&self) -> Vec<(String, f32)> {
        let mut parts: Vec<(String, f32)> = self
            .pictures
            .iter()
            .enumerate()
            .map(|(i, &v)| (format!("picture {}", i + 1), v))
            .collect();
        if let Some((label, v)) = &self.sink {
            parts.push((format!("sink {label}"), *v));
        }
        parts.push(("text".into(), self.text));
        parts
    }
}

/// The shares of a row as the titles write them: `picture 1 47% · sink <s> 12% · text 41%`.
fn shares(att: &Attention, row: &[f32]) -> String {
    Shares::of(att, row)
        .parts()
        .iter()
        .map(|(label, v)| format!("{label} {:.0}%", v * 100.0))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// The colour of share part `i` of `n` in a strip: the pictures from the bright end of the
/// colour map, the sink in the muted text colour, the text from its dark end.
fn part_colour(i: usize, n: usize, has_sink: bool, look: &Look) -> crate::colormap::Rgb {
    let text = n - 1;
    let sink = has_sink.then(|| n - 2);
    if i == text {
        look.ramp.at(0.3)
    } else if Some(i) == sink {
        look.pal.muted
    } else {
        look.ramp.at(0.9 - 0.2 * (i % 3) as f32)
    }
}

/// One stacked strip of `shares`, `w` × `h` at (`x`, `y`): each part's width its share.
fn share_strip(c: &mut Canvas, shares: &Shares, (x, y, w, h): (i32, i32, i32, i32), look: &Look) {
    let parts = shares.parts();
    let n = parts.len();
    let mut at = x;
    for (i, (_, v)) in parts.iter().enumerate() {
        let end = if i + 1 == n {
            x + w
        } else {
            (at + (v.clamp(0.0, 1.0) * w as f32).round() as i32).min(x + w)
        };
        if end > at {
            c.rect(
                at,
                y,
                end - at,
                h,
                part_colour(i, n, shares.sink.is_some(), look),
            );
        }
        at = end;
    }
    c.frame(x, y, w, h, 1, look.pal.frame);
}

/// The terminal view of unit `query`'s attention (at `layer`, one head or the mean) over each
/// picture: the patch grid's heatmap beside the picture, with the row's shares.
pub fn terminal_view(
    att: &Attention,
    layer: usize,
    head: HeadSel,
    query: Query,
    color: bool,
) -> Result<String, ImageError> {
    let unit = query_unit(att, query)?;
    let what = match head {
        HeadSel::Index(h) => format!("head {h}"),
        HeadSel::Mean => "mean of heads".into(),
    };
    if query == Query::Generated {
        return Ok(generated_lines(att, layer, head, &what));
    }
    let row = head_row(att, layer, head, unit);
    let name = att.queries().display.get(unit).cloned().unwrap_or_default();
    let shares = shares(att, &row);
    let mut out = String::new();
    out.push_str(&layer_lines(att, unit, &name));
    let mut drawn = Vec::new();
    for (i, p) in att.pictures.iter().enumerate() {
        let k = p.picture(i);
        // A cut picture: its parts put together once, then its whole view.
        let (view, label) = match PictureView::stitched(&att.pictures, k) {
            Some(_) if !p.is_whole() && drawn.contains(&k) => continue,
            Some(v) if !p.is_whole() => {
                drawn.push(k);
                let parts = if p.tile.is_some_and(|t| t.crop) {
                    "crops"
                } else {
                    "tiles"
                };
                (v, format!("picture {} · its {parts} put together", k + 1))
            }
            _ => (PictureView::of(p), p.name(i)),
        };
        out.push_str(&super::picture::terminal_grid(
            att.model.name(),
            &view.image,
            &view_row(att, &view, &row),
            usize::MAX,
            &format!(
                "{label} · layer {} {what} · from token {unit} “{}”",
                att.layer_number(layer),
                name.trim()
            ),
            Some(&format!("the row: {shares}")),
            color,
        ));
    }
    Ok(out)
}

/// Where unit `unit`'s attention went in each layer (the mean of its heads): a strip of 20
/// characters (`█` the pictures, `▒` the sink, `░` the text) and the shares.
fn layer_lines(att: &Attention, unit: usize, name: &str) -> String {
    let mut out = format!(
        "where token {unit} “{}” looked, layer by layer (mean of heads; █ picture, ▒ sink, ░ text)\n",
        name.trim()
    );
    for l in 0..att.layers() {
        let row = head_row(att, l, HeadSel::Mean, unit);
        let sh = Shares::of(att, &row);
        let mut strip = String::new();
        let mut filled = 0usize;
        let parts = sh.parts();
        for (i, (label, v)) in parts.iter().enumerate() {
            let glyph = if i + 1 == parts.len() {
                '░'
            } else if label.starts_with("sink ") {
                '▒'
            } else {
                '█'
            };
            let end = if i + 1 == parts.len() {
                20
            } else {
                (filled + (v.clamp(0.0, 1.0) * 20.0).round() as usize).min(20)
            };
            strip.extend(std::iter::repeat_n(glyph, end.saturating_sub(filled)));
            filled = filled.max(end);
        }
        out.push_str(&format!(
            "  layer {:<3} {strip}  {}\n",
            att.layer_number(l),
            shares(att, &row)
        ));
    }
    out
}

/// One line per generated token: its row's shares, and the patch of each picture it looked at
/// most.
fn generated_lines(att: &Attention, layer: usize, head: HeadSel, what: &str) -> String {
    let mut out = format!(
        "{} · layer {} {what} · where each generated token looked\n",
        att.model.name(),
        att.layer_number(layer)
    );
    for u in (0..att.n_queries()).filter(|&u| att.queries().generated.get(u) == Some(&true)) {
        let row = head_row(att, layer, head, u);
        let word = att.queries().display.get(u).cloned().unwrap_or_default();
        let mut most = Vec::new();
        for (i, p) in att.pictures.iter().enumerate() {
            let on = picture_row(att, p, &row);
            let best = (0..on.len()).max_by(|&a, &b| on[a].total_cmp(&on[b]));
            if let Some(k) = best {
                most.push(format!(
                    "{} most at {}",
                    p.name(i),
                    p.image.cells[k].label()
                ));
            }
        }
        out.push_str(&format!(
            "{u:>5} {:<16} {} · {}\n",
            format!("“{}”", word.trim()),
            shares(att, &row),
            most.join(", ")
        ));
    }
    out
}

/// The figure `spec` of unit `query`'s attention over the first picture.
pub(super) fn draw(
    att: &Attention,
    spec: &PictureSpec,
    query: Query,
    look: &Look,
) -> Result<Canvas, ImageError> {
    // A cut picture is drawn as its tiles (or crops) put back together, and, where one
    // overlay is drawn, its whole view beside them.
    let whole = PictureView::whole(&att.pictures, 0).ok_or_else(|| {
        refuse("this attention has no picture (it is not from a vision-language model)".into())
    })?;
    let stitched = PictureView::stitched(&att.pictures, 0);
    let view = stitched.as_ref().unwrap_or(&whole);
    let image = &view.image;
    let unit = query_unit(att, query)?;
    let name = att.queries().display.get(unit).cloned().unwrap_or_default();
    let qname = format!("from token {unit} “{}”", name.trim());
    let count = att
        .pictures
        .iter()
        .enumerate()
        .map(|(i, p)| p.picture(i) + 1)
        .max()
        .unwrap_or(0);
    let crops = att
        .pictures
        .first()
        .and_then(|p| p.tile)
        .is_some_and(|t| t.crop);
    let parts = if crops { "crops" } else { "tiles" };
    let one = if count > 1 {
        format!(" · picture 1 of {count}")
    } else {
        String::new()
    };
    let many = match &stitched {
        Some(_) => format!("{one} · its {parts} put together"),
        None if att.pictures.first().is_some_and(|p| p.tile.is_some()) && count == 1 => {
            " · its whole view".to_string()
        }
        None => one.clone(),
    };
    let model = att.model.name();
    if query == Query::Generated {
        let layer = match spec {
            PictureSpec::Head { layer, .. } | PictureSpec::Rollout { layer, .. } => *layer,
            PictureSpec::Layer { layer } => *layer,
            PictureSpec::Model => att.layers() - 1,
        };
        let head = match spec {
            PictureSpec::Head { head, .. } => *head,
            _ => HeadSel::Mean,
        };
        return strip(att, view, layer, head, &many, look);
    }
    match spec {
        PictureSpec::Head { layer, .. } | PictureSpec::Rollout { layer, .. } => {
            let (row, what) = match spec {
                PictureSpec::Rollout { matrix, layer, .. } => {
                    let nk = att.n_keys();
                    (
                        matrix[unit * nk..(unit + 1) * nk].to_vec(),
                        format!("rollout to layer {}", att.layer_number(*layer)),
                    )
                }
                PictureSpec::Head { head, .. } => (
                    head_row(att, *layer, *head, unit),
                    match head {
                        HeadSel::Index(h) => {
                            format!("layer {} head {h}", att.layer_number(*layer))
                        }
                        HeadSel::Mean => {
                            format!("layer {} mean of heads", att.layer_number(*layer))
                        }
                    },
                ),
                _ => unreachable!("matched above"),
            };
            let rollout = matches!(spec, PictureSpec::Rollout { .. });
            let caption = if rollout {
                "rollout weight"
            } else {
                crate::weight_caption(att)
            };
            match &stitched {
                Some(tiles) => {
                    let (on_tiles, on_whole) =
                        (view_row(att, tiles, &row), view_row(att, &whole, &row));
                    let [rows, cols] = att.pictures[0].tile.map_or([0, 0], |t| t.of);
                    let share = |v: &[f32]| v.iter().sum::<f32>() * 100.0;
                    pair_overlay(
                        (
                            &tiles.image,
                            &on_tiles,
                            &format!(
                                "its {rows}×{cols} {parts}: {:.0}% of the row",
                                share(&on_tiles)
                            ),
                        ),
                        (
                            &whole.image,
                            &on_whole,
                            &format!("whole view: {:.0}%", share(&on_whole)),
                        ),
                        &format!("{model} · {what}{one} · {qname} → {}", shares(att, &row)),
                        caption,
                        look,
                    )
                }
                None => single_overlay(
                    image,
                    &view_row(att, view, &row),
                    None,
                    &format!("{model} · {what}{many}"),
                    &format!("{qname} → {}", shares(att, &row)),
                    caption,
                    look,
                ),
            }
        }
        PictureSpec::Layer { layer } => {
            let rows: Vec<Vec<f32>> = (0..att.heads())
                .map(|h| view_row(att, view, &head_row(att, *layer, HeadSel::Index(h), unit)))
                .collect();
            heads_grid(
                image,
                &rows,
                None,
                &format!(
                    "{model} · layer {} · {qname}{many}",
                    att.layer_number(*layer)
                ),
                look,
            )
        }
        PictureSpec::Model => {
            let on_it = on_it(view);
            let (layers, heads) = (att.layers(), att.heads());
            let (tile, label_w, top) = (96, 60, 66);
            let grid_w = label_w + heads * (tile + 6) + 8;
            // Beside the grid, each layer's strip of shares (mean of heads).
            let (strip_x, strip_w) = (grid_w + 130, 230);
            let title = format!("{model} · every layer × head · {qname}{many}");
            let mut c = Canvas::new(
                (strip_x + strip_w + 12).max(heading_width(&title, image)),
                (top + layers * (tile + 18) + 8).max(top + 280),
                look,
            )?;
            c.text(
                "where the row went (mean of heads)",
                11.0,
                strip_x as i32,
                top as i32 - 10,
                look.pal.text,
            );
            own_scale_bar(&mut c, (grid_w as i32 + 8, top as i32 + 6), look);
            heading(&mut c, &title, image, look);
            for h in 0..heads {
                let x = (label_w + h * (tile + 6)) as i32;
                c.text(&format!("H{h}"), 11.0, x, top as i32 - 10, look.pal.text);
            }
            for l in 0..layers {
                let y0 = top + l * (tile + 18);
                let label = format!("L{}", att.layer_number(l));
                c.text(&label, 11.0, 8, (y0 + tile / 2) as i32, look.pal.text);
                for h in 0..heads {
                    let row = head_row(att, l, HeadSel::Index(h), unit);
                    let on = view_row(att, view, &row);
                    let o = overlay(image, &on, tile, None, look);
                    let x0 = label_w + h * (tile + 6);
                    c.overlay_at(&o, x0, y0);
                    let share = format!("{:.0}% {on_it}", on.iter().sum::<f32>() * 100.0);
                    c.text(&share, 9.0, x0 as i32, (y0 + o.h + 8) as i32, look.pal.text);
                }
                let row = head_row(att, l, HeadSel::Mean, unit);
                let y = (y0 + tile / 2) as i32;
                let place = (strip_x as i32, y - 16, strip_w as i32, 14);
                share_strip(&mut c, &Shares::of(att, &row), place, look);
                c.text(
                    &shares(att, &row),
                    9.0,
                    strip_x as i32,
                    y + 8,
                    look.pal.text,
                );
            }
            Ok(c)
        }
    }
}

/// What an overlay's share is of: the picture, or a cut picture's tiles.
fn on_it(view: &PictureView) -> &'static str {
    if view.stitched {
        "on its parts"
    } else {
        "on it"
    }
}

/// One small overlay per generated token (at `layer`, one head or the mean), in order, each
/// labelled with the token and its row's share on the picture, wrapped into rows.
fn strip(
    att: &Attention,
    view: &PictureView,
    layer: usize,
    head: HeadSel,
    many: &str,
    look: &Look,
) -> Result<Canvas, ImageError> {
    let image = &view.image;
    let on_it = on_it(view);
    let generated: Vec<usize> = (0..att.n_queries())
        .filter(|&u| att.queries().generated.get(u).copied().unwrap_or(false))
        .collect();
    let what = match head {
        HeadSel::Index(h) => format!("head {h}"),
        HeadSel::Mean => "mean of heads".into(),
    };
    let title = format!(
        "{} · layer {} {what} · where each generated token looked{many}",
        att.model.name(),
        att.layer_number(layer)
    );
    let (tile, label_h, top) = (120, 34, 52);
    let per_row = generated.len().clamp(1, 8);
    let rows = generated.len().div_ceil(per_row).max(1);
    let grid_w = per_row * (tile + 10) + 8;
    let mut c = Canvas::new(
        (grid_w + 130).max(heading_width(&title, image)),
        (top + rows * (tile + label_h + 8)).max(top + 280),
        look,
    )?;
    own_scale_bar(&mut c, (grid_w as i32 + 8, top as i32 + 20), look);
    heading(&mut c, &title, image, look);
    for (i, &u) in generated.iter().enumerate() {
        let row = head_row(att, layer, head, u);
        let on = view_row(att, view, &row);
        let o = overlay(image, &on, tile, None, look);
        let (x0, y0) = (
            8 + (i % per_row) * (tile + 10),
            top + (i / per_row) * (tile + label_h + 8),
        );
        let word = att.queries().display.get(u).cloned().unwrap_or_default();
        let label = super::font::label(&format!("{u} “{}”", word.trim()), 18);
        c.text(&label, 11.0, x0 as i32, y0 as i32 + 6, look.pal.text);
        c.overlay_at(&o, x0, y0 + 14);
        let share = format!("{:.0}% {on_it}", on.iter().sum::<f32>() * 100.0);
        let y = (y0 + 14 + o.h + 10) as i32;
        c.text(&share, 10.0, x0 as i32, y, look.pal.text);
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::fixtures::synthetic;
    use crate::attention::MaskKind;

    /// `<s>`, a 1 × 2 picture's two image tokens, two words; the last row puts 0.1 on `<s>`,
    /// 0.2 and 0.3 on the picture, 0.15 and 0.25 on the words.
    fn pictured() -> Attention {
        let labels = ["<s>", "<img1 0,0>", "<img1 0,1>", "a", "b"];
        let n = labels.len();
        let att = synthetic(&labels, 1, 1);
        let mut weights = vec![0f32; n * n];
        for q in 0..n {
            weights[q * n] = 1.0;
        }
        weights[(n - 1) * n..].copy_from_slice(&[0.1, 0.2, 0.3, 0.15, 0.25]);
        let att = att
            .derive(att.level, false, att.queries().clone(), None, weights)
            .unwrap()
            .with_mask(MaskKind::Causal);
        let image = crate::attention::fixtures::two_patch_picture();
        att.with_pictures(vec![PictureTokens {
            first: 1,
            image,
            bidirectional: false,
            tile: None,
        }])
        .unwrap()
    }

    /// A picture at the very start (PaliGemma): its first token is the sink, counted once, in
    /// the picture's share; the parts add up to the row.
    #[test]
    fn a_sink_inside_the_picture_is_the_picture_s() {
        let labels = ["<img1 0,0>", "<img1 0,1>", "<s>", "a", "b"];
        let n = labels.len();
        let att = synthetic(&labels, 1, 1);
        let mut weights = vec![0f32; n * n];
        for q in 0..n {
            weights[q * n] = 1.0;
        }
        weights[(n - 1) * n..].copy_from_slice(&[0.1, 0.2, 0.3, 0.15, 0.25]);
        let att = att
            .derive(att.level, false, att.queries().clone(), None, weights)
            .unwrap()
            .with_mask(MaskKind::Causal)
            .with_pictures(vec![PictureTokens {
                first: 0,
                image: crate::attention::fixtures::two_patch_picture(),
                bidirectional: false,
                tile: None,
            }])
            .unwrap();
        assert_eq!(att.sink(), Some(0));
        let row = head_row(&att, 0, HeadSel::Index(0), 4);
        let sh = Shares::of(&att, &row);
        assert!(sh.sink.is_none());
        assert!((sh.pictures[0] - 0.3).abs() < 1e-6, "{:?}", sh.pictures);
        assert!((sh.text - 0.7).abs() < 1e-6, "{}", sh.text);
    }

    #[test]
    fn a_row_is_split_into_the_picture_the_sink_and_the_text() {
        let att = pictured();
        let row = head_row(&att, 0, HeadSel::Index(0), 4);
        let on = picture_row(&att, &att.pictures[0], &row);
        assert_eq!(on, vec![0.2, 0.3]);
        assert_eq!(
            shares(&att, &row),
            "picture 1 50% · sink <s> 10% · text 40%"
        );
    }

    #[test]
    fn the_strip_of_shares_per_layer_reads_the_titles_shares() {
        let att = pictured();
        let row = head_row(&att, 0, HeadSel::Mean, 4);
        let sh = Shares::of(&att, &row);
        // 0.2 + 0.3 on the picture, 0.1 on the sink `<s>`, 0.15 + 0.25 on the words.
        assert_eq!(sh.pictures, vec![0.2 + 0.3]);
        assert_eq!(sh.sink, Some(("<s>".to_string(), 0.1)));
        assert!((sh.text - (0.15 + 0.25)).abs() < 1e-6);
        let view = terminal_view(&att, 0, HeadSel::Mean, Query::Token(4), false).unwrap();
        // 20 characters: 10 of picture, 2 of sink, the rest text.
        let line = format!(
            "  layer 0   {}{}{}  picture 1 50% · sink <s> 10% · text 40%",
            "█".repeat(10),
            "▒".repeat(2),
            "░".repeat(8)
        );
        assert!(view.contains(&line), "{view}");
    }

    #[test]
    fn the_query_is_a_token_number_and_the_last_token_by_default() {
        let att = pictured();
        assert_eq!(query_unit(&att, Query::Cls).unwrap(), 4);
        assert_eq!(query_unit(&att, Query::Token(3)).unwrap(), 3);
        let off = query_unit(&att, Query::Token(5)).unwrap_err().to_string();
        assert!(off.contains("token 5 is not one of the 5 tokens"), "{off}");
        let patch = query_unit(&att, Query::Patch(0, 0))
            .unwrap_err()
            .to_string();
        assert!(patch.contains("a token's number"), "{patch}");
        assert_eq!("12".parse::<Query>().unwrap(), Query::Token(12));
    }

    #[test]
    fn the_overlay_is_drawn_for_a_head_a_layer_and_the_model() {
        let att = pictured();
        let look = Look::of(&super::super::ImageOptions::default());
        for spec in [
            PictureSpec::Head {
                layer: 0,
                head: HeadSel::Mean,
            },
            PictureSpec::Layer { layer: 0 },
            PictureSpec::Model,
        ] {
            let c = draw(&att, &spec, Query::Cls, &look).unwrap();
            assert!(c.w > 100 && c.h > 100, "{spec:?}");
        }
    }
}
