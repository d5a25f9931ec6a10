//! `gatehouse stdio --url URL`: MCP on stdin/stdout (MCP `basic/transports` §stdio: one
//! JSON-RPC message per line, nothing else on stdout) forwarded to a remote Streamable HTTP
//! endpoint (§Streamable HTTP), message by message and unchanged, so every protocol revision
//! the server speaks passes through:
//!
//! - each line is `POST`ed with `Accept: application/json, text/event-stream`; a JSON answer is
//!   written back as one line, an SSE answer as one line per event; `202` (a notification)
//!   writes nothing;
//! - `MCP-Protocol-Version` is the message's own (`_meta` of 2026-07-28, or `initialize`'s
//!   `protocolVersion`), else the one `initialize` negotiated; a 2026-07-28 message also gets
//!   `Mcp-Method` and `Mcp-Name` (MCP 2026-07-28 transports §Request Metadata);
//! - the credential is `GATEHOUSE_API_KEY` (sent as a bearer token), or the tokens of
//!   `gatehouse login`: refreshed a minute before they expire, and once more when the server
//!   answers `401`; a refusal that a refresh cannot fix is answered to the client as a
//!   JSON-RPC error saying what to run;
//! - at most [`IN_FLIGHT`] messages are forwarded at once (reading waits beyond that); a line
//!   longer than [`MAX_LINE`] bytes is refused with `-32600` and skipped; an answer longer
//!   than [`MAX_ANSWER`] bytes is refused with `-32603`. When stdin ends, the messages in
//!   flight are answered and the process ends.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, Semaphore, mpsc};
use url::Url;

use super::RemoteError;
use super::credentials::{CredentialsFile, SavedTokens};

/// Messages forwarded at once.
pub const IN_FLIGHT: usize = 16;
/// Longest line read from stdin, in bytes (the server takes bodies up to 1 MiB).
pub const MAX_LINE: usize = 4 * 1024 * 1024;
/// Longest answer read from the server, in bytes (results are at most 16 MiB).
pub const MAX_ANSWER: usize = 32 * 1024 * 1024;
/// Seconds before expiry at which an access token is refreshed.
const REFRESH_MARGIN: i64 = 60;
/// Time one forwarded message may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// What the bridge authenticates with.
pub enum Credential {
    /// An API key (`GATEHOUSE_API_KEY`).
    ApiKey(String),
    /// The tokens `gatehouse login` saved for the URL, and where to keep their successors.
    Session {
        /// The credentials file.
        file: CredentialsFile,
        /// The current tokens.
        tokens: Mutex<SavedTokens>,
    },
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::ApiKey(_) => f.write_str("ApiKey(…)"),
            Credential::Session { file, .. } => write!(f, "Session({})", file.path().display()),
        }
    }
}

impl Credential {
    /// The credential for `url`: `api_key` when given, else the tokens saved in `file`.
    ///
    /// Errors: no key and nothing saved for the URL (run `gatehouse login URL`).
    pub fn choose(
        url: &Url,
        api_key: Option<String>,
        file: CredentialsFile,
    ) -> Result<Credential, RemoteError> {
        if let Some(key) = api_key
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty())
        {
            return Ok(Credential::ApiKey(key));
        }
        let tokens = file.load(url.as_str())?.ok_or_else(|| {
            RemoteError::new(format!(
                "no credential for {url}: set GATEHOUSE_API_KEY, or sign in once with \
                 gatehouse login {url} (tokens are kept in {})",
                file.path().display()
            ))
        })?;
        Ok(Credential::Session {
            file,
            tokens: Mutex::new(tokens),
        })
    }
}

/// One bridge: the endpoint, the HTTP client, the credential and the negotiated revision.
struct Bridge {
    url: Url,
    http: reqwest::Client,
    credential: Credential,
    negotiated: std::sync::Mutex<Option<String>>,
}

/// The `_meta` key of a 2026-07-28 request's revision.
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// A JSON-RPC error answering `message` (nothing for a notification or a response).
fn error_for(message: &Value, code: i64, text: &str) -> Option<Value> {
    let id = message.get("id")?;
    message.get("method")?;
    Some(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}}))
}

/// `Mcp-Name` of a 2026-07-28 request: `params.name` of `tools/call` and `prompts/get`,
/// `params.uri` of `resources/read`, `resources/subscribe` and `resources/unsubscribe`; wrapped
/// as `=?base64?…?=` when it is not plain visible ASCII (MCP 2026-07-28 §Value Encoding).
fn mcp_name(method: &str, params: Option<&Value>) -> Option<String> {
    use base64::Engine as _;
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => "uri",
        _ => return None,
    };
    let value = params?.get(key)?.as_str()?;
    let edge_blank = value.starts_with([' ', '\t']) || value.ends_with([' ', '\t']);
    let visible_ascii = value.chars().all(|c| (' '..='~').contains(&c));
    let looks_encoded = value.starts_with("=?base64?") && value.ends_with("?=");
    let plain = visible_ascii && !edge_blank && !looks_encoded;
    Some(if plain {
        value.to_string()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    })
}

