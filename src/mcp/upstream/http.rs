//! The HTTP side of rmcp's Streamable HTTP client transport
//! ([`rmcp::transport::StreamableHttpClientTransport`]) over the `reqwest` 0.12 client the
//! crate already uses (rmcp's own adapter needs `reqwest` 0.13: a second HTTP and TLS stack).
//! rmcp keeps the protocol (handshake, sessions, request ids, SSE events); this file sends the
//! POSTs and DELETEs and hands back what came (MCP `basic/transports` §Streamable HTTP).
//!
//! The event stream that answers a request is read here up to its first JSON-RPC message:
//! when that is the request's answer (the common case: an SDK server sends an empty priming
//! event, the answer, and closes the stream), it is handed to rmcp as a JSON answer, which
//! spares rmcp a task, a channel and a reconnecting stream per call; when it is a request or
//! a notification of the upstream's (progress, logging), the whole stream goes to rmcp, the
//! events already read first.
//!
//! What it adds for an upstream that is not trusted:
//! - redirects are not followed (a configured header never reaches another host);
//! - a JSON body is read up to [`UpstreamHttp::max_body`] bytes, and an SSE response stops
//!   with an error once that many bytes came, so an endless or huge answer costs one bounded
//!   call (the per-call timeout bounds a slow one);
//! - a standalone GET stream is not opened (Gatehouse only calls): an upstream's
//!   `list_changed` notification reaches Gatehouse within the event stream of an answer
//!   only; otherwise listings are kept for a short time ([`super::server::LISTING_TTL`]).

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    HttpStatusError, SseError, StreamableHttpClient, StreamableHttpError,
    StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};

const SESSION_ID: &str = "mcp-session-id";

/// One upstream's HTTP client: its configured headers are sent with every request, nothing
/// of the caller's.
#[derive(Clone)]
pub struct UpstreamHttp {
    client: reqwest::Client,
    /// The most bytes one response may bring.
    pub max_body: usize,
}

/// A failure below the MCP layer: the connection, the body, or a body over the bound.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The request could not be sent or its answer read.
    #[error("{0}")]
    Request(#[from] reqwest::Error),
    /// The answer was larger than the bound.
    #[error("the answer exceeded {0} bytes")]
    TooLarge(usize),
    /// The answer to a request was not the answer to it: another request's id, or an error
    /// without an id. rmcp would leave it unmatched and wait for the call's timeout.
    #[error("{0}")]
    Unmatched(String),
}

type Failure = StreamableHttpError<HttpError>;

/// How long an idle connection to an upstream is kept for reuse: less than the keep-alive
/// limit of common servers (Node.js closes an idle connection after 5 s, Gatehouse after its
/// `GATEHOUSE_HEADER_READ_TIMEOUT`, 10 s by default). A request sent on a connection the
/// upstream is closing at that moment fails with no answer, so connections are dropped here
/// first; under steady traffic they never sit idle that long.
pub const IDLE_REUSE: std::time::Duration = std::time::Duration::from_secs(4);

impl UpstreamHttp {
    /// A client that answers within `connect_timeout` to connect, sends `headers` (the
    /// upstream's own credential), follows no redirect and reads at most `max_body` bytes per
    /// response.
    ///
    /// Errors: the TLS backend could not be set up.
    /// With `guard` (a person's own upstream), every name is resolved through it.
    pub fn new(
        headers: http::HeaderMap,
        connect_timeout: std::time::Duration,
        max_body: usize,
        guard: Option<super::personal::GuardedResolver>,
    ) -> Result<UpstreamHttp, reqwest::Error> {
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(connect_timeout)
            .pool_idle_timeout(IDLE_REUSE)
            .default_headers(headers)
            .user_agent(concat!("gatehouse/", env!("CARGO_PKG_VERSION")));
        if let Some(guard) = guard {
            builder = builder.dns_resolver(Arc::new(guard));
        }
        let client = builder.build()?;
        Ok(UpstreamHttp { client, max_body })
    }

