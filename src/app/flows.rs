//! The flows of one invocation of the CLI: check the flags into a plan, then either load the
//! model once and run the text through it (a library [`RunRequest`], which decides what running
//! this model on this text means), read attention from a file (`attnviz render`), run a corpus,
//! or merge shards; the library's [`report::write`] writes what the plan's outputs ask for.

use std::io::{self, Read};
use std::mem::ManuallyDrop;

use attnviz::analysis::{reweighted, Weighting};
use attnviz::attention::{Attention, AttentionKind, AttentionSet};
use attnviz::choice::Choice;
use attnviz::model::Model;
use attnviz::output::OutputError;
use attnviz::render::image::Figure;
use attnviz::report;
use attnviz::request::{Run, RunRequest};
use attnviz::save::LayerWriter;
use attnviz::{import, tokenize};

use super::cli::Args;
use super::error::{note, Error};
use super::plan::{self, Mode, Render, Single};
use super::progress::{Bars, CorpusBar, GenerateBar};
use super::words;

/// The hub, with downloads drawn as bars on standard error.
fn hub() -> attnviz::model::Hub {
    attnviz::model::Hub::from_env().with_progress(std::sync::Arc::new(Bars::default()))
}

/// Settle the worker threads (`--threads`, capped; see [`attnviz::threads::configure`]) and say
/// so when a request was capped.
fn configure_threads(flag: Option<usize>) -> usize {
    let asked = flag.or_else(attnviz::threads::from_env);
    let threads = attnviz::threads::configure(flag);
    if let Some(asked) = asked.filter(|&n| n > threads) {
        let source = if flag.is_some() {
            "--threads"
        } else {
            "RAYON_NUM_THREADS"
        };
        note(&format!(
            "note: {source} {asked} is more than {} × the {} CPUs available; using {threads}",
            attnviz::threads::MAX_THREADS_PER_CPU,
            threads / attnviz::threads::MAX_THREADS_PER_CPU,
        ));
    }
    threads
}

/// Run the command line described by `args`.
pub fn run(args: &Args) -> Result<(), Error> {
    // `attnviz diff` reads two files and runs no model: its own flow.
    if let Some(super::cli::Command::Diff(d)) = &args.command {
        return super::diff::run(d);
    }
    if let Some(super::cli::Command::Serve(serve)) = &args.command {
        return super::serve::run(serve);
    }
    if let Some(super::cli::Command::Models(m)) = &args.command {
        return super::models::run(m);
    }
    // Everything that needs no model first: a mistake costs no load and leaves no file.
    let plan = plan::plan(args).map_err(Error::Usage)?;
    if let Mode::Merge(job) = &plan.mode {
        // No model and no threads: merging adds integers.
        return attnviz::corpus::merge::run(job).map_err(words::merge);
    }
    let threads = configure_threads(plan.threads);
    match plan.mode {
        // Corpus mode lives in its own module.
        Mode::Corpus(job) => {
            attnviz::corpus::run(&job, &hub(), threads, &CorpusBar::new()).map_err(words::corpus)
        }
        Mode::Merge(job) => attnviz::corpus::merge::run(&job).map_err(words::merge),
        Mode::Single(single) => run_single(&single),
        Mode::Render(render) => run_render(&render),
    }
}

/// What a model found in a store by name leaves for the user to know: which of several GGUF
/// files was taken, and that Ollama's own template is not what `--chat` applies.
fn store_notes(model: &Model, chat: bool) {
    let Some(found) = model.store() else { return };
    if let Some(first) = found.passed_over.first() {
        let prefix = found.name.rsplit_once('/').map_or("", |(p, _)| p);
        let file = found.name.rsplit('/').next().unwrap_or_default();
        note(&format!(
            "note: {prefix} holds {} GGUF files; using {file} (the first by name; name one as \
             {prefix}/{first} to use another)",
            found.passed_over.len() + 1
        ));
    }
    if chat && found.layers.template.is_some() {
        note(&format!(
            "note: --chat wraps the prompt in the chat template of {}'s GGUF file \
             (tokenizer.chat_template); Ollama's template layer (a Go template) is not applied",
            found.name
        ));
    }
}

