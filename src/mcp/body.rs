//! The body of `POST <mcp path>`, read and parsed once, and its JSON-RPC checks.
//!
//! [`read`] (after authentication) reads the body (at most [`MAX_BODY_BYTES`], `413` beyond)
//! and parses it once into a [`Parsed`] request extension, which the scope step-up
//! ([`super::stepup`]) and [`check_request`] read instead of parsing again. [`check_request`] then
//! refuses a broken message before rmcp sees it, so that it gets the JSON-RPC 2.0 error its
//! fault calls for (§5.1) rather than rmcp's `415` with the parser's text, and hands rmcp the
//! message it checked (serialized again from the parsed value, so rmcp reads exactly what the
//! checks and the step-up read, duplicate keys included):
//!
//! - not JSON, or `null`: HTTP `400`, `-32700 Parse error`, `id: null`;
//! - JSON that is not one JSON-RPC message object (an array — batches were removed in
//!   2025-06-18 and rmcp reads none —, a scalar, an object without `"jsonrpc": "2.0"`, a
//!   `method` that is not a string, an `id` that is neither a string nor an integer, an object
//!   that is neither a request, a notification nor a response): HTTP `400`,
//!   `-32600 Invalid Request`;
//! - a request whose `params` are not an object (MCP params always are; rmcp reads no other),
//!   or whose params do not fit a method rmcp knows (rmcp would read it as a custom request and
//!   answer `-32601 Method not found`): `-32602 Invalid params` with the request's `id`, HTTP
//!   `200` like the other in-band JSON-RPC errors of a request;
//!
//! Only bodies sent as `application/json` are checked: for another `Content-Type` rmcp answers
//! `415` naming the header it wants.

use std::sync::Arc;

use axum::body::{Body, to_bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequest, ClientJsonRpcMessage, CompleteRequest, DiscoverRequest, GetPromptRequest,
    ListPromptsRequest, ListResourceTemplatesRequest, ListResourcesRequest, ListToolsRequest,
    ReadResourceRequest,
};
use serde::Deserialize;
use serde_json::{Value, json};

pub use super::auth::MAX_BODY_BYTES;

/// The request body parsed once as JSON ([`read`]), shared by the later layers and the
/// handlers through the request extensions. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Parsed(Arc<Option<Value>>);

impl Parsed {
    /// The parsed JSON; `None` when the body is not JSON.
    pub fn message(&self) -> Option<&Value> {
        self.0.as_ref().as_ref()
    }
}

