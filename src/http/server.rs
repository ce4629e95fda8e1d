//! The accept loop. `axum::serve` keeps every connection for as long as the client likes: a
//! client that connects and sends nothing, or dribbles a header, holds a socket forever, and
//! enough of them exhaust the file descriptors. Here each connection needs a permit (at most
//! `--max-connections` at once; the rest wait in the listen backlog, not accepted), and a
//! watchdog closes connections that are idle too long or take too long to send a request
//! head. Requests themselves are bounded by the router's request timeout.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::response::Response;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tower::ServiceExt;

use crate::config::Config;

/// File descriptors kept for everything but client connections (database connections,
/// document files, outbound requests, logs) when the connection bound is derived.
const RESERVED_FDS: u64 = 256;
/// Each idle HTTP/1 connection holds buffers and a task (some 10–20 KiB); past this many,
/// memory rather than descriptors is what runs out.
const MAX_DERIVED_CONNECTIONS: u64 = 65_536;

/// Largest request head (request line and headers).
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// The bounds of the accept loop.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
}

impl Limits {
    /// The configured bounds. Raises this process's open-file soft limit to its hard limit
    /// first, so that a derived `max_connections` can use all of it.
    pub fn from_config(c: &Config) -> Limits {
        let fds = raise_nofile_limit();
        let max_connections = match c.max_connections {
            Some(n) => n as usize,
            None => derived_max_connections(fds) as usize,
        };
        Limits {
            max_connections,
            header_read_timeout: Duration::from_secs(c.header_read_timeout_seconds),
            idle_timeout: Duration::from_secs(c.idle_timeout_seconds),
        }
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (capped at 2^20, the usual kernel
/// ceiling, since an "unlimited" hard limit cannot be set as the soft one) and returns the
/// soft limit now in force.
fn raise_nofile_limit() -> u64 {
    match rlimit::increase_nofile_limit(1 << 20) {
        Ok(n) => n,
        Err(e) => {
            let soft = rlimit::getrlimit(rlimit::Resource::NOFILE)
                .map(|(soft, _)| soft)
                .unwrap_or(1024);
            tracing::warn!(error = %e, soft, "could not raise the open-file limit");
            soft
        }
    }
}

/// The open-file limit less what the rest of the service needs (half of it when the limit
/// is small), at least 1, at most [`MAX_DERIVED_CONNECTIONS`].
pub fn derived_max_connections(fds: u64) -> u64 {
    fds.saturating_sub(RESERVED_FDS)
        .max(fds / 2)
        .clamp(1, MAX_DERIVED_CONNECTIONS)
}

/// Serves `router` on `listener` until `shutdown` resolves; then stops accepting (closing
/// the listening socket) and waits for open connections: in-flight requests finish, idle
/// connections close at once.
pub async fn run(
    router: Router,
    listener: TcpListener,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    tracing::info!(
        max_connections = limits.max_connections,
        header_read_timeout_s = limits.header_read_timeout.as_secs(),
        idle_timeout_s = limits.idle_timeout.as_secs(),
        "connection limits"
    );
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut http = http1::Builder::new();
    // The watchdog below times the request head from its first byte; hyper's own timer
    // would start when it begins waiting, which makes it an idle timeout too.
    http.header_read_timeout(None);
    // hyper buffers a request head of up to ~400 KB by default; with tens of thousands of
    // connections that is gigabytes a slow client can make the server hold. 64 KiB is far
    // above any real head (a session token is ~300 bytes); over it is 431.
    http.max_header_size(MAX_HEAD_BYTES);
    let http = Arc::new(http);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // A permit before accepting: over the bound, connections stay in the kernel's
        // backlog (their clients wait) rather than being accepted and dropped.
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Typically EMFILE: descriptors are short elsewhere. Retrying at once would
                // spin; some will be closed soon.
                tracing::error!(error = %e, "accept failed; retrying in 100 ms");
                drop(permit);
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(100)) => continue,
                    () = &mut shutdown => break,
                }
            }
        };
        // Responses go out as soon as they are written: with Nagle's algorithm a response
        // written in more than one piece waits for the client's delayed ACK (up to 40 ms).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, %peer, "could not set TCP_NODELAY");
        }
        let watch = Arc::new(Watch::new());
        let service = ConnService {
            router: router.clone(),
            peer,
            watch: watch.clone(),
        };
        let io = TokioIo::new(Watched {
            io: stream,
            watch: watch.clone(),
        });
        let conn = graceful.watch(http.serve_connection(io, service));
        // Repoll: the connection wakes itself as a request's body reaches its handler.
        tokio::spawn(super::repoll::Repoll::new(async move {
            tokio::select! {
                r = conn => if let Err(e) = r {
                    tracing::debug!(error = %e, %peer, "connection ended with an error");
                },
                () = watch.expired(limits) => {
                    tracing::debug!(%peer, "closing a connection that timed out");
                },
            }
            drop(permit);
        }));
    }
    drop(listener);
    graceful.shutdown().await;
}

fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Waiting for a request: the idle timeout runs from the last byte moved.
const IDLE: u8 = 0;
/// Bytes of a request head arrived: the header-read timeout runs from the first.
const HEAD: u8 = 1;
/// A handler is running: the router's request timeout bounds it.
const BUSY: u8 = 2;

/// One connection's state, shared by its socket wrapper and its service. All of it lives on
/// the connection's task (hyper polls the service inside the connection future), so
/// relaxed atomics are only there to make it `Sync`.
struct Watch {
    phase: AtomicU8,
    /// Milliseconds after `start` when the current deadline's clock started.
    since: AtomicU64,
    start: Instant,
}

impl Watch {
    fn new() -> Watch {
        Watch {
            phase: AtomicU8::new(IDLE),
            since: AtomicU64::new(0),
            start: Instant::now(),
        }
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn read_some(&self) {
        if self.phase.load(Ordering::Relaxed) == IDLE {
            self.since.store(self.now(), Ordering::Relaxed);
            self.phase.store(HEAD, Ordering::Relaxed);
        }
    }

    /// Writing a response to a slow reader is progress; a stalled one is idle.
    fn wrote_some(&self) {
        if self.phase.load(Ordering::Relaxed) == IDLE {
            self.since.store(self.now(), Ordering::Relaxed);
        }
    }

    fn set(&self, phase: u8) {
        self.since.store(self.now(), Ordering::Relaxed);
        self.phase.store(phase, Ordering::Relaxed);
    }

    /// Resolves when the connection has overstayed its current phase. Activity only moves
    /// deadlines later, so it sleeps to the earliest possible one and checks again.
    async fn expired(&self, limits: Limits) {
        loop {
            let limit = match self.phase.load(Ordering::Relaxed) {
                IDLE => limits.idle_timeout,
                HEAD => limits.header_read_timeout,
                _ => {
                    tokio::time::sleep(limits.idle_timeout.max(Duration::from_secs(1))).await;
                    continue;
                }
            };
            let deadline =
                self.start + Duration::from_millis(self.since.load(Ordering::Relaxed)) + limit;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }
}

/// The socket, reporting reads and writes to the watchdog.
struct Watched {
    io: TcpStream,
    watch: Arc<Watch>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.watch.read_some();
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.watch.wrote_some();
        }
        r
    }

    // hyper writes a response's head and body in one vectored write when the socket can.
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.watch.wrote_some();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The router for one connection: adds the peer address (`ConnectInfo<SocketAddr>`, as
/// `into_make_service_with_connect_info` did) and marks the connection busy while a
/// handler runs.
#[derive(Clone)]
struct ConnService {
    router: Router,
    peer: SocketAddr,
    watch: Arc<Watch>,
}

/// Marks the connection busy; idle again when dropped (the handler finished or was
/// cancelled).
struct Busy(Arc<Watch>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.set(IDLE);
    }
}

impl hyper::service::Service<Request<Incoming>> for ConnService {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        req.extensions_mut().insert(ConnectInfo(self.peer));
        self.watch.set(BUSY);
        let busy = Busy(self.watch.clone());
        let response = self.router.clone().oneshot(req);
        Box::pin(async move {
            let r = response.await;
            drop(busy);
            r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::derived_max_connections;

    #[test]
    fn derived_bound_leaves_descriptors_for_the_rest() {
        assert_eq!(derived_max_connections(1024), 768);
        assert_eq!(derived_max_connections(20_000), 19_744);
        assert_eq!(derived_max_connections(300), 150);
        assert_eq!(derived_max_connections(1), 1);
        assert_eq!(derived_max_connections(1 << 20), 65_536);
    }
}
