//! The tool catalog: one registry of tool definitions (MCP `server/tools`).
//!
//! Each tool declares its name, title, a description written for the model, typed input and
//! output (JSON Schemas generated from the Rust types), annotations, the scope it needs,
//! whether it runs in the background, and whether it works on one project. The catalog:
//!
//! - refuses, when it is built at start, a tool whose name or metadata is destructive
//!   (delete, remove, cancel, undeploy, destroy, drop, purge): Gatehouse exposes no tool that
//!   loses data, so `destructiveHint` is always `false`;
//! - resolves the `project_id` argument against the caller's memberships and the credential's
//!   reach before the handler runs, so another account's project (or, for a project key,
//!   any other project) answers exactly like one that does not exist;
//! - keeps registration order, which is the stable order of `tools/list`.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::handler::server::common::{schema_for_input, schema_for_output};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::args::parse_arguments;
use super::auth::Principal;
use super::tool_meta::{CostClass, ToolMeta};
use crate::domain::account::Role;
use crate::domain::audit::Outcome;
use crate::domain::scope::{Scope, ScopeSet};
use crate::state::AppState;
use crate::store::StoreError;
use crate::store::projects::ProjectMembership;

/// Words that make a tool destructive wherever they appear in its name, title or description.
/// A word matches when it starts with one of these stems ("deletes", "removal", "dropped"…).
const DESTRUCTIVE_STEMS: &[&str] = &[
    "delet", "remov", "cancel", "undeploy", "destroy", "destruct", "drop", "purg",
];

/// Whether a tool works on one project named by its `project_id` argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectAccess {
    /// The tool takes no `project_id`.
    None,
    /// Any member may use it.
    Read,
    /// Only a member with the write role may use it.
    Write,
}

/// What a tool is, apart from its types and handler.
#[derive(Debug, Clone, Copy)]
pub struct ToolSpec {
    /// Unique name, `[A-Za-z0-9_.-]{1,64}`.
    pub name: &'static str,
    /// Human-readable name.
    pub title: &'static str,
    /// What it does and when to use it, written for the model.
    pub description: &'static str,
    /// The scope a token needs to call it (`mcp:write` implies `mcp:read`).
    pub scope: Scope,
    /// `readOnlyHint`: it changes nothing.
    pub read_only: bool,
    /// `idempotentHint`: repeating a call with the same arguments changes nothing more.
    pub idempotent: bool,
    /// `openWorldHint`: it reaches outside Gatehouse.
    pub open_world: bool,
    /// It returns a job receipt at once and finishes in the background.
    pub background: bool,
    /// Whether it works on one project, and with which role.
    pub project: ProjectAccess,
    /// What a call costs the server (published in `_meta`, [`super::tool_meta`]).
    pub cost: CostClass,
    /// The definition's version, published in `_meta`: raised by one whenever the input or
    /// output schema changes (the snapshot test of the published definitions fails otherwise).
    pub version: u32,
}

impl ToolSpec {
    /// A tool that only looks something up and answers at once: `mcp:read`, `readOnlyHint`
    /// and `idempotentHint` true, `openWorldHint` false, nothing left in the background.
    pub const fn lookup(
        name: &'static str,
        title: &'static str,
        description: &'static str,
        project: ProjectAccess,
    ) -> ToolSpec {
        ToolSpec {
            name,
            title,
            description,
            scope: Scope::McpRead,
            read_only: true,
            idempotent: true,
            open_world: false,
            background: false,
            project,
            cost: CostClass::Cheap,
            version: 1,
        }
    }

    /// The same tool with cost class `cost`.
    pub const fn cost(mut self, cost: CostClass) -> ToolSpec {
        self.cost = cost;
        self
    }

    /// The same tool at version `version`.
    pub const fn version(mut self, version: u32) -> ToolSpec {
        self.version = version;
        self
    }

    /// What the tool's `_meta` says: its scope, cost class, background flag and version.
    pub fn meta(&self) -> ToolMeta {
        ToolMeta {
            scopes: vec![self.scope],
            cost: self.cost,
            background: self.background,
            version: self.version.to_string(),
        }
    }
}

/// What a handler gets besides its typed input.
#[derive(Clone)]
pub struct ToolCtx {
    /// Configuration and storage.
    pub state: AppState,
    /// Who calls.
    pub principal: Arc<Principal>,
    /// The project named by `project_id`, already checked against the caller's memberships
    /// (`Some` exactly for tools whose [`ToolSpec::project`] is not `None`).
    pub project: Option<ProjectMembership>,
    /// The clock, read once for this call (Unix seconds).
    pub now: i64,
}

impl ToolCtx {
    /// The resolved project. Panics if the tool did not declare [`ProjectAccess`]: that is a
    /// programming error caught by the tool's tests.
    #[allow(
        clippy::expect_used,
        reason = "a tool without ProjectAccess never asks; each tool's tests call it"
    )]
    pub fn project(&self) -> &ProjectMembership {
        self.project
            .as_ref()
            .expect("tool declared ProjectAccess::Read or ::Write")
    }
}

/// A link to a Gatehouse resource, sent as a `resource_link` content block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// `gatehouse://…`
    pub uri: String,
    /// Name shown to the person.
    pub name: String,
}

