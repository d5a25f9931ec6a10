//! `export_project` (runs in the background, answers a job receipt) and `get_job`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::projects::ProjectInput;
use crate::domain::notes::{JobKind, ResourceUri};
use crate::domain::scope::Scope;
use crate::mcp::args::Id;
use crate::mcp::catalog::{ProjectAccess, ToolCtx, ToolDef, ToolError, ToolOk, ToolSpec};
use crate::mcp::tool_meta::CostClass;
use crate::mcp::views::JobView;

/// What a background tool answers at once.
#[derive(Debug, Serialize, JsonSchema)]
pub struct JobReceipt {
    /// What the job does, e.g. `export`.
    pub kind: String,
    /// Job id: pass it as `job_id` to `get_job`.
    pub id: String,
    /// `pending`, `running`, `completed` or `failed`.
    pub status: String,
    /// MCP resource URI of the job; reading it returns the finished document.
    pub resource: String,
}

/// `export_project`.
pub fn export_project() -> ToolDef {
    ToolDef::new(
        ToolSpec {
            name: "export_project",
            title: "Export a project",
            description: "Starts an export of every note of a project as one JSON document. It runs in the background and answers at once with a job receipt; call get_job with its id until the status is completed, then read the job's resource for the document.",
            scope: Scope::McpRead,
            read_only: true,
            idempotent: false,
            open_world: false,
            background: true,
            project: ProjectAccess::Read,
            cost: CostClass::Expensive,
            version: 1,
        },
        |ctx: ToolCtx, _input: ProjectInput| async move {
            let project = ctx.project();
            let store = &ctx.state.store;
            let job = store
                .create_job(
                    JobKind::Export,
                    &project.project_id,
                    &ctx.principal.account_id,
                    ctx.principal.client_id.as_deref(),
                    ctx.now,
                )
                .await?;
            let runner = store.clone();
            let job_id = job.id.clone();
            tokio::spawn(async move {
                if let Err(e) = runner.run_export_job(&job_id).await {
                    tracing::error!(job_id, error = %e, "export job could not be recorded");
                }
            });
            let resource = ResourceUri::job(job.kind, &job.id);
            let receipt = JobReceipt {
                kind: job.kind.to_string(),
                id: job.id.clone(),
                status: job.status.to_string(),
                resource: resource.clone(),
            };
            Ok::<_, ToolError>(
                ToolOk::new(receipt).link(resource, format!("Export of {}", project.name)),
            )
        },
    )
}

/// Input of `get_job`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetJobInput {
    /// The job id from a job receipt.
    pub job_id: Id,
}

/// `get_job`.
pub fn get_job() -> ToolDef {
    ToolDef::new(
        ToolSpec::lookup(
            "get_job",
            "Check a background job",
            "Returns the status of a background job started by another tool (such as export_project): pending, running, completed or failed. When completed, read the job's resource to get its document.",
            ProjectAccess::None,
        ),
        |ctx: ToolCtx, input: GetJobInput| async move {
            let store = &ctx.state.store;
            let not_found = || {
                ToolError::NotFound(format!(
                    "No job with id \"{}\" is available to you.",
                    input.job_id.as_str()
                ))
            };
            let job = store
                .job(input.job_id.as_str())
                .await?
                .ok_or_else(not_found)?;
            // Visible to members of the job's project, like the project itself.
            store
                .reachable_membership(&ctx.principal, &job.project_id)
                .await?
                .ok_or_else(not_found)?;
            let view = JobView::from(&job);
            let resource = view.resource.clone();
            Ok(ToolOk::new(view).link(resource, format!("{} job", job.kind)))
        },
    )
}
