//! An upstream's prompts and resources, forwarded like its tools (issue "Upstream MCP servers
//! behind Gatehouse" §2): its prompts are listed as `NAME__PROMPT`, its resources and resource
//! templates under `gatehouse://upstreams/NAME/` followed by the upstream's own URI
//! ([`crate::domain::upstream::namespaced_uri`]), after Gatehouse's own, on the last page.
//!
//! The listings are asked only of an upstream whose `initialize` answer declares the
//! capability, are cached like its tools ([`super::server::LISTING_TTL`]; a failure for
//! [`super::server::FAILURE_MEMORY`]) and are bounded: at most [`MAX_PROMPTS`] prompts and
//! [`MAX_RESOURCES`] resources and templates each, descriptions of at most
//! [`MAX_DESCRIPTION_BYTES`]; names or URIs Gatehouse cannot publish are left out and logged.
//! `prompts/get` and `resources/read` share the upstream's call slots and per-call timeout;
//! their answers are bounded by `GATEHOUSE_MAX_RESULT_BYTES` (a larger one is refused with an
//! error naming the upstream, never sent whole).

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{
    CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock, GetPromptRequestParams,
    GetPromptResult, JsonObject, ReadResourceRequestParams, ReadResourceResult, ResourceContents,
    ResultType,
};

pub use super::server::Extras;
use super::server::{ExtrasListing, UpstreamError, UpstreamServer, is_fresh};
use crate::domain::upstream::{
    MAX_DESCRIPTION_BYTES, UpstreamName, namespaced_tool, namespaced_uri,
};

/// The most prompts one upstream may list.
pub const MAX_PROMPTS: usize = 200;
/// The most resources (and, separately, resource templates) one upstream may list.
pub const MAX_RESOURCES: usize = 1000;

fn description_ok(text: Option<&str>) -> bool {
    text.is_none_or(|d| d.len() <= MAX_DESCRIPTION_BYTES)
}

/// Puts the resource URIs that `blocks` (a forwarded tool result's content, a prompt's
/// messages) carry, in resource links and embedded resources, under the upstream's prefix
/// ([`namespaced_uri`]): a client reads a resource of an upstream through Gatehouse, by that
/// URI ([`UpstreamServer::read_resource`]); the upstream's own URI means nothing to it (MCP
/// server/tools §Resource Links: links point to resources the client may read with
/// `resources/read`).
pub(super) fn namespace_blocks<'a>(
    name: &UpstreamName,
    blocks: impl IntoIterator<Item = &'a mut ContentBlock>,
) {
    for block in blocks {
        match block {
            ContentBlock::ResourceLink(link) => link.uri = namespaced_uri(name, &link.uri),
            ContentBlock::Resource(embedded) => {
                namespace_contents(name, std::slice::from_mut(&mut embedded.resource));
            }
            _ => {}
        }
    }
}

/// `contents` with each URI put back under the upstream's prefix.
fn namespace_contents(name: &UpstreamName, contents: &mut [ResourceContents]) {
    for content in contents {
        if let ResourceContents::TextResourceContents { uri, .. }
        | ResourceContents::BlobResourceContents { uri, .. } = content
        {
            *uri = namespaced_uri(name, uri);
        }
    }
}

/// A forwarded prompt get or resource read that failed: the error the client is answered with,
/// and the outcome it is audited and counted with when Gatehouse knows it (busy, cooling down,
/// timed out, failed); `None` when the upstream answered the error itself, whose code tells
/// (not found, invalid parameters, or another upstream error).
#[derive(Debug)]
pub struct ForwardError {
    /// The JSON-RPC error the client gets.
    pub error: rmcp::ErrorData,
    /// The audit outcome, when not the upstream's own error's.
    pub outcome: Option<crate::domain::audit::Outcome>,
}

impl ForwardError {
    fn new(outcome: crate::domain::audit::Outcome, text: String) -> ForwardError {
        ForwardError {
            error: rmcp::ErrorData::internal_error(text, None),
            outcome: Some(outcome),
        }
    }
}

impl UpstreamServer {
    /// The upstream's prompts and resources, from the cache while it is fresh.
    ///
    /// Errors: the upstream could not be reached or listed (remembered for
    /// [`super::server::FAILURE_MEMORY`]).
    ///
    /// Only the first listing is waited for; one past its time is answered at once while one
    /// task lists again in the background, as for tools ([`UpstreamServer::tools_as`]).
    pub async fn extras(self: &Arc<Self>) -> Result<Arc<Extras>, UpstreamError> {
        let mut listing = self.extras_listing.lock().await;
        if let Some(l) = listing.as_ref() {
            let fresh = is_fresh(l.at, l.result.is_ok(), &self.changed.extras);
            if !fresh {
                self.refresh_in_background(
                    |s| &s.refreshing_extras,
                    |s| async move {
                        let result = s.list_extras_bounded().await;
                        *s.extras_listing.lock().await = Some(ExtrasListing {
                            at: Instant::now(),
                            result,
                        });
                    },
                );
            }
            return l.result.clone();
        }
        let result = self.list_extras_bounded().await;
        *listing = Some(ExtrasListing {
            at: Instant::now(),
            result: result.clone(),
        });
        result
    }

