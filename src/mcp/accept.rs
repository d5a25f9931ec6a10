//! Content negotiation of `POST <mcp path>` (RFC 9110 §12.5.1, MCP Streamable HTTP transport).
//!
//! The transport says a client sends `Accept: application/json, text/event-stream`; many do
//! not (JSON-only clients, SSE-only clients, curl and httpx defaults), and rmcp answers those
//! `406` with a plain-text body. This layer reads `Accept` leniently instead:
//!
//! - `application/json` whenever the client accepts it (its weight, from the most specific
//!   matching range — `application/json`, `application/*`, `*/*` — is above 0) or sends no
//!   `Accept` (or an empty one);
//! - otherwise `text/event-stream` when the client accepts that (`text/event-stream`,
//!   `text/*`): the JSON-RPC response goes out as one SSE event (`data:` lines, the default
//!   `message` event type);
//! - otherwise `406` with a JSON-RPC error (`-32600`, `id: null`).
//!
//! rmcp itself is then handed `Accept: application/json, text/event-stream`, and its answer is
//! reshaped to what was negotiated: a `200` JSON body becomes one SSE event for an SSE-only
//! client; an event stream (a response preceded by notifications) becomes the response's JSON
//! for a JSON-only client. Error statuses, `202` and everything else pass unchanged.

use axum::body::{Body, to_bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";

/// Largest event stream this layer turns into one JSON response, in bytes: a response bounded
/// by `GATEHOUSE_MAX_RESULT_BYTES` (at most 16 MiB) plus the notifications before it.
const MAX_STREAM_BYTES: usize = 32 * 1024 * 1024;

/// The representation a request's `Accept` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Representation {
    /// `application/json`: the JSON-RPC response as the body.
    Json,
    /// `text/event-stream` only: the JSON-RPC response as one SSE event.
    EventStream,
    /// Neither: answered `406`.
    NotAcceptable,
}

/// Splits `s` at `sep` outside double-quoted strings (RFC 9110 §5.6.4 quoted-string).
fn split_unquoted(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            c if c == sep && !quoted => {
                parts.push(&s[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// One media range of `Accept`: `(type, subtype, weight)`, lowercased.
fn media_ranges(headers: &HeaderMap) -> Option<Vec<(String, String, f32)>> {
    let mut ranges = Vec::new();
    let mut present = false;
    for value in headers.get_all(header::ACCEPT) {
        // A value that is not visible ASCII says nothing usable: it is skipped.
        let Ok(value) = value.to_str() else { continue };
        for entry in split_unquoted(value, ',') {
            let mut parts = split_unquoted(entry, ';').into_iter();
            let essence = parts.next().unwrap_or_default().trim();
            if essence.is_empty() {
                continue;
            }
            present = true;
            let Some((kind, subtype)) = essence.split_once('/') else {
                continue;
            };
            // RFC 9110 §12.4.2: a weight that does not parse is ignored (the range counts at
            // full weight); only an explicit 0 excludes it.
            let weight = parts
                .filter_map(|p| p.split_once('='))
                .find(|(name, _)| name.trim().eq_ignore_ascii_case("q"))
                .and_then(|(_, q)| q.trim().parse::<f32>().ok())
                .filter(|q| q.is_finite() && (0.0..=1.0).contains(q))
                .unwrap_or(1.0);
            ranges.push((
                kind.trim().to_ascii_lowercase(),
                subtype.trim().to_ascii_lowercase(),
                weight,
            ));
        }
    }
    present.then_some(ranges)
}

/// The weight `ranges` give `media` (`type/subtype`): that of the most specific matching range,
/// 0 when none matches.
fn weight(ranges: &[(String, String, f32)], media: &str) -> f32 {
    let (kind, subtype) = media.split_once('/').unwrap_or((media, ""));
    let specificity = |(k, s, _): &&(String, String, f32)| match (k.as_str(), s.as_str()) {
        (k, s) if k == kind && s == subtype => Some(3),
        (k, "*") if k == kind => Some(2),
        ("*", "*") => Some(1),
        _ => None,
    };
    ranges
        .iter()
        .filter_map(|r| specificity(&r).map(|rank| (rank, r.2)))
        .max_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)))
        .map_or(0.0, |(_, w)| w)
}

impl Representation {
    /// What the request's `Accept` headers ask for (see the module documentation).
    pub fn of(headers: &HeaderMap) -> Representation {
        let Some(ranges) = media_ranges(headers) else {
            return Representation::Json;
        };
        if weight(&ranges, JSON) > 0.0 {
            Representation::Json
        } else if weight(&ranges, EVENT_STREAM) > 0.0 {
            Representation::EventStream
        } else {
            Representation::NotAcceptable
        }
    }
}

/// `406` with a JSON-RPC error: the client accepts neither representation.
fn not_acceptable() -> Response {
    (
        StatusCode::NOT_ACCEPTABLE,
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(JSON)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {
                "code": super::body::INVALID_REQUEST,
                "message": "Not Acceptable: the client must accept application/json or text/event-stream"
            }
        })
        .to_string(),
    )
        .into_response()
}

/// `500` with a JSON-RPC internal error: rmcp's answer could not be read or held no response.
fn undeliverable() -> Response {
    tracing::error!("MCP response could not be converted to the negotiated representation");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        [(header::CONTENT_TYPE, HeaderValue::from_static(JSON))],
        json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {"code": -32603, "message": "Internal error"}
        })
        .to_string(),
    )
        .into_response()
}

fn content_type_is(response: &Response, media: &str) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let essence = v.split_once(';').map_or(v, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case(media)
        })
}

