//! Failures of the MCP client talking to an upstream, in words a person can act on.
//!
//! rmcp's own error texts name its transports by their Rust types (`Send message error
//! Transport [rmcp::transport::worker::WorkerTransport<…>] error: Client error: …, when send
//! initialize request`). Those reached the console's notices and the `isError` results of
//! upstream tools. What counts there is the innermost cause: the upstream could not be
//! reached (with the system's reason), did not answer in time, answered an HTTP error status,
//! answered something else than a JSON-RPC message (not JSON, JSON of another shape, another
//! content type, the answer to another request), or answered with a JSON-RPC error of its own.

use rmcp::service::{ClientInitializeError, ServiceError};
use rmcp::transport::streamable_http_client::{HttpStatusError, SseError, StreamableHttpError};

use super::http::HttpError;

/// How many causes deep a failure is read (a chain of `source()`s ends, but is not trusted to
/// be short).
const MAX_DEPTH: usize = 16;

/// The words for an answer that is valid JSON of another shape: no JSON-RPC message, or one
/// whose result or params break MCP's schema (a resource link without its `uri`).
pub const NOT_MCP: &str = "its answer was not a JSON-RPC message MCP's schema allows";

/// The most characters of an upstream's own text (the message of a JSON-RPC error it
/// answered) that Gatehouse repeats.
pub const MAX_UPSTREAM_TEXT: usize = 300;

/// An upstream's own text as Gatehouse repeats it (in an `isError` result, an error answer,
/// `upstream list`, a log line): one line, its control characters (line breaks, terminal
/// escapes) made spaces, at most [`MAX_UPSTREAM_TEXT`] characters, a cut one ending with `…`.
/// The text is the upstream's, whatever its size or bytes; this keeps it from forging log
/// lines or filling a result.
#[must_use]
pub fn upstream_text(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(MAX_UPSTREAM_TEXT)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().nth(MAX_UPSTREAM_TEXT).is_some() {
        out.push('…');
    }
    out
}

/// One line for a failed handshake (the `initialize` exchange, MCP lifecycle).
#[must_use]
pub fn handshake(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::JsonRpcError(data) => {
            format!(
                "it answered with an error: {}",
                upstream_text(&data.message)
            )
        }
        ClientInitializeError::ConnectionClosed(_) => {
            "it closed the connection during the handshake".to_string()
        }
        ClientInitializeError::Cancelled => "the handshake was cancelled".to_string(),
        ClientInitializeError::TransportError { error, .. } => cause(error),
        ClientInitializeError::NoCompatibleProtocolVersion { .. } => {
            "it speaks no MCP protocol version that Gatehouse speaks".to_string()
        }
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => handshake(fallback),
        _ => "it did not answer the handshake as an MCP server does".to_string(),
    }
}

/// One line for a failed request after the handshake (`tools/list`, `tools/call`, …). A
/// JSON-RPC error the upstream answered is given as its own message ([`upstream_text`]).
#[must_use]
pub fn request(error: &ServiceError) -> String {
    match error {
        ServiceError::McpError(data) => upstream_text(&data.message),
        ServiceError::TransportSend(error) => cause(error),
        ServiceError::TransportClosed => "the connection to it closed".to_string(),
        ServiceError::Timeout { .. } => "it did not answer in time".to_string(),
        ServiceError::Cancelled { .. } => "the request was cancelled".to_string(),
        // A JSON-RPC answer whose result is not the one MCP's schema gives the request (a
        // resource link without its `uri`, a tools listing where a tool result belongs).
        ServiceError::UnexpectedResponse => NOT_MCP.to_string(),
        _ => "it did not answer as an MCP server does".to_string(),
    }
}

/// Whether a failed request (after the handshake) says that the upstream could not be reached
/// or gave no answer: the connection could not be made, broke before the answer came or
/// closed; a proxy in front of it answered that it is down or overloaded (HTTP 502, 503,
/// 504); or no answer came in time. These count toward its cool-down
/// ([`super::server::COOL_DOWN_AFTER`]). An answer that came, whatever its shape (another
/// status, not JSON, another request's id, too large, a JSON-RPC error), does not.
#[must_use]
pub fn unreachable(error: &ServiceError) -> bool {
    let gateway = |status: u16| matches!(status, 502..=504);
    match error {
        ServiceError::TransportClosed | ServiceError::Timeout { .. } => true,
        ServiceError::TransportSend(error) => chain(error).iter().any(|e| {
            if let Some(StreamableHttpError::<HttpError>::HttpStatus(status)) = e.downcast_ref() {
                return gateway(status.status);
            }
            if let Some(status) = e.downcast_ref::<HttpStatusError>() {
                return gateway(status.status);
            }
            if let Some(SseError::Body(body)) = e.downcast_ref::<SseError>() {
                return !matches!(
                    body.downcast_ref::<HttpError>(),
                    Some(HttpError::TooLarge(_))
                );
            }
            e.downcast_ref::<reqwest::Error>()
                .is_some_and(|r| r.status().is_none())
        }),
        _ => false,
    }
}