    async fn list_extras_bounded(&self) -> Result<Arc<Extras>, UpstreamError> {
        tokio::time::timeout(self.list_timeout(), self.list_extras())
            .await
            .unwrap_or_else(|_| {
                Err(UpstreamError(format!(
                    "upstream {} did not list its prompts and resources in time",
                    self.name()
                )))
            })
    }

    async fn list_extras(&self) -> Result<Arc<Extras>, UpstreamError> {
        let client = self.connect().await?;
        // As for tools: a change announced from here on marks the listing again.
        self.changed
            .extras
            .store(false, std::sync::atomic::Ordering::Release);
        let peer = client.peer();
        let capabilities = peer
            .peer_info()
            .map(|info| info.capabilities.clone())
            .unwrap_or_default();
        let name = self.upstream_name();
        let fail = |what: &str, e: rmcp::ServiceError| {
            UpstreamError(format!(
                "upstream {} could not list its {what}: {}",
                self.name(),
                super::failure::request(&e)
            ))
        };
        let mut extras = Extras::default();
        if capabilities.prompts.is_some() {
            let prompts = peer
                .list_all_prompts()
                .await
                .map_err(|e| fail("prompts", e))?;
            for mut prompt in prompts.into_iter().take(MAX_PROMPTS) {
                let Some(public) = namespaced_tool(name, &prompt.name) else {
                    tracing::warn!(upstream = self.name(), prompt = %prompt.name.escape_debug(), "upstream prompt refused: its name is not [A-Za-z0-9_-] within 64 characters once namespaced");
                    continue;
                };
                if !description_ok(prompt.description.as_deref()) {
                    tracing::warn!(upstream = self.name(), prompt = %prompt.name, "upstream prompt refused: its description is over {MAX_DESCRIPTION_BYTES} bytes");
                    continue;
                }
                prompt.name = public;
                extras.prompts.push(prompt);
            }
            extras.prompts.sort_by(|a, b| a.name.cmp(&b.name));
        }
        if capabilities.resources.is_some() {
            let resources = peer
                .list_all_resources()
                .await
                .map_err(|e| fail("resources", e))?;
            for mut resource in resources.into_iter().take(MAX_RESOURCES) {
                if !description_ok(resource.description.as_deref()) {
                    tracing::warn!(
                        upstream = self.name(),
                        "upstream resource refused: its description is over {MAX_DESCRIPTION_BYTES} bytes"
                    );
                    continue;
                }
                resource.uri = namespaced_uri(name, &resource.uri);
                extras.resources.push(resource);
            }
            extras.resources.sort_by(|a, b| a.uri.cmp(&b.uri));
            let templates = peer
                .list_all_resource_templates()
                .await
                .map_err(|e| fail("resource templates", e))?;
            for mut template in templates.into_iter().take(MAX_RESOURCES) {
                if !description_ok(template.description.as_deref()) {
                    continue;
                }
                template.uri_template = namespaced_uri(name, &template.uri_template);
                extras.templates.push(template);
            }
            extras
                .templates
                .sort_by(|a, b| a.uri_template.cmp(&b.uri_template));
        }
        Ok(Arc::new(extras))
    }

    /// `prompts/get` of the upstream's prompt `prompt` (its own name), within a call slot and
    /// the per-call timeout; the answer bounded by `GATEHOUSE_MAX_RESULT_BYTES`.
    ///
    /// Errors: the upstream's own JSON-RPC error (its code kept, the message naming the
    /// upstream), or a failure naming it (busy, timeout, unreachable, too large).
    pub async fn get_prompt(
        &self,
        prompt: &str,
        arguments: Option<JsonObject>,
    ) -> Result<GetPromptResult, ForwardError> {
        let mut params = GetPromptRequestParams::new(prompt.to_string());
        params.arguments = arguments;
        let mut result = self
            .forward(|client| async move { client.peer().get_prompt(params).await })
            .await?;
        namespace_blocks(
            self.upstream_name(),
            result.messages.iter_mut().map(|m| &mut m.content),
        );
        // A 2026-07-28 server sends it in every result; an upstream of an older revision does
        // not (rmcp leaves it out again for peers of older revisions).
        result.result_type.get_or_insert(ResultType::COMPLETE);
        self.within_bound(result)
    }

