//! A corpus run from start to end: the job (input, folder, model), the lines read in order and
//! checked, the pool of workers that run each line's request and write its outputs, the
//! checkpoints, and the log of progress and bad lines told to the [`Listener`].

use super::folder::FolderProblem;
use super::resume::ResumeProblem;
use super::*;
use crate::report as outputs;

/// Run `job` (flags already checked by the command line's plan step): load the model once with
/// `threads` workers, process every line of the shard, print the averaged statistics table on
/// stdout and a one-line summary on stderr (neither with `quiet`; warnings about bad lines are
/// always printed). Bad lines in stop mode and Ctrl-C end with an error after the summary and
/// the partial file are written.
pub fn run(
    job: &CorpusJob,
    hub: &model::Hub,
    threads: usize,
    listener: &dyn Listener,
) -> Result<(), CorpusError> {
    let fresh = fs::symlink_metadata(&job.out_dir).is_err();
    let result = run_into(job, hub, threads, listener);
    if result.is_err() && fresh {
        // A run that fails before it writes anything (the model does not load, the input does
        // not suit it) leaves no empty folder behind; one with outputs keeps them.
        let _ = fs::remove_dir(job.out_dir.join(super::SENTENCES_DIR));
        let _ = fs::remove_dir(&job.out_dir);
    }
    result
}

/// [`run`], into an output folder it may have created.
fn run_into(
    job: &CorpusJob,
    hub: &model::Hub,
    threads: usize,
    listener: &dyn Listener,
) -> Result<(), CorpusError> {
    let input = &job.input;
    let out_dir = job.out_dir.clone();
    let from_stdin = input.as_os_str() == "-";
    let input_name = input.display().to_string();
    let input_err = |source| CorpusError::Input {
        path: input_name.clone(),
        source,
    };
    // A folder is a corpus of its images, in name order (a vision model's).
    let listed = if input.is_dir() {
        Some(input::image_listing(input).map_err(input_err)?)
    } else {
        None
    };
    let raw: Box<dyn io::Read + Send> = match &listed {
        Some(listing) => Box::new(io::Cursor::new(listing.clone().into_bytes())),
        None => input::open_path(input).map_err(input_err)?,
    };
    let folder = prepare_out_dir(&out_dir, &job.per_sentence)?;
    let _lock = folder.lock()?;
    if !job.force {
        check_same_shard(&folder, job.shard)?;
    }
    if job.resume {
        check_resumable(&folder)?;
    }
    // The model's files are hashed (for the partial file) while the model loads.
    // A model named in a store (`ollama:NAME`): its GGUF file, hashed while it loads, and the
    // hash compared with the digest the store names it by (free here: the hash is made anyway).
    let stored = match model::source::stores::split(&job.model) {
        Some(_) => model::source::stores::resolve(&job.model, &model::Stores::from_env())
            .map_err(|e| model::Error::from(model::SourceError::from(e)))?,
        None => None,
    };
    let (model, fingerprint) = if let Some(found) = stored {
        let (model, hashed) = std::thread::scope(|scope| {
            let hashing = scope.spawn(|| provenance::fingerprint_gguf(&found.gguf));
            let model = Model::from_store(found.clone(), None);
            (model, hashing.join())
        });
        let hashed = hashed.map(|h| h.and_then(|fp| check_digest(&found, fp)));
        (model, hashed)
    } else if let Some(path) = model::gguf_file(&job.model) {
        std::thread::scope(|scope| {
            let hashing = scope.spawn(|| provenance::fingerprint_gguf(path));
            let model = Model::from_gguf(path);
            (model, hashing.join())
        })
    } else {
        let files =
            model::source::resolve(&job.model, &job.revision, hub).map_err(model::Error::from)?;
        std::thread::scope(|scope| {
            let hashing = scope.spawn(|| provenance::fingerprint(&files));
            let model = Model::from_files(&files);
            (model, hashing.join())
        })
    };
    let model = model?.with_full_path(job.full_paths);
    let model_files = fingerprint
        .unwrap_or_else(|_| Err(io::Error::other("the hashing thread failed")))
        .map_err(CorpusError::Fingerprint)?;
    let model_files = Some(model_files);
    if job.force {
        remove_earlier_run(&folder)?;
    }
    let text_limit = tokenize::byte_limit(model.max_positions());
    let opened = input::open(
        raw,
        job.input_format,
        text_limit.saturating_mul(input::JSONL_BYTES_PER_TEXT_BYTE),
    )
    .map_err(input_err)?;
    let (first_target, reader) = if model.is_seq2seq() {
        first_line_has_target(opened.reader, opened.format, text_limit).map_err(input_err)?
    } else {
        (false, opened.reader)
    };
    let (targets, kind) = job_kind(&model, job.kind, first_target)?;
    let images_from = match (model.is_vision(), &listed) {
        (false, Some(_)) => {
            return Err(CorpusError::FolderForText {
                input: input_name.to_string(),
                model: model.info().name().to_string(),
            })
        }
        (false, None) => None,
        (true, Some(_)) => Some(input.clone()),
        (true, None) if from_stdin => Some(PathBuf::from(".")),
        (true, None) => Some(
            input
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
        ),
    };
    if images_from.is_some() && opened.format == InputFormat::Jsonl {
        return Err(CorpusError::JsonlForImages {
            input: input_name.to_string(),
        });
    }
    let progress = listener.shows_progress();
    // Counted only in a regular file: a FIFO or device given as the input is read once.
    let regular = !from_stdin && fs::metadata(input).is_ok_and(|m| m.is_file());
    let total_lines = match &listed {
        Some(listing) => Some(listing.lines().count() as u64),
        None if progress && regular && opened.compression == Compression::None => {
            count_lines(input).ok()
        }
        None => None,
    };
    let recorded_input = if from_stdin {
        input_name.clone()
    } else if job.full_paths {
        model::source::full_path(input)
    } else {
        model::source::local_name(input)
    };
    let opts = CorpusOptions {
        input_name,
        recorded_input,
        out_dir,
        per_sentence: job.per_sentence.clone(),
        on_bad_line: job.on_bad_line,
        truncate: job.truncate,
        view: job.view,
        json: job.json,
        json_include: job.json_include.clone(),
        threads: Some(threads),
        progress,
        total_lines,
        shard: job.shard,
        format: opened.format,
        compression: opened.compression,
        model_files,
        resume: job.resume,
        targets,
        images_from,
        kind,
    };
    interrupt::install();
    let outcome = process(&model, &opts, &folder, reader, listener);
    interrupt::uninstall();
    let outcome = outcome?;

    if !job.quiet {
        if outcome.tally.stats.sentences > 0 {
            let names = run_identity(&model, &opts, outcome.threads).token_names;
            print_table(&outcome.tally.stats, &names, job.stat, job.color)?;
        }
        listener.notice(&Notice::Summary(&outcome));
    }
    end_to_result(&outcome, &opts)
}

