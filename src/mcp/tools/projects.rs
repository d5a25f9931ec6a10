//! `list_projects` and `get_project`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::NoInput;
use crate::domain::notes::ResourceUri;
use crate::mcp::args::Id;
use crate::mcp::catalog::{ProjectAccess, ToolCtx, ToolDef, ToolError, ToolOk, ToolSpec};
use crate::mcp::views::ProjectView;
use crate::store::projects::ProjectMembership;

/// One project the caller can use.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ProjectSummary {
    /// Project id: pass it as `project_id` to the other tools.
    pub id: String,
    /// Project name.
    pub name: String,
    /// The caller's role: `read` (may read notes) or `write` (may also create and change them).
    pub role: String,
    /// MCP resource URI of the project.
    pub uri: String,
}

impl ProjectSummary {
    fn from_membership(m: &ProjectMembership) -> Self {
        ProjectSummary {
            id: m.project_id.clone(),
            name: m.name.clone(),
            role: m.role.as_str().to_string(),
            uri: ResourceUri::project(&m.project_id),
        }
    }
}

/// Output of `list_projects`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ProjectList {
    /// The caller's active projects, oldest first.
    pub projects: Vec<ProjectSummary>,
}

/// Input naming one project.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProjectInput {
    /// The project id, from `list_projects`.
    pub project_id: Id,
}

/// `list_projects`.
pub fn list_projects() -> ToolDef {
    ToolDef::new(
        ToolSpec::lookup(
            "list_projects",
            "List projects",
            "Lists the projects the signed-in person can use, with their ids and the person's role in each (read or write). Call this first: every other tool needs a project_id from here. If the list is empty, the person has no project yet and no other tool is offered: a project is made by a Gatehouse administrator with `gatehouse project add NAME --owner EMAIL`, or a project's owner adds the person as a member on the project's page in the Gatehouse console; the notes tools appear once a project exists.",
            ProjectAccess::None,
        ),
        |ctx: ToolCtx, _input: NoInput| async move {
            let memberships = ctx.state.store.reachable_projects(&ctx.principal).await?;
            let mut ok = ToolOk::new(ProjectList {
                projects: memberships
                    .iter()
                    .map(ProjectSummary::from_membership)
                    .collect(),
            });
            for m in &memberships {
                ok = ok.link(ResourceUri::project(&m.project_id), m.name.clone());
            }
            Ok::<_, ToolError>(ok)
        },
    )
}

/// `get_project`.
pub fn get_project() -> ToolDef {
    ToolDef::new(
        ToolSpec::lookup(
            "get_project",
            "Get a project",
            "Returns one project: its name, the person's role, how many notes it holds, and a console_url where the person can open it in a browser.",
            ProjectAccess::Read,
        ),
        |ctx: ToolCtx, _input: ProjectInput| async move {
            let project = ctx.project();
            let count = ctx.state.store.count_notes(&project.project_id).await?;
            let view = ProjectView::new(&ctx.state.config, project, count);
            let uri = view.uri.clone();
            let name = view.name.clone();
            Ok::<_, ToolError>(ToolOk::new(view).link(uri, name))
        },
    )
}