/// One text (or pair, or picture): load, run the plan's request once, write the plan's
/// outputs.
fn run_single(plan: &Single) -> Result<(), Error> {
    // The weights, the captured attention and the analyses are left for the OS to reclaim
    // when the process exits, which it does right after this function: freeing them first
    // (unmapping the checkpoint, returning the capture buffer page by page) only adds time.
    let request = &plan.request;
    let model = ManuallyDrop::new(
        Model::load_with_projector(
            &plan.model,
            &plan.revision,
            &hub(),
            request.max_memory,
            request.mmproj.as_deref(),
        )?
        .with_full_path(plan.full_paths),
    );
    store_notes(&model, request.chat);
    // Checked before anything is read or run; an encoder–decoder's is checked per kind once
    // its attentions exist, each against its own layers and heads.
    let seq2seq = model.is_seq2seq();
    if !seq2seq {
        match model.captured_layer_numbers() {
            // A hybrid model (Qwen3-Next): `--layer` names one of its attention layers.
            Some(numbers) => plan.selection_among(model.info(), &numbers),
            None => plan.selection(model.info()),
        }
        .map_err(Error::Usage)?;
    }
    let hybrid = model.non_softmax_note();
    plan.check_rollout(model.info().layers, seq2seq, hybrid.as_deref())
        .map_err(Error::Usage)?;
    let limit = tokenize::byte_limit(model.max_positions());
    // `-` reads standard input, now that the model's byte limit is known.
    let mut stdin_cut = false;
    let read;
    // A vision-language model's prompt is read there too; a vision model reads no text.
    let reads_text = request.images.is_empty() || model.is_multimodal();
    let request = if reads_text && request.text == "-" {
        let (text, cut) = read_text(
            &request.text,
            limit,
            request.truncate,
            model.max_positions(),
        )?;
        stdin_cut = cut;
        read = RunRequest {
            text,
            ..request.clone()
        };
        &read
    } else {
        request
    };
    if let Some(path) = &plan.save {
        if request.wants_heads() {
            return Err(Error::Usage(
                "--save-attention streams the attention to a file; head attribution and \
                 ablation are not written there: run them separately"
                    .into(),
            ));
        }
        if request.lens.is_some() {
            return Err(Error::Usage(
                "--save-attention streams the attention to a file; the logit lens (--lens, \
                 --figure lens) is not written there: run them separately"
                    .into(),
            ));
        }
        if !seq2seq && request.images.is_empty() {
            return save_streamed(plan, &model, request, path);
        }
    }
    let run = request
        .run(&model, &GenerateBar::new())
        .map_err(words::request)?;
    say_generated(&run, &model);
    // What the outputs ask of this attention (its kind, the layer and head, a query on the
    // picture's grid), refused before any file is written, the saved capture included.
    let summarised = run.measured.summary.is_some();
    if !summarised {
        plan.report.check(&run.set)?;
    }
    if let Some(path) = &plan.save {
        // An encoder–decoder captures its three attentions together, and a vision model its
        // layers with the picture's token norms: written from the run.
        let mut writer = LayerWriter::create(path, plan.save_dtype)?;
        for att in run.set.iter() {
            writer.write_attention(att).map_err(|source| OutputError {
                path: path.clone(),
                source,
            })?;
        }
        let kinds: Vec<&Attention> = run.set.iter().collect();
        writer.finish(&kinds, run_document(&run))?;
    }
    let bytes_cut = stdin_cut || run.bytes_cut;
    if bytes_cut {
        note(&format!(
            "note: the input is over {limit} bytes; only its first {limit} bytes were read \
             (--truncate)"
        ));
    }
    if let Some(from) = run.truncated_from {
        let what = if bytes_cut {
            "those bytes were"
        } else {
            "the input was"
        };
        // An encoder–decoder's input is its source: the encoder's tokens, whatever --kind shows.
        let kept = match run.set.encoder() {
            Some(encoder) => encoder.len(),
            None => run.set.primary().len(),
        };
        note(&format!(
            "note: {what} {from} tokens; truncated to the model's maximum of {kept} (--truncate)"
        ));
    }

    if summarised {
        return write_summarised(plan, &model, run);
    }

    // Whether every layer was captured (an encoder–decoder's kinds have their own layer counts:
    // every layer is captured unless --layers picks some); a rollout of some was refused above.
    let every_layer = if seq2seq {
        request.layers.is_none()
    } else {
        run.set
            .primary()
            .layer_numbers()
            .iter()
            .copied()
            .eq(0..model.info().layers)
    };
    let out = &plan.report;

    // Every attention of the run, token level: one value, or an encoder–decoder's three;
    // weighted by what it moves when --weighting asks (titles say so).
    let tokens = ManuallyDrop::new(match &run.value_weighted {
        Some(weights) if plan.weighting != Weighting::Raw => {
            let mut att = reweighted(run.set.primary(), weights, plan.weighting)
                .map_err(|e| Error::Usage(e.to_string()))?;
            att.model.name = Some(format!("{} · {}", att.model.name(), plan.weighting.title()));
            AttentionSet::single(att)
        }
        _ => run.set,
    });

    // The model as every export names it: a local folder by its name (`--full-paths`: its full
    // path).
    let mut settings = vec![("model".to_string(), model.info().id.clone())];
    if !std::path::Path::new(&plan.model).is_dir() {
        settings.push(("revision".to_string(), plan.revision.clone()));
    }
    if request.truncate {
        settings.push(("truncate".to_string(), "yes".to_string()));
    }
    if plan.weighting != Weighting::Raw {
        settings.push(("weighting".to_string(), plan.weighting.name().to_string()));
    }
    // The head detectors' induction score is the model's: one probe run, when statistics are
    // asked for (the terminal table, the JSON). A model the probe cannot be built for (a
    // tokenizer with no ordinary token for it, as rxnmapper's) goes without, as in corpus mode.
    let mut measured = run.measured;
    if out.terminal.stats.is_some() || out.files.json.is_some() {
        measured.induction = attnviz::request::induction_probe(&model).ok().flatten();
    }
    let finished = report::Finished {
        set: &tokens,
        measured: &measured,
        every_layer,
        settings,
        model_name: model.info().name().to_string(),
    };
    write_report(out, &finished)
}

