//! The server loop: accepts TCP connections and serves each over HTTP/1.1 on a serving lane
//! ([`crate::lanes`]), within the connection limits, until told to stop ([`serve`]). The
//! wiring that builds what it serves is [`crate::app`].

use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;

use crate::config::Config;
use crate::store::Store;

/// Largest request head (request line and headers) read, in bytes; a bigger one is answered
/// `431 Request Header Fields Too Large` (RFC 6585 §5) by hyper (`max_header_size`).
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

/// Most header fields in one request; more are answered `431` (RFC 6585 §5) by hyper.
pub const MAX_HEADERS: usize = 64;

/// Accepts connections on `listener` and serves on each over HTTP/1.1 (RFC 9112;
/// TLS and HTTP/2 end at the reverse proxy) until `stop` completes; then stops accepting, lets
/// in-flight requests finish for at most [`SHUTDOWN_GRACE`] and returns.
///
/// Each connection is served on one of the serving lanes ([`crate::lanes`], one per core),
/// the lanes taken in turn, by the router `lane_router` made for that lane of its own store
/// ([`Store::for_lane`]); the accepting loop runs where this is called.
///
/// The limits against hostile clients are hyper's and tower-http's settings:
/// `header_read_timeout` (slow or idle connections, including a new one that sends nothing:
/// closed once a request head has not arrived within `GATEHOUSE_HEADER_READ_TIMEOUT`; the
/// HTTP/1-or-2 detection of `hyper_util`'s `auto` builder, which `axum::serve` uses, waits for
/// the first bytes without any limit, so it is not used), [`MAX_HEADER_BYTES`] and
/// [`MAX_HEADERS`] (`431`), at most `GATEHOUSE_MAX_CONNECTIONS`
/// connections served at once (a semaphore permit per accepted connection; while none is free
/// the listener is not polled, so new connections wait in the kernel's backlog), and at most
/// `GATEHOUSE_MAX_CONNECTIONS_PER_ADDRESS` of them from one source address
/// ([`crate::connections`]: a connection over it is closed as soon as it is accepted, before
/// anything is read; O(1) per connection). Request bodies get their whole-body deadline from
/// [`crate::app::router`] ([`crate::request_body`]).
pub async fn serve(
    listener: TcpListener,
    lane_router: impl Fn(Store) -> Router + Send + Sync + 'static,
    config: &Config,
    store: &Store,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let builder = connection_builder(config);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let permits = Arc::new(tokio::sync::Semaphore::new(config.max_connections));
    let per_address = crate::connections::PerAddress::new(
        config.max_connections_per_address,
        config.trusted_proxies.clone(),
    );
    let count = crate::lanes::default_count();
    let mut lanes = crate::lanes::Lanes::start(
        count,
        store,
        crate::store::lane_pool_size(store.max_connections(), count),
        lane_router,
    )?;
    let mut stop = std::pin::pin!(stop);
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            _ = &mut stop => break,
        };
        let (socket, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    after_accept_failure(&e).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        // Over its address's cap: closed at once (its permit goes back with it).
        let Some(place) = per_address.admit(remote.ip()) else {
            crate::metrics::connection_refused();
            continue;
        };
        let _ = socket.set_nodelay(true);
        // Registered again with the lane's runtime, which drives it from then on.
        let socket = match socket.into_std() {
            Ok(socket) => socket,
            Err(e) => {
                tracing::debug!(error = %e, "an accepted connection could not be handed on");
                continue;
            }
        };
        let job = connection_job(
            socket,
            remote,
            builder.clone(),
            graceful.watcher(),
            (permit, place),
        );
        let handed = lanes.run(job);
        if !handed {
            tracing::error!("every serving lane has ended; no longer accepting connections");
            break;
        }
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("in-flight requests did not finish in time; stopping anyway");
    }
    Ok(())
}

/// hyper's HTTP/1.1 connection settings: the `header_read_timeout` of `config`
/// (`GATEHOUSE_HEADER_READ_TIMEOUT`), [`MAX_HEADER_BYTES`] and [`MAX_HEADERS`].
fn connection_builder(config: &Config) -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(std::time::Duration::from_secs(
            config.header_read_timeout_secs as u64,
        ))
        .max_header_size(MAX_HEADER_BYTES)
        .max_headers(MAX_HEADERS);
    builder
}

/// What follows a failed `accept` of error `e`: a per-connection failure (reset before
/// accept) is skipped at once; any other (running out of file descriptors…) is logged and
/// gets a pause of 100 ms instead of a busy loop.
async fn after_accept_failure(e: &std::io::Error) {
    if !matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionRefused
    ) {
        tracing::error!(error = %e, "accept failed");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The job that serves the accepted connection `socket` from `remote` on a lane, with the
/// lane's router: the peer address put in each request (what
/// `into_make_service_with_connect_info` does, for extractors), the connection served by
/// `builder` and watched by `watcher` for a graceful shutdown, on a task of the lane's runtime.
/// `held` (the connection's permit and its place of its address) is released when the
/// connection ends; a socket the lane's runtime cannot take is dropped with it.
fn connection_job(
    socket: std::net::TcpStream,
    remote: std::net::SocketAddr,
    builder: hyper::server::conn::http1::Builder,
    watcher: hyper_util::server::graceful::Watcher,
    held: (tokio::sync::OwnedSemaphorePermit, crate::connections::Place),
) -> crate::lanes::Job<Router> {
    use hyper_util::rt::TokioIo;
    use hyper_util::service::TowerToHyperService;

    Box::new(move |router: &Router| {
        let service = TowerToHyperService::new(tower::ServiceExt::map_request(
            router.clone(),
            move |mut request: http::Request<hyper::body::Incoming>| {
                request
                    .extensions_mut()
                    .insert(axum::extract::ConnectInfo(remote));
                request
            },
        ));
        let socket = match tokio::net::TcpStream::from_std(socket) {
            Ok(socket) => socket,
            Err(e) => {
                tracing::debug!(error = %e, "an accepted connection could not be served");
                return;
            }
        };
        let connection = watcher.watch(builder.serve_connection(TokioIo::new(socket), service));
        tokio::spawn(crate::lanes::watched(
            async move {
                // A client that goes away mid-request is its own business, not an error
                // here.
                let _ = connection.await;
                drop(held);
            },
            crate::lanes::BUSY_WARNING,
        ));
    })
}

/// How long in-flight requests may take to finish after a stop signal; past it they are
/// dropped. Leaves room within [`crate::app::SHUTDOWN_BOUND`] for the rest of the stop.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(25);
