//! The doctor's HTTP client: never follows a redirect (a redirect is a finding), bounds every
//! request in time and every body in size, and turns every failure into text.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use reqwest::header::HeaderMap;

/// Largest body read from any answer; the rest is dropped (and said so).
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// One answer, read in full up to [`MAX_BODY_BYTES`].
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The status code.
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// The body, lossily decoded as UTF-8.
    pub body: String,
    /// Whether the body was cut at [`MAX_BODY_BYTES`].
    pub truncated: bool,
}

impl Fetched {
    /// A header's value as text (the first one), if present and visible ASCII.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The media type of `Content-Type`, lowercased, without parameters.
    pub fn media_type(&self) -> String {
        self.header("content-type")
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    }

    /// Whether this is a redirect (3xx with or without `Location`).
    pub fn is_redirect(&self) -> bool {
        (300..400).contains(&self.status)
    }

    /// `status` and, for a redirect, where it points; for an HTML page, that it is one.
    pub fn summary(&self) -> String {
        let mut s = self.status.to_string();
        if self.is_redirect() {
            s.push_str(&format!(
                " redirect to {}",
                self.header("location").unwrap_or("(no Location)")
            ));
        } else if self.media_type() == "text/html" {
            s.push_str(" (an HTML page)");
        }
        s
    }

    /// The first characters of the body, on one line, for reports.
    pub fn excerpt(&self) -> String {
        let one_line: String = self
            .body
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(120)
            .collect();
        if self.body.chars().count() > 120 {
            format!("{}…", one_line.trim_end())
        } else {
            one_line.trim_end().to_string()
        }
    }
}

/// The HTTP client of one doctor run.
#[derive(Debug, Clone)]
pub struct Probe {
    client: reqwest::Client,
    timeout: Duration,
    answered: Arc<AtomicBool>,
}

impl Probe {
    /// A client that follows no redirect and gives each request `timeout` in all (connect,
    /// send, and reading the body).
    pub fn new(timeout: Duration) -> Result<Probe, String> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(timeout)
            .user_agent(concat!("gatehouse-doctor/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Probe {
            client,
            timeout,
            answered: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The underlying client, to build requests with.
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// The time each request may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether any request of this run got an HTTP answer (any status).
    pub fn reached(&self) -> bool {
        self.answered.load(Ordering::Relaxed)
    }

    /// Sends `request` and reads its answer, within the timeout. `Err` is a sentence saying
    /// what went wrong (connection refused, timeout, TLS, …).
    pub async fn send(&self, request: reqwest::RequestBuilder) -> Result<Fetched, String> {
        let timeout = self.timeout;
        let result = match tokio::time::timeout(timeout, read(request)).await {
            Ok(result) => result,
            Err(_) => Err(format!("no answer within {} s", timeout.as_secs())),
        };
        if result.is_ok() {
            self.answered.store(true, Ordering::Relaxed);
        }
        result
    }

    /// Whether `host:port` answers a plain-HTTP request (its first bytes are `HTTP/`): asked
    /// after an `https` request failed, to tell "this port speaks plain HTTP" from other
    /// failures. Bounded by the probe's timeout; any failure is `false`.
    pub async fn speaks_plain_http(&self, host: &str, port: u16) -> bool {
        let attempt = async {
            let mut stream = tokio::net::TcpStream::connect((host, port)).await.ok()?;
            let request = format!("HEAD / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
            stream.write_all(request.as_bytes()).await.ok()?;
            let mut first = [0u8; 5];
            stream.read_exact(&mut first).await.ok()?;
            Some(&first == b"HTTP/")
        };
        tokio::time::timeout(self.timeout, attempt)
            .await
            .ok()
            .flatten()
            .unwrap_or(false)
    }
}

async fn read(request: reqwest::RequestBuilder) -> Result<Fetched, String> {
    let mut response = request.send().await.map_err(|e| describe(&e))?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let mut bytes = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = response.chunk().await.map_err(|e| describe(&e))? {
        let room = MAX_BODY_BYTES - bytes.len();
        if chunk.len() > room {
            bytes.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Fetched {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
        truncated,
    })
}

/// A reqwest error with its causes, on one line.
fn describe(e: &reqwest::Error) -> String {
    let mut text = if e.is_connect() {
        "cannot connect".to_string()
    } else if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_builder() {
        "bad request URL".to_string()
    } else {
        "request failed".to_string()
    };
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    let mut depth = 0;
    while let Some(s) = source {
        if depth == 4 {
            break;
        }
        text.push_str(&format!(": {s}"));
        source = s.source();
        depth += 1;
    }
    text
}