/// How a result too large for one answer is continued (issue "The rest of the MCP surface",
/// part 4): the result's list `list` (a top-level member) can be cut after any item, and
/// `resume(kept)` is the opaque cursor that makes the same tool, called again with the same
/// arguments plus `cursor`, answer the items after the first `kept` of this page.
#[derive(Clone)]
pub struct Paging {
    /// The top-level member holding the list, e.g. `results`.
    pub list: &'static str,
    /// The cursor for the items after the first `kept` of this page.
    pub resume: Arc<dyn Fn(usize) -> String + Send + Sync>,
}

impl std::fmt::Debug for Paging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Paging").field("list", &self.list).finish()
    }
}

/// A handler's successful answer.
#[derive(Debug)]
pub struct ToolOk<O> {
    /// The structured result (matches the output schema).
    pub value: O,
    /// Resources the result names.
    pub links: Vec<Link>,
    /// How a cut result is continued, for tools that take a `cursor`.
    pub paging: Option<Paging>,
}

impl<O> ToolOk<O> {
    /// An answer without links.
    pub fn new(value: O) -> Self {
        ToolOk {
            value,
            links: Vec::new(),
            paging: None,
        }
    }

    /// Makes the list `list` resumable: a cut answer keeps whole items of it and carries
    /// `nextCursor` = `resume(kept)` ([`Paging`]).
    pub fn paged(
        mut self,
        list: &'static str,
        resume: impl Fn(usize) -> String + Send + Sync + 'static,
    ) -> Self {
        self.paging = Some(Paging {
            list,
            resume: Arc::new(resume),
        });
        self
    }

    /// Adds a link.
    pub fn link(mut self, uri: String, name: impl Into<String>) -> Self {
        self.links.push(Link {
            uri,
            name: name.into(),
        });
        self
    }
}

/// What a caller is told when the database cannot be used right now.
pub const UNAVAILABLE_MESSAGE: &str =
    "Gatehouse cannot use its database right now; try again in a few seconds.";

/// An expected failure, answered as an `isError: true` result the model can act on.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not fit the input schema; the message names the field.
    #[error("{0}")]
    InvalidArguments(String),
    /// The project, note or job does not exist or is not visible to the caller.
    #[error("{0}")]
    NotFound(String),
    /// The caller may see but not do this (e.g. a read-only member writing).
    #[error("{0}")]
    Forbidden(String),
    /// Something failed inside Gatehouse; logged, never shown.
    #[error("internal error: {0}")]
    Internal(String),
    /// The database is busy, out of reach, full or read-only ([`StoreError::is_unavailable`]):
    /// answered as a JSON-RPC error with HTTP `503` and `Retry-After`, like the other routes.
    #[error("database unavailable: {0}")]
    Unavailable(String),
}

impl From<StoreError> for ToolError {
    fn from(e: StoreError) -> ToolError {
        if e.is_unavailable() {
            return ToolError::Unavailable(e.to_string());
        }
        ToolError::Internal(e.to_string())
    }
}

impl ToolError {
    /// The audit outcome of this failure.
    pub fn outcome(&self) -> Outcome {
        match self {
            ToolError::InvalidArguments(_) => Outcome::InvalidArguments,
            ToolError::NotFound(_) => Outcome::NotFound,
            ToolError::Forbidden(_) => Outcome::Forbidden,
            ToolError::Internal(_) => Outcome::Error,
            ToolError::Unavailable(_) => Outcome::Unavailable,
        }
    }

    /// What the model is told.
    pub fn message(&self) -> String {
        match self {
            ToolError::Internal(_) => {
                "Gatehouse could not complete this call because of an internal error. Try again in a moment."
                    .to_string()
            }
            ToolError::Unavailable(_) => UNAVAILABLE_MESSAGE.to_string(),
            other => other.to_string(),
        }
    }
}

/// What a call produced, with the output type erased.
#[derive(Debug)]
pub struct Produced {
    /// The structured result.
    pub value: serde_json::Value,
    /// Resources it names.
    pub links: Vec<Link>,
    /// How it is continued when cut, and the tool's name for the note.
    pub paging: Option<(Paging, &'static str)>,
}

/// The outcome of one call and the project it worked on (for the audit log).
pub struct CallOutcome {
    /// The project resolved from `project_id`, if the call got that far.
    pub project_id: Option<String>,
    /// The answer.
    pub result: Result<Produced, ToolError>,
}

type Handler =
    Arc<dyn Fn(ToolCtx, Option<JsonObject>) -> BoxFuture<'static, CallOutcome> + Send + Sync>;

/// One registered tool.
#[derive(Clone)]
pub struct ToolDef {
    /// Its declaration.
    pub spec: ToolSpec,
    tool: Tool,
    handler: Handler,
}

impl std::fmt::Debug for ToolDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolDef").field("spec", &self.spec).finish()
    }
}

/// The not-found answer for a project: the same whether it does not exist or belongs to
/// someone else.
pub fn project_not_found(project_id: &str) -> ToolError {
    ToolError::NotFound(format!(
        "No project with id \"{project_id}\" is available to you. Call list_projects to see the projects you can use."
    ))
}