/// Splits an SSE body into the JSON messages of its `data` fields (events without data, such
/// as priming events, are skipped).
fn sse_messages(body: &str) -> Vec<Value> {
    body.replace("\r\n", "\n")
        .split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            (!data.is_empty())
                .then(|| serde_json::from_str(&data.join("\n")).ok())
                .flatten()
        })
        .collect()
}

/// What one `POST` came back with.
enum Answer {
    /// The messages to write.
    Messages(Vec<Value>),
    /// `401`: the credential was refused.
    Unauthorized,
}

impl Bridge {
    /// The bearer credential to send; `force` refreshes a session even if it looks fresh.
    async fn bearer(&self, force: bool) -> Result<String, RemoteError> {
        let (file, tokens) = match &self.credential {
            Credential::ApiKey(key) => return Ok(key.clone()),
            Credential::Session { file, tokens } => (file, tokens),
        };
        let mut current = tokens.lock().await;
        let now = crate::store::now();
        if !force && !current.expires_within(now, REFRESH_MARGIN) {
            return Ok(current.access_token.clone());
        }
        // Another bridge may have refreshed already: its tokens are the ones to use.
        if let Some(saved) = file.load(self.url.as_str())?
            && saved.access_token != current.access_token
            && !saved.expires_within(now, REFRESH_MARGIN)
        {
            *current = saved;
            return Ok(current.access_token.clone());
        }
        let next = super::login::refresh(self.url.as_str(), &current, file).await?;
        tracing::info!("access token refreshed");
        *current = next;
        Ok(current.access_token.clone())
    }

