//! What a run prints: the terminal view, the ALTI and value-zeroing matrices, the statistics
//! table, and the tables of the logit lens and of head attribution and ablation.

use std::io::{self, Write};

use crate::attention::Selection;
use crate::render::stats_table::{token_names, write_stats_table, StatsTableOptions};
use crate::render::terminal::{write_matrix_view, write_view, MatrixText, TerminalOptions};

use super::{Analysed, Finished, Plan, ReportError, Sink};

/// Write to one of the sink's writers; a reader that stops early (`| head`) is not an error.
pub(super) fn to(
    w: &mut dyn Write,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), ReportError> {
    match write(w).and_then(|_| w.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(ReportError::Terminal(e)),
        _ => Ok(()),
    }
}

/// The terminal view of the shown kind (`index`, at `selection`) and the statistics table.
pub(super) fn views(
    plan: &Plan,
    run: &Finished<'_>,
    analysed: &Analysed<'_>,
    index: usize,
    selection: Selection,
    sink: &mut Sink<'_>,
) -> Result<(), ReportError> {
    let att = analysed.shown.iter().nth(index).expect("one view per kind");
    let token_att = run.set.iter().nth(index).expect("one value per kind");
    let Selection { layer, head } = selection;
    let induction = run
        .measured
        .induction
        .as_ref()
        .filter(|_| !run.set.is_encoder_decoder());
    if let Some(look) = &plan.terminal.view {
        if att.image.is_some() {
            let view = crate::render::image::picture::terminal_view(
                att,
                layer,
                head,
                plan.figure.query,
                look.color,
            )?;
            to(sink.out, |w| w.write_all(view.as_bytes()))?;
        } else {
            let opts = TerminalOptions {
                color: look.color,
                width: look.width,
                top: look.top,
                raw_tokens: look.raw_tokens,
                expand_pictures: look.expand_pictures,
                ..TerminalOptions::default()
            };
            to(sink.out, |w| write_view(att, selection, &opts, w))?;
            // A speech run's cross-attention: the words with their times, and where each
            // word's attention peaks over the recording.
            if let Some(rec) = crate::render::speech::speech_of(token_att) {
                let which = super::figures::speech_heads(plan, selection);
                let m = crate::render::speech::word_matrix(token_att, which)
                    .map_err(crate::render::image::ImageError::from)?;
                let text = crate::render::speech::terminal_words(rec, &m, look.width);
                to(sink.out, |w| {
                    writeln!(w)?;
                    w.write_all(text.as_bytes())
                })?;
            }
            // A mixture-of-experts model's router at the shown layer, under the attention.
            if let Some(router) = &att.router {
                let number = att.layer_number(layer);
                // The token-level value's labels, as the attention view shows tokens.
                let labels = token_att.queries().shown(look.raw_tokens);
                to(sink.out, |w| {
                    writeln!(w)?;
                    crate::render::router_table::write_router_view(
                        router,
                        number,
                        Some(labels),
                        look.color,
                        w,
                    )
                })?;
            }
            // A hybrid model's token mixing: the gated delta layers that feed the shown
            // attention layer, each on a signed scale under its legend.
            if let Some(mixing) = att.non_softmax.as_ref().and_then(|n| n.mixing.as_deref()) {
                let number = att.layer_number(layer);
                let feeding =
                    crate::render::mixing_table::feeding(mixing, token_att.layer_numbers(), number);
                let labels = token_att.queries().shown(look.raw_tokens);
                to(sink.out, |w| {
                    writeln!(w)?;
                    crate::render::mixing_table::write_mixing_view(
                        mixing,
                        &feeding,
                        head,
                        Some(labels),
                        look.color,
                        look.width,
                        w,
                    )
                })?;
            }
            // A vision-language model's token asked for by number: where on the picture it
            // looked, under the matrix.
            if !att.pictures.is_empty()
                && matches!(
                    plan.figure.query,
                    crate::render::image::picture::Query::Token(_)
                        | crate::render::image::picture::Query::Generated
                )
            {
                let view = crate::render::image::on_picture::terminal_view(
                    att,
                    layer,
                    head,
                    plan.figure.query,
                    look.color,
                )?;
                to(sink.out, |w| w.write_all(view.as_bytes()))?;
            }
            matrices(att, analysed, layer, &opts, sink)?;
        }
    }
    if let Some(base) = &plan.terminal.stats {
        let opts = StatsTableOptions {
            token_names: Some(token_names(token_att)),
            layer_numbers: Some(token_att.layer_numbers().to_vec()),
            induction: induction.map(|p| p.rows_for(token_att.layer_numbers())),
            left_out: token_att.non_softmax.as_ref().map(|n| n.skipped()),
            ..base.clone()
        };
        let stats = analysed.stats(index);
        if plan.terminal.aside {
            // Standard output carries a file: the table goes to the side.
            let res = write_stats_table(stats, &opts, sink.side);
            match res {
                Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
                    return Err(ReportError::Terminal(e))
                }
                _ => {}
            }
        } else {
            let blank = plan.terminal.view.is_some();
            to(sink.out, |w| {
                if blank {
                    writeln!(w)?;
                }
                write_stats_table(stats, &opts, w)
            })?;
        }
    }
    Ok(())
}