/// A summarised run's outputs (`--summarise`): the terminal view of its summaries, the JSON
/// export and the HTML report; `--layer` picks the layer shown head by head, and in detail in
/// the report (default: the last summarised).
fn write_summarised(plan: &Single, model: &Model, run: attnviz::request::Run) -> Result<(), Error> {
    let summary = run.measured.summary.as_ref().expect("a summarised run");
    let numbers: Vec<usize> = summary.layers.iter().map(|l| l.layer).collect();
    let layer = match plan.report.choose.layer {
        None => numbers.len().saturating_sub(1),
        Some(l) => numbers.iter().position(|&n| n == l).ok_or_else(|| {
            Error::Usage(format!(
                "--layer {l} was not summarised; --layers picked {}",
                attnviz::attention::layer_list(&numbers)
            ))
        })?,
    };
    let finished = report::Finished {
        set: &run.set,
        measured: &run.measured,
        every_layer: numbers.len() == model.info().layers,
        settings: vec![("model".to_string(), model.info().id.clone())],
        model_name: model.info().name().to_string(),
    };
    let mut sink = report::Sink {
        out: &mut io::stdout(),
        side: &mut io::stderr(),
        note: &mut |_| {},
    };
    report::write_summarised(&plan.report, &finished, layer, &mut sink)?;
    Ok(())
}

/// [`report::write`] to standard output and standard error, its notes as notes; what it
/// computed is left for the system to reclaim (the process exits right after).
fn write_report(plan: &report::Plan, run: &report::Finished<'_>) -> Result<(), Error> {
    // Not locked for the whole write: the signal handler's thread writes its line to
    // standard error while a file is being written.
    let mut sink = report::Sink {
        out: &mut io::stdout(),
        side: &mut io::stderr(),
        note: &mut |n| match n {
            report::Note::WroteFolder { files, dir } => {
                note(&format!("wrote {files} files into {}", dir.display()))
            }
        },
    };
    let analysed = report::write(plan, run, &mut sink)?;
    std::mem::forget(analysed);
    Ok(())
}

