//! The accept loop: each connection served by hyper's HTTP/1 with a bound on the time to send
//! the request headers (a client that sends them slowly is dropped), which axum's `serve` does
//! not set; a bound on the connections open at once (one more is answered 503 and closed, so
//! idle keep-alive or slow clients cannot exhaust the descriptors); graceful shutdown: stop
//! accepting, let the connections finish their requests.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

/// The most time a client may take to send a request's headers, from its connection (or its
/// previous answer) on; hyper closes the connection after it.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// What a connection over the bound is told before it is closed.
const FULL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
    content-type: application/json\r\ncache-control: no-store\r\nretry-after: 1\r\n\
    connection: close\r\n\
    content-length: 65\r\n\r\n\
    {\"error\": \"too many connections are open; try again in a moment\"}";

/// The most time the 503 of a connection over the bound may take to send.
const FULL_WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// Tell a connection over the bound so, without reading its request, and close it.
async fn refuse(stream: TcpStream) {
    let _ = tokio::time::timeout(FULL_WRITE_TIMEOUT, async {
        let mut rest = FULL;
        while !rest.is_empty() && stream.writable().await.is_ok() {
            match stream.try_write(rest) {
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
        }
    })
    .await;
    // Dropped: closed.
}

/// Serve `router` on `listener`, at most `max_connections` connections at once, until
/// `shutdown` completes, then wait for the connections in flight to finish their requests.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    max_connections: usize,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let open = Arc::new(Semaphore::new(max_connections));
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
        let Ok(place) = Arc::clone(&open).try_acquire_owned() else {
            tokio::spawn(refuse(stream));
            continue;
        };
        let service = TowerToHyperService::new(router.clone());
        let mut stop = stop_rx.clone();
        let held = done_rx.clone();
        tokio::spawn(async move {
            let _held = (held, place);
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
