//! What a finished corpus run reports: the averaged statistics table on stdout, and how an
//! early end becomes the error the front end shows.

use super::*;

/// Print the averaged statistics table on stdout (`token_names`: the start and end tokens).
pub fn print_table(
    stats: &CorpusStats,
    token_names: &(String, String),
    stat: Option<Stat>,
    color: ColorChoice,
) -> Result<(), CorpusError> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let n = stats.sentences;
    let res = writeln!(
        out,
        "Per-head statistics averaged over {} sentence{} (each sentence weighs the same):\n",
        thousands(n),
        if n == 1 { "" } else { "s" }
    )
    .and_then(|_| {
        // The names come from the model (or a partial file): shown, not sent to the terminal.
        let names = format!("{}, {}", token_names.0, token_names.1);
        let opts = StatsTableOptions {
            token_names: Some(escape_controls(&names).into_owned()),
            ..StatsTableOptions::for_stdout(stat, color)
        };
        write_stats_table(&stats.mean_per_sentence(), &opts, &mut out)
    })
    .and_then(|_| out.flush());
    match res {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(CorpusError::Stdout(e)),
        _ => Ok(()),
    }
}

/// Turn an early end into the error `main` prints.
pub(super) fn end_to_result(outcome: &Outcome, opts: &CorpusOptions) -> Result<(), CorpusError> {
    let kept = |which: &str| {
        let n = outcome.tally.stats.sentences;
        let (noun, verb) = if n == 1 {
            ("sentence", "is")
        } else {
            ("sentences", "are")
        };
        let files = if opts.per_sentence.is_empty() {
            String::new()
        } else {
            format!(
                "{verb} in {} and ",
                opts.out_dir.join(SENTENCES_DIR).display()
            )
        };
        format!(
            "The {} {noun} {which} {files}{verb} summarised in {}",
            thousands(n),
            outcome.summary_path.display()
        )
    };
    let lines_read = outcome.tally.lines;
    match &outcome.end {
        End::Complete
            if outcome.tally.stats.sentences == 0 && !no_lines_of_shard(outcome, opts) =>
        {
            Err(if lines_read == 0 {
                CorpusError::NoLines {
                    input: opts.input_name.clone(),
                }
            } else {
                CorpusError::NoUsableLines {
                    lines: partial::lines_in_shard(opts.shard, lines_read),
                    input: opts.input_name.clone(),
                    shard: opts.shard,
                }
            })
        }
        End::Complete => Ok(()),
        End::Stopped { line, reason } => Err(CorpusError::Stopped {
            line: *line,
            reason: reason.clone(),
            done: kept("before it"),
        }),
        End::Interrupted { after_line, signal } => Err(CorpusError::Interrupted {
            done: kept(&format!("up to line {after_line}")),
            signal: *signal,
        }),
        End::Failed(failure) => Err(CorpusError::Failed {
            failure: failure.clone(),
            done: kept("finished before that"),
        }),
    }
}

/// A shard with no lines at all (more shards than lines) is not an error: it has nothing to do.
pub(super) fn no_lines_of_shard(outcome: &Outcome, opts: &CorpusOptions) -> bool {
    !opts.shard.is_whole()
        && outcome.tally.lines > 0
        && partial::lines_in_shard(opts.shard, outcome.tally.lines) == 0
}

/// `12345` → `12,345`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
