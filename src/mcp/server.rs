//! The rmcp `ServerHandler`: tools from the [`Catalog`](super::catalog::Catalog), resources,
//! prompts and argument completion ([`prompts`]), server identity; the upstream servers' tools,
//! prompts and resources after Gatehouse's own ([`super::upstream`]). Every `tools/call`,
//! `resources/read` and `prompts/get` is audited (event `tool_call`, `resource_read` or
//! `prompt_get`: who, which client or credential, the tool name, URI template or prompt name,
//! the project once resolved, the outcome and duration — never arguments or content).
//!
//! A fresh handler is made for every HTTP request (stateless Streamable HTTP); the caller is the
//! [`Principal`] the authentication layer put into the request extensions, which rmcp passes on
//! inside the `http::request::Parts` it stores in the request context.

use std::time::Instant;

mod per_person_call;

use crate::client_addr::ClientAddr;
use crate::domain::audit::{Event, Outcome};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams,
    CompleteResult, ContentBlock, ErrorCode, GetPromptRequestParams, GetPromptResponse,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use super::McpState;
use super::auth::Principal;
use super::catalog::{DataProbe, ToolCtx, ToolError};
use super::{output, prompts, resources};
use crate::domain::notes::ResourceUri;
use crate::domain::principal::Reach;
use crate::domain::scope::Scope;
use crate::domain::upstream::{split_namespaced, split_uri};
use crate::store::audit::AuditEvent;

const INSTRUCTIONS: &str = "Gatehouse holds the signed-in person's projects and each project's notes. \
Start with list_projects to get project ids. search_notes finds notes by words and get_note reads one; \
create_note and update_note change notes in projects where the person has the write role. \
export_project runs in the background: it answers with a job receipt; poll get_job with the receipt's id \
and read the job resource when it is completed.";

/// What the audit log records of one read (`resources/read` or `prompts/get`).
struct ReadAudit<'a> {
    event: Event,
    subject: &'a str,
    outcome: Outcome,
    project_id: Option<&'a str>,
    /// The upstream server that answered, for a forwarded read.
    upstream: Option<&'a str>,
    started: Instant,
    now: i64,
}

/// Templates never change: clients may cache them for an hour and share the cache.
const TEMPLATES_TTL_MS: u64 = 3_600_000;

/// `serverInfo` (MCP `basic/lifecycle`, `Implementation`): name and title from
/// `GATEHOUSE_SERVER_NAME` and `GATEHOUSE_SERVER_TITLE`, the version of this build, and
/// `websiteUrl` = `FRONTEND_URL`, where people open the console.
pub fn server_info(config: &crate::config::Config) -> Implementation {
    Implementation::new(&config.surface.server_name, env!("CARGO_PKG_VERSION"))
        .with_title(&config.surface.server_title)
        .with_website_url(config.frontend_url.as_str())
}

/// The MCP server for one request.
#[derive(Clone)]
pub struct GatehouseMcp {
    mcp: McpState,
}

impl GatehouseMcp {
    /// A handler over the shared state.
    pub fn new(mcp: McpState) -> Self {
        GatehouseMcp { mcp }
    }
}

/// The caller of this request, from the HTTP request's extensions.
fn principal(ctx: &RequestContext<RoleServer>) -> Result<Principal, ErrorData> {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("request is not authenticated", None))
}

fn source_ip(ctx: &RequestContext<RoleServer>) -> Option<String> {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|parts| ClientAddr::of(&parts.extensions))
        .map(|c| c.to_string())
}