/// Whether a run reads targets, and the attention it accumulates: self-attention for an
/// encoder or a decoder; for an encoder–decoder the `asked` kind (decoder and cross-attention
/// need targets), else cross-attention when the input's first line carries a target
/// (`first_target`), the encoder's when it does not.
pub(super) fn job_kind(
    model: &Model,
    asked: Option<AttentionKind>,
    first_target: bool,
) -> Result<(bool, AttentionKind), KindError> {
    use AttentionKind::*;
    if !model.is_seq2seq() {
        return match asked {
            None | Some(SelfAttention) => Ok((false, SelfAttention)),
            Some(asked) => Err(KindError {
                asked,
                held: vec![SelfAttention],
            }),
        };
    }
    match asked {
        Some(SelfAttention) => Err(KindError {
            asked: SelfAttention,
            held: crate::attention::ENCODER_DECODER_KINDS.to_vec(),
        }),
        Some(kind @ (Decoder | Cross)) => Ok((true, kind)),
        Some(Encoder) => Ok((first_target, Encoder)),
        None if first_target => Ok((true, Cross)),
        None => Ok((false, Encoder)),
    }
}

/// Whether the first line of `reader` that is not blank carries a target (plain text: a
/// second, tab-separated column; JSON Lines: a `"target"` string), and the reader with what was
/// read put back in front. Reads at most about two lines' worth of `line_limit` bytes.
pub(super) fn first_line_has_target(
    mut reader: Box<dyn BufRead + Send>,
    format: InputFormat,
    line_limit: usize,
) -> io::Result<(bool, Box<dyn BufRead + Send>)> {
    let budget = line_limit.saturating_mul(2).max(1 << 16);
    let mut prefix = Vec::new();
    let found = loop {
        let start = prefix.len();
        let room = (budget.saturating_sub(start) as u64).max(1);
        let n = (&mut reader).take(room).read_until(b'\n', &mut prefix)?;
        if n == 0 || prefix.len() >= budget {
            break false;
        }
        let line = &prefix[start..];
        let line = line
            .strip_prefix(b"\xEF\xBB\xBF".as_slice())
            .unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        break match format {
            InputFormat::Jsonl => serde_json::from_slice::<Value>(line)
                .ok()
                .is_some_and(|v| v.get("target").is_some_and(Value::is_string)),
            _ => line.contains(&b'\t'),
        };
    };
    let rest: Box<dyn BufRead + Send> =
        Box::new(io::BufReader::new(io::Cursor::new(prefix).chain(reader)));
    Ok((found, rest))
}

/// Refuse to overwrite another shard's results in `folder` (a shard given another's
/// `--out-dir`): its partial file names its shard.
pub(super) fn check_same_shard(folder: &OutFolder, shard: Shard) -> Result<(), CorpusError> {
    let Ok(Some(earlier)) = partial::read_in(folder) else {
        return Ok(());
    };
    if earlier.identity.shard != shard {
        return Err(CorpusError::Folder {
            path: folder.path().to_path_buf(),
            reason: FolderProblem::OtherShard {
                theirs: earlier.identity.shard,
                ours: shard,
            },
        });
    }
    Ok(())
}

/// `--resume` into `folder`: refuse a folder holding per-sentence files that no partial file
/// describes (they could not be told apart from this run's).
pub(super) fn check_resumable(folder: &OutFolder) -> Result<(), CorpusError> {
    let has_partial = folder
        .kind(Place::Top, PARTIAL_FILE)
        .is_ok_and(|k| k.is_some());
    if earlier_run_files(folder.path()) > 0 && !has_partial {
        return Err(CorpusError::Resume {
            dir: folder.path().to_path_buf(),
            reason: Box::new(ResumeProblem::NoPartialFile),
        });
    }
    Ok(())
}