async fn resolve_project(
    ctx: &ToolCtx,
    project_id: Option<&str>,
    access: ProjectAccess,
) -> Result<ProjectMembership, ToolError> {
    let Some(project_id) = project_id else {
        return Err(ToolError::InvalidArguments(
            "Invalid arguments: missing field `project_id`.".to_string(),
        ));
    };
    let membership = ctx
        .state
        .store
        .reachable_membership(&ctx.principal, project_id)
        .await?
        .ok_or_else(|| project_not_found(project_id))?;
    if access == ProjectAccess::Write && membership.role != Role::Write {
        return Err(ToolError::Forbidden(format!(
            "You can read project \"{}\" but not change it: your role there is read-only. Ask a project owner for the write role.",
            membership.name
        )));
    }
    Ok(membership)
}

impl ToolDef {
    /// Defines a tool from its declaration and a handler taking the typed input `I` and
    /// answering `O`. Input and output schemas are generated from the types.
    ///
    /// Panics if `I`'s schema is not an object: a programming error found by the catalog test.
    pub fn new<I, O, F, Fut>(spec: ToolSpec, handler: F) -> ToolDef
    where
        I: DeserializeOwned + JsonSchema + Send + 'static,
        O: Serialize + JsonSchema + 'static,
        F: Fn(ToolCtx, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOk<O>, ToolError>> + Send + 'static,
    {
        let input_schema = match schema_for_input::<I>() {
            Ok(schema) => schema,
            Err(e) => panic!("tool {}: {e}", spec.name),
        };
        let mut input_schema = (*input_schema).clone();
        standard_formats(&mut input_schema);
        let mut output_schema = (*schema_for_output::<O>()).clone();
        standard_formats(&mut output_schema);
        for (which, schema) in [("input", &mut input_schema), ("output", &mut output_schema)] {
            if let Err(e) = without_null(schema, which) {
                panic!("tool {}: {e}", spec.name);
            }
        }
        let mut tool = Tool::new(spec.name, spec.description, Arc::new(input_schema));
        tool.title = Some(spec.title.to_string());
        tool.output_schema = Some(Arc::new(output_schema));
        tool.annotations = Some(
            ToolAnnotations::with_title(spec.title)
                .read_only(spec.read_only)
                .destructive(false)
                .idempotent(spec.idempotent)
                .open_world(spec.open_world),
        );
        tool.meta = Some(spec.meta().to_meta());
        let handler = Arc::new(handler);
        let access = spec.project;
        let name = spec.name;
        let erased: Handler = Arc::new(move |mut ctx: ToolCtx, arguments: Option<JsonObject>| {
            let handler = handler.clone();
            Box::pin(async move {
                let project_id = arguments
                    .as_ref()
                    .and_then(|a| a.get("project_id"))
                    .and_then(|v| v.as_str())
                    .map(str::to_owned);
                let input = match parse_arguments::<I>(arguments) {
                    Ok(input) => input,
                    Err(message) => {
                        return CallOutcome {
                            project_id: None,
                            result: Err(ToolError::InvalidArguments(message)),
                        };
                    }
                };
                if access != ProjectAccess::None {
                    match resolve_project(&ctx, project_id.as_deref(), access).await {
                        Ok(membership) => ctx.project = Some(membership),
                        Err(e) => {
                            return CallOutcome {
                                project_id: None,
                                result: Err(e),
                            };
                        }
                    }
                }
                let resolved = ctx.project.as_ref().map(|p| p.project_id.clone());
                let result = handler(ctx, input).await.and_then(|ok| {
                    let value = serde_json::to_value(&ok.value)
                        .map_err(|e| ToolError::Internal(format!("serialize result: {e}")))?;
                    Ok(Produced {
                        value,
                        links: ok.links,
                        paging: ok.paging.map(|p| (p, name)),
                    })
                });
                CallOutcome {
                    project_id: resolved,
                    result,
                }
            })
        });
        ToolDef {
            spec,
            tool,
            handler: erased,
        }
    }

    /// The MCP description of this tool (`tools/list`).
    pub fn tool(&self) -> &Tool {
        &self.tool
    }

    /// Runs the tool: parse and bound the arguments, resolve the project, call the handler.
    pub async fn call(&self, ctx: ToolCtx, arguments: Option<JsonObject>) -> CallOutcome {
        (self.handler)(ctx, arguments).await
    }
}

/// `format` values a schema may keep: JSON Schema 2020-12 (Validation §7.3) and the
/// `int32`/`int64` validators widely know.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
    "int32",
    "int64",
];

/// Removes every `format` outside [`STANDARD_FORMATS`] from a generated schema (schemars
/// writes `uint32`, `uint64`, `uint`, `double`… for Rust number types; validators such as the
/// TypeScript SDK's warn about them). An unsigned format leaves `"minimum": 0` behind, so the
/// bound it carried is kept. Member names under `properties` and values under `const`,
/// `enum`, `default` and `examples` are left alone.
fn standard_formats(schema: &mut JsonObject) {
    if let Some(format) = schema.get("format").and_then(|f| f.as_str())
        && !STANDARD_FORMATS.contains(&format)
    {
        if format.starts_with("uint") && !schema.contains_key("minimum") {
            schema.insert("minimum".to_string(), serde_json::Value::from(0));
        }
        schema.remove("format");
    }
    for (key, value) in schema.iter_mut() {
        match key.as_str() {
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                if let Some(members) = value.as_object_mut() {
                    members.values_mut().for_each(standard_formats_in);
                }
            }
            "const" | "enum" | "default" | "examples" | "required" | "format" => {}
            _ => standard_formats_in(value),
        }
    }
}

