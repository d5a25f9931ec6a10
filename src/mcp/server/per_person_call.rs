//! A `tools/call` of a per-person upstream's tool ([`crate::upstream_oauth`]).
//!
//! With the caller's grant in the vault, the call is forwarded with their own access token
//! (refreshed first when it is about to end) through the same scope check, quota, audit and
//! bounds as any upstream call. Without one, the answer sends the person to Gatehouse's own
//! page `/connections/NAME/start?request=ID` — never to the upstream, and with nothing secret
//! in the link; the link works only for the person it was made for, and records the client
//! that asked (MCP `client/elicitation` §URL Mode, "MUST bind each elicitation to client and
//! user identity"):
//!
//! - 2026-07-28, a client that declares `elicitation.url` in its request's
//!   `clientCapabilities`: an `InputRequiredResult` holding a URL-mode `elicitation/create`
//!   (multi round-trip requests); the client retries the call once the person is done;
//! - 2025-11-25, a client that declared `elicitation.url` at `initialize`: JSON-RPC error
//!   `-32042` (URL elicitation required) with `data.elicitations`;
//! - any other client: an `isError` result whose text gives the link.
//!
//! A grant the upstream ended (`invalid_grant` on refresh) is forgotten and answered like no
//! grant; an upstream token endpoint that cannot be reached leaves the grant as it is and
//! answers `isError` "try again".

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest,
    ElicitRequestParams, ErrorCode, InputRequest, InputRequests, InputRequiredResult,
    ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::{GatehouseMcp, source_ip};
use crate::domain::audit::Outcome;
use crate::domain::principal::Principal;
use crate::mcp::upstream::server::UpstreamServer;
use crate::store::vault::ConnectionRequest;
use crate::upstream_oauth::discovery::public_url;
use crate::upstream_oauth::vault::{self, Access};
use crate::upstream_oauth::{LINK_TTL_SECS, handle_hash, new_handle};

/// JSON-RPC error code of MCP 2025-11-25 "URL elicitation required".
pub(super) const URL_ELICITATION_REQUIRED: i32 = -32042;

/// The most (account, client) pairs whose `initialize` declared URL elicitation this instance
/// remembers; beyond it the memory starts again (a client then gets the text link).
const DECLARED_MAX: usize = 10_000;

fn declared() -> &'static Mutex<HashMap<(String, String), bool>> {
    static DECLARED: OnceLock<Mutex<HashMap<(String, String), bool>>> = OnceLock::new();
    DECLARED.get_or_init(Mutex::default)
}

/// Remembers whether the client of `principal` declared URL-mode elicitation in its
/// `initialize` (2025-11-25 clients declare capabilities only there).
pub(super) fn remember_initialize(principal: &Principal, url_elicitation: bool) {
    let key = (
        principal.account_id.clone(),
        principal.client_id.clone().unwrap_or_default(),
    );
    let mut map = match declared().lock() {
        Ok(m) => m,
        Err(poisoned) => poisoned.into_inner(),
    };
    if map.len() >= DECLARED_MAX && !map.contains_key(&key) {
        map.clear();
    }
    map.insert(key, url_elicitation);
}

fn declared_at_initialize(principal: &Principal) -> bool {
    let key = (
        principal.account_id.clone(),
        principal.client_id.clone().unwrap_or_default(),
    );
    let map = match declared().lock() {
        Ok(m) => m,
        Err(poisoned) => poisoned.into_inner(),
    };
    map.get(&key).copied().unwrap_or(false)
}

/// How the client of this request can be sent to a page.
enum Reach {
    /// 2026-07-28 multi round-trip: an input request.
    InputRequired,
    /// 2025-11-25: error `-32042`.
    ErrorCode,
    /// Neither: the link in an `isError` text.
    Text,
}

fn reach_of(ctx: &RequestContext<RoleServer>, principal: &Principal) -> Reach {
    let modern = ctx
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
    if modern {
        let declares = ctx
            .meta
            .client_capabilities()
            .and_then(|c| c.elicitation)
            .is_some_and(|e| e.url.is_some());
        return if declares {
            Reach::InputRequired
        } else {
            Reach::Text
        };
    }
    let v2025_11 = ctx
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2025_11_25.as_str());
    if v2025_11 && declared_at_initialize(principal) {
        Reach::ErrorCode
    } else {
        Reach::Text
    }
}

impl GatehouseMcp {
    async fn audit_per_person(
        &self,
        ctx: &RequestContext<RoleServer>,
        principal: &Principal,
        name: &str,
        outcome: Outcome,
        upstream: &str,
    ) {
        let ip = source_ip(ctx);
        let detail = format!("{} upstream={upstream}", principal.audit_credential());
        self.audit_tool_call(
            principal,
            name,
            ip.as_deref(),
            outcome,
            &detail,
            crate::store::now(),
        )
        .await;
    }

