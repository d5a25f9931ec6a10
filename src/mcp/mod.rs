//! The MCP resource server: protected-resource metadata, the Streamable HTTP endpoint at the
//! path of `MCP_SERVER_URL` (and the same path with a trailing slash), bearer authentication
//! and challenges, the tool catalog, the resources, and the prompts with their completions.
//!
//! What `POST <mcp path>` goes through, in order: CORS (preflights are answered there, without
//! authentication; `WWW-Authenticate` is exposed), then one layer ([`layers`]) that runs these
//! steps, each of which may answer the request itself:
//! 1. [`guard`]: a request that does not name one host is refused (400); a foreign `Origin`,
//!    or on a loopback listener a foreign host, is refused (403).
//! 2. [`accept`]: `Accept` is read leniently — JSON whenever the client takes it (or says
//!    nothing), one SSE event for an SSE-only client, `406` with a JSON-RPC error otherwise;
//!    every answer of the later steps is reshaped to what was negotiated.
//! 3. [`auth`]: the credential (OAuth access token, API key or personal URL) is checked (401
//!    with a challenge otherwise, 403 for a key used from an address it is not allowed from),
//!    through the validation cache ([`crate::store::auth_cache`]); the [`auth::Principal`] is
//!    attached.
//! 4. [`body::read`]: the body is read (413 beyond [`auth::MAX_BODY_BYTES`]) and parsed once;
//!    the parsed value ([`body::Parsed`]) is attached for the steps after it.
//! 5. [`stepup`]: an operation outside the credential's scopes is refused (403
//!    `insufficient_scope`, audited).
//! 6. [`body::check_request`]: a JSON body that is not a well-formed JSON-RPC message is answered
//!    with its JSON-RPC error (400 `-32700` or `-32600`, `-32602` for params that do not fit
//!    the method); a good one is handed on as the message that was checked.
//! 7. rmcp's `StreamableHttpService`, stateless, JSON responses, serving the revisions rmcp
//!    knows (2024-11-05 … 2026-07-28): `initialize` for the older ones, `server/discover` and
//!    per-request `_meta` for 2026-07-28, with rmcp's header checks, `resultType` and cache
//!    hints.
//!
//! The steps run in one layer rather than one layer each because every layer of a route costs
//! each request a clone of the inner service and a boxed future (docs/benchmarks.md).
//!
//! `POST <mcp path>/<secret>` (a personal MCP URL) has the same layers, with
//! [`auth::authenticate_personal`] taking the credential from the path; the request span and
//! logs name only the route template `<mcp path>/…`.
//!
//! Every other method on the route is answered `405` with `Allow: POST`; nothing redirects.
//! Every error answer of the route, whichever layer gives it, is a JSON-RPC error ([`errors`]).

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::IntoResponse;
use axum::routing::{MethodRouter, post_service};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::state::AppState;

pub mod accept;
pub mod args;
pub mod auth;
pub mod body;
pub mod catalog;
pub mod errors;
pub mod guard;
pub mod layers;
pub mod metadata;
pub mod output;
pub mod prompts;
pub mod quota;
pub mod resources;
pub mod server;
pub mod stdio;
pub mod stepup;
pub mod tool_meta;
pub mod tools;
pub mod upstream;
pub mod views;

/// What the MCP layers share. Cheap to clone.
#[derive(Clone)]
pub struct McpState(Arc<McpParts>);

impl std::ops::Deref for McpState {
    type Target = McpParts;

    fn deref(&self) -> &McpParts {
        &self.0
    }
}

/// What an [`McpState`] holds; every layer of the route clones the state per request, so it
/// is one shared reference rather than one per part.
#[derive(Clone)]
pub struct McpParts {
    /// Configuration and storage.
    pub app: AppState,
    /// The tools.
    pub catalog: Arc<catalog::Catalog>,
    /// Which `Host` values are served.
    pub hosts: Arc<guard::HostPolicy>,
    /// Which browser origins are served.
    pub origins: Arc<guard::OriginPolicy>,
    /// When this process last wrote each API key's use.
    pub key_use: Arc<auth::KeyUseTracker>,
    /// This process's count of each account's tool calls ([`quota`]).
    pub quotas: Arc<quota::QuotaTracker>,
    /// The upstream MCP servers whose tools join the catalog ([`upstream`]).
    pub upstreams: Arc<upstream::Upstreams>,
    /// Continuations of reads that are not counted again ([`quota::Continuations`]).
    pub continuations: Arc<quota::Continuations>,
}