fn standard_formats_in(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => standard_formats(map),
        serde_json::Value::Array(items) => items.iter_mut().for_each(standard_formats_in),
        _ => {}
    }
}

/// Why the catalog refused its tools.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// A tool that could lose data; Gatehouse registers none.
    #[error(
        "tool \"{tool}\" is destructive (\"{word}\" in its {field}); Gatehouse registers no destructive tool"
    )]
    Destructive {
        /// The tool's name.
        tool: String,
        /// Where the word is: name, title or description.
        field: &'static str,
        /// The destructive word.
        word: String,
    },
    /// Two tools with one name.
    #[error("tool \"{0}\" is registered twice")]
    Duplicate(String),
    /// A name clients cannot use.
    #[error("tool name \"{0}\" must be 1-64 characters of letters, digits, '_', '-' and '.'")]
    BadName(String),
    /// A definition that breaks one of the catalog's contract rules (docs/adding-a-tool.md):
    /// an input that takes unknown members, an unbounded string, list or number, hints that
    /// contradict the scope, a background tool that does not answer a job receipt, or a
    /// `project_id` argument that does not match the declared project access.
    #[error("tool \"{tool}\": {rule}")]
    Contract {
        /// The tool's name.
        tool: String,
        /// The rule it breaks and where.
        rule: String,
    },
}

/// The members of a job receipt, which a background tool must answer (SPEC: `{kind, id,
/// status, resource}`).
pub const RECEIPT_MEMBERS: [&str; 4] = ["kind", "id", "status", "resource"];

/// Where `schema` (an input schema) accepts something unbounded: a string without
/// `maxLength` (and no `enum`/`const`), an array without `maxItems`, a number without
/// `maximum`, or an object that takes unknown members. Walks every subschema, `$defs`
/// included.
fn unbounded(schema: &serde_json::Value, at: &str, found: &mut Vec<String>) {
    use serde_json::Value;
    match schema {
        Value::Object(map) => {
            let closed = map.contains_key("enum") || map.contains_key("const");
            let has = |k: &str| map.contains_key(k);
            match map.get("type").and_then(Value::as_str) {
                Some("string") if !closed && !has("maxLength") => {
                    found.push(format!("{at}: a string without maxLength"));
                }
                Some("array") if !has("maxItems") => {
                    found.push(format!("{at}: an array without maxItems"));
                }
                Some("integer" | "number") if !closed && !has("maximum") => {
                    found.push(format!("{at}: a number without maximum"));
                }
                Some("object") if map.get("additionalProperties") != Some(&Value::Bool(false)) => {
                    found.push(format!(
                        "{at}: an object that takes unknown members (deny_unknown_fields)"
                    ));
                }
                _ => {}
            }
            for (key, value) in map {
                match key.as_str() {
                    "properties" | "$defs" | "definitions" | "patternProperties" => {
                        if let Some(members) = value.as_object() {
                            for (name, sub) in members {
                                unbounded(sub, &format!("{at}/{key}/{name}"), found);
                            }
                        }
                    }
                    "const" | "enum" | "default" | "examples" | "required" => {}
                    _ => unbounded(value, &format!("{at}/{key}"), found),
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                unbounded(item, &format!("{at}/{i}"), found);
            }
        }
        _ => {}
    }
}

/// The members `schema` requires at its top.
fn required(schema: &JsonObject) -> Vec<&str> {
    schema
        .get("required")
        .and_then(|r| r.as_array())
        .map(|r| r.iter().filter_map(|n| n.as_str()).collect())
        .unwrap_or_default()
}

impl ToolDef {
    /// The catalog's contract rules for one definition (docs/adding-a-tool.md). Errors:
    /// [`CatalogError::Contract`] naming the first rule broken.
    fn check_contract(&self) -> Result<(), CatalogError> {
        let spec = &self.spec;
        let broken = |rule: String| CatalogError::Contract {
            tool: spec.name.to_string(),
            rule,
        };
        let input = serde_json::Value::Object((*self.tool.input_schema).clone());
        let mut found = Vec::new();
        unbounded(&input, "inputSchema", &mut found);
        if let Some(first) = found.into_iter().next() {
            return Err(broken(first));
        }
        let read_scope = spec.scope == Scope::McpRead;
        if spec.read_only != read_scope {
            return Err(broken(format!(
                "readOnlyHint {} contradicts its scope {} (read-only tools need mcp:read, the others mcp:write)",
                spec.read_only, spec.scope
            )));
        }
        if spec.background {
            let output = self
                .tool
                .output_schema
                .as_deref()
                .map(required)
                .unwrap_or_default();
            if let Some(missing) = RECEIPT_MEMBERS.iter().find(|m| !output.contains(m)) {
                return Err(broken(format!(
                    "a background tool answers a job receipt, whose output requires `{missing}`"
                )));
            }
        }
        let takes_project = required(&self.tool.input_schema).contains(&"project_id");
        if takes_project != (spec.project != ProjectAccess::None) {
            return Err(broken(format!(
                "project access {:?} but `project_id` {} a required argument",
                spec.project,
                if takes_project { "is" } else { "is not" }
            )));
        }
        Ok(())
    }
}

/// The destructive word in `text`, if any (see [`DESTRUCTIVE_STEMS`]).
fn destructive_word(text: &str) -> Option<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::to_ascii_lowercase)
        .find(|word| DESTRUCTIVE_STEMS.iter().any(|stem| word.starts_with(stem)))
}

