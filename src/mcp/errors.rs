//! One shape for every error the MCP route answers (JSON-RPC 2.0 §5; MCP Streamable HTTP
//! transport, which speaks JSON-RPC over HTTP).
//!
//! Our own layers answer JSON-RPC errors, but some answers come from elsewhere: rmcp's header
//! checks (`415` for a body that is not JSON, `400` for an unknown `MCP-Protocol-Version`), body
//! limits (`413`), the `405` of a method other than POST, and a `503` while the database is busy.
//! This outermost layer rewrites any such error response whose body is not JSON into
//! `{"jsonrpc":"2.0","id":null,"error":{"code":…,"message":…}}` as `application/json`, keeping the
//! HTTP status and every other header (`Allow`, `WWW-Authenticate`, `Retry-After`). JSON error
//! bodies (our own, and the 401/403 challenges) pass unchanged.
//!
//! It also names the method in rmcp's `-32601` answer ("Method not found: <method>", the
//! message JSON-RPC 2.0 §5.1 gives that code), where rmcp puts the bare method name.

use axum::body::{Body, HttpBody, to_bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::{Value, json};

/// How much of a non-JSON error body is kept as the message, in bytes.
const MAX_MESSAGE_BYTES: usize = 512;

/// Largest JSON answer inspected for rmcp's `-32601` message, in bytes: that answer is tiny,
/// and tool results (up to `GATEHOUSE_MAX_RESULT_BYTES`) are never read here.
const MAX_INSPECTED_BYTES: u64 = 1024;

/// JSON-RPC 2.0 §5.1: the method does not exist.
const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC 2.0 §5.1: internal error (used for a `5xx` answer).
const INTERNAL_ERROR: i64 = -32603;

/// The member of an error's `data` that marks a request failed because the database cannot be
/// used right now; its value is the `Retry-After` in seconds.
const RETRY_AFTER_DATA: &str = "retryAfter";

/// The most characters of a name the client sent (a tool, prompt or method name) that an error
/// repeats back; MCP tool names are at most 128 characters (SEP-986).
pub const ECHOED_NAME_MAX: usize = 128;
/// The most characters of a URI the client sent that an error repeats back.
pub const ECHOED_URI_MAX: usize = 1024;

/// `text` as an error repeats it to the client: whole when it has at most `max` characters,
/// else its first `max` characters followed by `…`, so that an error answer stays small
/// whatever was sent.
pub fn echoed(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(text),
        Some((cut, _)) => std::borrow::Cow::Owned(format!("{}…", &text[..cut])),
    }
}

/// A JSON-RPC internal error for a database that is busy, out of reach, full or read-only; this
/// layer answers it with HTTP `503` and `Retry-After` (RFC 9110 §15.6.4, §10.2.3).
pub fn unavailable() -> rmcp::ErrorData {
    let seconds: u64 = crate::oauth::error::RETRY_AFTER_SECS.parse().unwrap_or(5);
    rmcp::ErrorData::internal_error(
        super::catalog::UNAVAILABLE_MESSAGE,
        Some(json!({ RETRY_AFTER_DATA: seconds })),
    )
}

/// The JSON-RPC error of an MCP request (`what`: "resource", "prompt") whose storage failed,
/// logged here: the database busy or unreachable gives [`unavailable`] (503 with
/// `Retry-After` at the HTTP layer); any other failure -32603 without a retry hint.
pub fn storage_failure(e: &crate::store::StoreError, what: &str) -> rmcp::ErrorData {
    if e.is_unavailable() {
        tracing::warn!(error = %e, "MCP {what} request: database unavailable");
        return unavailable();
    }
    tracing::error!(error = %e, "MCP {what} request failed");
    rmcp::ErrorData::internal_error(
        "Gatehouse could not read its storage; try again shortly.",
        None,
    )
}

fn is_json(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| {
            let essence = essence.trim().to_ascii_lowercase();
            essence == "application/json" || essence.ends_with("+json")
        })
}

/// A JSON-RPC error body for `status` whose message is `text` (or the status's reason).
fn json_rpc_error(status: StatusCode, text: &str) -> String {
    let code = if status.is_server_error() {
        INTERNAL_ERROR
    } else {
        super::body::INVALID_REQUEST
    };
    let text = text.trim();
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("Error").to_string()
    } else {
        let mut end = text.len().min(MAX_MESSAGE_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text[..end].to_string()
    };
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}}).to_string()
}