    async fn post(&self, message: &Value, bearer: &str) -> Result<Answer, RemoteError> {
        let method = message.get("method").and_then(Value::as_str);
        let params = message.get("params");
        let own_version = params
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(META_VERSION))
            .and_then(Value::as_str);
        let version = own_version
            .or_else(|| {
                (method == Some("initialize"))
                    .then(|| params?.get("protocolVersion")?.as_str())
                    .flatten()
            })
            .map(str::to_string)
            .or_else(|| self.negotiated.lock().ok()?.clone());
        let mut request = self
            .http
            .post(self.url.as_str())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .bearer_auth(bearer)
            .body(message.to_string());
        if let Some(v) = &version {
            request = request.header("mcp-protocol-version", v);
        }
        if let (Some(method), Some(_)) = (method, own_version) {
            request = request.header("mcp-method", method);
            if let Some(name) = mcp_name(method, params) {
                request = request.header("mcp-name", name);
            }
        }
        let mut response = request.send().await.map_err(|e| {
            RemoteError::new(format!("the remote MCP server could not be reached: {e}"))
        })?;
        let status = response.status();
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Ok(Answer::Unauthorized);
        }
        let sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| RemoteError::new(format!("the answer was cut off: {e}")))?
        {
            if body.len() + chunk.len() > MAX_ANSWER {
                return Err(RemoteError::new(format!(
                    "the answer is larger than {MAX_ANSWER} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&body);
        if status == reqwest::StatusCode::ACCEPTED || text.trim().is_empty() {
            return Ok(Answer::Messages(Vec::new()));
        }
        let messages = if sse {
            sse_messages(&text)
        } else {
            match serde_json::from_str::<Value>(&text) {
                Ok(v) => vec![v],
                Err(_) => {
                    return Err(RemoteError::new(format!(
                        "the remote MCP server answered HTTP {status} without a JSON-RPC message"
                    )));
                }
            }
        };
        if method == Some("initialize")
            && let Some(v) = messages
                .iter()
                .find_map(|m| m.pointer("/result/protocolVersion")?.as_str())
            && let Ok(mut negotiated) = self.negotiated.lock()
        {
            *negotiated = Some(v.to_string());
        }
        Ok(Answer::Messages(messages))
    }

    /// Forwards one message; the messages to write back.
    async fn forward(&self, message: &Value) -> Vec<Value> {
        let refused = |e: RemoteError| {
            error_for(message, -32603, &e.to_string())
                .into_iter()
                .collect()
        };
        let mut bearer = match self.bearer(false).await {
            Ok(b) => b,
            Err(e) => return refused(e),
        };
        for attempt in 0..2 {
            match self.post(message, &bearer).await {
                Ok(Answer::Messages(messages)) => return messages,
                Err(e) => return refused(e),
                Ok(Answer::Unauthorized) => {
                    let session = matches!(self.credential, Credential::Session { .. });
                    if attempt == 0 && session {
                        match self.bearer(true).await {
                            Ok(b) => bearer = b,
                            Err(e) => return refused(e),
                        }
                        continue;
                    }
                    let text = if session {
                        format!(
                            "The remote server refused the saved session; run gatehouse login {} again.",
                            self.url
                        )
                    } else {
                        "The remote server refused GATEHOUSE_API_KEY: it is unknown, revoked or \
                         expired, or its account is disabled."
                            .to_string()
                    };
                    return error_for(message, -32600, &text).into_iter().collect();
                }
            }
        }
        Vec::new()
    }
}

/// Bridges stdin/stdout to `url` with `credential` until stdin ends.
///
/// Errors: stdout closed, or the HTTP client could not be built.
pub async fn run(url: Url, credential: Credential) -> Result<(), RemoteError> {
    run_with(url, credential, tokio::io::stdin(), tokio::io::stdout()).await
}

/// [`run`] over any reader and writer (tests).
///
/// Errors: the writer failed, or the HTTP client could not be built.
pub async fn run_with<R, W>(
    url: Url,
    credential: Credential,
    input: R,
    mut output: W,
) -> Result<(), RemoteError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .timeout(REQUEST_TIMEOUT)
        .user_agent(concat!("gatehouse-stdio/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| RemoteError::new(format!("cannot build the HTTP client: {e}")))?;
    let bridge = Arc::new(Bridge {
        url,
        http,
        credential,
        negotiated: std::sync::Mutex::new(None),
    });
    let (tx, mut rx) = mpsc::channel::<Value>(IN_FLIGHT * 2);
    let writer = tokio::spawn(async move {
        while let Some(message) = rx.recv().await {
            let mut line = message.to_string();
            line.push('\n');
            output.write_all(line.as_bytes()).await?;
            output.flush().await?;
        }
        Ok::<_, std::io::Error>(())
    });
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await
            .map_err(|e| RemoteError::new(format!("cannot read stdin: {e}")))?;
        if n == 0 {
            break;
        }
        if line.len() > MAX_LINE && line.last() != Some(&b'\n') {
            // Skip the rest of the line, then refuse it (its id cannot be known).
            let mut rest = Vec::new();
            while (&mut reader)
                .take(MAX_LINE as u64)
                .read_until(b'\n', &mut rest)
                .await
                .is_ok_and(|k| k > 0 && rest.last() != Some(&b'\n'))
            {
                rest.clear();
            }
            let error = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600,
                "message": format!("A message longer than {MAX_LINE} bytes was skipped.")}});
            let _ = tx.send(error).await;
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        if text.trim().is_empty() {
            continue;
        }
        let message: Value = match serde_json::from_str(text.trim()) {
            Ok(m) => m,
            Err(_) => {
                let error = json!({"jsonrpc": "2.0", "id": null,
                    "error": {"code": -32700, "message": "Parse error: the line is not JSON."}});
                let _ = tx.send(error).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().acquire_owned().await else {
            break;
        };
        let (bridge, tx) = (bridge.clone(), tx.clone());
        tokio::spawn(async move {
            for answer in bridge.forward(&message).await {
                let _ = tx.send(answer).await;
            }
            drop(slot);
        });
    }
    // Stdin ended: wait for the messages in flight, then let the writer finish.
    let _all = slots.acquire_many(IN_FLIGHT as u32).await;
    drop(tx);
    writer
        .await
        .map_err(|e| RemoteError::new(format!("the writer stopped: {e}")))?
        .map_err(|e| RemoteError::new(format!("cannot write stdout: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_events_are_read_as_the_transport_says() {
        assert_eq!(
            mcp_name("tools/call", Some(&json!({"name": "get_note"}))),
            Some("get_note".into())
        );
        assert_eq!(
            mcp_name(
                "resources/read",
                Some(&json!({"uri": "gatehouse://projects/1"}))
            ),
            Some("gatehouse://projects/1".into())
        );
        assert_eq!(
            mcp_name("prompts/get", Some(&json!({"name": "résumé"}))),
            Some("=?base64?csOpc3Vtw6k=?=".into())
        );
        assert_eq!(mcp_name("tools/list", Some(&json!({}))), None);
        let body = "id: 1\ndata:\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
        assert_eq!(
            sse_messages(body),
            [json!({"jsonrpc": "2.0", "id": 1, "result": {}})]
        );
        assert!(
            error_for(
                &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                -1,
                "x"
            )
            .is_none()
        );
        assert_eq!(
            error_for(
                &json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
                -32603,
                "x"
            )
            .unwrap()["id"],
            3
        );
    }
}