/// The registered tools, in registration order.
#[derive(Debug, Clone)]
pub struct Catalog {
    tools: Vec<ToolDef>,
}

impl Catalog {
    /// Checks and registers `tools`. Errors: [`CatalogError`] for a destructive tool, a
    /// duplicate, a bad name or a broken contract rule ([`CatalogError::Contract`]) — the
    /// server does not start with such a catalog.
    pub fn new(tools: Vec<ToolDef>) -> Result<Catalog, CatalogError> {
        for (i, def) in tools.iter().enumerate() {
            let spec = &def.spec;
            let name_ok = !spec.name.is_empty()
                && spec.name.len() <= 64
                && spec
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
            if !name_ok {
                return Err(CatalogError::BadName(spec.name.to_string()));
            }
            if tools[..i].iter().any(|t| t.spec.name == spec.name) {
                return Err(CatalogError::Duplicate(spec.name.to_string()));
            }
            for (field, text) in [
                ("name", spec.name),
                ("title", spec.title),
                ("description", spec.description),
            ] {
                if let Some(word) = destructive_word(text) {
                    return Err(CatalogError::Destructive {
                        tool: spec.name.to_string(),
                        field,
                        word,
                    });
                }
            }
            def.check_contract()?;
        }
        Ok(Catalog { tools })
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&ToolDef> {
        self.tools.iter().find(|t| t.spec.name == name)
    }

    /// Every tool, in registration order.
    pub fn all(&self) -> &[ToolDef] {
        &self.tools
    }

    /// The tools `tools/list` shows a caller with `scopes`, in registration order (MCP
    /// `server/tools` §Listing Tools; issue "data-gated listing"): those its scopes allow, and
    /// of those only the ones whose data it can have, as `probe` found —
    ///
    /// - no project within reach: only [`NO_PROJECT_TOOL`], whose description says how
    ///   projects are made;
    /// - no write role in any project within reach: no tool that needs it
    ///   ([`ProjectAccess::Write`]);
    /// - [`DataProbe::Unknown`] (the probe failed): nothing is hidden (fail open; every call
    ///   is still checked on its own).
    pub fn listed(&self, scopes: &ScopeSet, probe: DataProbe) -> Vec<Tool> {
        self.tools
            .iter()
            .filter(|def| scopes.satisfies(def.spec.scope))
            .filter(|def| match probe {
                DataProbe::Unknown => true,
                DataProbe::Known { any_project, .. } if !any_project => {
                    def.spec.name == NO_PROJECT_TOOL
                }
                DataProbe::Known { any_write, .. } => {
                    def.spec.project != ProjectAccess::Write || any_write
                }
            })
            .map(|def| def.tool().clone())
            .collect()
    }
}

/// The one tool listed to a caller with no project within reach: `list_projects`, whose
/// description tells the model how a project comes about.
pub const NO_PROJECT_TOOL: &str = "list_projects";

/// What the one probe of a `tools/list` request learned about the caller's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataProbe {
    /// The probe failed: nothing is hidden.
    Unknown,
    /// The caller's projects within reach were read.
    Known {
        /// At least one project is within reach.
        any_project: bool,
        /// The caller has the write role in at least one of them.
        any_write: bool,
    },
}

impl DataProbe {
    /// The probe's finding from the caller's reachable projects.
    pub fn of(projects: &[ProjectMembership]) -> DataProbe {
        DataProbe::Known {
            any_project: !projects.is_empty(),
            any_write: projects.iter().any(|p| p.role == Role::Write),
        }
    }
}

/// Removes `null` from a generated schema, so optional members are simply optional (the
/// portable form: validators such as the MCP Inspector's warn about nullable type arrays).
/// schemars writes `Option<T>` as `"type": [T, "null"]`, as an `anyOf`/`oneOf` with a
/// `{"type": "null"}` branch (the other branch is then merged into the schema), or with `null`
/// in `enum` and `default`; all of these go.
///
/// Errors: a member listed in `required` whose schema allowed `null` — an output `Option`
/// that would be sent as `null`: give it `#[serde(skip_serializing_if = "Option::is_none")]`.
fn without_null(schema: &mut JsonObject, at: &str) -> Result<(), String> {
    strip_null(schema, at).map(|_| ())
}