/// Process the lines of `input` that are `opts.shard`'s with `model`: per-sentence outputs into
/// `opts.out_dir/sentences/`, the exact state into `opts.out_dir/corpus_partial.json` (when the
/// run starts, every [`CHECKPOINT_EVERY`], and when it ends) and the summary into
/// `opts.out_dir/corpus_stats.json` (written however the run ends, for the sentences that were
/// done). With `opts.resume`, start from the partial file and journal already in the folder.
/// Errors only for what stops the run before or after the lines (the pool, the partial file and
/// summary themselves, a run that cannot be resumed); how the lines went is in the [`Outcome`].
pub fn process(
    model: &Model,
    opts: &CorpusOptions,
    folder: &OutFolder,
    input: impl BufRead + Send,
    listener: &dyn Listener,
) -> Result<Outcome, CorpusError> {
    let threads = opts
        .threads
        .unwrap_or_else(candle_core::utils::get_num_threads);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|source| CorpusError::Threads { threads, source })?;
    let start = Instant::now();
    let mut identity = run_identity(model, opts, threads);
    // The induction score is the model's, not a sentence's: one probe run for the corpus, on the
    // corpus's threads (a model it does not apply to, or a probe that fails, leaves it null). It
    // goes into the per-sentence files as into `attnviz TEXT --json`, and into the summary.
    let probe = pool.install(|| crate::request::induction_probe(model).ok().flatten());
    identity.induction = serde_json::to_value(&probe).expect("scores serialise");
    // Each sentence's outputs, as the single-sentence CLI's plan with the same options gives
    // them (`attnviz TEXT --json`), the model's probe scores among its statistics.
    let plan = sentence_plan(opts);
    let measured = outputs::Measured {
        induction: probe,
        ..outputs::Measured::default()
    };
    let (tally, mut resumed) = resume_state(model, opts, folder, &identity, listener)?;
    let log = Log::new(listener, opts.progress, opts.total_lines);
    let text_limit = tokenize::byte_limit(model.max_positions());
    let line_limit = match opts.format {
        InputFormat::Jsonl => text_limit.saturating_mul(input::JSONL_BYTES_PER_TEXT_BYTE),
        _ => text_limit,
    };
    let mut lines = Source::new(LineReader::new(input, line_limit));
    let mut names = Names::new();
    skip_done(&mut lines, &mut names, opts, &tally, &log)?;
    check_journaled(&mut lines, opts, &mut resumed)?;
    if opts.resume {
        // Only once the earlier run is known to be resumable: a refused resume changes nothing.
        remove_temporaries(folder)?;
    }
    let done_before = tally.stats.sentences
        + resumed
            .values()
            .filter(|j| matches!(j.event, Event::Sentence { .. }))
            .count() as u64;

    let journal_err = |source: io::Error| CorpusError::Journal {
        dir: opts.out_dir.clone(),
        source,
    };
    let journal = journal::Journal::create(
        folder,
        resumed.iter().map(|(l, j)| (*l, &j.event, &j.digest)),
    )
    .map_err(journal_err)?;
    let ledger = Mutex::new(Ledger::new(tally, opts.shard, resumed, Some(journal)));
    let checkpoints = Checkpoints {
        folder: folder.clone(),
        identity,
        sync: !opts.per_sentence.is_empty(),
        last: Mutex::new(Instant::now()),
        busy: AtomicBool::new(false),
    };
    checkpoints.write(&ledger, "running", None)?;

    let (end, lines_read, digest) = pool.install(|| {
        let outputs = (&plan, &measured);
        process_in_pool(
            model,
            opts,
            outputs,
            lines,
            names,
            &ledger,
            &checkpoints,
            &log,
        )
    });
    let mut ledger = ledger.into_inner().unwrap_or_else(|e| e.into_inner());
    ledger.read_through(lines_read, digest);
    let (end_name, reason) = match &end {
        End::Complete => ("complete", None),
        End::Stopped { reason, .. } => ("stopped", Some(reason.to_string())),
        End::Interrupted { .. } => ("interrupted", None),
        End::Failed(failure) => ("failed", Some(failure.to_string())),
    };
    let ledger = Mutex::new(ledger);
    checkpoints.write(&ledger, end_name, reason.as_deref())?;
    let ledger = ledger.into_inner().unwrap_or_else(|e| e.into_inner());
    if end == End::Complete && !ledger.has_gap() {
        let _ = journal::remove_all(folder);
    }
    let stopped_at = match &end {
        End::Stopped { line, reason } => Some((*line, reason)),
        _ => None,
    };
    let tally = ledger.summary(lines_read, stopped_at);
    let summary_path = opts.out_dir.join(SUMMARY_FILE);
    summary::write_in(
        folder,
        &summary::Summary {
            model: &checkpoints.identity.model,
            input: &opts.recorded_input,
            input_format: opts.format.as_str(),
            compression: opts.compression.as_str(),
            shard: (!opts.shard.is_whole()).then_some(opts.shard),
            options: &checkpoints.identity.options,
            per_sentence: !opts.per_sentence.is_empty(),
            end: &end,
            tally: &tally,
            induction: &checkpoints.identity.induction,
        },
    )?;
    Ok(Outcome {
        tally,
        end,
        elapsed: start.elapsed(),
        threads,
        summary_path,
        done_before,
        shard: opts.shard,
        out_dir: opts.out_dir.clone(),
    })
}

/// Where a `--resume` run starts: the partial file's tally and the journal's finished
/// sentences (those whose outputs are all in place), or nothing when there is nothing to resume.
pub(super) fn resume_state(
    model: &Model,
    opts: &CorpusOptions,
    folder: &OutFolder,
    identity: &RunIdentity,
    listener: &dyn Listener,
) -> Result<(Tally, BTreeMap<usize, Journaled>), CorpusError> {
    let (layers, heads) = stats_shape(model, opts);
    let fresh = Ok((Tally::new(layers, heads), BTreeMap::new()));
    if !opts.resume {
        return fresh;
    }
    let err = |reason: ResumeProblem| CorpusError::Resume {
        dir: opts.out_dir.clone(),
        reason: Box::new(reason),
    };
    let earlier = match partial::read_in(folder) {
        Ok(Some(p)) => p,
        Ok(None) => return fresh,
        Err(e) => {
            return Err(CorpusError::Resume {
                dir: opts.out_dir.clone(),
                reason: Box::new(ResumeProblem::PartialFile(e)),
            })
        }
    };
    if let Some(c) = earlier
        .identity
        .conflict(identity, ("the earlier run", "this run"), true)
    {
        return Err(CorpusError::Resume {
            dir: opts.out_dir.clone(),
            reason: Box::new(ResumeProblem::Conflict(c)),
        });
    }
    if earlier.tally.stats.shape() != (layers, heads) {
        let (l, h) = earlier.tally.stats.shape();
        return Err(err(ResumeProblem::Shape {
            layers: l,
            heads: h,
            model_layers: layers,
            model_heads: heads,
        }));
    }
    if earlier.identity.threads != identity.threads {
        listener.notice(&Notice::ThreadsDiffer {
            earlier: earlier.identity.threads,
            now: identity.threads,
        });
    }
    let mut resumed =
        journal::read_all(folder, layers, heads).map_err(|e| err(ResumeProblem::Journal(e)))?;
    resumed.retain(|line, j| {
        *line > earlier.tally.lines
            && opts.shard.owns(*line)
            && outputs_in_place(opts, folder, &j.event)
    });
    Ok((earlier.tally, resumed))
}