/// A `200` JSON body as one SSE event.
async fn json_to_event_stream(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = to_bytes(body, MAX_STREAM_BYTES).await else {
        return undeliverable();
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut event = String::with_capacity(text.len() + 16);
    for line in text.lines() {
        event.push_str("data: ");
        event.push_str(line);
        event.push('\n');
    }
    event.push('\n');
    parts.headers.remove(header::CONTENT_LENGTH);
    parts
        .headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(EVENT_STREAM));
    parts
        .headers
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Response::from_parts(parts, Body::from(event))
}

/// An event stream reduced to the JSON-RPC response (or error) it carries. The stream of a
/// stateless request ends with that response.
async fn event_stream_to_json(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = to_bytes(body, MAX_STREAM_BYTES).await else {
        return undeliverable();
    };
    let text = String::from_utf8_lossy(&bytes);
    // Events are separated by blank lines; an event's data is its `data:` lines joined by \n.
    let mut answer = None;
    for event in text.split("\n\n") {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if let Ok(message) = serde_json::from_str::<Value>(&data.join("\n"))
            && message.get("id").is_some()
            && (message.get("result").is_some() || message.get("error").is_some())
        {
            answer = Some(message);
        }
    }
    let Some(answer) = answer else {
        return undeliverable();
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts
        .headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON));
    parts.headers.remove(header::CACHE_CONTROL);
    Response::from_parts(parts, Body::from(answer.to_string()))
}

/// The negotiation of one request (module documentation), before the layers after it:
/// `Err` with the `406` answer when the client accepts neither representation; otherwise the
/// representation to answer in, with the request's `Accept` set to what rmcp wants.
#[allow(
    clippy::result_large_err,
    reason = "a step of the MCP layers answers a refused request with the response itself, moved once on that rare path"
)]
pub fn negotiate(request: &mut Request) -> Result<Representation, Response> {
    let wanted = Representation::of(request.headers());
    if wanted == Representation::NotAcceptable {
        return Err(not_acceptable());
    }
    request.headers_mut().insert(
        header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    Ok(wanted)
}

/// The answer of the layers after [`negotiate`] in the representation it chose: a `200` JSON
/// body as one SSE event for an SSE-only client, a `200` event stream as its response's JSON
/// for a JSON-only client; anything else unchanged.
pub async fn reshape(wanted: Representation, response: Response) -> Response {
    match wanted {
        Representation::EventStream
            if response.status() == StatusCode::OK && content_type_is(&response, JSON) =>
        {
            json_to_event_stream(response).await
        }
        Representation::Json
            if response.status() == StatusCode::OK && content_type_is(&response, EVENT_STREAM) =>
        {
            event_stream_to_json(response).await
        }
        _ => response,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(values: &[&str]) -> Representation {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::ACCEPT, HeaderValue::from_str(v).unwrap());
        }
        Representation::of(&h)
    }

    #[test]
    fn json_whenever_accepted_or_unsaid() {
        use Representation::*;
        for accept in [
            &[][..],
            &[""],
            &["application/json"],
            &["*/*"],
            &["application/*"],
            &["APPLICATION/JSON; charset=utf-8"],
            &["application/json, text/event-stream"],
            &["text/event-stream", "application/json"],
            &["text/event-stream;q=1, application/json;q=0.1"],
            &["application/json;q=abc"],
            &["text/html, */*;q=0.1"],
            &["application/json;q=0.5, */*;q=0"],
            &[r#"application/json;profile="a,b";q=1"#],
        ] {
            assert_eq!(of(accept), Json, "{accept:?}");
        }
        for accept in [
            &["text/event-stream"][..],
            &["text/*"],
            &["text/event-stream, application/json;q=0"],
            &["text/event-stream", "*/*;q=0"],
            &["application/*;q=0, text/event-stream"],
        ] {
            assert_eq!(of(accept), EventStream, "{accept:?}");
        }
        for accept in [
            &["text/html"][..],
            &["application/json;q=0"],
            &["image/png, text/plain"],
            &["*/*;q=0"],
            &["application/json;q=0.000, text/event-stream;q=0"],
            &["application/xml"],
        ] {
            assert_eq!(of(accept), NotAcceptable, "{accept:?}");
        }
    }

    #[test]
    fn quoted_separators_are_not_split() {
        assert_eq!(
            split_unquoted(r#"a;b="x,y;z", c"#, ','),
            vec![r#"a;b="x,y;z""#, " c"]
        );
        assert_eq!(split_unquoted(r#"a="\"", b"#, ','), vec![r#"a="\"""#, " b"]);
    }

    fn response(content_type: &'static str, body: &'static str) -> Response {
        ([(header::CONTENT_TYPE, content_type)], body).into_response()
    }

    async fn body_of(response: Response) -> String {
        let bytes = to_bytes(response.into_body(), 1 << 20).await.unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_json_answer_becomes_one_event() {
        let r =
            json_to_event_stream(response(JSON, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#)).await;
        assert_eq!(r.headers()[header::CONTENT_TYPE], EVENT_STREAM);
        assert_eq!(
            body_of(r).await,
            "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
        );
    }

    #[tokio::test]
    async fn an_event_stream_becomes_its_response() {
        let stream = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n\
                      id: 2\ndata:{\"jsonrpc\":\"2.0\",\n\
                      data: \"id\":7,\"result\":{\"ok\":true}}\n\n";
        let r = event_stream_to_json(response(EVENT_STREAM, stream)).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[header::CONTENT_TYPE], JSON);
        let v: Value = serde_json::from_str(&body_of(r).await).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc": "2.0", "id": 7, "result": {"ok": true}})
        );
        // A stream without a response cannot be answered as JSON.
        let r = event_stream_to_json(response(EVENT_STREAM, "data: {}\n\n")).await;
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