    fn request(
        &self,
        method: reqwest::Method,
        uri: &str,
        session_id: Option<&str>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> reqwest::RequestBuilder {
        let mut request = self.client.request(method, uri);
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        if let Some(session) = session_id {
            request = request.header(SESSION_ID, session);
        }
        request
    }
}

/// Whether `answer`, a JSON body answering the POST of request `sent` (none for a
/// notification or a response), is that request's answer as far as its id tells: a response
/// or error carrying another id, or an error carrying none, is refused at once.
fn answers(sent: Option<&RequestId>, answer: &ServerJsonRpcMessage) -> Result<(), Failure> {
    let Some(sent) = sent else {
        return Ok(());
    };
    let unmatched = |why: String| Err(StreamableHttpError::Client(HttpError::Unmatched(why)));
    let stray = || unmatched("its answer carried another request's id".to_string());
    match answer {
        ServerJsonRpcMessage::Response(response) if response.id != *sent => stray(),
        ServerJsonRpcMessage::Error(error) => match &error.id {
            Some(id) if id != sent => stray(),
            Some(_) => Ok(()),
            // Its message is left out: it is the upstream's text, and this line is logged.
            None => unmatched("it answered an error without the request's id".to_string()),
        },
        _ => Ok(()),
    }
}

/// Whether an SSE event carries a JSON-RPC message, as rmcp reads a stream: events without
/// a type or of type `message` do; others are control frames.
fn is_message_event(event: &Sse) -> bool {
    matches!(event.event.as_deref(), None | Some("" | "message"))
}

/// The answer to request `sent` from the event stream `events` that answered its POST (MCP
/// `basic/transports` §Sending Messages to the Server: the stream may carry the upstream's
/// requests and notifications before the response).
///
/// - Its first JSON-RPC message is the answer ([`answers`]): given as a JSON answer. The
///   stream is then dropped, as rmcp drops a response stream once it has its answer (the
///   server closes it after the answer; its end, when already there, is read so that the
///   connection is kept for the next call).
/// - Its first message is a request or a notification of the upstream's, or a control event
///   comes first: the stream goes to rmcp, the events read so far first.
/// - Events without data (an SDK server's priming event) are passed over.
/// - A stream that ends before any message goes to rmcp as it is (the request ends with the
///   connection closed: a reconnection with `Last-Event-ID` is not offered, see
///   `get_stream`).
///
/// Errors, at once, whether or not the stream goes on: data that is no JSON-RPC message (rmcp
/// would pass it over and wait for the call's timeout), another request's answer or an error
/// without an id ([`answers`]), a stream that fails before its first message (over the size
/// bound, malformed, broken).
async fn first_answer(
    mut events: BoxStream<'static, Result<Sse, SseError>>,
    sent: &RequestId,
    session: Option<String>,
) -> Result<StreamableHttpPostResponse, Failure> {
    let mut read = Vec::new();
    let to_rmcp = |read: Vec<Sse>, rest: BoxStream<'static, Result<Sse, SseError>>| {
        let stream = futures::stream::iter(read.into_iter().map(Ok)).chain(checked(rest, sent));
        StreamableHttpPostResponse::Sse(stream.boxed(), session.clone())
    };
    while let Some(event) = events.next().await {
        let event = event.map_err(StreamableHttpError::Sse)?;
        if !is_message_event(&event) {
            read.push(event);
            return Ok(to_rmcp(read, events));
        }
        let message = match event.data.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(data) => Some(serde_json::from_str::<ServerJsonRpcMessage>(data)?),
        };
        match message {
            None => read.push(event),
            Some(answer @ (ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_))) => {
                answers(Some(sent), &answer)?;
                // The end of the stream, if it came with the answer: the connection is then
                // free for the next request. Never waited for.
                let _ = futures::FutureExt::now_or_never(events.next());
                return Ok(StreamableHttpPostResponse::Json(answer, session));
            }
            Some(_) => {
                read.push(event);
                return Ok(to_rmcp(read, events));
            }
        }
    }
    Ok(to_rmcp(read, futures::stream::empty().boxed()))
}