async fn method_not_allowed() -> impl IntoResponse {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::ALLOW, HeaderValue::from_static("POST"))],
        "This MCP endpoint accepts POST only (stateless Streamable HTTP).",
    )
}

/// CORS of the MCP route: the same origins the guard allows ([`guard::OriginPolicy`]).
fn cors(origins: Arc<guard::OriginPolicy>) -> CorsLayer {
    let origins =
        AllowOrigin::predicate(move |origin, _| origin.to_str().is_ok_and(|o| origins.allows(o)));
    crate::cors::layer(
        origins,
        &[Method::POST],
        &[
            header::WWW_AUTHENTICATE,
            HeaderName::from_static("mcp-protocol-version"),
        ],
    )
}

/// The state the MCP handlers share, over `state`: the built-in catalog and this process's
/// trackers. Used by the HTTP routes ([`router`]) and by `gatehouse stdio` ([`stdio`]).
///
/// Panics when the built-in tool catalog breaks its rules (e.g. a destructive tool): the
/// server refuses to start with such a catalog.
pub fn mcp_state(state: AppState) -> McpState {
    let catalog = match tools::catalog() {
        Ok(catalog) => Arc::new(catalog),
        Err(e) => panic!("refusing to start: {e}"),
    };
    let config = state.config.clone();
    let upstreams = upstream::Upstreams::new(state.clone());
    upstreams.start();
    McpState(Arc::new(McpParts {
        upstreams,
        app: state,
        catalog,
        hosts: Arc::new(guard::HostPolicy::new(&config)),
        origins: Arc::new(guard::OriginPolicy::new(&config)),
        key_use: Arc::new(auth::KeyUseTracker::default()),
        quotas: Arc::new(quota::QuotaTracker::default()),
        continuations: Arc::new(quota::Continuations::default()),
    }))
}

impl McpState {
    /// This state over `app` (a serving lane's, [`crate::lanes`]): the catalog, the trackers
    /// and the upstreams stay this process's one set.
    pub fn on(&self, app: AppState) -> McpState {
        McpState(Arc::new(McpParts {
            app,
            ..McpParts::clone(&self.0)
        }))
    }
}

/// The MCP routes over `mcp` ([`mcp_state`], or [`McpState::on`] a lane's state): the
/// endpoint, and the protected-resource metadata while OAuth is on.
pub fn router(mcp: &McpState) -> Router {
    let state = mcp.app.clone();
    let config = state.config.clone();
    let service_state = mcp.clone();
    let service = StreamableHttpService::new(
        move || Ok(server::GatehouseMcp::new(service_state.clone())),
        Arc::new(NeverSessionManager::default()),
        StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_keep_alive(None)
            .with_max_request_body_bytes(auth::MAX_BODY_BYTES)
            // Host and Origin are checked by `guard`, before authentication.
            .disable_allowed_hosts()
            .disable_allowed_origins(),
    );
    let endpoint: MethodRouter = post_service(service.clone())
        .route_layer(from_fn_with_state(mcp.clone(), layers::endpoint))
        .fallback(method_not_allowed)
        .layer::<_, std::convert::Infallible>(from_fn(errors::json_rpc_errors))
        .layer(cors(mcp.origins.clone()));
    // Personal MCP URLs: the same steps, with the credential taken from the path.
    let personal: MethodRouter = post_service(service)
        .route_layer(from_fn_with_state(mcp.clone(), layers::personal))
        .fallback(method_not_allowed)
        .layer::<_, std::convert::Infallible>(from_fn(errors::json_rpc_errors))
        .layer(cors(mcp.origins.clone()));
    let path = config.mcp_path.clone();
    let mut router = Router::new()
        .route(&path, endpoint.clone())
        .route(&format!("{path}/"), endpoint)
        .route(&crate::domain::api_key::personal_url_route(&path), personal);
    if config.oauth_enabled {
        router = router.merge(metadata::router(state));
    }
    router
}