/// `error` and its sources, outermost first (at most [`MAX_DEPTH`]), with the HTTP client's
/// error that rmcp keeps out of the chain put back in.
fn chain<'e>(
    error: &'e (dyn std::error::Error + 'static),
) -> Vec<&'e (dyn std::error::Error + 'static)> {
    let mut chain: Vec<&(dyn std::error::Error + 'static)> = Vec::with_capacity(4);
    let mut next = Some(error);
    while let Some(e) = next {
        if chain.len() == MAX_DEPTH {
            break;
        }
        chain.push(e);
        next = match e.downcast_ref::<StreamableHttpError<HttpError>>() {
            // rmcp keeps the HTTP client's error out of the chain of sources.
            Some(StreamableHttpError::Client(inner)) => Some(inner),
            _ => e.source(),
        };
    }
    chain
}

/// The innermost cause in `error`'s chain of sources that a person can act on.
fn cause(error: &(dyn std::error::Error + 'static)) -> String {
    let chain = chain(error);
    for e in &chain {
        if let Some(StreamableHttpError::<HttpError>::HttpStatus(status)) = e.downcast_ref() {
            return format!("it answered HTTP {}", status.status);
        }
        if let Some(StreamableHttpError::<HttpError>::UnexpectedContentType(media)) =
            e.downcast_ref()
        {
            return match media {
                Some(media) => format!(
                    "it answered {}, not JSON or an event stream",
                    media.escape_debug()
                ),
                None => {
                    "it answered without a content type, not JSON or an event stream".to_string()
                }
            };
        }
        if let Some(HttpError::Unmatched(why)) = e.downcast_ref::<HttpError>() {
            return why.clone();
        }
        if let Some(sse) = e.downcast_ref::<SseError>() {
            return match sse {
                SseError::Body(body) => match body.downcast_ref::<HttpError>() {
                    Some(HttpError::TooLarge(max)) => format!("its answer exceeded {max} bytes"),
                    _ => "the connection to it broke while it answered".to_string(),
                },
                malformed => format!("its event stream was malformed ({malformed})"),
            };
        }
        if let Some(json) = e.downcast_ref::<serde_json::Error>() {
            return match json.classify() {
                // Valid JSON of another shape: no JSON-RPC message, or one whose result or
                // params break MCP's schema (a resource link without its `uri`). serde's text
                // names Rust types.
                serde_json::error::Category::Data => NOT_MCP.to_string(),
                _ => format!("its answer was not JSON ({json})"),
            };
        }
        if let Some(status) = e.downcast_ref::<HttpStatusError>() {
            return format!("it answered HTTP {}", status.status);
        }
        if let Some(r) = e.downcast_ref::<reqwest::Error>() {
            if r.is_timeout() {
                return "it did not answer in time".to_string();
            }
            if let Some(status) = r.status() {
                return format!("it answered HTTP {}", status.as_u16());
            }
            // The system's reason (refused, reset), else the innermost text of the HTTP
            // stack's own ("connection closed before message completed") unless it names
            // Rust types.
            let io = chain
                .iter()
                .rev()
                .find_map(|e| e.downcast_ref::<std::io::Error>());
            let innermost = chain
                .last()
                .filter(|last| !std::ptr::addr_eq(**last, *e))
                .map(ToString::to_string)
                .filter(|text| !text.is_empty() && !text.contains("::"));
            let reason = match (io, innermost) {
                (Some(io), _) => format!(": {}", plain_io(io)),
                (None, Some(text)) => format!(": {}", upstream_text(&text)),
                (None, None) => String::new(),
            };
            if r.is_connect() {
                return format!("could not connect to it{reason}");
            }
            return format!("the request to it failed{reason}");
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return plain_io(io);
        }
    }
    // No cause of a known kind: the innermost text, unless it names Rust types.
    let innermost = chain.last().map(ToString::to_string).unwrap_or_default();
    if innermost.contains("::") || innermost.is_empty() {
        "it did not answer as an MCP server does".to_string()
    } else {
        innermost
    }
}

/// An I/O error's reason without the `(os error N)` suffix: "Connection refused".
fn plain_io(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error of a request to a port with nothing listening (bound, then released).
    async fn refused() -> reqwest::Error {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        reqwest::get(format!("http://127.0.0.1:{port}/mcp"))
            .await
            .unwrap_err()
    }

    /// A connection the upstream closes once it has read the request, without answering,
    /// is named with the HTTP stack's reason, not only "the request to it failed".
    #[tokio::test]
    async fn a_connection_closed_before_the_answer_says_so() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            use tokio::io::AsyncReadExt as _;
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = socket.read(&mut buf).await;
        });
        let closed = reqwest::get(format!("http://127.0.0.1:{port}/mcp"))
            .await
            .unwrap_err();
        let wrapped: StreamableHttpError<HttpError> =
            StreamableHttpError::Client(HttpError::Request(closed));
        let text = cause(&wrapped);
        assert!(
            text.starts_with("the request to it failed: ") && !text.contains("::"),
            "{text}"
        );
        assert!(text.contains("closed") || text.contains("reset"), "{text}");
    }

    #[tokio::test]
    async fn a_refused_connection_is_named_without_the_sdks_types() {
        let refused = refused().await;
        let wrapped: StreamableHttpError<HttpError> =
            StreamableHttpError::Client(HttpError::Request(refused));
        assert_eq!(
            cause(&wrapped),
            "could not connect to it: Connection refused"
        );
        let status = StreamableHttpError::<HttpError>::HttpStatus(HttpStatusError::new(503, None));
        assert_eq!(cause(&status), "it answered HTTP 503");
    }

    /// Only a request that got no answer counts toward the cool-down: a refused or broken
    /// connection, a gateway status, a closed transport, a timeout; an answer of any shape
    /// does not.
    #[tokio::test]
    async fn only_a_request_without_an_answer_counts_as_unreachable() {
        let sent = |error: StreamableHttpError<HttpError>| {
            ServiceError::TransportSend(rmcp::transport::DynamicTransportError::from_parts(
                "test",
                std::any::TypeId::of::<()>(),
                Box::new(error),
            ))
        };
        let refused = refused().await;
        let status = |code| {
            sent(StreamableHttpError::HttpStatus(HttpStatusError::new(
                code, None,
            )))
        };
        assert!(unreachable(&sent(StreamableHttpError::Client(
            HttpError::Request(refused)
        ))));
        for code in [502, 503, 504] {
            assert!(unreachable(&status(code)), "{code}");
        }
        assert!(unreachable(&ServiceError::TransportClosed));
        assert!(unreachable(&ServiceError::Timeout {
            timeout: std::time::Duration::from_secs(1)
        }));
        for code in [400, 401, 404, 500] {
            assert!(!unreachable(&status(code)), "{code}");
        }
        let not_json = serde_json::from_str::<serde_json::Value>("<html>").unwrap_err();
        assert!(!unreachable(&sent(StreamableHttpError::Deserialize(
            not_json
        ))));
        assert!(!unreachable(&sent(StreamableHttpError::Client(
            HttpError::TooLarge(10)
        ))));
        assert!(!unreachable(&sent(StreamableHttpError::Client(
            HttpError::Unmatched("another id".into())
        ))));
        assert!(!unreachable(&ServiceError::McpError(
            rmcp::ErrorData::invalid_params("no such note", None)
        )));
    }

    #[test]
    fn requests_name_the_upstreams_own_error_and_the_kind_of_failure() {
        let own = ServiceError::McpError(rmcp::ErrorData::invalid_params("no such note", None));
        assert_eq!(request(&own), "no such note");
        assert_eq!(
            request(&ServiceError::TransportClosed),
            "the connection to it closed"
        );
        assert_eq!(
            request(&ServiceError::Timeout {
                timeout: std::time::Duration::from_secs(1)
            }),
            "it did not answer in time"
        );
        assert_eq!(
            handshake(&ClientInitializeError::ConnectionClosed("eof".into())),
            "it closed the connection during the handshake"
        );
    }

    #[test]
    fn an_upstreams_own_text_is_one_bounded_line() {
        assert_eq!(upstream_text("no such note"), "no such note");
        assert_eq!(
            upstream_text("boom\n2026-12-07T00:00:00Z  INFO gatehouse: forged\u{1b}[31m"),
            "boom 2026-12-07T00:00:00Z  INFO gatehouse: forged [31m"
        );
        let long = "é".repeat(MAX_UPSTREAM_TEXT + 1);
        let cut = upstream_text(&long);
        assert_eq!(cut.chars().count(), MAX_UPSTREAM_TEXT + 1);
        assert!(cut.ends_with("é…"));
        assert_eq!(
            upstream_text(&long[..2 * MAX_UPSTREAM_TEXT]),
            long[..2 * MAX_UPSTREAM_TEXT]
        );
        let own = ServiceError::McpError(rmcp::ErrorData::invalid_params(long, None));
        assert_eq!(request(&own), cut);
    }
}