/// [`without_null`] on one schema object; whether it allowed `null`.
fn strip_null(schema: &mut JsonObject, at: &str) -> Result<bool, String> {
    use serde_json::Value;
    let mut nullable = false;
    if let Some(Value::Array(types)) = schema.get("type") {
        let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        nullable |= kept.len() < types.len();
        match kept.len() {
            0 => return Err(format!("{at}: a schema that allows only null")),
            1 => {
                schema.insert("type".to_string(), kept[0].clone());
            }
            _ => {
                schema.remove("type");
                let branches = kept.into_iter().map(|t| serde_json::json!({ "type": t }));
                schema.insert("anyOf".to_string(), Value::Array(branches.collect()));
            }
        }
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(branches)) = schema.get_mut(key) else {
            continue;
        };
        let before = branches.len();
        branches.retain(|b| b != &serde_json::json!({ "type": "null" }));
        if branches.len() == before {
            continue;
        }
        nullable = true;
        if let [Value::Object(only)] = branches.as_slice() {
            let only = only.clone();
            schema.remove(key);
            for (k, v) in only {
                schema.entry(k).or_insert(v);
            }
        }
    }
    if let Some(Value::Array(values)) = schema.get_mut("enum") {
        let before = values.len();
        values.retain(|v| !v.is_null());
        nullable |= values.len() < before;
    }
    if schema.get("const").is_some_and(Value::is_null) {
        return Err(format!("{at}: a schema that allows only null"));
    }
    if schema.get("default").is_some_and(Value::is_null) {
        schema.remove("default");
    }
    let required: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    for (key, value) in schema.iter_mut() {
        let here = format!("{at}/{key}");
        match key.as_str() {
            "properties" => {
                let Some(members) = value.as_object_mut() else {
                    continue;
                };
                for (name, member) in members.iter_mut() {
                    let Value::Object(member) = member else {
                        continue;
                    };
                    if strip_null(member, &format!("{here}/{name}"))? && required.contains(name) {
                        return Err(format!(
                            "{here}/{name} is required but may be null: leave it out when empty \
                             (skip_serializing_if)"
                        ));
                    }
                }
            }
            "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                if let Some(members) = value.as_object_mut() {
                    for (name, member) in members.iter_mut() {
                        if let Value::Object(member) = member {
                            strip_null(member, &format!("{here}/{name}"))?;
                        }
                    }
                }
            }
            "const" | "enum" | "default" | "examples" | "required" | "type" => {}
            _ => strip_null_in(value, &here)?,
        }
    }
    Ok(nullable)
}

fn strip_null_in(value: &mut serde_json::Value, at: &str) -> Result<(), String> {
    match value {
        serde_json::Value::Object(map) => strip_null(map, at).map(|_| ()),
        serde_json::Value::Array(items) => items
            .iter_mut()
            .enumerate()
            .try_for_each(|(i, item)| strip_null_in(item, &format!("{at}/{i}"))),
        _ => Ok(()),
    }
}

/// Test support: finds `format` keywords outside JSON Schema 2020-12.
#[cfg(test)]
pub(crate) mod schema_check {
    use serde_json::Value;

    /// The `format` values a schema may carry.
    pub(crate) const KNOWN_FORMATS: &[&str] = super::STANDARD_FORMATS;