/// Reads the body (`Err` with `413` beyond [`MAX_BODY_BYTES`], declared or read, before any of
/// it is read when declared; `408` when it has not arrived whole within its deadline),
/// parses it once as JSON into a [`Parsed`] extension and gives back the request with the same
/// bytes.
pub async fn read(request: Request) -> Result<Request, Response> {
    let (mut parts, body) = request.into_parts();
    if crate::request_body::declared_over(&parts.headers, MAX_BODY_BYTES) {
        return Err((
            StatusCode::PAYLOAD_TOO_LARGE,
            "The request body is too large.",
        )
            .into_response());
    }
    let bytes = match to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(e) if crate::error::body_stalled(&e) => {
            return Err((
                StatusCode::REQUEST_TIMEOUT,
                "The request body stopped arriving before its end.",
            )
                .into_response());
        }
        Err(_) => {
            return Err((
                StatusCode::PAYLOAD_TOO_LARGE,
                "The request body is too large.",
            )
                .into_response());
        }
    };
    let parsed = serde_json::from_slice::<Value>(&bytes).ok();
    parts.extensions.insert(Parsed(Arc::new(parsed)));
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// For a body sent as `application/json`: `Err` with the JSON-RPC error of a message that is
/// not a well-formed JSON-RPC message ([`check_value`]); a good one is given back serialized
/// from the [`Parsed`] value (what rmcp reads). Other bodies pass unchanged (rmcp answers
/// `415`).
#[allow(
    clippy::result_large_err,
    reason = "a step of the MCP layers answers a refused request with the response itself, moved once on that rare path"
)]
pub fn check_request(request: Request) -> Result<Request, Response> {
    if !is_json(request.headers()) {
        return Ok(request);
    }
    let Some(parsed) = request.extensions().get::<Parsed>().cloned() else {
        return Ok(request);
    };
    let checked = match parsed.message() {
        Some(message) => check_value(message).map(|()| message),
        None => Err(Refusal::parse_error()),
    };
    let message = match checked {
        Ok(message) => message,
        Err(refusal) => {
            tracing::info!(code = refusal.code, "MCP request body refused");
            return Err(refusal.into_response());
        }
    };
    // A method name longer than any MCP method is unknown whatever it says; rmcp is handed
    // its first characters, so that its "method not found" answer repeats a bounded name.
    let cut = message
        .get("method")
        .and_then(Value::as_str)
        .map(|m| super::errors::echoed(m, super::errors::ECHOED_NAME_MAX))
        .filter(|m| matches!(m, std::borrow::Cow::Owned(_)))
        .map(|m| {
            let mut message = message.clone();
            message["method"] = Value::String(m.into_owned());
            message
        });
    let Ok(bytes) = serde_json::to_vec(cut.as_ref().unwrap_or(message)) else {
        return Err(Refusal::parse_error().into_response());
    };
    let (parts, _) = request.into_parts();
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// JSON-RPC 2.0 `Parse error`.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC 2.0 `Invalid Request`.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC 2.0 `Invalid params`.
pub const INVALID_PARAMS: i64 = -32602;

/// Why a body was refused, and the JSON-RPC error that says so.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// HTTP status of the answer.
    pub status: StatusCode,
    /// The `id` of the request, when it could be read; `null` otherwise.
    pub id: Value,
    /// JSON-RPC error code.
    pub code: i64,
    /// Why, for the `data` member (`None`: no `data`).
    pub data: Option<Value>,
}

impl Refusal {
    fn parse_error() -> Refusal {
        Refusal {
            status: StatusCode::BAD_REQUEST,
            id: Value::Null,
            code: PARSE_ERROR,
            data: None,
        }
    }

    fn invalid_request(id: Value, reason: &str) -> Refusal {
        Refusal {
            status: StatusCode::BAD_REQUEST,
            id,
            code: INVALID_REQUEST,
            data: Some(json!({ "reason": reason })),
        }
    }

    /// The JSON-RPC error message of the code.
    pub fn message(&self) -> &'static str {
        match self.code {
            PARSE_ERROR => "Parse error",
            INVALID_REQUEST => "Invalid Request",
            _ => "Invalid params",
        }
    }

    /// The JSON-RPC error response.
    pub fn body(&self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message() });
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        json!({ "jsonrpc": "2.0", "id": self.id, "error": error })
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        (
            self.status,
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ],
            self.body().to_string(),
        )
            .into_response()
    }
}

/// Whether the request says its body is JSON (`application/json`, parameters allowed), the
/// same test rmcp makes.
pub fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let essence = v.split_once(';').map_or(v, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case("application/json")
        })
}

/// Whether `message` reads as `T`: `Err` with the reason when it does not. Read from the parsed
/// value as it is (no copy of the whole value is made first).
fn fits<'a, T: Deserialize<'a>>(message: &'a Value) -> Result<(), String> {
    T::deserialize(message).map(drop).map_err(|e| e.to_string())
}