/// Middleware: see the module documentation.
pub async fn json_rpc_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    if (status.is_client_error() || status.is_server_error()) && !is_json(&response) {
        let (mut parts, body) = response.into_parts();
        // A body that cannot be read whole within the bound gives no message (the reason then).
        let text = match to_bytes(body, 16 * 1024).await {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(_) => String::new(),
        };
        parts.headers.remove(header::CONTENT_LENGTH);
        parts.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return Response::from_parts(parts, Body::from(json_rpc_error(status, &text)));
    }
    if is_json(&response)
        && response
            .body()
            .size_hint()
            .exact()
            .is_some_and(|n| n <= MAX_INSPECTED_BYTES)
    {
        let (parts, body) = response.into_parts();
        let Ok(bytes) = to_bytes(body, MAX_INSPECTED_BYTES as usize).await else {
            return Response::from_parts(parts, Body::empty());
        };
        let mut parts = parts;
        let body = match serde_json::from_slice::<Value>(&bytes) {
            Ok(mut message) if message["error"]["code"] == METHOD_NOT_FOUND => {
                let named = message["error"]["message"]
                    .as_str()
                    .filter(|m| !m.starts_with("Method not found"))
                    .map(|m| format!("Method not found: {}", echoed(m, ECHOED_NAME_MAX)));
                match named {
                    Some(named) => {
                        message["error"]["message"] = Value::String(named);
                        parts.headers.remove(header::CONTENT_LENGTH);
                        Body::from(message.to_string())
                    }
                    None => Body::from(bytes),
                }
            }
            Ok(message)
                if message["error"]["code"] == INTERNAL_ERROR
                    && message["error"]["data"][RETRY_AFTER_DATA].is_u64() =>
            {
                let seconds = message["error"]["data"][RETRY_AFTER_DATA].to_string();
                parts.status = StatusCode::SERVICE_UNAVAILABLE;
                parts
                    .extensions
                    .insert(crate::metrics::Unavailable::Database);
                if let Ok(v) = HeaderValue::from_str(&seconds) {
                    parts.headers.insert(header::RETRY_AFTER, v);
                }
                Body::from(bytes)
            }
            _ => Body::from(bytes),
        };
        return Response::from_parts(parts, body);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoed_text_is_cut_at_a_character_count() {
        assert_eq!(echoed("abc", 3), "abc");
        assert!(matches!(echoed("abc", 3), std::borrow::Cow::Borrowed(_)));
        assert_eq!(echoed("abcd", 3), "abc…");
        // Counted in characters, cut on a character boundary.
        assert_eq!(echoed("ééééé", 2), "éé…");
        assert_eq!(echoed("", 0), "");
    }

    /// The answer of the error layer to a handler that answers `body` with 200.
    async fn through_layer(body: Value) -> Response {
        use tower::ServiceExt;
        let app = axum::Router::new()
            .route(
                "/mcp",
                axum::routing::post(move || async move { axum::Json(body) }),
            )
            .layer(axum::middleware::from_fn(json_rpc_errors));
        let request = Request::post("/mcp").body(Body::empty()).unwrap();
        app.oneshot(request).await.unwrap()
    }

    #[tokio::test]
    async fn a_database_that_cannot_be_used_is_503_with_retry_after() {
        let error = serde_json::to_value(unavailable()).unwrap();
        let r = through_layer(json!({"jsonrpc": "2.0", "id": 1, "error": error})).await;
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            r.headers()[header::RETRY_AFTER],
            crate::oauth::error::RETRY_AFTER_SECS
        );
        let body: Value =
            serde_json::from_slice(&to_bytes(r.into_body(), 4096).await.unwrap()).unwrap();
        assert_eq!(body["error"]["code"], INTERNAL_ERROR);
        // Any other internal error keeps its status.
        let other = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "x"}});
        let r = through_layer(other).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert!(r.headers().get(header::RETRY_AFTER).is_none());
    }

    #[test]
    fn error_bodies_keep_status_class_and_text() {
        let body: Value =
            serde_json::from_str(&json_rpc_error(StatusCode::UNSUPPORTED_MEDIA_TYPE, " x "))
                .unwrap();
        assert_eq!(
            body,
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "x"}})
        );
        let body: Value =
            serde_json::from_str(&json_rpc_error(StatusCode::SERVICE_UNAVAILABLE, "")).unwrap();
        assert_eq!(body["error"]["code"], -32603);
        assert_eq!(body["error"]["message"], "Service Unavailable");
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        let body: Value =
            serde_json::from_str(&json_rpc_error(StatusCode::BAD_REQUEST, &long)).unwrap();
        assert!(body["error"]["message"].as_str().unwrap().len() <= MAX_MESSAGE_BYTES);
    }
}