    /// Every `format` keyword of `schema` outside [`KNOWN_FORMATS`], with where it is.
    /// Member names under `properties` (and the like) are names, not keywords; `const`,
    /// `enum`, `default` and `examples` hold values, not schemas.
    pub(crate) fn unknown_formats(schema: &Value, at: &str, found: &mut Vec<String>) {
        match schema {
            Value::Object(map) => {
                for (key, value) in map {
                    let here = format!("{at}/{key}");
                    match key.as_str() {
                        "format" => match value.as_str() {
                            Some(f) if KNOWN_FORMATS.contains(&f) => {}
                            _ => found.push(format!("{here} = {value}")),
                        },
                        "properties" | "patternProperties" | "$defs" | "definitions"
                        | "dependentSchemas" => {
                            if let Some(members) = value.as_object() {
                                for (name, sub) in members {
                                    unknown_formats(sub, &format!("{here}/{name}"), found);
                                }
                            }
                        }
                        "const" | "enum" | "default" | "examples" | "required" => {}
                        _ => unknown_formats(value, &here, found),
                    }
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    unknown_formats(item, &format!("{at}/{i}"), found);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn the_walker_finds_nested_formats_and_skips_names_and_values() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "format": {"type": "string", "format": "date-time"},
                "n": {"type": ["integer", "null"], "format": "uint64"},
                "list": {"type": "array", "items": {"anyOf": [{"format": "double"}, {"format": "int64"}]}}
            },
            "$defs": {"X": {"type": "integer", "format": "uint32"}},
            "default": {"format": "uint"}
        });
        let mut found = Vec::new();
        unknown_formats(&schema, "s", &mut found);
        found.sort();
        assert_eq!(
            found,
            [
                "s/$defs/X/format = \"uint32\"",
                "s/properties/list/items/anyOf/0/format = \"double\"",
                "s/properties/n/format = \"uint64\"",
            ]
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct NoInput {}

    #[derive(Serialize, JsonSchema)]
    struct Nothing {}

    fn spec(name: &'static str, title: &'static str, description: &'static str) -> ToolSpec {
        ToolSpec {
            name,
            title,
            description,
            scope: Scope::McpRead,
            read_only: true,
            idempotent: true,
            open_world: false,
            background: false,
            project: ProjectAccess::None,
            cost: CostClass::Cheap,
            version: 1,
        }
    }

    fn def(spec: ToolSpec) -> ToolDef {
        ToolDef::new(spec, |_ctx: ToolCtx, _input: NoInput| async {
            Ok(ToolOk::new(Nothing {}))
        })
    }

    #[test]
    fn refuses_destructive_tools() {
        let cases = [
            (spec("delete_note", "Note", "Gone."), "name", "delete"),
            (spec("notes.purge", "Note", "Gone."), "name", "purge"),
            (spec("tidy", "Remove a note", "Tidy up."), "title", "remove"),
            (
                spec("tidy", "Tidy", "Drops every note of a project."),
                "description",
                "drops",
            ),
            (
                spec("stop", "Stop", "Cancels the export."),
                "description",
                "cancels",
            ),
            (spec("undeploy_site", "Site", "x"), "name", "undeploy"),
            (spec("x", "Destroy", "x"), "title", "destroy"),
        ];
        for (spec, field, word) in cases {
            let name = spec.name;
            let err = Catalog::new(vec![def(spec)]).unwrap_err();
            assert_eq!(
                err,
                CatalogError::Destructive {
                    tool: name.into(),
                    field,
                    word: word.into()
                }
            );
            assert!(err.to_string().contains("destructive"));
        }
    }

    /// The rule a catalog of this one definition breaks, if any.
    fn broken(def: ToolDef) -> Option<String> {
        match Catalog::new(vec![def]) {
            Ok(_) => None,
            Err(CatalogError::Contract { rule, .. }) => Some(rule),
            Err(other) => panic!("not a contract rule: {other}"),
        }
    }

    #[test]
    fn refuses_inputs_that_take_unknown_members_or_unbounded_values() {
        #[derive(Deserialize, JsonSchema)]
        #[allow(dead_code)]
        struct Open {
            n: crate::mcp::args::Count<1, 5>,
        }
        let def = ToolDef::new(spec("open", "Open", "x"), |_ctx, _i: Open| async {
            Ok(ToolOk::new(Nothing {}))
        });
        assert!(broken(def).unwrap().contains("unknown members"));

        #[derive(Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Unbounded {
            text: String,
        }
        let def = ToolDef::new(spec("text", "Text", "x"), |_ctx, _i: Unbounded| async {
            Ok(ToolOk::new(Nothing {}))
        });
        let rule = broken(def).unwrap();
        assert!(
            rule.contains("properties/text: a string without maxLength"),
            "{rule}"
        );

        #[derive(Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Many {
            ids: Vec<crate::mcp::args::Id>,
        }
        let def = ToolDef::new(spec("many", "Many", "x"), |_ctx, _i: Many| async {
            Ok(ToolOk::new(Nothing {}))
        });
        assert!(broken(def).unwrap().contains("an array without maxItems"));

        #[derive(Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Number {
            n: u32,
        }
        let def = ToolDef::new(spec("number", "Number", "x"), |_ctx, _i: Number| async {
            Ok(ToolOk::new(Nothing {}))
        });
        assert!(broken(def).unwrap().contains("a number without maximum"));

