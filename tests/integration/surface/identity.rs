//! `serverInfo` from the configuration and each tool's `_meta` as clients receive them.

use serde_json::json;

use crate::helpers::spawn_app_with;
use crate::keys::{ALICE, alice, create_key};
use crate::mcp::{legacy, rpc, send};

#[tokio::test]
async fn server_info_comes_from_the_configuration_and_tools_carry_their_meta() {
    let app = spawn_app_with(|vars| {
        vars.insert("GATEHOUSE_SERVER_NAME".into(), "acme-notes".into());
        vars.insert("GATEHOUSE_SERVER_TITLE".into(), "Acme Notes".into());
        vars.insert("FRONTEND_URL".into(), "https://console.example.com".into());
    })
    .await;
    alice(&app).await;
    let (_, key) = create_key(&app, &["--account", ALICE, "--write"]);

    // 2025-06-18: initialize.
    let (status, _, init) = send(legacy(
        &app,
        &key,
        None,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    ))
    .await;
    assert_eq!(status, 200, "{init}");
    let info = &init["result"]["serverInfo"];
    assert_eq!(info["name"], "acme-notes", "{init}");
    assert_eq!(info["title"], "Acme Notes");
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(info["websiteUrl"], "https://console.example.com");

    // 2026-07-28: server/discover names the same server.
    let d = rpc(&app, &key, "server/discover", json!({})).await;
    assert_eq!(
        d["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "acme-notes",
        "{d}"
    );

    // Every listed tool carries scopes, cost class, background flag and version.
    let list = rpc(&app, &key, "tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 8, "{list}");
    for tool in tools {
        let meta = &tool["_meta"];
        assert!(meta["gatehouse/scopes"].is_array(), "{tool}");
        assert!(meta["gatehouse/costClass"].is_string(), "{tool}");
        assert!(meta["gatehouse/background"].is_boolean(), "{tool}");
        assert!(meta["gatehouse/version"].is_string(), "{tool}");
    }
    let by_name = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap().clone();
    assert_eq!(
        by_name("export_project")["_meta"],
        json!({"gatehouse/scopes": ["mcp:read"], "gatehouse/costClass": "expensive",
               "gatehouse/background": true, "gatehouse/version": "1"})
    );
    assert_eq!(
        by_name("create_note")["_meta"]["gatehouse/scopes"],
        json!(["mcp:write"])
    );
}
