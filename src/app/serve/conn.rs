//! The accept loop: each connection served by hyper's HTTP/1 with a bound on the time to send
//! the request headers (a client that sends them slowly is dropped), which axum's `serve` does
//! not set; graceful shutdown: stop accepting, let the connections finish their requests.

use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// The most time a client may take to send a request's headers, from its connection (or its
/// previous answer) on; hyper closes the connection after it.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Serve `router` on `listener` until `shutdown` completes, then wait for the connections in
/// flight to finish their requests.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let (stop_tx, stop_rx) = watch::channel(false);
    // Every connection task holds a receiver; when all are gone, `closed()` completes.
    let (done_tx, done_rx) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            // Out of descriptors and the like: wait a moment, as axum's loop does.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let mut stop = stop_rx.clone();
        let held = done_rx.clone();
        tokio::spawn(async move {
            let _held = held;
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT);
            let mut conn = std::pin::pin!(builder.serve_connection(TokioIo::new(stream), service));
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = stop.wait_for(|s| *s) => conn.as_mut().graceful_shutdown(),
            }
            let _ = conn.await;
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(done_rx);
    done_tx.closed().await;
}