/// Whether the message `m` of method `method` fits the typed request rmcp reads that
/// method into (`Err` with the reason when it does not); `None` for the methods rmcp reads no
/// typed request for. A message that fits is read by rmcp as that request; one that does not
/// would be read as a custom request, answered `-32601 Method not found`. The lifecycle
/// methods `initialize` and `ping` are left to rmcp: in 2026-07-28 they are removed and must
/// answer 404 with -32601 whatever their params (SEP-2575).
fn typed_fit(method: &str, m: &Value) -> Option<Result<(), String>> {
    Some(match method {
        "server/discover" => fits::<DiscoverRequest>(m),
        "completion/complete" => fits::<CompleteRequest>(m),
        "prompts/get" => fits::<GetPromptRequest>(m),
        "prompts/list" => fits::<ListPromptsRequest>(m),
        "resources/list" => fits::<ListResourcesRequest>(m),
        "resources/templates/list" => fits::<ListResourceTemplatesRequest>(m),
        "resources/read" => fits::<ReadResourceRequest>(m),
        "tools/call" => fits::<CallToolRequest>(m),
        "tools/list" => fits::<ListToolsRequest>(m),
        _ => return None,
    })
}

/// Checks one body (see the module documentation). `Ok` with the parsed JSON when rmcp should
/// answer it.
pub fn check(bytes: &[u8]) -> Result<Value, Refusal> {
    let value: Value = serde_json::from_slice(bytes).map_err(|_| Refusal::parse_error())?;
    check_value(&value)?;
    Ok(value)
}