/// What is wrong with the data of a message event in the stream answering request `sent`:
/// `None` when it is empty or a JSON-RPC message that may come there; otherwise why not, in
/// the words of [`super::failure`].
fn fault(data: Option<&str>, sent: &RequestId) -> Option<String> {
    let data = data.map(str::trim).filter(|d| !d.is_empty())?;
    match serde_json::from_str::<ServerJsonRpcMessage>(data) {
        Err(e) if e.classify() == serde_json::error::Category::Data => {
            Some(super::failure::NOT_MCP.to_string())
        }
        Err(e) => Some(format!("its answer was not JSON ({e})")),
        Ok(message) => match answers(Some(sent), &message) {
            Err(StreamableHttpError::Client(HttpError::Unmatched(why))) => Some(why),
            _ => None,
        },
    }
}

/// The rest of the event stream answering request `sent`, once the upstream's own requests
/// or notifications came first and the stream goes to rmcp ([`first_answer`]): events pass
/// on until one carries data that is no JSON-RPC message or answers another request
/// ([`fault`]). That one is replaced by an error answering `sent` that says so, and the
/// stream ends there: rmcp would pass such data over and wait for the call's timeout. The
/// caller gets the upstream's failure at once, as when such data comes first.
fn checked(
    rest: BoxStream<'static, Result<Sse, SseError>>,
    sent: &RequestId,
) -> BoxStream<'static, Result<Sse, SseError>> {
    let sent = sent.clone();
    rest.scan(false, move |ended, event| {
        if *ended {
            return futures::future::ready(None);
        }
        let why = match &event {
            Ok(e) if is_message_event(e) => fault(e.data.as_deref(), &sent),
            _ => None,
        };
        let Some(why) = why else {
            return futures::future::ready(Some(event));
        };
        *ended = true;
        let error = ServerJsonRpcMessage::error(
            rmcp::ErrorData::internal_error(why, None),
            Some(sent.clone()),
        );
        let replaced = Sse {
            data: serde_json::to_string(&error).ok(),
            ..Sse::default()
        };
        futures::future::ready(Some(Ok(replaced)))
    })
    .boxed()
}

/// Reads `response`'s body, failing beyond `max` bytes.
async fn bounded_body(response: reqwest::Response, max: usize) -> Result<Vec<u8>, Failure> {
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Err(StreamableHttpError::Client(HttpError::TooLarge(max)));
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| StreamableHttpError::Client(HttpError::Request(e)))?;
        if body.len() + chunk.len() > max {
            return Err(StreamableHttpError::Client(HttpError::TooLarge(max)));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The SSE events of `response`, ending with an error once more than `max` bytes came.
fn bounded_events(
    response: reqwest::Response,
    max: usize,
) -> BoxStream<'static, Result<Sse, SseError>> {
    let mut seen = 0usize;
    let bytes = response.bytes_stream().map(move |chunk| match chunk {
        Ok(chunk) => {
            seen = seen.saturating_add(chunk.len());
            if seen > max {
                Err(HttpError::TooLarge(max))
            } else {
                Ok(chunk)
            }
        }
        Err(e) => Err(HttpError::Request(e)),
    });
    SseStream::from_bytes_stream(bytes).boxed()
}

