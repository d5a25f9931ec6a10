//! `gatehouse stdio`: MCP over standard input and output, for local clients that launch a
//! process (Claude Desktop, Cursor, editors) — MCP `basic/transports` §stdio, with rmcp's stdio
//! transport: one JSON-RPC message per line on stdin and stdout, nothing else on stdout (logs
//! go to stderr).
//!
//! The same [`GatehouseMcp`] handler serves it as the HTTP route: the same catalog, resources,
//! authorization, quotas and audit. The caller is the API key in `GATEHOUSE_API_KEY`, checked
//! when the process starts (a refused key ends it with a message on stderr and a non-zero
//! exit) and again before every request, so a revoked or expired key, or a disabled account,
//! is refused from the next request on. A key limited to addresses is refused: a local process
//! has no peer address to check.
//!
//! The check happens in [`KeyedTransport`], which resolves the key into a [`Principal`] and
//! hands it to the handler exactly as the HTTP layer does (inside the request's
//! `http::request::Parts`), or answers the request with a JSON-RPC error itself.

use rmcp::ServiceExt;
use rmcp::model::{ClientJsonRpcMessage, ErrorData, GetExtensions, JsonRpcMessage};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use super::McpState;
use super::auth::{KeyRefused, Principal, local_key_principal};
use super::server::GatehouseMcp;
use crate::domain::secret::{Secret, TokenKind};

/// Why `gatehouse stdio` could not serve.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    /// `GATEHOUSE_API_KEY` is missing, not an API key, or refused.
    #[error("GATEHOUSE_API_KEY: {0}")]
    Key(String),
    /// The MCP session could not start or ended with an error.
    #[error("MCP over stdio: {0}")]
    Session(String),
}

/// The message a refused key gets, on stderr at start and in the JSON-RPC error afterwards.
fn refusal_text(why: &KeyRefused) -> String {
    match why {
        KeyRefused::Invalid => "the API key is unknown, revoked or expired, or its account is \
                                disabled; create a new one with `gatehouse key create` or on the \
                                console's Keys page"
            .to_string(),
        KeyRefused::Address => "the API key may be used only from listed addresses, and a local \
                                process has none; use a key without an address allow-list"
            .to_string(),
        KeyRefused::Unavailable(e) => format!("the database could not be asked ({e})"),
    }
}

/// The key in `raw` (the value of `GATEHOUSE_API_KEY`), if it has the shape of an API key.
pub fn parse_key(raw: Option<String>) -> Result<Secret, StdioError> {
    let raw = raw
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .ok_or_else(|| {
            StdioError::Key(
                "not set: set it to an API key (gatehouse key create --account EMAIL)".into(),
            )
        })?;
    let secret = Secret::from_presented(raw);
    if secret.kind() != Some(TokenKind::ApiKey) {
        return Err(StdioError::Key(format!(
            "not an API key (API keys start with {})",
            TokenKind::ApiKey.prefix()
        )));
    }
    Ok(secret)
}

/// Serves MCP on stdin/stdout as the holder of `key` until the client closes stdin or `stop`
/// completes (SIGTERM or SIGINT: a desktop client ends its servers so), whichever comes first.
///
/// Errors: [`StdioError::Key`] when the key is refused at start (nothing is written to
/// stdout then); [`StdioError::Session`] when the transport fails.
pub async fn serve(
    mcp: McpState,
    key: Secret,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StdioError> {
    let now = crate::store::now();
    let principal = local_key_principal(&mcp, &key, now)
        .await
        .map_err(|why| StdioError::Key(refusal_text(&why)))?;
    tracing::info!(
        account = %principal.account_id,
        credential = %format_args!("{}:{}", principal.credential, principal.credential_id),
        "serving MCP over stdio"
    );
    let (stdin, stdout) = rmcp::transport::io::stdio_pipes();
    let inner = rmcp::transport::async_rw::AsyncRwTransport::new_server(stdin, stdout);
    let transport = KeyedTransport {
        inner,
        mcp: mcp.clone(),
        key,
        pending: None,
    };
    let session = |e: &dyn std::fmt::Display| StdioError::Session(e.to_string());
    let mut stop = std::pin::pin!(stop);
    // A stop before the client's `initialize` ends the session as cleanly as one after it.
    let running = tokio::select! {
        served = GatehouseMcp::new(mcp).serve(transport) => served.map_err(|e| session(&e))?,
        () = &mut stop => return Ok(()),
    };
    let cancel = running.cancellation_token();
    let mut waiting = std::pin::pin!(running.waiting());
    let waited = tokio::select! {
        waited = &mut waiting => waited,
        () = &mut stop => {
            cancel.cancel();
            waiting.await
        }
    };
    waited.map_err(|e| session(&e))?;
    Ok(())
}

/// A transport that checks the key before each request and attaches its [`Principal`].
pub struct KeyedTransport<T> {
    inner: T,
    mcp: McpState,
    key: Secret,
    /// A request received but not yet checked. `receive` may be cancelled while the key is
    /// looked up (rmcp polls it inside a `select!`): the request waits here for the next call
    /// instead of being lost.
    pending: Option<RxJsonRpcMessage<RoleServer>>,
}

/// `parts` as the HTTP layer would hand them to the handler: with the principal inside.
fn parts_with(principal: Principal) -> http::request::Parts {
    let (mut parts, ()) = http::Request::new(()).into_parts();
    parts.extensions.insert(principal);
    parts
}

impl<T> Transport<RoleServer> for KeyedTransport<T>
where
    T: Transport<RoleServer> + Send,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let message = match self.pending.take() {
                Some(message) => message,
                None => self.inner.receive().await?,
            };
            if !matches!(message, JsonRpcMessage::Request(_)) {
                return Some(message);
            }
            self.pending = Some(message);
            let now = crate::store::now();
            let checked = local_key_principal(&self.mcp, &self.key, now).await;
            let mut message: ClientJsonRpcMessage = self.pending.take()?;
            let JsonRpcMessage::Request(request) = &mut message else {
                return Some(message);
            };
            match checked {
                Ok(principal) => {
                    request
                        .request
                        .extensions_mut()
                        .insert(parts_with(principal));
                    return Some(message);
                }
                Err(why) => {
                    tracing::warn!(reason = %why, "MCP request over stdio refused: GATEHOUSE_API_KEY");
                    let error = ErrorData::invalid_request(
                        format!("GATEHOUSE_API_KEY was refused: {}.", refusal_text(&why)),
                        None,
                    );
                    let reply =
                        TxJsonRpcMessage::<RoleServer>::error(error, Some(request.id.clone()));
                    // Sent to the end even if this call is cancelled.
                    tokio::spawn(self.inner.send(reply));
                }
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