/// The layers × heads of the attention the run accumulates (an encoder–decoder's decoder and
/// cross-attention have the decoder's).
pub(super) fn stats_shape(model: &Model, opts: &CorpusOptions) -> (usize, usize) {
    let info = model.info();
    match opts.kind {
        AttentionKind::Decoder | AttentionKind::Cross => {
            model.decoder_shape().unwrap_or((info.layers, info.heads))
        }
        _ => (info.layers, info.heads),
    }
}

/// Whether the per-sentence files of a journaled sentence are all there (a crash can lose
/// files the journal survived; those sentences are computed again).
pub(super) fn outputs_in_place(opts: &CorpusOptions, folder: &OutFolder, event: &Event) -> bool {
    let Event::Sentence { name, .. } = event else {
        return true;
    };
    opts.per_sentence.iter().all(|kind| match kind {
        PerSentence::Json => folder.has_nonempty_file(Place::Sentences, &format!("{name}.json")),
        PerSentence::None => true,
    })
}

/// The lines of the input, in order: first those a resumed run read ahead to check the
/// journal against the input ([`check_journaled`]), then the rest.
pub(super) struct Source<R> {
    reader: LineReader<R>,
    ahead: VecDeque<(RawLine, InputDigest)>,
    /// The number of the last line handed out, and its digest when it came from `ahead` (else
    /// the reader's own digest is that of the last line).
    last: (usize, Option<InputDigest>),
}

impl<R: BufRead> Source<R> {
    fn new(reader: LineReader<R>) -> Self {
        Source {
            last: (reader.lines(), None),
            reader,
            ahead: VecDeque::new(),
        }
    }

    fn next_line(&mut self, stop: impl Fn() -> bool) -> io::Result<Option<RawLine>> {
        if let Some((raw, digest)) = self.ahead.pop_front() {
            self.last = (raw.number, Some(digest));
            return Ok(Some(raw));
        }
        let raw = self.reader.next_line(stop)?;
        if let Some(raw) = &raw {
            self.last = (raw.number, None);
        }
        Ok(raw)
    }
}

impl<R> Source<R> {
    /// Lines handed out so far.
    fn lines(&self) -> usize {
        self.last.0
    }

    /// The input's digest through the last line handed out.
    fn digest(&self) -> InputDigest {
        match &self.last.1 {
            Some(d) => d.clone(),
            None => self.reader.digest(),
        }
    }

    fn max_bytes(&self) -> usize {
        self.reader.max_bytes()
    }
}

/// Read past the lines an earlier run finished (a `--resume`), checking that they are the ones
/// it read: the SHA-256 of the input through its last line must be the one it recorded.
pub(super) fn skip_done<R: BufRead>(
    lines: &mut Source<R>,
    names: &mut Names,
    opts: &CorpusOptions,
    done: &Tally,
    log: &Log<'_>,
) -> Result<(), CorpusError> {
    if done.lines == 0 {
        return Ok(());
    }
    let err = |reason: ResumeProblem| CorpusError::Resume {
        dir: opts.out_dir.clone(),
        reason: Box::new(reason),
    };
    let text_limit = lines_text_limit(opts, lines);
    while lines.lines() < done.lines {
        match lines.next_line(interrupt::requested) {
            Ok(Some(raw)) => {
                claim_name(names, opts, &raw, text_limit);
                log.inc();
            }
            Ok(None) if interrupt::requested() => {
                return Err(CorpusError::Interrupted {
                    done: "Nothing was changed.".into(),
                    signal: interrupt::signal(),
                })
            }
            Ok(None) => {
                return Err(err(ResumeProblem::InputShorter {
                    input: opts.input_name.clone(),
                    lines: lines.lines(),
                    done: done.lines,
                }))
            }
            Err(source) => {
                return Err(CorpusError::Input {
                    path: opts.input_name.clone(),
                    source,
                })
            }
        }
    }
    let now = lines.digest();
    if now != done.digest {
        return Err(err(ResumeProblem::InputChanged {
            lines: done.lines,
            input: opts.input_name.clone(),
            sha256: short_hex(&now),
            bytes: now.bytes,
            earlier_sha256: short_hex(&done.digest),
            earlier_bytes: done.digest.bytes,
        }));
    }
    Ok(())
}

pub(super) fn short_hex(d: &InputDigest) -> String {
    let hex = d.hex();
    hex[..16.min(hex.len())].to_string()
}

/// A resumed run, past its checkpoint: read ahead through the last line the journal holds and
/// check every journaled line against the input (the SHA-256 of the input through that line must
/// be the one the earlier run journaled), before anything is written. The lines read ahead are
/// kept in `lines` for the run. A changed or shorter input is refused. If reading ahead would
/// hold more than [`READ_AHEAD_BYTES`], the journaled lines beyond are dropped from `resumed`
/// (computed again).
pub(super) fn check_journaled<R: BufRead>(
    lines: &mut Source<R>,
    opts: &CorpusOptions,
    resumed: &mut BTreeMap<usize, Journaled>,
) -> Result<(), CorpusError> {
    let Some(&last) = resumed.keys().next_back() else {
        return Ok(());
    };
    let err = |reason: ResumeProblem| CorpusError::Resume {
        dir: opts.out_dir.clone(),
        reason: Box::new(reason),
    };
    let mut held = 0usize;
    while lines.reader.lines() < last {
        if held > READ_AHEAD_BYTES {
            let through = lines.reader.lines();
            resumed.retain(|line, _| *line <= through);
            break;
        }
        let raw = match lines.reader.next_line(interrupt::requested) {
            Ok(Some(raw)) => raw,
            Ok(None) if interrupt::requested() => {
                return Err(CorpusError::Interrupted {
                    done: "Nothing was changed.".into(),
                    signal: interrupt::signal(),
                })
            }
            Ok(None) => {
                return Err(err(ResumeProblem::ShorterThanJournal {
                    input: opts.input_name.clone(),
                    lines: lines.reader.lines(),
                    last,
                }))
            }
            Err(source) => {
                return Err(CorpusError::Input {
                    path: opts.input_name.clone(),
                    source,
                })
            }
        };
        let digest = lines.reader.digest();
        if let Some(j) = resumed.get(&raw.number) {
            if j.digest != digest {
                return Err(err(ResumeProblem::LineChanged {
                    line: raw.number,
                    input: opts.input_name.clone(),
                    sha256: short_hex(&digest),
                    bytes: digest.bytes,
                    earlier_sha256: short_hex(&j.digest),
                    earlier_bytes: j.digest.bytes,
                }));
            }
        }
        held = held.saturating_add(raw.bytes.len() + READ_AHEAD_LINE_COST);
        lines.ahead.push_back((raw, digest));
    }
    Ok(())
}