fn media_type(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

impl StreamableHttpClient for UpstreamHttp {
    type Error = HttpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        // Set only for a per-person upstream: the person's own access token from the vault
        // (otherwise the upstream's credential is one of its configured headers).
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let mut request = self.request(
            reqwest::Method::POST,
            &uri,
            session_id.as_deref(),
            custom_headers,
        );
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        let sent = match &message {
            ClientJsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        let response = request
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .json(&message)
            .send()
            .await
            .map_err(|e| StreamableHttpError::Client(HttpError::Request(e)))?;
        let status = response.status();
        if matches!(
            status,
            reqwest::StatusCode::ACCEPTED | reqwest::StatusCode::NO_CONTENT
        ) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == reqwest::StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        let session = response
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let media = media_type(&response);
        if !status.is_success() {
            // A JSON-RPC error in a failure status is still the answer to the request when it
            // carries the request's id. Without it (an SDK server answers a session it no
            // longer knows with 400 and an error whose id is null), it answers no request: the
            // call fails at once naming the status, where rmcp would wait for the timeout.
            // Such a 400 to a request that carried a session is taken for the session's end,
            // as a 404 is (MCP basic/transports §Session Management): rmcp starts a new session
            // and sends the request once more. The request was refused, not run.
            if media == "application/json" {
                let body = bounded_body(response, self.max_body).await?;
                if let Ok(message) = serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                    if answers(sent.as_ref(), &message).is_ok() {
                        return Ok(StreamableHttpPostResponse::Json(message, session));
                    }
                    let idless =
                        matches!(&message, ServerJsonRpcMessage::Error(e) if e.id.is_none());
                    if status == reqwest::StatusCode::BAD_REQUEST && session_id.is_some() && idless
                    {
                        return Err(StreamableHttpError::SessionExpired);
                    }
                }
            }
            let retry_after = None;
            return Err(HttpStatusError::new(status.as_u16(), retry_after).into());
        }
        match media.as_str() {
            "text/event-stream" => {
                let events = bounded_events(response, self.max_body);
                match sent {
                    Some(sent) => first_answer(events, &sent, session).await,
                    None => Ok(StreamableHttpPostResponse::Sse(events, session)),
                }
            }
            "application/json" => {
                let body = bounded_body(response, self.max_body).await?;
                let message = serde_json::from_slice(&body)?;
                answers(sent.as_ref(), &message)?;
                Ok(StreamableHttpPostResponse::Json(message, session))
            }
            _ if response.content_length() == Some(0) => Ok(StreamableHttpPostResponse::Accepted),
            other => Err(StreamableHttpError::UnexpectedContentType(Some(
                other.chars().take(100).collect(),
            ))),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Failure> {
        let mut request = self.request(
            reqwest::Method::DELETE,
            &uri,
            Some(&session_id),
            custom_headers,
        );
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        // Ending a session is a courtesy to the upstream: one that cannot be reached has
        // nothing to end, or ends it itself. The failure is logged here, at debug and without
        // the session's id (rmcp would log it as an error naming the session, which lets
        // whoever reads the log use it), and the session counts as ended.
        match request.send().await {
            Ok(response) if response.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED => {
                Err(StreamableHttpError::ServerDoesNotSupportDeleteSession)
            }
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::debug!(error = %e.without_url(), "an upstream session could not be ended");
                Ok(())
            }
        }
    }

    async fn get_stream(
        &self,
        _uri: Arc<str>,
        _session_id: Option<Arc<str>>,
        _last_event_id: Option<String>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failure> {
        Err(StreamableHttpError::ServerDoesNotSupportSse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ending a session on an upstream that cannot be reached counts as done: rmcp logs the
    /// failure of `delete_session` as an error with the session's id.
    #[tokio::test]
    async fn ending_a_session_on_an_unreachable_upstream_is_no_failure() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let http = UpstreamHttp::new(
            http::HeaderMap::new(),
            std::time::Duration::from_secs(2),
            1024,
            None,
        )
        .unwrap();
        let ended = http
            .delete_session(
                Arc::from(format!("http://127.0.0.1:{port}/mcp")),
                Arc::from("s1"),
                None,
                HashMap::new(),
            )
            .await;
        assert!(ended.is_ok(), "{ended:?}");
    }
}
