//! `attnviz serve`: a live local web app over the library's run request. The models are loaded
//! once; the page (`assets/serve/`) posts each text to `/api/run`, which runs it through
//! [`attnviz::request::RunRequest`] on a blocking thread, keeps the run in memory and answers
//! JSON with the run's report data (a vision model's picture is posted to `/api/image` as the
//! body itself, a speech model's recording to `/api/audio`, each read into memory within a bound
//! and handed to the library as bytes); the page loads the first report (the very bytes `--html`
//! writes, written on demand at `/report/ID`) into a frame and hands each later run's data to
//! that report, which redraws in place. Save asks for the kept run's report.
//!
//! Safe by default: it binds 127.0.0.1; another address needs the random token printed at start
//! in every URL. Every request's Host and Origin must be the served address ([`guard`]); bodies,
//! input tokens, generated tokens and time are bounded; one forward pass per model runs at a
//! time, a few wait, the rest get 503 ([`slot`]). Requests name models by their place in the
//! list, never a file, and reports live in memory only. Ctrl-C or SIGTERM stops it gracefully.

mod api;
mod conn;
pub mod guard;
mod kept;
pub mod report;
mod slot;

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use attnviz::model::{Mask, Model};

use super::cli::ServeArgs;
use super::error::{note, Error};
use guard::Guard;
use slot::Slot;

/// One served model.
pub struct Served {
    /// What the page shows.
    pub name: String,
    /// What `--model` said.
    pub spec: String,
    /// The model, loaded once.
    pub model: Model,
    /// `encoder`, `decoder`, `encoder-decoder`, `vision` (a picture, uploaded) or `speech` (a
    /// recording, uploaded): which inputs the page offers.
    pub kind: &'static str,
    /// Its one forward pass at a time and its queue.
    pub slot: Slot,
}

/// What every handler shares.
pub struct State {
    /// The models, in `--model` order; requests name them by index.
    pub models: Vec<Served>,
    /// Who may talk to the server.
    pub guard: Guard,
    /// `--revision`.
    pub revision: String,
    /// The most input tokens of one request.
    pub max_tokens: usize,
    /// The most generated tokens of one request.
    pub max_generate: usize,
    /// The most time one request may take.
    pub timeout: Duration,
    /// The runs and comparisons made lately, by id (memory only), within `--keep-memory`.
    pub reports: kept::Reports,
    /// The report writer: one report written at a time (on one blocking thread, beside the
    /// models' runs), `--queue` waiting, the rest refused.
    pub drawing: Slot,
    /// `--test-hold`: one message per line read from stdin; each run and each report written
    /// takes one first.
    pub hold: Option<Mutex<mpsc::Receiver<()>>>,
}

impl State {
    /// `--test-hold`: wait for the test's release (at once without the flag).
    pub fn wait_for_release(&self) {
        if let Some(hold) = &self.hold {
            let _ = hold.lock().unwrap_or_else(|p| p.into_inner()).recv();
        }
    }
}

/// `--test-hold`: a thread turning each line of stdin into one release.
fn hold_on_stdin() -> Mutex<mpsc::Receiver<()>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for _ in std::io::stdin().lock().lines().map_while(Result::ok) {
            if tx.send(()).is_err() {
                break;
            }
        }
    });
    Mutex::new(rx)
}

/// Load the models, listen, and serve until Ctrl-C or SIGTERM.
pub fn run(args: &ServeArgs) -> Result<(), Error> {
    if args.max_tokens == 0 || args.queue > 1024 || args.timeout == 0 || args.max_connections == 0 {
        return Err(Error::Usage(
            "--max-tokens, --timeout and --max-connections must be at least 1, --queue at most 1024"
                .into(),
        ));
    }
    attnviz::threads::configure(args.threads);
    let loopback = args.host.is_loopback();
    let token = if loopback && !args.token {
        None
    } else {
        Some(
            guard::new_token()
                .map_err(|e| Error::Usage(format!("cannot draw a random token for --host: {e}")))?,
        )
    };
    let mut models = Vec::new();
    for spec in &args.models {
        let started = Instant::now();
        let model =
            Model::load_within(spec, &args.revision, &attnviz::model::Hub::from_env(), None)?
                .with_full_path(args.full_paths);
        let kind = if model.is_speech() {
            "speech"
        } else if model.is_vision() {
            "vision"
        } else if model.is_seq2seq() {
            "encoder-decoder"
        } else if model.architecture().mask == Mask::Causal {
            "decoder"
        } else {
            "encoder"
        };
        let name = model.info().name().to_string();
        note(&format!(
            "loaded {name} ({}, {kind}) in {:.1} s",
            model.family(),
            started.elapsed().as_secs_f64()
        ));
        models.push(Served {
            name,
            spec: spec.clone(),
            model,
            kind,
            slot: Slot::new(args.queue),
        });
    }
    // Blocking threads: one per model's run and one for the report writer (each behind its own
    // turn, so a run always finds a thread), and one to spare.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(models.len() + 2)
        .enable_all()
        .build()
        .map_err(|e| Error::Usage(format!("cannot start the server's runtime: {e}")))?;
    runtime.block_on(async move {
        let wanted = SocketAddr::new(args.host, args.port);
        let listener = tokio::net::TcpListener::bind(wanted).await.map_err(|e| {
            Error::Usage(format!(
                "cannot listen on {wanted}: {e}; pick another --port (0: any free one)"
            ))
        })?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Usage(format!("cannot read the listening address: {e}")))?;
        let state = Arc::new(State {
            models,
            guard: Guard::new(addr, token.clone()),
            revision: args.revision.clone(),
            max_tokens: args.max_tokens,
            max_generate: args.max_generate,
            timeout: Duration::from_secs(args.timeout),
            reports: kept::Reports::new(args.keep_memory),
            drawing: Slot::new(args.queue),
            hold: args.test_hold.then(hold_on_stdin),
        });
        let url = match &token {
            Some(t) => format!("http://{addr}/?token={t}"),
            None => format!("http://{addr}/"),
        };
        if !loopback {
            note(&format!(
                "warning: listening on {addr}, not only on this machine: anyone who can reach \
                 it and has the token can run the models; prefer the default 127.0.0.1 and \
                 `ssh -L {p}:127.0.0.1:{p} HOST`",
                p = addr.port()
            ));
        }
        note(&format!("attnviz serve: open {url}  (Ctrl-C stops it)"));
        // Ctrl-C and SIGTERM: the library's handler records them (graceful mode); the server
        // stops taking connections and lets the requests in flight finish.
        attnviz::cleanup::set_graceful(true);
        let shutdown = async {
            while !attnviz::cleanup::stop_requested() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        conn::serve(listener, api::router(state), args.max_connections, shutdown).await;
        let _ = writeln!(std::io::stderr(), "attnviz serve: stopped");
        Ok(())
    })
}
