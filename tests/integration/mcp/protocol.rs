//! Protocol revisions: 2026-07-28 discovery, initialize for older revisions, version errors.

use super::*;

#[tokio::test]
async fn protocol_revisions_discover_initialize_and_version_errors() {
    let app = spawn_app().await;
    let a = alice(&app).await;

    // 2026-07-28: server/discover, resultType and cache hints.
    let d = rpc(&app, &a.token, "server/discover", json!({})).await;
    let r = &d["result"];
    assert_eq!(r["resultType"], "complete");
    let versions: Vec<&str> = r["supportedVersions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for v in ["2025-03-26", "2025-06-18", "2025-11-25", V26] {
        assert!(versions.contains(&v), "{v} in {versions:?}");
    }
    assert!(r["capabilities"]["tools"].is_object() && r["capabilities"]["resources"].is_object());
    assert!(r["ttlMs"].is_u64() && r["cacheScope"].is_string());
    // The authorization extensions, each with no settings (an empty object).
    let extensions = json!({
        "io.modelcontextprotocol/oauth-client-credentials": {},
        "io.modelcontextprotocol/enterprise-managed-authorization": {},
        "io.modelcontextprotocol/auth/wif": {},
    });
    assert_eq!(r["capabilities"]["extensions"], extensions, "{r}");
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "gatehouse"
    );
    let l = rpc(&app, &a.token, "tools/list", json!({})).await;
    assert_eq!(l["result"]["resultType"], "complete");
    assert_eq!(l["result"]["cacheScope"], "private");

    // Header checks.
    let (s, _, body) = send(
        modern(
            &app,
            Some(&a.token),
            "tools/call",
            json!({"name": "list_projects", "arguments": {}}),
        )
        .header("mcp-name", "get_job"),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], -32020);

    // Unsupported version: -32022 with supported and requested.
    let (s, _, body) = send(
        app.client
            .post(mcp_url(&app))
            .bearer_auth(&a.token)
            .header("accept", ACCEPT)
            .header("mcp-protocol-version", "2099-01-01")
            .header("mcp-method", "tools/list")
            .json(
                &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2099-01-01",
                "io.modelcontextprotocol/clientCapabilities": {}}}}),
            ),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], -32022);
    assert_eq!(body["error"]["data"]["requested"], "2099-01-01");
    assert!(
        body["error"]["data"]["supported"]
            .as_array()
            .unwrap()
            .contains(&json!(V26))
    );

    // Older revisions: initialize answers the same version; lists have no resultType.
    for v in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let (s, _, body) = send(legacy(&app, &a.token, None, "initialize", json!({
            "protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}
        })))
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(body["result"]["protocolVersion"], v);
        assert_eq!(body["result"]["serverInfo"]["name"], "gatehouse");
        assert_eq!(
            body["result"]["capabilities"]["extensions"], extensions,
            "{v}"
        );
        let (s, _, body) = send(legacy(&app, &a.token, Some(v), "tools/list", json!({}))).await;
        assert_eq!(s, StatusCode::OK);
        assert!(body["result"].get("resultType").is_none(), "{v}: {body}");
        assert_eq!(tool_names(&body), ALL_TOOLS, "{v}");
    }
    let (s, _, _) = send(
        legacy(
            &app,
            &a.token,
            Some("2025-11-25"),
            "notifications/initialized",
            json!({}),
        )
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED);
}