/// The text limit for reading `opts`'s lines (the line limit is `lines`').
pub(super) fn lines_text_limit<R>(opts: &CorpusOptions, lines: &Source<R>) -> usize {
    match opts.format {
        InputFormat::Jsonl => lines.max_bytes() / input::JSONL_BYTES_PER_TEXT_BYTE,
        _ => lines.max_bytes(),
    }
}

/// A JSON Lines record claims its output name whether or not this run processes it (see
/// [`ids`]), so every shard names files as one run over the whole corpus would.
pub(super) fn claim_name(
    names: &mut Names,
    opts: &CorpusOptions,
    raw: &RawLine,
    text_limit: usize,
) {
    if opts.format == InputFormat::Jsonl {
        if let Ok(record) = lines::parse_json(
            raw,
            text_limit.saturating_mul(input::JSONL_BYTES_PER_TEXT_BYTE),
            text_limit,
        ) {
            let _ = names.claim(raw.number, record.id.as_ref());
        }
    }
}

/// Writes the partial file: when the run starts, every [`CHECKPOINT_EVERY`] (by whichever
/// worker finishes a sentence after that), and when it ends.
pub(super) struct Checkpoints {
    folder: OutFolder,
    identity: RunIdentity,
    /// Whether per-sentence files are written: their file system is synced before each
    /// checkpoint so that every file the checkpoint counts is on disk.
    sync: bool,
    last: Mutex<Instant>,
    busy: AtomicBool,
}

impl Checkpoints {
    fn write(
        &self,
        ledger: &Mutex<Ledger>,
        end: &str,
        reason: Option<&str>,
    ) -> Result<(), CorpusError> {
        let lock = || ledger.lock().unwrap_or_else(|e| e.into_inner());
        let tally = lock().checkpoint().map_err(|source| CorpusError::Journal {
            dir: self.folder.path().to_path_buf(),
            source,
        })?;
        if self.sync {
            self.folder.sync();
        }
        partial::write(&self.folder, &self.identity, &tally, end, reason)?;
        lock().prune_journal();
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        Ok(())
    }

    /// A checkpoint, if the last one is [`CHECKPOINT_EVERY`] old and no other thread is writing
    /// one.
    fn maybe(&self, ledger: &Mutex<Ledger>) -> Result<(), CorpusError> {
        let due = self
            .last
            .lock()
            .is_ok_and(|t| t.elapsed() >= CHECKPOINT_EVERY);
        if !due || self.busy.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let res = self.write(ledger, "running", None);
        self.busy.store(false, Ordering::Release);
        res
    }
}

/// The lines, in the pool: how the run ended, the lines read, and the input's digest through
/// them.
#[allow(clippy::too_many_arguments)]
pub(super) fn process_in_pool<R: BufRead + Send>(
    model: &Model,
    opts: &CorpusOptions,
    (plan, measured): (&outputs::Plan, &outputs::Measured),
    lines: Source<R>,
    names: Names,
    ledger: &Mutex<Ledger>,
    checkpoints: &Checkpoints,
    log: &Log<'_>,
) -> (End, usize, InputDigest) {
    let abort = AtomicBool::new(false);
    let text_limit = lines_text_limit(opts, &lines);
    let mut feed = Feed {
        lines,
        names,
        text_limit,
        model,
        opts,
        log,
        ledger,
        abort: &abort,
        truncations: 0,
        end: None,
    };
    let worker = Worker {
        model,
        opts,
        plan,
        measured,
        folder: &checkpoints.folder,
        ledger,
        checkpoints,
        log,
    };
    let result = (&mut feed).par_bridge().try_for_each(|item| {
        let res = worker.process(item);
        if res.is_err() {
            abort.store(true, Ordering::Relaxed);
        } else {
            log.inc();
        }
        res
    });
    log.finish();
    log.withheld_counts();
    let end = match (result, feed.end.take()) {
        (Err(CorpusError::Stopped { line, reason, .. }), _) => End::Stopped { line, reason },
        (Err(e), _) => End::Failed(Failure::new(e)),
        (Ok(()), Some(end)) => end,
        (Ok(()), None) => End::Complete,
    };
    (end, feed.lines.lines(), feed.lines.digest())
}

/// A good line on its way to a worker.
pub(super) struct Item {
    line: usize,
    text: String,
    pair: Option<String>,
    target: Option<String>,
    /// The tokens of a text line, or the image of an image line.
    input: ItemInput,
    /// Its output name (line number or id).
    name: String,
    /// The input's digest through this line.
    digest: InputDigest,
}

/// What the model reads for one line.
pub(super) enum ItemInput {
    /// A text line, tokenized.
    Text(Encoded),
    /// A vision model's line: the image file it names.
    Image(PathBuf),
}

/// Reads lines in order, reports bad ones, and hands out good ones of this shard (tokenized) to
/// the workers.
pub(super) struct Feed<'a, R> {
    lines: Source<R>,
    names: Names,
    text_limit: usize,
    model: &'a Model,
    opts: &'a CorpusOptions,
    log: &'a Log<'a>,
    ledger: &'a Mutex<Ledger>,
    abort: &'a AtomicBool,
    truncations: usize,
    end: Option<End>,
}