/// Checks one parsed body (see the module documentation): `Ok` when rmcp should answer it.
pub fn check_value(value: &Value) -> Result<(), Refusal> {
    let object = match value {
        Value::Object(object) => object,
        Value::Null => return Err(Refusal::parse_error()),
        Value::Array(_) => {
            return Err(Refusal::invalid_request(
                Value::Null,
                "send one JSON-RPC message per request; batches are not accepted",
            ));
        }
        _ => {
            return Err(Refusal::invalid_request(
                Value::Null,
                "the body must be a JSON-RPC message object",
            ));
        }
    };
    let id = match object.get("id") {
        Some(id @ Value::String(_)) => id.clone(),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Value::Number(n.clone()),
        _ => Value::Null,
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Refusal::invalid_request(id, "\"jsonrpc\" must be \"2.0\""));
    }
    if object.contains_key("id") && id.is_null() {
        return Err(Refusal::invalid_request(
            id,
            "\"id\" must be a string or an integer",
        ));
    }
    match object.get("method") {
        Some(Value::String(_)) => {}
        Some(_) => {
            return Err(Refusal::invalid_request(id, "\"method\" must be a string"));
        }
        None => {
            let answers = object.contains_key("result") as u8 + object.contains_key("error") as u8;
            if !object.contains_key("id") || answers != 1 {
                return Err(Refusal::invalid_request(
                    id,
                    "a request needs \"method\" (and \"id\"); a response needs \"id\" and one of \"result\" or \"error\"",
                ));
            }
        }
    }
    // MCP params are always an object (JSON-RPC would allow an array; rmcp reads none).
    if let Some(Value::String(method)) = object.get("method")
        && let Some(params) = object.get("params")
        && !params.is_object()
    {
        if !object.contains_key("id") {
            return Err(Refusal::invalid_request(id, "\"params\" must be an object"));
        }
        return Err(Refusal {
            status: StatusCode::OK,
            id,
            code: INVALID_PARAMS,
            data: Some(json!({
                "method": super::errors::echoed(method, super::errors::ECHOED_NAME_MAX),
                "reason": "params must be an object",
            })),
        });
    }
    // A request of a method rmcp reads into a typed request is checked against that request
    // alone: one that fits is what rmcp reads (the whole message need not be read again as a
    // JSON-RPC message, the costliest step of this check on every tool call); one that does
    // not is refused here with the reason, rather than answered "method not found".
    if let Some(Value::String(method)) = object.get("method")
        && object.contains_key("id")
        && let Some(fit) = typed_fit(method, value)
    {
        return fit.map_err(|reason| Refusal {
            status: StatusCode::OK,
            id,
            code: INVALID_PARAMS,
            data: Some(json!({ "method": method, "reason": reason })),
        });
    }
    if let Err(e) = ClientJsonRpcMessage::deserialize(value) {
        return Err(Refusal::invalid_request(id, &e.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(body: &str) -> Option<i64> {
        check(body.as_bytes()).err().map(|r| r.code)
    }

    #[test]
    fn parse_errors_are_exactly_the_json_rpc_answer() {
        for body in ["", "{", "null", "nul", "{\"a\":}"] {
            let refusal = check(body.as_bytes()).unwrap_err();
            assert_eq!(refusal.status, StatusCode::BAD_REQUEST, "{body:?}");
            assert_eq!(
                refusal.body(),
                json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}),
                "{body:?}"
            );
        }
    }

    #[test]
    fn non_messages_are_invalid_requests() {
        for body in [
            "[1]",
            "[]",
            "{}",
            "true",
            "3",
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#,
            r#"{"jsonrpc":"2.0","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
            r#"{"jsonrpc":"2","id":1,"method":"ping"}"#,
            r#"{"id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":null}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized","params":[1]}"#,
        ] {
            assert_eq!(code(body), Some(INVALID_REQUEST), "{body}");
        }
        let r = check(br#"{"jsonrpc":"2.0","id":"x","result":{},"error":{}}"#).unwrap_err();
        assert_eq!(r.id, json!("x"));
        assert_eq!(r.body()["error"]["message"], "Invalid Request");
    }

    #[test]
    fn params_that_do_not_fit_a_known_method_are_invalid_params() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":"all"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"rockets/launch","params":[1]}"#,
        ] {
            let r = check(body.as_bytes()).unwrap_err();
            assert_eq!(r.code, INVALID_PARAMS, "{body}");
            assert_eq!(r.id, json!(1));
            assert_eq!(r.body()["error"]["message"], "Invalid params");
        }
    }

    #[test]
    fn well_formed_messages_pass() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"gatehouse://x"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"rockets/launch","params":{"a":[1]}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":4,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":5,"error":{"code":-1,"message":"no"}}"#,
        ] {
            assert!(check(body.as_bytes()).is_ok(), "{body}");
        }
    }

    /// A request that passes the check by its typed request alone is what rmcp reads it as:
    /// that typed request, never a custom one (which rmcp would answer "method not found").
    #[test]
    fn a_typed_request_that_passes_is_read_by_rmcp_as_that_request() {
        use rmcp::model::ClientRequest;
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"c"}}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","arguments":{"a":[1,{"b":null}]},"_meta":{"progressToken":3}}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"gatehouse://x"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"p","arguments":{"k":"v"}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"resources/templates/list","params":{}}"#,
        ] {
            let value: Value = serde_json::from_str(body).unwrap();
            let method = value["method"].as_str().unwrap();
            assert_eq!(typed_fit(method, &value), Some(Ok(())), "{body}");
            assert!(check(body.as_bytes()).is_ok(), "{body}");
            match ClientJsonRpcMessage::deserialize(&value).unwrap() {
                ClientJsonRpcMessage::Request(r) => assert!(
                    !matches!(r.request, ClientRequest::CustomRequest(_)),
                    "{body}"
                ),
                other => panic!("{body}: read as {other:?}"),
            }
        }
        // And one that does not fit is refused with the reason, naming the method.
        let r =
            check(br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"arguments":{}}}"#)
                .unwrap_err();
        assert_eq!((r.code, r.id.clone()), (INVALID_PARAMS, json!(9)));
        let data = r.data.unwrap();
        assert_eq!(data["method"], "tools/call");
        assert!(data["reason"].as_str().unwrap().contains("name"), "{data}");
    }

    #[test]
    fn json_content_types() {
        let mut h = HeaderMap::new();
        assert!(!is_json(&h));
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("Application/JSON; charset=utf-8"),
        );
        assert!(is_json(&h));
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert!(!is_json(&h));
    }
}