/// ALTI and value zeroing through the selected layer, after the terminal view.
fn matrices(
    att: &crate::Attention,
    analysed: &Analysed<'_>,
    layer: usize,
    opts: &TerminalOptions,
    sink: &mut Sink<'_>,
) -> Result<(), ReportError> {
    let through = att.layer_number(layer);
    let matrices = [
        analysed.alti.as_ref().map(|a| {
            (
                a,
                format!(
                    "ALTI (Ferrando et al. 2022) through layer {through}: each row token's \
                     share from each input token, through the values, the residual and the \
                     norms of every layer up to this one (rows sum to 1)"
                ),
            )
        }),
        analysed.value_zeroing.as_ref().map(|a| {
            (
                a,
                format!(
                    "Value zeroing (Mohebbi et al. 2023) through layer {through}: how far \
                     each row token's output moves when an input token's value vector is \
                     zeroed, as shares, rolled out through the layers up to this one (rows \
                     sum to 1)"
                ),
            )
        }),
    ];
    for (view, title) in matrices.into_iter().flatten() {
        let Some(matrix) = view.aggregated.get(layer) else {
            continue;
        };
        let text = MatrixText {
            title,
            axes: "rows: token (after the layer) · columns: input token (its share)".to_string(),
            caption: "share".to_string(),
            top_heading: "Largest input shares (top {top}):".to_string(),
        };
        to(sink.out, |w| {
            writeln!(w)?;
            write_matrix_view(att, matrix, &text, opts, w)
        })?;
    }
    Ok(())
}

/// The tables of what the run measured: head attribution and ablation, then the logit lens;
/// after the terminal view on `out`, or on `side` when standard output carries a file (and
/// not at all when neither is printed).
pub(super) fn measured_tables(
    plan: &Plan,
    run: &Finished<'_>,
    sink: &mut Sink<'_>,
) -> Result<(), ReportError> {
    let m = run.measured;
    let t = &plan.terminal;
    let (attribution, ablation) = (m.head_attribution.as_ref(), m.head_ablation.as_ref());
    if t.heads_table && (attribution.is_some() || ablation.is_some()) {
        use crate::render::heads_table;
        let table = |w: &mut dyn Write| -> io::Result<()> {
            if let Some(a) = attribution {
                heads_table::write_attribution(a, w)?;
            }
            if let Some(a) = ablation {
                if attribution.is_some() {
                    writeln!(w)?;
                }
                heads_table::write_ablation(a, w)?;
            }
            Ok(())
        };
        if t.view.is_some() {
            to(sink.out, table)?;
        } else if t.aside {
            table(sink.side).map_err(ReportError::Terminal)?;
        }
    }
    if let (Some(width), Some(lens)) = (t.lens_table, &m.lens) {
        let table = |w: &mut dyn Write| crate::render::lens_table::write_lens_table(lens, width, w);
        if t.view.is_some() {
            to(sink.out, table)?;
        } else if t.aside {
            table(sink.side).map_err(ReportError::Terminal)?;
        }
    }
    Ok(())
}