impl<R> Feed<'_, R> {
    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<R: BufRead> Iterator for Feed<'_, R> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        loop {
            if self.end.is_some() || self.abort.load(Ordering::Relaxed) {
                return None;
            }
            if interrupt::requested() {
                self.end = Some(End::Interrupted {
                    after_line: self.lines.lines(),
                    signal: interrupt::signal(),
                });
                return None;
            }
            let raw = match self.lines.next_line(interrupt::requested) {
                Ok(Some(raw)) => raw,
                Ok(None) if interrupt::requested() => continue,
                Ok(None) => return None,
                Err(e) => {
                    self.end = Some(End::Failed(Failure::new(CorpusError::Input {
                        path: self.opts.input_name.clone(),
                        source: e,
                    })));
                    return None;
                }
            };
            let line = raw.number;
            let resumed = self.opts.shard.owns(line) && self.ledger().is_resumed(line);
            if !self.opts.shard.owns(line) || resumed {
                claim_name(&mut self.names, self.opts, &raw, self.text_limit);
                if resumed {
                    let digest = self.lines.digest();
                    self.ledger().take_resumed(line, digest);
                }
                self.log.inc();
                continue;
            }
            match self.check(&raw) {
                Ok(item) => return Some(item),
                Err(bad) => {
                    self.log.inc();
                    if self.opts.on_bad_line == OnBadLine::Stop {
                        self.end = Some(End::Stopped { line, reason: bad });
                        return None;
                    }
                    self.log.bad_line(line, &bad);
                    let digest = self.lines.digest();
                    // Not journaled (a rerun finds it again), so it cannot fail.
                    let _ = self.ledger().record(line, Event::Bad(bad), digest, false);
                }
            }
        }
    }
}

impl<R> Feed<'_, R> {
    /// Parse and tokenize a line, or say why it cannot be used.
    fn check(&mut self, raw: &RawLine) -> Result<Item, BadLine> {
        let limit = self.text_limit;
        let (sentence, name) = match self.opts.format {
            InputFormat::Jsonl => {
                let record = lines::parse_json(
                    raw,
                    limit.saturating_mul(input::JSONL_BYTES_PER_TEXT_BYTE),
                    limit,
                )?;
                self.names.claim(raw.number, record.id.as_ref())?;
                let name = record
                    .id
                    .map_or_else(|| ids::line_name(raw.number), |id| id.as_str().to_string());
                (record.sentence?, name)
            }
            _ => (lines::parse(raw, limit)?, ids::line_name(raw.number)),
        };
        if let Some(base) = &self.opts.images_from {
            if sentence.pair.is_some() {
                return Err(BadLine::Tabs { count: 1 });
            }
            let named = Path::new(sentence.text.trim());
            let path = if base == Path::new(".") {
                named.to_path_buf()
            } else {
                base.join(named)
            };
            return Ok(Item {
                line: raw.number,
                text: sentence.text.trim().to_string(),
                pair: None,
                target: None,
                input: ItemInput::Image(path),
                name,
                digest: self.lines.digest(),
            });
        }
        let mut sentence = sentence;
        let seq2seq = self.model.is_seq2seq();
        // In plain text an encoder–decoder's second column is its target (it reads no pairs).
        if seq2seq && self.opts.format != InputFormat::Jsonl {
            sentence.target = sentence.pair.take();
        }
        if sentence.pair.is_some() && seq2seq {
            return Err(BadLine::PairForEncoderDecoder);
        }
        if sentence.pair.is_some() && !self.model.accepts_pairs() {
            return Err(BadLine::PairUnsupported);
        }
        match (&sentence.target, self.opts.targets) {
            (Some(_), false) => return Err(BadLine::TargetUnsupported { seq2seq }),
            (None, true) => return Err(BadLine::NoTarget),
            (Some(target), true) => {
                self.model
                    .target_labels(target, self.opts.truncate)
                    .map_err(|e| match e {
                        model::Error::Target(e) => BadLine::Target(e.to_string()),
                        other => BadLine::Tokenizer(other.to_string()),
                    })?;
            }
            (None, false) => {}
        }
        let encoded = self
            .model
            .tokenizer()
            .encode(
                &sentence.text,
                sentence.pair.as_deref(),
                self.model.max_positions(),
                self.opts.truncate,
            )
            .map_err(|e| match e {
                tokenize::Error::Empty { .. } => BadLine::Empty,
                tokenize::Error::NoTokens { .. } => BadLine::NoTokens,
                tokenize::Error::TooLong { tokens, max } => BadLine::TooLong { tokens, max },
                tokenize::Error::TooManyBytes { bytes, limit, .. } => {
                    BadLine::TooManyBytes { len: bytes, limit }
                }
                other => BadLine::Tokenizer(other.to_string()),
            })?;
        if let Some(from) = encoded.truncated_from {
            self.truncations += 1;
            if self.truncations <= NOTED_TRUNCATIONS {
                self.log.listener.notice(&Notice::Truncated {
                    line: raw.number,
                    from,
                    kept: encoded.ids.len(),
                    last_listed: self.truncations == NOTED_TRUNCATIONS,
                });
            }
        }
        Ok(Item {
            line: raw.number,
            text: sentence.text.into_owned(),
            pair: sentence.pair.map(|p| p.into_owned()),
            target: sentence.target.map(|t| t.into_owned()),
            input: ItemInput::Text(encoded),
            name,
            digest: self.lines.digest(),
        })
    }
}

/// What each worker needs: shared, read-only, except the ledger.
pub(super) struct Worker<'a> {
    model: &'a Model,
    opts: &'a CorpusOptions,
    /// The outputs of each sentence ([`sentence_plan`]).
    plan: &'a outputs::Plan,
    /// What the run measured beside each sentence's attention: the model's probe scores.
    measured: &'a outputs::Measured,
    folder: &'a OutFolder,
    ledger: &'a Mutex<Ledger>,
    checkpoints: &'a Checkpoints,
    log: &'a Log<'a>,
}