    /// `resources/read` of the upstream's own URI `uri`, within a call slot and the per-call
    /// timeout; the contents' URIs put back under the upstream's prefix, the answer bounded by
    /// `GATEHOUSE_MAX_RESULT_BYTES`.
    ///
    /// Errors: as [`UpstreamServer::get_prompt`].
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, ForwardError> {
        let params = ReadResourceRequestParams::new(uri.to_string());
        let mut result = self
            .forward(|client| async move { client.peer().read_resource(params).await })
            .await?;
        namespace_contents(self.upstream_name(), &mut result.contents);
        result.result_type.get_or_insert(ResultType::COMPLETE);
        self.within_bound(result)
    }

    /// `completion/complete` of an argument of the upstream's prompt or resource template,
    /// `request` naming it by the upstream's own name or URI, within a call slot and the
    /// per-call timeout: the upstream's values, at most [`CompletionInfo::MAX_VALUES`] (MCP
    /// server/utilities/completion), the answer bounded by `GATEHOUSE_MAX_RESULT_BYTES`. An
    /// upstream whose `initialize` answer declares no `completions` capability is not asked:
    /// it completes nothing (an empty list), as the spec lets a server answer.
    ///
    /// Errors: as [`UpstreamServer::get_prompt`].
    pub async fn complete(
        &self,
        request: CompleteRequestParams,
    ) -> Result<CompleteResult, ForwardError> {
        let mut result = self
            .forward(|client| async move {
                let declared = client
                    .peer()
                    .peer_info()
                    .is_some_and(|info| info.capabilities.completions.is_some());
                if !declared {
                    return Ok(CompleteResult::new(CompletionInfo::default()));
                }
                client.peer().complete(request).await
            })
            .await?;
        let values = &mut result.completion.values;
        if values.len() > CompletionInfo::MAX_VALUES {
            values.truncate(CompletionInfo::MAX_VALUES);
            result.completion.has_more = Some(true);
        }
        result.result_type.get_or_insert(ResultType::COMPLETE);
        self.within_bound(result)
    }

    fn within_bound<T: serde::Serialize>(&self, result: T) -> Result<T, ForwardError> {
        let max = self.app().config.max_result_bytes;
        let size = serde_json::to_vec(&result).map_or(usize::MAX, |v| v.len());
        if size > max {
            return Err(ForwardError::new(
                crate::domain::audit::Outcome::UpstreamError,
                format!(
                    "The upstream server {} answered {size} bytes, more than the {max} Gatehouse passes on.",
                    self.name()
                ),
            ));
        }
        Ok(result)
    }

    /// Runs one request on the upstream within a call slot and the per-call timeout.
    async fn forward<T, F, Fut>(&self, request: F) -> Result<T, ForwardError>
    where
        F: FnOnce(Arc<super::server::Client>) -> Fut,
        Fut: Future<Output = Result<T, rmcp::ServiceError>>,
    {
        use crate::domain::audit::Outcome;
        if let Some(text) = self.cooling_down() {
            return Err(ForwardError::new(Outcome::CoolingDown, text));
        }
        let Some(_permit) = self.call_slot() else {
            return Err(ForwardError::new(
                Outcome::Busy,
                format!(
                    "The upstream server {} is busy; retry shortly.",
                    self.name()
                ),
            ));
        };
        let timeout = self.call_timeout();
        // Why the request failed when the connection did (none when the upstream answered).
        let attempt = async {
            let client = self.connect().await.map_err(|e| {
                (
                    Some(format!("a request failed: {}", e.0)),
                    ForwardError::new(Outcome::UpstreamError, e.0),
                )
            })?;
            request(client).await.map_err(|e| match e {
                rmcp::ServiceError::McpError(error) => (
                    None,
                    ForwardError {
                        error: rmcp::ErrorData::new(
                            error.code,
                            format!(
                                "upstream {}: {}",
                                self.name(),
                                super::failure::upstream_text(&error.message)
                            ),
                            None,
                        ),
                        outcome: None,
                    },
                ),
                other => {
                    let why = super::failure::request(&other);
                    (
                        super::failure::unreachable(&other)
                            .then(|| format!("a request failed: {why}")),
                        ForwardError::new(
                            Outcome::UpstreamError,
                            format!("The upstream server {} failed: {why}", self.name()),
                        ),
                    )
                }
            })
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(Ok(result)) => {
                self.after_request(None).await;
                Ok(result)
            }
            Ok(Err((failed, error))) => {
                self.after_request(failed).await;
                Err(error)
            }
            Err(_) => {
                let text = self.timed_out("request", timeout);
                self.after_request(Some(format!(
                    "a request got no answer within {} ms",
                    timeout.as_millis()
                )))
                .await;
                Err(ForwardError::new(Outcome::Timeout, text))
            }
        }
    }
}