    /// See the module documentation.
    pub(super) async fn call_per_person(
        &self,
        ctx: &RequestContext<RoleServer>,
        principal: &Principal,
        server: &std::sync::Arc<UpstreamServer>,
        request: CallToolRequestParams,
    ) -> Result<CallToolResponse, ErrorData> {
        let app = &self.mcp.app;
        let access = match vault::access_token(app, &principal.account_id, server.name()).await {
            Ok(access) => access,
            Err(e) if e.is_unavailable() => return Err(crate::mcp::errors::unavailable()),
            Err(e) => {
                tracing::error!(error = %e, "could not read a connection");
                return Err(ErrorData::internal_error("connections unreadable", None));
            }
        };
        let token = match access {
            Access::Token(token) => token,
            Access::NotConnected => {
                return self
                    .connection_needed(ctx, principal, server, &request)
                    .await;
            }
            Access::TryAgain(why) => {
                self.audit_per_person(
                    ctx,
                    principal,
                    &request.name,
                    Outcome::Unavailable,
                    server.name(),
                )
                .await;
                return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "Your connection to the upstream server {} could not be renewed just now ({why}); \
                     it is kept. Try again in a minute.",
                    server.name()
                ))])
                .into());
            }
        };
        let tool = match self
            .mcp
            .upstreams
            .per_person_tool(server, &request.name, &token)
            .await
        {
            Ok(Some(tool)) => tool,
            Ok(None) => {
                return Err(super::unknown_tool(&request.name));
            }
            Err(e) => {
                tracing::warn!(upstream = server.name(), error = %e, "per-person upstream could not be listed");
                self.audit_per_person(
                    ctx,
                    principal,
                    &request.name,
                    Outcome::UpstreamError,
                    server.name(),
                )
                .await;
                return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "The upstream server {} could not be reached with your connection: {e}. Try again \
                     later, or reconnect it on your Connections page ({}).",
                    server.name(),
                    public_url(app.config.frontend_url.as_str(), "/connections")
                ))])
                .into());
            }
        };
        let result = self
            .call_upstream(ctx, principal, server, &tool, request, Some(&token))
            .await;
        let store = app.store.clone();
        let (account, upstream) = (principal.account_id.clone(), server.name().to_string());
        tokio::spawn(async move {
            if let Err(e) = store
                .touch_grant(&account, &upstream, crate::store::now())
                .await
            {
                tracing::debug!(error = %e, "could not note a connection's last use");
            }
        });
        Ok(result)
    }

    /// The answer to a call that needs the person to connect first (see the module
    /// documentation): a fresh link bound to the person and the client.
    async fn connection_needed(
        &self,
        ctx: &RequestContext<RoleServer>,
        principal: &Principal,
        server: &UpstreamServer,
        request: &CallToolRequestParams,
    ) -> Result<CallToolResponse, ErrorData> {
        let app = &self.mcp.app;
        let now = crate::store::now();
        let id = new_handle();
        let link = ConnectionRequest {
            upstream: server.name().to_string(),
            account_id: principal.account_id.clone(),
            client_id: principal.client_id.clone(),
        };
        if let Err(e) = app
            .store
            .create_connection_request(&handle_hash(&id), &link, now + LINK_TTL_SECS, now)
            .await
        {
            if e.is_unavailable() {
                return Err(crate::mcp::errors::unavailable());
            }
            tracing::error!(error = %e, "could not record a connection link");
            return Err(ErrorData::internal_error(
                "connection link not recorded",
                None,
            ));
        }
        let url = public_url(
            app.config.frontend_url.as_str(),
            &format!("/connections/{}/start?request={id}", server.name()),
        );
        let message = format!(
            "To use {} you connect your own account at the upstream server {} once. Open {url}, \
             sign in there and allow access, then call the tool again.",
            request.name,
            server.name()
        );
        self.audit_per_person(
            ctx,
            principal,
            &request.name,
            Outcome::ConnectionRequired,
            server.name(),
        )
        .await;
        Ok(match reach_of(ctx, principal) {
            Reach::InputRequired => {
                let params = ElicitRequestParams::UrlElicitationParams {
                    meta: None,
                    message,
                    url,
                    elicitation_id: String::new(),
                };
                let mut requests = InputRequests::new();
                requests.insert(
                    format!("connect-{}", server.name()),
                    InputRequest::Elicitation(ElicitRequest::new(params)),
                );
                InputRequiredResult::from_input_requests(requests).into()
            }
            Reach::ErrorCode => {
                return Err(ErrorData::new(
                    ErrorCode(URL_ELICITATION_REQUIRED),
                    message.clone(),
                    Some(serde_json::json!({
                        "elicitations": [{
                            "mode": "url",
                            "elicitationId": id,
                            "url": url,
                            "message": message,
                        }]
                    })),
                ));
            }
            Reach::Text => CallToolResult::error(vec![ContentBlock::text(message)]).into(),
        })
    }
}