impl Worker<'_> {
    fn record(&self, line: usize, event: Event, digest: InputDigest) -> Result<(), CorpusError> {
        self.ledger
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(line, event, digest, true)
            .map_err(|source| CorpusError::Journal {
                dir: self.opts.out_dir.clone(),
                source,
            })
    }

    /// A line found bad by its run: the run stops on it, or it is reported and recorded.
    fn bad_after_run(
        &self,
        line: usize,
        bad: BadLine,
        digest: InputDigest,
    ) -> Result<(), CorpusError> {
        if self.opts.on_bad_line == OnBadLine::Stop {
            return Err(CorpusError::Stopped {
                line,
                reason: bad,
                done: String::new(),
            });
        }
        self.log.bad_line(line, &bad);
        self.record(line, Event::Bad(bad), digest)
    }

    /// Forward pass, view, statistics, per-sentence outputs, then the result into the ledger.
    /// The same steps as the single-sentence CLI, so each JSON file equals what
    /// `attnviz TEXT --json` writes.
    fn process(&self, item: Item) -> Result<(), CorpusError> {
        let counts_pair = item.pair.is_some();
        let truncated = match &item.input {
            ItemInput::Text(encoded) => encoded.truncated_from.is_some(),
            ItemInput::Image(_) => false,
        };
        // The request of the single-sentence CLI for this line, already tokenized.
        let request = RunRequest {
            pair: item.pair,
            target: item.target,
            truncate: self.opts.truncate,
            ..RunRequest::new(item.text)
        };
        let is_image = matches!(item.input, ItemInput::Image(_));
        let run = match item.input {
            // A target is teacher-forced (the request tokenizes the source and target itself).
            ItemInput::Text(_) if request.target.is_some() => {
                request.run(self.model, &crate::progress::Silent)
            }
            ItemInput::Text(encoded) => request.run_encoded(self.model, encoded),
            // The request of `attnviz -m MODEL --image PATH`.
            ItemInput::Image(path) => {
                let request = RunRequest {
                    images: vec![path.into()],
                    ..RunRequest::new("")
                };
                request.run(self.model, &crate::progress::Silent)
            }
        };
        let run = match run {
            // The model's numbers overflow on this sentence, or its picture cannot be read: a
            // bad line, like the others.
            Err(RequestError::Model(model::Error::Attention(row))) => {
                let bad = BadLine::Attention(row.to_string());
                return self.bad_after_run(item.line, bad, item.digest);
            }
            Err(RequestError::Model(model::Error::Input(why))) if is_image => {
                return self.bad_after_run(item.line, BadLine::Image(why.to_string()), item.digest);
            }
            Err(RequestError::Model(e)) => return Err(e.into()),
            Err(e) => return Err(CorpusError::Request(Box::new(e))),
            Ok(run) => run,
        };
        // The view, the statistics and the per-sentence JSON, as the single-sentence CLI
        // writes them; an encoder–decoder's statistics of the run's kind into the ledger.
        let set = &run.set;
        let finished = outputs::Finished {
            set,
            measured: self.measured,
            every_layer: true,
            settings: Vec::new(),
            model_name: String::new(),
        };
        let analysed = outputs::analyse(self.plan, &finished).map_err(report_error)?;
        let index = if set.is_encoder_decoder() {
            set.kinds()
                .iter()
                .position(|&k| k == self.opts.kind)
                .ok_or(CorpusError::NoKind {
                    kind: self.opts.kind,
                })?
        } else {
            0
        };
        if self.opts.per_sentence.contains(&PerSentence::Json) {
            let file = format!("{}.json", item.name);
            self.folder.write(Place::Sentences, &file, false, |w| {
                outputs::write_json(self.plan, &finished, &analysed, w)
            })?;
        }
        let counts = SentenceCounts {
            pair: counts_pair,
            truncated,
            tokens: set.iter().nth(index).map_or(0, |a| a.len()),
            units: analysed.shown.iter().nth(index).map_or(0, |a| a.len()),
        };
        let event = Event::Sentence {
            stats: analysed.stats(index).to_vec(),
            counts,
            name: item.name,
            load: set
                .iter()
                .nth(index)
                .and_then(|a| a.router.as_deref())
                .map(attnviz_formats::doc::router::ExpertLoadDoc::of),
        };
        self.record(item.line, event, item.digest)?;
        self.checkpoints.maybe(self.ledger)
    }
}

/// Each sentence's outputs: the plan of `attnviz TEXT --json` with the corpus's view and JSON
/// options, its statistics kept for the summary.
pub(super) fn sentence_plan(opts: &CorpusOptions) -> outputs::Plan {
    outputs::Plan {
        view: opts.view,
        json: outputs::JsonPlan {
            format: opts.json,
            include: opts.json_include.clone(),
        },
        keep_stats: true,
        ..outputs::Plan::default()
    }
}

/// The view of a sentence (all its tokens special, and `no_special`) as the corpus words it.
fn report_error(e: outputs::ReportError) -> CorpusError {
    match e {
        outputs::ReportError::Analysis(e) => e.into(),
        e => CorpusError::Report(Box::new(e)),
    }
}

/// The run's progress and warnings, told to its [`Listener`] (which draws, or not).
pub(super) struct Log<'a> {
    listener: &'a dyn Listener,
    /// Whether progress is shown (telling the listener of each line costs it a clock read,
    /// which a corpus of millions of empty lines would feel).
    shown: bool,
    /// Per kind of bad line: warnings printed, and bad lines not warned about one by one.
    warned: Mutex<BTreeMap<&'static str, (usize, usize)>>,
}