/// `--save-attention` for an encoder or a decoder: each layer streamed to the file as the model
/// computes it, so no capture of every layer is ever held; then the outputs asked for are drawn
/// from the saved file, reading only the layer they show when that is all they need.
fn save_streamed(
    plan: &Single,
    model: &Model,
    request: &RunRequest,
    path: &std::path::Path,
) -> Result<(), Error> {
    let mut writer = LayerWriter::create(path, plan.save_dtype)?;
    let run = request
        .run_into(model, &GenerateBar::new(), &mut writer)
        .map_err(words::request)?;
    say_generated(&run, model);
    if let Some(from) = run.truncated_from {
        note(&format!(
            "note: the input was {from} tokens; truncated to the model's maximum of {} \
             (--truncate)",
            run.set.primary().len()
        ));
    }
    writer.finish(&[run.set.primary()], run_document(&run))?;
    let out = &plan.report;
    if !out.draws() {
        return Ok(());
    }
    // The single-layer views need their layer only (--layer, default the last captured).
    let one_layer =
        !(out.terminal.stats.is_some() || out.files.json.is_some() || out.html_report())
            && matches!(
                out.figure.figure,
                Figure::Head | Figure::Layer | Figure::Mean
            );
    let layers = one_layer.then(|| {
        let last = request
            .layers
            .as_ref()
            .and_then(|l| l.last().copied())
            .or_else(|| model.captured_layer_numbers()?.last().copied())
            .unwrap_or(model.info().layers.saturating_sub(1));
        vec![out.choose.layer.unwrap_or(last)]
    });
    render_file(path, None, None, layers, plan)
}

/// The whole run's fields a saved capture records beside its kinds.
fn run_document(run: &Run) -> serde_json::Value {
    serde_json::json!({
        "target": run.set.target(),
        "generated_text": run.generated_text,
    })
}

/// What a run generated, and how an encoder–decoder's target was cut, on stderr, in the order
/// the run found them.
fn say_generated(run: &Run, model: &Model) {
    if let Some(speech) = &run.measured.speech {
        say_speech(speech, run);
        return;
    }
    if let Some(n) = run.default_generation {
        note(&format!(
            "{} is an encoder–decoder model: TEXT is the source, and with neither --target nor \
             --generate the decoder generates up to {n} tokens greedily (--target TEXT \
             teacher-forces an output; --generate N sets the length)",
            model.info().name()
        ));
    }
    if let Some(g) = &run.generation {
        let text = run.generated_text.as_deref().unwrap_or_default();
        note(&format!(
            "generated {} token{}{}: {text:?}",
            g.generated().len(),
            if g.generated().len() == 1 { "" } else { "s" },
            if g.stopped_at_eos {
                " (stopped at the end-of-sequence token)"
            } else {
                ""
            }
        ));
    }
    // The decoder reads the target shifted right: as many tokens as the labels kept.
    let kept = run.target_kept;
    match (run.target_bytes_cut, run.target_truncated_from) {
        (false, Some(from)) => note(&format!(
            "note: the target was {from} tokens; truncated to the decoder's maximum of {kept} \
             (--truncate)"
        )),
        (true, Some(from)) => note(&format!(
            "note: the target is longer than the decoder could use: its first bytes were read, \
             {from} tokens, truncated to the decoder's maximum of {kept} (--truncate)"
        )),
        (true, None) => note(
            "note: the target is longer than the decoder could use; only its first bytes were \
             read (--truncate)",
        ),
        (false, None) => {}
    }
}

/// `attnviz render FILE`: read the attention, say what the reader noticed, and write every
/// output as for a single input (the analyses that need the model were refused in planning). A file of an encoder–decoder run (JSON version 3, or arrays of
/// the three kinds) is read whole: `--kind` picks what the single-kind outputs show, and JSON
/// gets all three.
fn run_render(render: &Render) -> Result<(), Error> {
    let tokens = match &render.tokens {
        Some(path) => Some(import::read_token_file(path)?),
        None => None,
    };
    render_file(
        &render.file,
        tokens,
        render.max_memory,
        render.layers.clone(),
        &render.out,
    )
}