        // Bounded types pass.
        #[derive(Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Bounded {
            text: crate::mcp::args::Text<1, 10>,
            tags: crate::mcp::args::List<crate::mcp::args::Text<1, 5>, 3>,
            n: Option<crate::mcp::args::Count<1, 5>>,
        }
        let def = ToolDef::new(spec("bounded", "Bounded", "x"), |_ctx, _i: Bounded| async {
            Ok(ToolOk::new(Nothing {}))
        });
        assert_eq!(broken(def), None);
    }

    #[test]
    fn refuses_hints_that_contradict_the_scope() {
        let mut writes_read_only = spec("w", "W", "x");
        writes_read_only.scope = Scope::McpWrite;
        assert!(
            broken(def(writes_read_only))
                .unwrap()
                .contains("readOnlyHint true")
        );
        let mut reads_writing = spec("r", "R", "x");
        reads_writing.read_only = false;
        assert!(
            broken(def(reads_writing))
                .unwrap()
                .contains("readOnlyHint false")
        );
    }

    #[test]
    fn a_background_tool_must_answer_a_job_receipt() {
        let mut background = spec("bg", "Background", "x");
        background.background = true;
        let rule = broken(def(background)).unwrap();
        assert!(
            rule.contains("job receipt") && rule.contains("`kind`"),
            "{rule}"
        );

        #[derive(Serialize, JsonSchema)]
        struct Receipt {
            kind: String,
            id: String,
            status: String,
            resource: String,
        }
        let def = ToolDef::new(background, |_ctx, _i: NoInput| async {
            Ok(ToolOk::new(Receipt {
                kind: "export".into(),
                id: "j".into(),
                status: "pending".into(),
                resource: "gatehouse://jobs/export/j".into(),
            }))
        });
        assert_eq!(broken(def), None);
    }

    #[test]
    fn project_access_and_the_project_id_argument_go_together() {
        let mut project = spec("p", "P", "x");
        project.project = ProjectAccess::Read;
        assert!(
            broken(def(project))
                .unwrap()
                .contains("is not a required argument")
        );

        #[derive(Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct InProject {
            project_id: crate::mcp::args::Id,
        }
        let takes = |spec: ToolSpec| {
            ToolDef::new(spec, |_ctx, _i: InProject| async {
                Ok(ToolOk::new(Nothing {}))
            })
        };
        assert!(
            broken(takes(spec("q", "Q", "x")))
                .unwrap()
                .contains("is a required argument")
        );
        assert_eq!(broken(takes(project)), None);
    }

    #[test]
    fn refuses_duplicates_and_bad_names() {
        let a = def(spec("same", "A", "a"));
        let b = def(spec("same", "B", "b"));
        assert_eq!(
            Catalog::new(vec![a, b]).unwrap_err(),
            CatalogError::Duplicate("same".into())
        );
        assert!(matches!(
            Catalog::new(vec![def(spec("has space", "A", "a"))]),
            Err(CatalogError::BadName(_))
        ));
    }

    #[test]
    fn accepts_harmless_words_and_keeps_order() {
        let catalog = Catalog::new(vec![
            def(spec(
                "b_tool",
                "Create a dropdown-free note",
                "Reads notes; nothing is lost.",
            )),
            def(spec("a_tool", "Update", "Changes a note's title.")),
        ]);
        // "dropdown" starts with "drop": the rule is deliberately strict.
        assert!(catalog.is_err());
        let catalog = Catalog::new(vec![
            def(spec(
                "b_tool",
                "Create a note",
                "Reads notes; nothing is lost.",
            )),
            def(spec("a_tool", "Update", "Changes a note's title.")),
        ])
        .unwrap();
        let names: Vec<_> = catalog.all().iter().map(|t| t.spec.name).collect();
        assert_eq!(names, ["b_tool", "a_tool"]);
        let tool = catalog.get("a_tool").unwrap().tool();
        let annotations = tool.annotations.as_ref().unwrap();
        assert_eq!(annotations.destructive_hint, Some(false));
        assert_eq!(annotations.read_only_hint, Some(true));
        assert_eq!(tool.input_schema["type"], "object");
        assert!(tool.output_schema.is_some());
    }

    #[test]
    fn schemas_carry_no_non_standard_format() {
        #[derive(Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Numbers {
            a: u32,
            b: Option<u64>,
            c: f64,
            d: i64,
            e: Vec<u8>,
        }
        #[derive(Serialize, JsonSchema)]
        struct Out {
            a: u64,
            b: usize,
            #[serde(skip_serializing_if = "Option::is_none")]
            c: Option<u16>,
            d: f32,
            e: i32,
            f: i64,
            g: Vec<u128>,
            h: i8,
        }
        let def = ToolDef::new(
            spec("numbers", "Numbers", "Counts."),
            |_ctx, _input: Numbers| async {
                Ok(ToolOk::new(Out {
                    a: 0,
                    b: 0,
                    c: None,
                    d: 0.0,
                    e: 0,
                    f: 0,
                    g: vec![],
                    h: 0,
                }))
            },
        );
        let tool = def.tool();
        let input = serde_json::Value::Object((*tool.input_schema).clone());
        let output = serde_json::Value::Object((**tool.output_schema.as_ref().unwrap()).clone());
        let mut found = Vec::new();
        schema_check::unknown_formats(&input, "input", &mut found);
        schema_check::unknown_formats(&output, "output", &mut found);
        assert!(found.is_empty(), "{found:#?}");
        // Unsigned numbers keep their lower bound; the standard formats stay.
        assert_eq!(input["properties"]["a"]["minimum"], 0, "{input}");
        assert_eq!(input["properties"]["e"]["items"]["minimum"], 0, "{input}");
        assert_eq!(output["properties"]["a"]["minimum"], 0, "{output}");
        assert_eq!(output["properties"]["b"]["minimum"], 0, "{output}");
        assert_eq!(output["properties"]["f"]["format"], "int64", "{output}");
        assert_eq!(output["properties"]["e"]["format"], "int32", "{output}");
        assert_eq!(input["properties"]["c"]["type"], "number", "{input}");
    }

    #[test]
    fn optional_members_are_simply_optional() {
        let mut schema = serde_json::json!({
            "type": "object",
            "properties": {
                "a": {"type": ["integer", "null"], "minimum": 1},
                "b": {"anyOf": [{"$ref": "#/$defs/B"}, {"type": "null"}], "description": "B."},
                "c": {"type": "array", "items": {"type": ["string", "null"]}},
                "d": {"enum": ["x", null], "default": null},
                "e": {"type": ["string", "integer", "null"]}
            },
            "required": [],
            "$defs": {"B": {"type": "object", "properties": {"n": {"type": ["number", "null"]}}}}
        });
        without_null(schema.as_object_mut().unwrap(), "s").unwrap();
        assert_eq!(
            schema,
            serde_json::json!({
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "minimum": 1},
                    "b": {"$ref": "#/$defs/B", "description": "B."},
                    "c": {"type": "array", "items": {"type": "string"}},
                    "d": {"enum": ["x"]},
                    "e": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
                },
                "required": [],
                "$defs": {"B": {"type": "object", "properties": {"n": {"type": "number"}}}}
            })
        );
        // An output member that would be sent as null is a programming error.
        let mut required = serde_json::json!({
            "type": "object",
            "properties": {"error": {"type": ["string", "null"]}},
            "required": ["error"]
        });
        let e = without_null(required.as_object_mut().unwrap(), "output").unwrap_err();
        assert!(e.contains("output/properties/error"), "{e}");
    }
}