impl<'a> Log<'a> {
    fn new(listener: &'a dyn Listener, show: bool, total: Option<u64>) -> Log<'a> {
        if show {
            listener.start(&Stage::Corpus, total);
        }
        Log {
            listener,
            shown: show,
            warned: Mutex::new(BTreeMap::new()),
        }
    }

    /// One more line done.
    fn inc(&self) {
        if self.shown {
            self.listener.advance(1);
        }
    }

    /// The lines are done: the progress ends.
    fn finish(&self) {
        if self.shown {
            self.listener.finish();
        }
    }

    /// Warn about bad line `line`: the first [`WARNED_PER_KIND`] of each kind one by one, the
    /// others counted for [`Log::withheld_counts`] (as compilers do), so that a corpus of a
    /// million empty lines does not bury the terminal.
    fn bad_line(&self, line: usize, bad: &BadLine) {
        let shown = {
            let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
            let (shown, withheld) = warned.entry(bad.kind()).or_default();
            if *shown < WARNED_PER_KIND {
                *shown += 1;
                Some(*shown)
            } else {
                *withheld += 1;
                None
            }
        };
        if let Some(n) = shown {
            self.listener.notice(&Notice::BadLine {
                line,
                bad,
                last_shown: n == WARNED_PER_KIND,
            });
        }
    }

    /// One line per kind of bad line that was not shown one by one: how many more were skipped.
    fn withheld_counts(&self) {
        let warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        for (kind, &(shown, withheld)) in warned.iter() {
            if withheld > 0 {
                self.listener.notice(&Notice::Withheld {
                    kind,
                    withheld,
                    total: shown + withheld,
                });
            }
        }
    }
}

/// Number of lines in a file (a last line without a newline counts), for the progress bar.
pub(super) fn count_lines(path: &Path) -> io::Result<u64> {
    let mut file = File::open(path)?;
    let mut buf = vec![0u8; 1 << 16];
    let (mut lines, mut last) = (0u64, b'\n');
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        last = buf[n - 1];
    }
    Ok(lines + u64::from(last != b'\n'))
}

/// `fingerprint` (of a store's GGUF file), refused when its SHA-256 is not the digest the
/// store names the file by.
fn check_digest(
    found: &model::StoreModel,
    fingerprint: ModelFilesDoc,
) -> io::Result<ModelFilesDoc> {
    use model::source::stores::{FileProblem, StoreError};
    let actual = fingerprint
        .weights
        .first()
        .map_or("", |w| w.sha256.as_str());
    match &found.sha256 {
        Some(expected) if expected != actual => Err(io::Error::other(
            StoreError::File {
                name: found.name.clone(),
                what: "model blob",
                path: found.gguf.clone(),
                problem: FileProblem::DigestMismatch {
                    expected: expected.clone(),
                    actual: actual.to_string(),
                },
            }
            .to_string(),
        )),
        _ => Ok(fingerprint),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn sentence_files_are_named_by_line_number() {
        let p = sentence_path(Path::new("out"), 42, "json");
        assert_eq!(p, Path::new("out/sentences/000042.json"));
        let p = sentence_path(Path::new("out"), 1234567, "png");
        assert_eq!(p, Path::new("out/sentences/1234567.png"));
    }

    fn options(out_dir: &Path) -> CorpusOptions {
        CorpusOptions {
            input_name: "in.txt".into(),
            recorded_input: "in.txt".into(),
            out_dir: out_dir.to_path_buf(),
            per_sentence: vec![],
            on_bad_line: OnBadLine::Skip,
            truncate: false,
            view: ViewOptions::default(),
            json: JsonOptions::default(),
            json_include: vec![],
            threads: Some(1),
            progress: false,
            total_lines: None,
            shard: Shard::WHOLE,
            format: InputFormat::Text,
            compression: Compression::None,
            model_files: None,
            resume: true,
            targets: false,
            images_from: None,
            kind: AttentionKind::SelfAttention,
        }
    }

    /// What an earlier run journaled for `lines` of `input`: each line's digest, as the run
    /// read it.
    fn journaled(input: &[u8], lines: &[usize]) -> BTreeMap<usize, Journaled> {
        let mut reader = LineReader::new(input, 1000);
        let mut out = BTreeMap::new();
        while let Some(raw) = reader.next_line(|| false).unwrap() {
            if lines.contains(&raw.number) {
                let digest = reader.digest();
                let digest = InputDigest::recorded(digest.hex(), digest.bytes);
                out.insert(
                    raw.number,
                    Journaled {
                        event: Event::Bad(BadLine::Attention("x".into())),
                        digest,
                    },
                );
            }
        }
        out
    }

    #[test]
    fn a_resumed_run_checks_every_journaled_line_before_it_starts() {
        let dir = tempfile::tempdir().unwrap();
        let opts = options(dir.path());
        let input = b"one\ntwo\nthree\nfour\nfive\n";
        fn check<'a>(
            opts: &CorpusOptions,
            new: &'a [u8],
            resumed: &mut BTreeMap<usize, Journaled>,
        ) -> Result<Source<&'a [u8]>, CorpusError> {
            let mut source = Source::new(LineReader::new(new, 1000));
            check_journaled(&mut source, opts, resumed).map(|()| source)
        }
        // The same input: lines 1 to 4 are read ahead, kept for the run, with their digests.
        let mut resumed = journaled(input, &[2, 4]);
        let mut source = check(&opts, input, &mut resumed).unwrap();
        assert_eq!(source.ahead.len(), 4);
        assert_eq!(resumed.len(), 2);
        let mut seen = Vec::new();
        while let Some(raw) = source.next_line(|| false).unwrap() {
            seen.push((raw.number, source.digest().bytes));
        }
        assert_eq!(seen, [(1, 4), (2, 8), (3, 14), (4, 19), (5, 24)]);
        // A line after the last checkpoint changed: refused, naming it.
        let changed = b"one\ntwo\nthree\nFOUR\nfive\n";
        let e = check(&opts, changed, &mut journaled(input, &[2, 4]))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("line 4 of in.txt is not the one the earlier run read"),
            "{e}"
        );
        // A line before a journaled one changed (its digest covers everything before it).
        let earlier = b"one\nTWO\nthree\nfour\nfive\n";
        let e = check(&opts, earlier, &mut journaled(input, &[4]))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("line 4 of in.txt"), "{e}");
        // A shorter input.
        let e = check(&opts, b"one\ntwo\n", &mut journaled(input, &[4]))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("has 2 lines, but the earlier run had finished line 4"),
            "{e}"
        );
        // Nothing journaled: nothing read ahead.
        let source = check(&opts, changed, &mut BTreeMap::new()).unwrap();
        assert!(source.ahead.is_empty());
    }

    #[test]
    fn count_lines_counts_a_last_line_without_newline() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("in.txt");
        for (text, want) in [("", 0), ("a", 1), ("a\n", 1), ("a\nb", 2), ("\n\n", 2)] {
            fs::write(&p, text).unwrap();
            assert_eq!(count_lines(&p).unwrap(), want, "{text:?}");
        }
    }
}
