//! The built-in tools, registered in the order `tools/list` shows them. Handlers are thin:
//! they take typed input, call one storage service (the same the console pages use) and
//! shape the answer.

use schemars::JsonSchema;
use serde::Deserialize;

use super::catalog::{Catalog, CatalogError};

pub mod jobs;
pub mod notes;
pub mod projects;
#[cfg(test)]
mod snapshot;

/// Input of the tools that take no arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoInput {}

/// Every built-in tool, checked.
///
/// Errors: [`CatalogError`] if a definition breaks the catalog's rules (a unit test keeps the
/// built-in set valid).
pub fn catalog() -> Result<Catalog, CatalogError> {
    Catalog::new(vec![
        projects::list_projects(),
        projects::get_project(),
        notes::search_notes(),
        notes::get_note(),
        notes::create_note(),
        notes::update_note(),
        jobs::export_project(),
        jobs::get_job(),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::scope::Scope;
    use crate::mcp::catalog::schema_check::unknown_formats;

    #[test]
    fn the_built_in_catalog_is_valid_and_ordered() {
        let catalog = catalog().unwrap();
        let names: Vec<_> = catalog.all().iter().map(|t| t.spec.name).collect();
        assert_eq!(
            names,
            [
                "list_projects",
                "get_project",
                "search_notes",
                "get_note",
                "create_note",
                "update_note",
                "export_project",
                "get_job"
            ]
        );
        for def in catalog.all() {
            let tool = def.tool();
            let annotations = tool.annotations.as_ref().unwrap();
            assert_eq!(
                annotations.destructive_hint,
                Some(false),
                "{}",
                def.spec.name
            );
            assert_eq!(
                tool.input_schema["additionalProperties"], false,
                "{}",
                def.spec.name
            );
            let writes = def.spec.scope == Scope::McpWrite;
            assert_eq!(
                annotations.read_only_hint,
                Some(!writes),
                "{}",
                def.spec.name
            );
        }
        assert!(catalog.get("export_project").unwrap().spec.background);
    }

    #[test]
    fn listing_hides_tools_whose_data_the_caller_cannot_have() {
        use crate::mcp::catalog::DataProbe;
        let catalog = catalog().unwrap();
        let names = |scopes: &str, probe| -> Vec<String> {
            let scopes = crate::domain::scope::ScopeSet::parse(scopes).unwrap();
            catalog
                .listed(&scopes, probe)
                .into_iter()
                .map(|t| t.name.to_string())
                .collect()
        };
        let rw = "mcp:read mcp:write";
        let none = DataProbe::Known {
            any_project: false,
            any_write: false,
        };
        assert_eq!(names(rw, none), ["list_projects"]);
        let read_only = DataProbe::Known {
            any_project: true,
            any_write: false,
        };
        let readers = [
            "list_projects",
            "get_project",
            "search_notes",
            "get_note",
            "export_project",
            "get_job",
        ];
        assert_eq!(names(rw, read_only), readers);
        let writer = DataProbe::Known {
            any_project: true,
            any_write: true,
        };
        assert_eq!(names(rw, writer).len(), 8);
        assert_eq!(names("mcp:read", writer), readers);
        // The probe failed: nothing is hidden beyond what the scopes rule out.
        assert_eq!(names(rw, DataProbe::Unknown).len(), 8);
        assert_eq!(names("mcp:read", DataProbe::Unknown), readers);
        let lone = catalog.get("list_projects").unwrap().tool();
        assert!(
            lone.description
                .as_deref()
                .unwrap()
                .contains("gatehouse project add"),
            "{lone:?}"
        );
    }

    #[test]
    fn schemas_use_only_standard_formats() {
        let mut found = Vec::new();
        for def in catalog().unwrap().all() {
            let tool = def.tool();
            let input = serde_json::Value::Object((*tool.input_schema).clone());
            unknown_formats(
                &input,
                &format!("{}/inputSchema", def.spec.name),
                &mut found,
            );
            if let Some(output) = &tool.output_schema {
                let output = serde_json::Value::Object((**output).clone());
                unknown_formats(
                    &output,
                    &format!("{}/outputSchema", def.spec.name),
                    &mut found,
                );
            }
        }
        assert!(found.is_empty(), "non-standard formats: {found:#?}");
    }
}