/// Read attention from `file` (its `layers` only, for a saved capture) and write `plan`'s
/// outputs from it.
fn render_file(
    file_path: &std::path::Path,
    tokens: Option<Vec<String>>,
    max_memory: Option<u64>,
    layers: Option<Vec<usize>>,
    plan: &Single,
) -> Result<(), Error> {
    let out = &plan.report;
    let opts = import::ReadOptions {
        tokens,
        max_memory,
        layers,
        cost: render_cost(out),
        // Outputs that show one kind need only its weights (JSON and the report hold every
        // kind of an encoder–decoder file).
        only: (out.files.json.is_none() && !out.html_report())
            .then(|| out.kind.unwrap_or(AttentionKind::Cross)),
        full_path: plan.full_paths,
    };
    let mut imported = import::read(file_path, &opts).map_err(|e| match e {
        e @ import::ImportError::TooBig { .. } => Error::Usage(format!("{e} with --max-memory")),
        e => Error::Import(e),
    })?;
    for w in &imported.warnings {
        note(&format!("warning: {w}"));
    }
    let file = file_path.display();
    if let Some(kind) = out.kind {
        if imported.kind(kind).is_none() {
            return Err(Error::Usage(format!(
                "{file} holds no {} attention (it holds {}); choose one of those with --kind",
                kind.as_str(),
                imported.kinds_in_words()
            )));
        }
    }
    let set = match imported.kinds.as_slice() {
        // Moved, not copied: the weights are most of the memory.
        [_] => imported.kinds.pop().map(AttentionSet::single),
        [enc, dec, cross]
            if [enc.kind, dec.kind, cross.kind] == attnviz::attention::ENCODER_DECODER_KINDS =>
        {
            // Arrays without texts (.npz, .safetensors) label each side by its own tokens:
            // every value of a run carries the source as its text, and the decoder's is the
            // target.
            let target = imported
                .target
                .clone()
                .or_else(|| (dec.text != enc.text).then(|| dec.text.clone()));
            // A generated run's decoder text is what it generated (a target, if any, is
            // quoted by `encoder_decoder`).
            let source = |a: &Attention| {
                let mut a = a.clone();
                a.text = enc.text.clone();
                a.pair = None;
                a.target_text = imported.generated_text.clone();
                a
            };
            AttentionSet::encoder_decoder(enc.clone(), source(dec), source(cross), target).ok()
        }
        _ => None,
    };
    let set = match set {
        Some(set) => set,
        // Kinds that are not one run's whole set: draw the one --kind picks.
        None => match out.kind {
            Some(kind) => AttentionSet::single(imported.kind(kind).expect("checked").clone()),
            None => {
                return Err(Error::Usage(format!(
                    "{file} holds {} attention; choose one with --kind {}",
                    imported.kinds_in_words(),
                    imported.kind_names().join("|")
                )))
            }
        },
    };
    let every_layer = set
        .iter()
        .all(|a| a.layer_numbers().iter().copied().eq(0..a.layers()));
    // The file as every export names files: by its name (`--full-paths`: its full path).
    let source = if plan.full_paths {
        attnviz::model::source::full_path(file_path)
    } else {
        attnviz::model::source::local_name(file_path)
    };
    let settings = vec![
        ("source".to_string(), source),
        ("format".to_string(), imported.format.clone()),
    ];
    // No model here: nothing measured beyond the attention, and no induction probe.
    let model_name = set.primary().model.name().to_string();
    let finished = report::Finished {
        set: &set,
        measured: &report::Measured::default(),
        every_layer,
        settings,
        model_name,
    };
    write_report(out, &finished)
}

