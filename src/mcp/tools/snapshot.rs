//! The snapshot of every published tool definition (`published.json` beside this file) and
//! the rule it enforces: a tool whose input or output schema changes must raise its version
//! (seed: "version the protocol and the tools, so that a client knows what it is talking to").
//!
//! `cargo test --lib published_definitions` compares the catalog with the snapshot. A schema
//! change without a new version fails and cannot be written; any other difference (a new tool,
//! a new description, a raised version) fails until the snapshot is written again with
//! `GATEHOUSE_UPDATE_SNAPSHOT=1 cargo test --lib published_definitions`, so every change of
//! the published surface shows in review.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::mcp::tool_meta::VERSION_KEY;

const SNAPSHOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/mcp/tools/published.json");

/// Every published definition of the built-in catalog, by name, as `tools/list` sends it.
fn published() -> BTreeMap<String, Value> {
    super::catalog()
        .expect("the built-in catalog is valid")
        .all()
        .iter()
        .map(|def| {
            let json = serde_json::to_value(def.tool()).expect("a tool serializes");
            (def.spec.name.to_string(), json)
        })
        .collect()
}

fn version_of(tool: &Value) -> Option<u64> {
    tool.get("_meta")?.get(VERSION_KEY)?.as_str()?.parse().ok()
}

/// What differs between the snapshot and the catalog: `(must_raise_version, other)`. The
/// first list holds changes no snapshot update may accept (a schema changed at the same
/// version, a version that went down); the second, changes a new snapshot accepts.
fn compare(
    snapshot: &BTreeMap<String, Value>,
    current: &BTreeMap<String, Value>,
) -> (Vec<String>, Vec<String>) {
    let (mut versions, mut other) = (Vec::new(), Vec::new());
    for (name, now) in current {
        let Some(before) = snapshot.get(name) else {
            other.push(format!("{name}: a new tool"));
            continue;
        };
        let (v_before, v_now) = (version_of(before), version_of(now));
        if v_now < v_before {
            versions.push(format!(
                "{name}: version went down from {v_before:?} to {v_now:?}"
            ));
        }
        for schema in ["inputSchema", "outputSchema"] {
            if before.get(schema) != now.get(schema) && v_now == v_before {
                versions.push(format!(
                    "{name}: {schema} changed but the version is still {v_now:?}: raise its \
                     ToolSpec version"
                ));
            }
        }
        if before != now {
            other.push(format!("{name}: the published definition changed"));
        }
    }
    for name in snapshot.keys().filter(|n| !current.contains_key(*n)) {
        other.push(format!("{name}: no longer published"));
    }
    (versions, other)
}

#[test]
fn published_definitions_match_the_snapshot_and_schema_changes_raise_the_version() {
    let current = published();
    let snapshot: BTreeMap<String, Value> = std::fs::read_to_string(SNAPSHOT)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    let (versions, other) = compare(&snapshot, &current);
    assert!(
        versions.is_empty(),
        "tool definitions changed without a new version:\n{}",
        versions.join("\n")
    );
    if other.is_empty() {
        return;
    }
    if std::env::var_os("GATEHOUSE_UPDATE_SNAPSHOT").is_some() {
        let text = serde_json::to_string_pretty(&current).expect("JSON") + "\n";
        std::fs::write(SNAPSHOT, text).expect("write the snapshot");
        return;
    }
    panic!(
        "the published tool definitions differ from src/mcp/tools/published.json:\n{}\n\
         Review the change, then write the snapshot again with \
         GATEHOUSE_UPDATE_SNAPSHOT=1 cargo test --lib published_definitions",
        other.join("\n")
    );
}

#[test]
fn a_schema_change_without_a_new_version_is_refused() {
    let current = published();
    let name = "get_note".to_string();
    // The snapshot as it would be if get_note's output had one member less at this version.
    let mut snapshot = current.clone();
    let before = snapshot.get_mut(&name).unwrap();
    before["outputSchema"]["properties"]
        .as_object_mut()
        .unwrap()
        .remove("tags");
    let (versions, _) = compare(&snapshot, &current);
    assert_eq!(versions.len(), 1, "{versions:?}");
    assert!(
        versions[0].contains("get_note: outputSchema changed"),
        "{versions:?}"
    );
    // At a lower version in the snapshot the same change is accepted (written on update).
    let v = version_of(&current[&name]).unwrap();
    snapshot.get_mut(&name).unwrap()["_meta"][VERSION_KEY] = Value::from((v - 1).to_string());
    let (versions, other) = compare(&snapshot, &current);
    assert!(versions.is_empty(), "{versions:?}");
    assert_eq!(other, ["get_note: the published definition changed"]);
    // A version may not go down; a description change alone needs no new version.
    let mut snapshot = current.clone();
    snapshot.get_mut(&name).unwrap()["_meta"][VERSION_KEY] = Value::from((v + 1).to_string());
    assert!(compare(&snapshot, &current).0[0].contains("went down"));
    let mut snapshot = current.clone();
    snapshot.get_mut(&name).unwrap()["description"] = Value::from("Old words.");
    let (versions, other) = compare(&snapshot, &current);
    assert!(versions.is_empty());
    assert_eq!(other.len(), 1);
}

#[test]
fn every_published_tool_carries_its_meta() {
    for (name, tool) in published() {
        let meta = &tool["_meta"];
        let scopes = meta["gatehouse/scopes"].as_array().unwrap();
        assert!(!scopes.is_empty(), "{name}");
        assert!(
            ["cheap", "standard", "expensive"]
                .contains(&meta["gatehouse/costClass"].as_str().unwrap()),
            "{name}"
        );
        assert!(meta["gatehouse/background"].is_boolean(), "{name}");
        assert!(version_of(&tool).is_some_and(|v| v >= 1), "{name}");
        // The scope published is the one the catalog enforces.
        let writes = scopes.contains(&Value::from("mcp:write"));
        assert_eq!(tool["annotations"]["readOnlyHint"], !writes, "{name}");
    }
    let all = published();
    assert_eq!(all["export_project"]["_meta"]["gatehouse/background"], true);
    assert_eq!(
        all["export_project"]["_meta"]["gatehouse/costClass"],
        "expensive"
    );
}
