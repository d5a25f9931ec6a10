//! Per-person upstreams in the registry (`upstream add --per-person-oauth`,
//! [`crate::upstream_oauth`]): they are listed and called with the caller's own token from the
//! vault, never with a shared credential. A person who has not connected sees the listing
//! last seen on this instance (definitions are the upstream's, the same for everyone, and
//! pinned like any upstream's), and a call answers with the link to connect.

use std::sync::Arc;

use super::Upstreams;
use super::server::{UpstreamError, UpstreamServer, UpstreamTool};
use crate::domain::upstream::split_namespaced;
use crate::upstream_oauth::vault::{self, Access};

impl Upstreams {
    /// The enabled per-person upstream a catalog name `NAME__TOOL` belongs to, whatever the
    /// tool (a person who has not connected may not have its listing yet).
    pub async fn per_person_server(&self, name: &str) -> Option<Arc<UpstreamServer>> {
        let (upstream, _) = split_namespaced(name)?;
        let snapshot = self.loaded().await;
        snapshot
            .servers
            .iter()
            .find(|s| s.name() == upstream.as_str() && s.is_per_person())
            .cloned()
    }

    /// The listed tool `name` of the per-person upstream `server`, listing with `token` (the
    /// caller's own) when this instance's listing is not fresh.
    pub async fn per_person_tool(
        &self,
        server: &Arc<UpstreamServer>,
        name: &str,
        token: &str,
    ) -> Result<Option<UpstreamTool>, UpstreamError> {
        let snapshot = self.loaded().await;
        let tools = server.tools_as(Some(token)).await?;
        Ok(tools
            .iter()
            .find(|t| t.tool.name == name && server.is_listed(t, &snapshot.approved))
            .cloned())
    }

    /// The tools of `server` to list for `account_id`: any upstream's as usual; a per-person
    /// one's from this instance's listing when there is one, else listed with the person's
    /// token. `None`: nothing to list and nothing went wrong (a person who has not connected,
    /// before anyone's listing reached this instance).
    pub(super) async fn tools_for(
        &self,
        server: &Arc<UpstreamServer>,
        account_id: &str,
    ) -> Option<Result<Arc<Vec<UpstreamTool>>, UpstreamError>> {
        if !server.is_per_person() {
            return Some(server.tools().await);
        }
        if let Ok(tools) = server.tools_as(None).await {
            return Some(Ok(tools));
        }
        match vault::access_token(&self.app, account_id, server.name()).await {
            Ok(Access::Token(token)) => Some(server.tools_as(Some(&token)).await),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(upstream = server.name(), error = %e, "could not read a connection for tools/list");
                None
            }
        }
    }
}