/// Whether the request speaks 2026-07-28 or later (cache hints are sent only then).
fn is_modern(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

impl GatehouseMcp {
    /// Records a `resources/read` or `prompts/get` like a tool call, through the same queue.
    async fn audit_read(
        &self,
        ctx: &RequestContext<RoleServer>,
        principal: &Principal,
        read: ReadAudit<'_>,
    ) {
        let elapsed_ms = read.started.elapsed().as_millis();
        let credential = principal.audit_credential();
        let detail = match (read.project_id, read.upstream) {
            (Some(p), _) => format!("{credential} project={p} duration_ms={elapsed_ms}"),
            (None, Some(u)) => format!("{credential} upstream={u} duration_ms={elapsed_ms}"),
            (None, None) => format!("{credential} duration_ms={elapsed_ms}"),
        };
        let ip = source_ip(ctx);
        self.mcp
            .app
            .store
            .audit_batched(
                AuditEvent {
                    event: read.event,
                    outcome: read.outcome,
                    account_id: Some(&principal.account_id),
                    client_id: principal.client_id.as_deref(),
                    subject: Some(read.subject),
                    source_ip: ip.as_deref(),
                    detail: Some(&detail),
                },
                read.now,
            )
            .await;
    }
}

impl GatehouseMcp {
    /// Whether `principal` may use `server` (`--accounts`/`--projects`); an upstream it may
    /// not use answers like an unknown tool.
    async fn may_use(
        &self,
        principal: &Principal,
        server: &super::upstream::server::UpstreamServer,
    ) -> Result<bool, ErrorData> {
        if let Some(owner) = server.owner() {
            // A person's own upstream: its owner, with a credential reaching the whole account
            // (never a project key); no database read.
            return Ok(owner == principal.account_id && principal.reach == Reach::Account);
        }
        if !server.is_restricted() {
            return Ok(true);
        }
        let reachable: Vec<String> = match self.mcp.app.store.reachable_projects(principal).await {
            Ok(projects) => projects.into_iter().map(|p| p.project_id).collect(),
            Err(e) if e.is_unavailable() => return Err(super::errors::unavailable()),
            Err(e) => {
                tracing::error!(error = %e, "could not read memberships for an upstream call");
                return Err(ErrorData::internal_error("memberships unreadable", None));
            }
        };
        Ok(server.allows(&principal.account_id, false, &reachable))
    }

    /// A `tools/call` of an upstream's tool ([`super::upstream`]): the same scope check,
    /// quota and audit as a built-in tool (the audit's detail names the upstream), then the
    /// call forwarded with the upstream's own credential only. A destructive tool the operator
    /// allowed is forwarded only once the person confirmed this call
    /// ([`super::upstream::confirm`]). Every failure is an `isError` result naming the
    /// upstream.
    async fn call_upstream(
        &self,
        ctx: &RequestContext<RoleServer>,
        principal: &Principal,
        server: &super::upstream::server::UpstreamServer,
        tool: &super::upstream::server::UpstreamTool,
        request: CallToolRequestParams,
        bearer: Option<&str>,
    ) -> CallToolResponse {
        let name = tool.tool.name.as_ref();
        if !principal.scopes.satisfies(tool.scope) {
            // The authentication layer answers 403 before this; kept as a second line.
            return CallToolResult::error(vec![ContentBlock::text(format!(
                "This tool needs the {} scope; authorize again with it.",
                tool.scope
            ))])
            .into();
        }
        let now = crate::store::now();
        let ip = source_ip(ctx);
        if tool.destructive {
            use super::upstream::confirm::{self, Confirmation};
            let can_ask = is_modern(ctx)
                && ctx
                    .client_capabilities()
                    .is_some_and(|c| c.elicitation.is_some());
            let decision = confirm::check(
                &self.mcp.app,
                confirm::Call {
                    account_id: &principal.account_id,
                    upstream: server.name(),
                    tool: &tool.upstream_name,
                    public_name: name,
                    arguments: request.arguments.as_ref(),
                },
                confirm::Round {
                    input_responses: request.input_responses.as_ref(),
                    request_state: request.request_state.as_deref(),
                    can_ask,
                },
                now,
            )
            .await;
            match decision {
                Confirmation::Confirmed => {}
                Confirmation::Ask(question) => return (*question).into(),
                Confirmation::Refused(result, outcome) => {
                    self.audit_upstream_call(
                        principal,
                        name,
                        server.name(),
                        ip.as_deref(),
                        outcome,
                        0,
                        now,
                    )
                    .await;
                    return result.into();
                }
            }
        }
        if let Some(refusal) =
            super::quota::refuse_over_budget(&self.mcp, principal, name, ip.as_deref(), now).await
        {
            return refusal.into();
        }
        let started = Instant::now();
        let (result, outcome) = server.call(tool, request.arguments, bearer).await;
        let elapsed = started.elapsed();
        record_upstream_request(server.name(), outcome, elapsed);
        self.mcp.quotas.refund(&principal.account_id, outcome, now);
        self.audit_upstream_call(
            principal,
            name,
            server.name(),
            ip.as_deref(),
            outcome,
            elapsed.as_millis(),
            now,
        )
        .await;
        result.into()
    }

    /// Audits one upstream `tools/call` (never its arguments or result) from the caller's
    /// address `ip`.
    #[allow(clippy::too_many_arguments)]
    async fn audit_upstream_call(
        &self,
        principal: &Principal,
        name: &str,
        upstream: &str,
        ip: Option<&str>,
        outcome: Outcome,
        elapsed_ms: u128,
        now: i64,
    ) {
        let detail = format!(
            "{} upstream={upstream} duration_ms={elapsed_ms}",
            principal.audit_credential(),
        );
        self.audit_tool_call(principal, name, ip, outcome, &detail, now)
            .await;
    }
}

impl GatehouseMcp {
    /// A `tools/call` of a tool outside the catalog: a person's own upstream's tool
    /// ([`GatehouseMcp::call_per_person`]), else a shared upstream's
    /// ([`GatehouseMcp::call_upstream`]), each only when `principal` may use that upstream.
    ///
    /// Errors: `invalid_params` "Unknown tool" when there is none it may use, or the error of
    /// [`GatehouseMcp::may_use`] or of the per-person call.
    async fn call_other_tool(
        &self,
        ctx: &RequestContext<RoleServer>,
        principal: &Principal,
        request: CallToolRequestParams,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(server) = self.mcp.upstreams.per_person_server(&request.name).await
            && self.may_use(principal, &server).await?
        {
            return Box::pin(self.call_per_person(ctx, principal, &server, request)).await;
        }
        if let Some((server, tool)) = self.mcp.upstreams.find(&request.name).await
            && self.may_use(principal, &server).await?
        {
            return Ok(
                Box::pin(self.call_upstream(ctx, principal, &server, &tool, request, None)).await,
            );
        }
        Err(unknown_tool(&request.name))
    }

    /// The accounting of a built-in tool's call once it answered `result`: the outcome the
    /// audit records ([`super::quota::CONTINUED`] for a successful continuation), counted in
    /// the tool-call metric; the account's budget refunded for a call refused for its reach or
    /// role (a continuation spent none); an internal failure or an unavailable database
    /// logged.
    ///
    /// Returns the audit outcome.
    fn account_tool_call(
        &self,
        principal: &Principal,
        tool: &'static str,
        result: &Result<super::catalog::Produced, ToolError>,
        continued: bool,
        now: i64,
    ) -> Outcome {
        let audit_outcome = match result {
            Ok(_) if continued => super::quota::CONTINUED,
            Ok(_) => Outcome::Success,
            Err(e) => e.outcome(),
        };
        metrics::counter!(crate::metrics::TOOL_CALLS, "tool" => tool, "outcome" => audit_outcome.as_str())
            .increment(1);
        // A call refused for its reach or role does not spend the account's budget (a
        // continuation spent none).
        if !continued {
            self.mcp
                .quotas
                .refund(&principal.account_id, audit_outcome, now);
        }
        if let Err(ToolError::Internal(cause)) = result {
            tracing::error!(tool, error = %cause, "MCP tool failed");
        }
        if let Err(ToolError::Unavailable(cause)) = result {
            tracing::warn!(tool, error = %cause, "database unavailable for an MCP tool");
        }
        audit_outcome
    }

    /// Records a `tools/call` of `tool` by `principal` from `ip` (event `tool_call`, with
    /// `outcome` and `detail`) through the batched audit queue: built-in, forwarded and a
    /// person's own upstream's calls alike.
    async fn audit_tool_call(
        &self,
        principal: &Principal,
        tool: &str,
        ip: Option<&str>,
        outcome: Outcome,
        detail: &str,
        now: i64,
    ) {
        self.mcp
            .app
            .store
            .audit_batched(
                AuditEvent {
                    event: Event::ToolCall,
                    outcome,
                    account_id: Some(&principal.account_id),
                    client_id: principal.client_id.as_deref(),
                    subject: Some(tool),
                    source_ip: ip,
                    detail: Some(detail),
                },
                now,
            )
            .await;
    }

    /// A built-in tool's `result` rendered as the `tools/call` answer within
    /// `GATEHOUSE_MAX_RESULT_BYTES` (a large one off the async runtime); the next part or page
    /// it offers is remembered for `principal`'s account, so that asking for it is not counted
    /// again.
    ///
    /// Errors: `internal_error` when the rendering off the runtime failed.
    async fn render_tool_result(
        &self,
        principal: &Principal,
        tool: &str,
        result: Result<super::catalog::Produced, ToolError>,
        now: i64,
    ) -> Result<CallToolResult, ErrorData> {
        let max_bytes = self.mcp.app.config.max_result_bytes;
        let rendered = if output::is_small(&result) {
            output::render(result, max_bytes)
        } else {
            output::off_runtime(move || output::render(result, max_bytes))
                .await
                .ok_or_else(|| {
                    ErrorData::internal_error("the result could not be prepared", None)
                })?
        };
        if let Some(next) = super::quota::tool_continuation(tool, &rendered) {
            self.mcp
                .continuations
                .offer(&principal.account_id, &next, now);
        }
        Ok(rendered)
    }
}

/// The `invalid_params` error of a `tools/call` naming a tool that does not exist, or one the
/// caller may not see: `Unknown tool: NAME`, with the name in `data`.
pub(super) fn unknown_tool(name: &str) -> ErrorData {
    let name = super::errors::echoed(name, super::errors::ECHOED_NAME_MAX);
    ErrorData::invalid_params(
        format!("Unknown tool: {name}"),
        Some(serde_json::json!({ "name": name })),
    )
}

/// The audit detail of a built-in `tools/call`: the `credential`, the `project` once
/// resolved, the call's `duration_ms`, and the `note` it touched.
fn tool_call_detail(
    principal: &Principal,
    project_id: Option<&str>,
    elapsed_ms: u128,
    note: Option<String>,
) -> String {
    let credential = principal.audit_credential();
    let mut detail = match project_id {
        Some(p) => format!("{credential} project={p} duration_ms={elapsed_ms}"),
        None => format!("{credential} duration_ms={elapsed_ms}"),
    };
    if let Some(note) = note {
        detail.push_str(" note=");
        detail.push_str(&note);
    }
    detail
}

/// Longest note id recorded in the audit detail (ids are UUIDs).
const MAX_NOTE_ID_CHARS: usize = 64;

/// A note id as the audit detail may hold it: short, and only letters, digits and `-`, so it
/// cannot break the detail's `key=value` words apart.
fn plain_note_id(id: &str) -> Option<String> {
    (!id.is_empty()
        && id.len() <= MAX_NOTE_ID_CHARS
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
    .then(|| id.to_string())
}

/// The `note_id` argument of a tool call, when it is a [`plain_note_id`].
fn note_id_argument(arguments: Option<&rmcp::model::JsonObject>) -> Option<String> {
    arguments?
        .get("note_id")
        .and_then(serde_json::Value::as_str)
        .and_then(plain_note_id)
}

/// The note a successful call touched, for the audit detail's `note=ID` (the console's
/// activity pages link it): its `note_id` argument, or the id `create_note` answered.
fn touched_note(
    tool: &str,
    argument: Option<String>,
    result: &Result<super::catalog::Produced, ToolError>,
) -> Option<String> {
    let Ok(produced) = result else {
        return None;
    };
    argument.or_else(|| {
        (tool == "create_note")
            .then(|| produced.value.get("id").and_then(serde_json::Value::as_str))
            .flatten()
            .and_then(plain_note_id)
    })
}

impl GatehouseMcp {
    /// The prompts and resources of the upstreams `principal` may use
    /// ([`super::upstream::Upstreams::listed_extras`]); none without `mcp:read`.
    async fn upstream_extras(
        &self,
        principal: &Principal,
    ) -> Vec<std::sync::Arc<super::upstream::extras::Extras>> {
        if !principal.scopes.satisfies(Scope::McpRead) {
            return Vec::new();
        }
        let upstreams = &self.mcp.upstreams;
        let reachable: Vec<String> = if upstreams.any_restricted().await {
            match self.mcp.app.store.reachable_projects(principal).await {
                Ok(projects) => projects.into_iter().map(|p| p.project_id).collect(),
                Err(e) => {
                    tracing::warn!(error = %e, "could not read memberships for an upstream listing");
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        upstreams
            .listed_extras(
                &principal.account_id,
                principal.reach == Reach::Account,
                &reachable,
            )
            .await
    }

    /// The enabled upstream named `name` that `principal` may use, if any.
    async fn usable_upstream(
        &self,
        principal: &Principal,
        name: &str,
    ) -> Result<Option<std::sync::Arc<super::upstream::server::UpstreamServer>>, ErrorData> {
        let Some(server) = self.mcp.upstreams.server(name).await else {
            return Ok(None);
        };
        Ok(self.may_use(principal, &server).await?.then_some(server))
    }

    /// `prompts/get` of an upstream's prompt `NAME__PROMPT` that `principal` may use and the
    /// upstream lists; `None` when the name is not one. Quota and audit as a built-in prompt.
    async fn get_upstream_prompt(
        &self,
        ctx: &RequestContext<RoleServer>,
        principal: &Principal,
        request: &GetPromptRequestParams,
    ) -> Option<Result<rmcp::model::GetPromptResult, ErrorData>> {
        let (upstream, own) = split_namespaced(&request.name)?;
        let server = match self.usable_upstream(principal, upstream.as_str()).await {
            Ok(Some(server)) => server,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        };
        let listed = server
            .extras()
            .await
            .is_ok_and(|e| e.prompts.iter().any(|p| p.name == request.name));
        if !listed {
            return None;
        }
        if !principal.scopes.satisfies(Scope::McpRead) {
            return Some(Err(ErrorData::invalid_request(
                "prompts/get needs the mcp:read scope",
                None,
            )));
        }
        let started = Instant::now();
        let now = crate::store::now();
        let ip = source_ip(ctx);
        if let Some(refusal) = super::quota::refuse_read_over_budget(
            &self.mcp,
            principal,
            Event::PromptGet,
            &request.name,
            ip.as_deref(),
            now,
        )
        .await
        {
            return Some(Err(refusal));
        }
        let result = server.get_prompt(own, request.arguments.clone()).await;
        let outcome = upstream_read_outcome(result.as_ref().err());
        let result = result.map_err(|e| e.error);
        self.mcp.quotas.refund(&principal.account_id, outcome, now);
        record_upstream_request(server.name(), outcome, started.elapsed());
        self.audit_read(
            ctx,
            principal,
            ReadAudit {
                event: Event::PromptGet,
                subject: &request.name,
                outcome,
                project_id: None,
                upstream: Some(server.name()),
                started,
                now,
            },
        )
        .await;
        Some(result)
    }

    /// `completion/complete` of an argument of an upstream's prompt `NAME__PROMPT` or resource
    /// template `gatehouse://upstreams/NAME/…` that `principal` may use and the upstream
    /// lists, forwarded with the upstream's own name or URI
    /// ([`super::upstream::server::UpstreamServer::complete`]); `None` when the reference is
    /// not one (the built-in completions answer). Counted in the upstream metrics; not
    /// audited, as built-in completions are not.
    async fn complete_upstream(
        &self,
        principal: &Principal,
        request: &CompleteRequestParams,
    ) -> Option<Result<CompleteResult, ErrorData>> {
        use rmcp::model::Reference;
        let (upstream, own) = match &request.r#ref {
            Reference::Prompt(prompt) => split_namespaced(&prompt.name)?,
            Reference::Resource(template) => split_uri(&template.uri)?,
            _ => return None,
        };
        let server = match self.usable_upstream(principal, upstream.as_str()).await {
            Ok(Some(server)) => server,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        };
        let listed = server
            .extras()
            .await
            .is_ok_and(|extras| match &request.r#ref {
                Reference::Prompt(prompt) => extras.prompts.iter().any(|p| p.name == prompt.name),
                Reference::Resource(template) => extras
                    .templates
                    .iter()
                    .any(|t| t.uri_template == template.uri),
                _ => false,
            });
        if !listed {
            return None;
        }
        if !principal.scopes.satisfies(Scope::McpRead) {
            return Some(Err(ErrorData::invalid_request(
                "completion/complete needs the mcp:read scope",
                None,
            )));
        }
        if request.argument.value.chars().count() > prompts::MAX_COMPLETION_INPUT {
            return Some(Err(ErrorData::invalid_params(
                format!(
                    "The value to complete must be at most {} characters.",
                    prompts::MAX_COMPLETION_INPUT
                ),
                None,
            )));
        }
        let mut forwarded = request.clone();
        forwarded.meta = None;
        forwarded.r#ref = match &request.r#ref {
            Reference::Resource(_) => Reference::for_resource(own),
            _ => Reference::for_prompt(own),
        };
        let started = Instant::now();
        let result = server.complete(forwarded).await;
        let outcome = upstream_read_outcome(result.as_ref().err());
        record_upstream_request(server.name(), outcome, started.elapsed());
        Some(result.map_err(|e| e.error))
    }

    /// `resources/read` of an upstream's resource `gatehouse://upstreams/NAME/URI`; `None`
    /// when the URI is not one of an upstream `principal` may use. Quota and audit as a
    /// built-in read (the audit names the upstream, never the URI).
    async fn read_upstream_resource(
        &self,
        ctx: &RequestContext<RoleServer>,
        principal: &Principal,
        uri: &str,
    ) -> Option<Result<rmcp::model::ReadResourceResult, ErrorData>> {
        let (upstream, own) = split_uri(uri)?;
        let server = match self.usable_upstream(principal, upstream.as_str()).await {
            Ok(Some(server)) => server,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        };
        if !principal.scopes.satisfies(Scope::McpRead) {
            return Some(Err(ErrorData::invalid_request(
                "resources/read needs the mcp:read scope",
                None,
            )));
        }
        let subject = format!(
            "{}{}",
            crate::domain::upstream::RESOURCE_URI_PREFIX,
            server.name()
        );
        let started = Instant::now();
        let now = crate::store::now();
        let ip = source_ip(ctx);
        if let Some(refusal) = super::quota::refuse_read_over_budget(
            &self.mcp,
            principal,
            Event::ResourceRead,
            &subject,
            ip.as_deref(),
            now,
        )
        .await
        {
            return Some(Err(refusal));
        }
        let result = server.read_resource(own).await;
        let outcome = upstream_read_outcome(result.as_ref().err());
        let result = result.map_err(|e| e.error);
        self.mcp.quotas.refund(&principal.account_id, outcome, now);
        record_upstream_request(server.name(), outcome, started.elapsed());
        self.audit_read(
            ctx,
            principal,
            ReadAudit {
                event: Event::ResourceRead,
                subject: &subject,
                outcome,
                project_id: None,
                upstream: Some(server.name()),
                started,
                now,
            },
        )
        .await;
        Some(result)
    }
}

/// The audit outcome of a forwarded read that failed with `error` (`None`: it succeeded): the
/// one Gatehouse gave it (busy, cooling down, timed out, failed), else by the code of the error
/// the upstream answered.
fn upstream_read_outcome(error: Option<&super::upstream::extras::ForwardError>) -> Outcome {
    match error {
        None => Outcome::Success,
        Some(e) => e.outcome.unwrap_or(match e.error.code {
            ErrorCode::RESOURCE_NOT_FOUND => Outcome::NotFound,
            ErrorCode::INVALID_PARAMS => Outcome::InvalidArguments,
            _ => Outcome::UpstreamError,
        }),
    }
}

/// Counts a forwarded call or read that ended with `outcome` after `elapsed` in the upstream
/// metrics: [`crate::metrics::UPSTREAM_CALLS`] always, and
/// [`crate::metrics::UPSTREAM_CALL_SECONDS`] only when it was sent (one refused as busy or
/// while the upstream cools down took no time of the upstream's and would pull its latency
/// figures toward zero).
fn record_upstream_request(upstream: &str, outcome: Outcome, elapsed: std::time::Duration) {
    metrics::counter!(crate::metrics::UPSTREAM_CALLS, "upstream" => upstream.to_string(), "outcome" => outcome.as_str())
        .increment(1);
    if !matches!(outcome, Outcome::Busy | Outcome::CoolingDown) {
        metrics::histogram!(crate::metrics::UPSTREAM_CALL_SECONDS, "upstream" => upstream.to_string())
            .record(elapsed.as_secs_f64());
    }
}

/// The audit outcome of a `resources/read` answer.
fn read_outcome(result: &Result<rmcp::model::ReadResourceResult, ErrorData>) -> Outcome {
    match result {
        Ok(_) => Outcome::Success,
        Err(e) if e.code == ErrorCode::RESOURCE_NOT_FOUND => Outcome::NotFound,
        Err(e) if e.code == ErrorCode::INVALID_PARAMS => Outcome::InvalidArguments,
        Err(_) => Outcome::Error,
    }
}

/// MCP's client-credentials authorization extension (`client_credentials` and
/// `private_key_jwt` for service clients).
pub const CLIENT_CREDENTIALS_EXTENSION: &str = "io.modelcontextprotocol/oauth-client-credentials";
/// MCP's enterprise-managed authorization extension (the JWT-bearer grant with an ID-JAG,
/// [`crate::oauth::id_jag`]).
pub const ENTERPRISE_MANAGED_EXTENSION: &str =
    "io.modelcontextprotocol/enterprise-managed-authorization";

/// The authorization extensions this server's authorization server implements, declared under
/// `capabilities.extensions` (SEP-1724; each with no settings: an empty object) in
/// `server/discover` (2026-07-28) and in `initialize` (older revisions), as the extensions'
/// "advertise support" sections ask: [`CLIENT_CREDENTIALS_EXTENSION`],
/// [`ENTERPRISE_MANAGED_EXTENSION`] and workload identity
/// ([`crate::oauth::workload::WIF_EXTENSION`], a draft).
pub fn auth_extensions() -> rmcp::model::ExtensionCapabilities {
    [
        CLIENT_CREDENTIALS_EXTENSION,
        ENTERPRISE_MANAGED_EXTENSION,
        crate::oauth::workload::WIF_EXTENSION,
    ]
    .into_iter()
    .map(|id| (id.to_string(), rmcp::model::JsonObject::new()))
    .collect()
}

impl ServerHandler for GatehouseMcp {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_completions()
            .enable_prompts()
            .enable_resources()
            .enable_tools()
            .build();
        capabilities.extensions = Some(auth_extensions());
        ServerConfig::new(capabilities)
            .with_server_info(server_info(&self.mcp.app.config))
            .with_instructions(INSTRUCTIONS)
    }

    /// The default negotiation; remembers whether the client declared URL-mode elicitation
    /// (2025-11-25 clients declare it only here), for per-person upstreams' links
    /// ([`per_person_call`]).
    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::InitializeResult, ErrorData> {
        if let Ok(principal) = principal(&context) {
            let url = request
                .capabilities
                .elicitation
                .as_ref()
                .is_some_and(|e| e.url.is_some());
            per_person_call::remember_initialize(&principal, url);
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        match self.mcp.catalog.get(name) {
            Some(def) => Some(def.tool().clone()),
            None => self.mcp.upstreams.cached_tool(name),
        }
    }

    /// The tools this caller's scopes allow and whose data it can have, in catalog order
    /// ([`super::catalog::Catalog::listed`]): one probe of its projects per request; if the
    /// probe fails, nothing is hidden and the failure is logged (calls are still checked one by
    /// one). Computed per request, so no `list_changed` notification is needed.
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let principal = principal(&ctx)?;
        let mut reachable = Vec::new();
        let probe = match self.mcp.app.store.reachable_projects(&principal).await {
            Ok(projects) => {
                reachable = projects.iter().map(|p| p.project_id.clone()).collect();
                DataProbe::of(&projects)
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not read memberships for tools/list; listing every tool");
                DataProbe::Unknown
            }
        };
        let mut tools = self.mcp.catalog.listed(&principal.scopes, probe);
        tools.extend(
            Box::pin(self.mcp.upstreams.listed(
                &principal.scopes,
                &principal.account_id,
                principal.reach == Reach::Account,
                &reachable,
            ))
            .await,
        );
        // The credential's own tool list (`--tools` / `--deny-tools`).
        tools.retain(|t| principal.tools.allows(&t.name));
        Ok(ListToolsResult::with_all_items(tools))
    }

    /// A `tools/call`: refused like an unknown tool outside the credential's tool list; an
    /// upstream's tool is forwarded ([`GatehouseMcp::call_other_tool`]). A built-in tool: the
    /// scope check, the quota (not spent again by a continuation), the call, its accounting
    /// and audit, then the result rendered within `GATEHOUSE_MAX_RESULT_BYTES`.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let principal = principal(&ctx)?;
        if !principal.tools.allows(&request.name) {
            // Outside the credential's tool list: answered like an unknown tool.
            return Err(unknown_tool(&request.name));
        }
        let Some(def) = self.mcp.catalog.get(&request.name) else {
            return self.call_other_tool(&ctx, &principal, request).await;
        };
        if !principal.scopes.satisfies(def.spec.scope) {
            // The authentication layer answers 403 before this; kept as a second line.
            return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "This tool needs the {} scope; authorize again with it.",
                def.spec.scope
            ))])
            .into());
        }
        let now = crate::store::now();
        let ip = source_ip(&ctx);
        // The next part or page a previous result of this account offered is not counted again.
        let continued = super::quota::call_continuation(def.spec.name, request.arguments.as_ref())
            .is_some_and(|call| {
                self.mcp
                    .continuations
                    .take(&principal.account_id, &call, now)
            });
        if !continued
            && let Some(refusal) = super::quota::refuse_over_budget(
                &self.mcp,
                &principal,
                def.spec.name,
                ip.as_deref(),
                now,
            )
            .await
        {
            return Ok(refusal.into());
        }
        let started = Instant::now();
        let tool_ctx = ToolCtx {
            state: self.mcp.app.clone(),
            principal: std::sync::Arc::new(principal.clone()),
            project: None,
            now,
        };
        let note_arg = note_id_argument(request.arguments.as_ref());
        let outcome = def.call(tool_ctx, request.arguments).await;
        let elapsed_ms = started.elapsed().as_millis();
        let audit_outcome =
            self.account_tool_call(&principal, def.spec.name, &outcome.result, continued, now);
        let note = touched_note(def.spec.name, note_arg, &outcome.result);
        let detail = tool_call_detail(&principal, outcome.project_id.as_deref(), elapsed_ms, note);
        self.audit_tool_call(
            &principal,
            def.spec.name,
            ip.as_deref(),
            audit_outcome,
            &detail,
            now,
        )
        .await;
        if let Err(ToolError::Unavailable(_)) = &outcome.result {
            // Not a tool result the model should act on: the request failed as a whole, and
            // the error layer answers it 503 with Retry-After (`errors::json_rpc_errors`).
            return Err(super::errors::unavailable());
        }
        let rendered = self
            .render_tool_result(&principal, def.spec.name, outcome.result, now)
            .await?;
        Ok(rendered.into())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let principal = principal(&ctx)?;
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let mut result = resources::list(&self.mcp.app, &principal, cursor).await?;
        if result.next_cursor.is_none() {
            // Upstreams' resources after Gatehouse's own, on the last page.
            for extras in Box::pin(self.upstream_extras(&principal)).await {
                result.resources.extend(extras.resources.iter().cloned());
            }
        }
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let principal = principal(&ctx)?;
        let mut templates = resources::templates();
        let own = templates.len();
        for extras in Box::pin(self.upstream_extras(&principal)).await {
            templates.extend(extras.templates.iter().cloned());
        }
        let shared = templates.len() == own;
        let result = ListResourceTemplatesResult::with_all_items(templates);
        // Upstreams' templates depend on the caller: then no shared cache hint.
        Ok(if is_modern(&ctx) && shared {
            result
                .with_ttl_ms(TEMPLATES_TTL_MS)
                .with_cache_scope(CacheScope::Public)
        } else {
            result
        })
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let principal = principal(&ctx)?;
        if let Some(result) =
            Box::pin(self.read_upstream_resource(&ctx, &principal, &request.uri)).await
        {
            return result.map(Into::into);
        }
        let started = Instant::now();
        let now = crate::store::now();
        // The URI's template, never its ids; the project only once the read succeeded (so
        // after the membership check).
        let parsed = ResourceUri::parse(&request.uri);
        let template = parsed.as_ref().map_or("unknown", ResourceUri::template);
        let ip = source_ip(&ctx);
        // The next page a previous read of this account offered is not counted again.
        let continued = super::quota::read_continuation(&request.uri).is_some_and(|call| {
            self.mcp
                .continuations
                .take(&principal.account_id, &call, now)
        });
        if !continued
            && let Some(refusal) = super::quota::refuse_read_over_budget(
                &self.mcp,
                &principal,
                Event::ResourceRead,
                template,
                ip.as_deref(),
                now,
            )
            .await
        {
            return Err(refusal);
        }
        let result = resources::read(&self.mcp.app, &principal, &request.uri).await;
        let outcome = match read_outcome(&result) {
            Outcome::Success if continued => super::quota::CONTINUED,
            other => other,
        };
        if !continued {
            self.mcp.quotas.refund(&principal.account_id, outcome, now);
        }
        if let Some(next) = result
            .as_ref()
            .ok()
            .and_then(super::quota::next_page_continuation)
        {
            self.mcp
                .continuations
                .offer(&principal.account_id, &next, now);
        }
        let project_id = parsed
            .as_ref()
            .filter(|_| result.is_ok())
            .and_then(ResourceUri::project_id);
        self.audit_read(
            &ctx,
            &principal,
            ReadAudit {
                event: Event::ResourceRead,
                subject: template,
                outcome,
                project_id,
                upstream: None,
                started,
                now,
            },
        )
        .await;
        result.map(Into::into)
    }

    /// The prompts this caller may use ([`prompts::list`]), paged. Cache hints for 2026-07-28
    /// are rmcp's conservative defaults (`ttlMs: 0`, `cacheScope: "private"`): the list depends
    /// on the caller's scopes and roles, which may change at any time.
    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let principal = principal(&ctx)?;
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let mut result = prompts::list(&self.mcp.app, &principal, cursor).await?;
        if result.next_cursor.is_none() {
            // Upstreams' prompts after Gatehouse's own, on the last page.
            for extras in Box::pin(self.upstream_extras(&principal)).await {
                result.prompts.extend(extras.prompts.iter().cloned());
            }
        }
        Ok(result)
    }

    /// One prompt, its arguments checked and its project resolved ([`prompts::get`]); audited.
    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let principal = principal(&ctx)?;
        if prompts::find(&request.name).is_none()
            && let Some(result) =
                Box::pin(self.get_upstream_prompt(&ctx, &principal, &request)).await
        {
            return result.map(Into::into);
        }
        let started = Instant::now();
        let now = crate::store::now();
        // An unknown name is the client's text: recorded as such, not echoed.
        let subject = prompts::find(&request.name).map_or("unknown", |p| p.name);
        let ip = source_ip(&ctx);
        if let Some(refusal) = super::quota::refuse_read_over_budget(
            &self.mcp,
            &principal,
            Event::PromptGet,
            subject,
            ip.as_deref(),
            now,
        )
        .await
        {
            return Err(refusal);
        }
        let got = prompts::get(
            &self.mcp.app,
            &principal,
            &request.name,
            request.arguments.as_ref(),
            now,
        )
        .await;
        self.mcp
            .quotas
            .refund(&principal.account_id, got.outcome, now);
        self.audit_read(
            &ctx,
            &principal,
            ReadAudit {
                event: Event::PromptGet,
                subject,
                outcome: got.outcome,
                project_id: got.project_id.as_deref(),
                upstream: None,
                started,
                now,
            },
        )
        .await;
        got.result.map(Into::into)
    }

    /// Completes `project_id` from the caller's projects ([`prompts::complete`]).
    async fn complete(
        &self,
        request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let principal = principal(&ctx)?;
        if let Some(result) = self.complete_upstream(&principal, &request).await {
            return result;
        }
        prompts::complete(&self.mcp.app, &principal, &request).await
    }
}
