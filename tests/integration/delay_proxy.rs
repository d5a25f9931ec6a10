//! A TCP proxy that holds every byte coming back from its target for a set delay (the bytes
//! towards the target pass at once): a listener path that delivers late, as a congested
//! network, an overloaded proxy or a paused virtual machine would. The delay can be changed
//! while connections are open; it applies to bytes read after the change.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A running proxy; dropping it stops accepting (open connections end with their peers).
pub(crate) struct DelayProxy {
    /// The loopback port it listens on.
    pub(crate) port: u16,
    delay_ms: Arc<AtomicU64>,
    accepting: JoinHandle<()>,
}

impl DelayProxy {
    /// Starts a proxy in front of `target` delaying what comes back by `delay`.
    pub(crate) async fn start(target: SocketAddr, delay: Duration) -> DelayProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let delay_ms = Arc::new(AtomicU64::new(delay.as_millis() as u64));
        let shared = delay_ms.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let delay_ms = shared.clone();
                tokio::spawn(async move {
                    if let Ok(outbound) = TcpStream::connect(target).await {
                        relay(inbound, outbound, delay_ms).await;
                    }
                });
            }
        });
        DelayProxy {
            port,
            delay_ms,
            accepting,
        }
    }

    /// Changes the delay of the bytes read from now on.
    pub(crate) fn set_delay(&self, delay: Duration) {
        self.delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// `url` (a `postgres://` URL) with its host and port replaced by this proxy's.
    pub(crate) fn url_for(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").unwrap();
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let user = authority
            .rsplit_once('@')
            .map(|(u, _)| format!("{u}@"))
            .unwrap_or_default();
        format!("{scheme}://{user}127.0.0.1:{}/{path}", self.port)
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// The `host:port` of a `postgres://` URL as a socket address (names resolved as loopback).
pub(crate) fn target_of(url: &str) -> SocketAddr {
    let rest = url.split_once("://").unwrap().1;
    let authority = rest.split('/').next().unwrap();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = host_port.rsplit_once(':').unwrap_or((host_port, "5432"));
    let host = if host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    format!("{host}:{port}").parse().unwrap()
}

async fn relay(inbound: TcpStream, outbound: TcpStream, delay_ms: Arc<AtomicU64>) {
    let (mut in_read, mut in_write) = inbound.into_split();
    let (mut out_read, mut out_write) = outbound.into_split();
    let up = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut in_read, &mut out_write).await;
    });
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match out_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let due = tokio::time::Instant::now()
                        + Duration::from_millis(delay_ms.load(Ordering::SeqCst));
                    if tx.send((due, buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    });
    while let Some((due, bytes)) = rx.recv().await {
        tokio::time::sleep_until(due).await;
        if in_write.write_all(&bytes).await.is_err() {
            break;
        }
    }
    up.abort();
    reader.abort();
}