/// What `attnviz render`'s outputs cost beyond the f32 weights themselves, per weight and per
/// cell of one layer-and-head matrix: the peak resident memory of each output over the
/// reading alone, fitted on files shaped [1, 1, 2048, 2048], [16, 16, 128, 128] and
/// [4, 4, 1024, 1024] and checked on [2, 2, 3000, 3000] and [8, 12, 700, 700], rounded up
/// (docs/render.md, "Memory"). Outputs asked for together add up.
fn render_cost(plan: &report::Plan) -> import::Cost {
    let mut cost = import::Cost::default();
    let mut add = |per_weight: u64, per_cell: u64| {
        cost.per_weight += per_weight;
        cost.per_cell += per_cell;
    };
    if plan.terminal.view.is_some() {
        // The strongest links of the shown matrix, sorted (24 bytes a cell), and the mean.
        add(0, 28);
    }
    if plan.figures() {
        add(0, 8);
        if plan.figure.figure == Figure::Rollout {
            add(4, 24);
        }
    }
    if plan.files.html.is_some() {
        add(2, 20);
    }
    if plan.files.report.is_some() {
        add(9, 20);
    }
    if plan.files.json.is_some() {
        add(7, 7);
    }
    if plan.view.words || plan.view.no_special {
        // The view's own copy of the weights.
        add(4, 0);
    }
    if plan.files.json.is_some() || plan.html_report() {
        // Every kind of an encoder–decoder file, copied into its set.
        add(4, 0);
    }
    cost
}

/// `text`, or standard input when it is `-`, read up to `limit` bytes (the model's
/// [`tokenize::byte_limit`]): more is an error, or with `truncate` is cut (at a character
/// boundary) and left unread. Returns the text and whether it was cut.
fn read_text(
    text: &str,
    limit: usize,
    truncate: bool,
    max_positions: usize,
) -> Result<(String, bool), Error> {
    if text != "-" {
        // An argument is already in memory; the tokenizer bounds its own work by the same limit.
        return Ok((text.to_string(), false));
    }
    let mut buf = Vec::new();
    io::stdin()
        .lock()
        .take(limit as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(Error::Stdin)?;
    let cut = buf.len() > limit;
    if cut {
        if !truncate {
            return Err(Error::Usage(format!(
                "standard input holds more than {limit} bytes, more than a model of \
                 {max_positions} positions can take; shorten it, or pass --truncate to analyse \
                 its beginning"
            )));
        }
        buf.truncate(limit);
    }
    let text = match String::from_utf8(buf) {
        Ok(s) => s,
        // The cut fell inside a character: drop its first bytes.
        Err(e) if cut && e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
        Err(e) => {
            return Err(Error::Usage(format!(
                "standard input is not valid UTF-8 (byte {}); give UTF-8 text",
                e.utf8_error().valid_up_to() + 1
            )))
        }
    };
    Ok((text.trim_end_matches(['\n', '\r']).to_string(), cut))
}

/// A speech run's recording, transcript and word timings, on standard error as the other
/// notes.
fn say_speech(speech: &attnviz::doc::speech::SpeechSection, run: &Run) {
    let language = match (&speech.language, speech.language_detected) {
        (Some(l), true) => format!(", language {l} (detected)"),
        (Some(l), false) => format!(", language {l}"),
        (None, _) => String::new(),
    };
    note(&format!(
        "{}: {:.2} s of audio{}, task {}",
        speech.audio, speech.duration, language, speech.task
    ));
    if speech.windows > 1 {
        note(&format!(
            "note: the recording was read in {} windows; the attention is window {}'s ({:.2}–{:.2} s, --window N picks another), the transcript and word timings cover them all",
            speech.windows,
            speech.window,
            speech.window_start,
            speech.window_start + speech.window_seconds
        ));
        note(&format!(
            "the recording's transcript: {:?}",
            speech.transcript
        ));
    }
    if let Some(g) = &run.generation {
        let n = g.generated().len();
        note(&format!(
            "transcript ({n} token{}{}): {:?}",
            if n == 1 { "" } else { "s" },
            if g.stopped_at_eos {
                ", stopped at <|endoftext|>"
            } else {
                ", stopped at the length limit (--generate N)"
            },
            run.generated_text.as_deref().unwrap_or_default()
        ));
    }
    if !speech.words.is_empty() {
        let heads = if speech.alignment_heads_given {
            "the model's alignment heads"
        } else {
            "every head of the decoder's second half"
        };
        let words: Vec<String> = speech
            .words
            .iter()
            .map(|w| format!("{} {:.2}–{:.2}", w.word.trim(), w.start, w.end))
            .collect();
        note(&format!("word timings ({heads}): {}", words.join(" · ")));
    }
}
