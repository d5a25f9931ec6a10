//! The tool catalog: scope filter, step-up, results, argument errors, membership isolation.

use super::*;

#[tokio::test]
async fn tools_list_follows_scopes_and_roles_and_step_up_is_403() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    let read = token_for(&app, &a.browser, "mcp:read").await;

    let all = rpc(&app, &a.token, "tools/list", json!({})).await;
    assert_eq!(
        tool_names(&all),
        ALL_TOOLS,
        "write token: every tool, stable order"
    );
    let tools = all["result"]["tools"].as_array().unwrap();
    for t in tools {
        assert_eq!(t["annotations"]["destructiveHint"], false);
        assert!(t["title"].is_string() && t["description"].is_string());
        assert_eq!(t["inputSchema"]["type"], "object");
        assert_eq!(t["inputSchema"]["additionalProperties"], false);
        assert!(t["outputSchema"].is_object());
    }
    let create = tools.iter().find(|t| t["name"] == "create_note").unwrap();
    assert_eq!(create["annotations"]["readOnlyHint"], false);
    assert_eq!(
        create["inputSchema"]["properties"]["title"]["maxLength"],
        200
    );
    assert_eq!(create["inputSchema"]["properties"]["tags"]["maxItems"], 20);

    let ro = rpc(&app, &read, "tools/list", json!({})).await;
    let names = tool_names(&ro);
    assert_eq!(
        names,
        [
            "list_projects",
            "get_project",
            "search_notes",
            "get_note",
            "export_project",
            "get_job"
        ]
    );

    // Calling a tool outside the token's scopes: step-up challenge.
    let (s, h, _) = send(modern(
        &app,
        Some(&read),
        "tools/call",
        json!({
            "name": "create_note",
            "arguments": {"project_id": a.project, "title": "t", "body": "b"}
        }),
    ))
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(
        h["www-authenticate"],
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"mcp:read mcp:write\", resource_metadata=\"{}\"",
            prm_url(&app)
        )
        .as_str()
    );
    let audit = app.store.recent_audit(5).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e.event == "tool_call" && e.outcome == "insufficient_scope")
    );

    // An account that has the write role nowhere does not see the write tools.
    let (_, bob_token, bob_id) = bob(&app, "mcp:read mcp:write").await;
    app.store
        .add_member(&a.project, &bob_id, Role::Read, gatehouse::store::now())
        .await
        .unwrap();
    let names = tool_names(&rpc(&app, &bob_token, "tools/list", json!({})).await);
    assert!(!names.contains(&"create_note".to_string()) && names.contains(&"get_note".to_string()));
    // …and calling one anyway is refused by the role check, as an isError result.
    let r = call(
        &app,
        &bob_token,
        "create_note",
        json!({"project_id": a.project, "title": "t", "body": "b"}),
    )
    .await;
    assert!(error_text(&r).contains("read-only"));
}

#[tokio::test]
async fn notes_tools_results_links_and_argument_errors() {
    let app = spawn_app().await;
    let a = alice(&app).await;

    let sc = ok(&call(&app, &a.token, "list_projects", json!({})).await);
    assert_eq!(
        sc["projects"],
        json!([{
            "id": a.project, "name": "Research", "role": "write",
            "uri": format!("gatehouse://projects/{}", a.project)
        }])
    );

    let r = call(
        &app,
        &a.token,
        "create_note",
        json!({
            "project_id": a.project,
            "title": "Launch plan",
            "body": "We launch the zeppelin on Tuesday after the checklist.",
            "tags": ["launch", "ops"]
        }),
    )
    .await;
    let note = ok(&r);
    let note_id = note["id"].as_str().unwrap().to_string();
    let uri = format!("gatehouse://projects/{}/notes/{note_id}", a.project);
    assert_eq!(note["uri"], uri.as_str());
    assert_eq!(note["tags"], json!(["launch", "ops"]));
    let link = &r["content"][1];
    assert_eq!(link["type"], "resource_link");
    assert_eq!(link["uri"], uri.as_str());

    let sc = ok(&call(
        &app,
        &a.token,
        "search_notes",
        json!({"project_id": a.project, "query": "Zeppelin!", "limit": 5}),
    )
    .await);
    assert_eq!(sc["results"][0]["id"], note_id.as_str());
    assert!(
        sc["results"][0]["snippet"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("[zeppelin]"),
        "the match is marked the same way on both engines: {}",
        sc["results"][0]["snippet"]
    );
    let sc = ok(&call(
        &app,
        &a.token,
        "search_notes",
        json!({"project_id": a.project, "query": "submarine"}),
    )
    .await);
    assert_eq!(sc["results"], json!([]));

    let sc = ok(&call(
        &app,
        &a.token,
        "update_note",
        json!({"project_id": a.project, "note_id": note_id, "title": "Launch plan v2"}),
    )
    .await);
    assert_eq!(sc["title"], "Launch plan v2");
    assert_eq!(sc["body"], note["body"]);
    let sc = ok(&call(
        &app,
        &a.token,
        "get_note",
        json!({"project_id": a.project, "note_id": note_id}),
    )
    .await);
    assert_eq!(sc["title"], "Launch plan v2");
    let sc = ok(&call(
        &app,
        &a.token,
        "search_notes",
        json!({"project_id": a.project, "query": "v2"}),
    )
    .await);
    assert_eq!(
        sc["results"][0]["id"],
        note_id.as_str(),
        "the index follows updates"
    );

    let sc = ok(&call(
        &app,
        &a.token,
        "get_project",
        json!({"project_id": a.project}),
    )
    .await);
    assert_eq!(sc["note_count"], 1);
    assert_eq!(
        sc["console_url"],
        format!("{}/projects/{}", app.address, a.project).as_str()
    );

    // Bad arguments: isError naming the field.
    let cases = [
        (
            "create_note",
            json!({"project_id": a.project, "title": "x".repeat(201), "body": ""}),
            "`title`",
        ),
        (
            "create_note",
            json!({"project_id": a.project, "title": "t"}),
            "`body`",
        ),
        (
            "create_note",
            json!({"project_id": a.project, "title": "t", "body": "", "tags": [7]}),
            "`tags[0]`",
        ),
        (
            "search_notes",
            json!({"project_id": a.project, "query": "x", "limit": 500}),
            "`limit`",
        ),
        (
            "get_note",
            json!({"project_id": a.project, "note_id": "../etc"}),
            "`note_id`",
        ),
        ("list_projects", json!({"verbose": true}), "`verbose`"),
        (
            "update_note",
            json!({"project_id": a.project, "note_id": note_id}),
            "`title`",
        ),
    ];
    for (tool, args, field) in cases {
        let msg = error_text(&call(&app, &a.token, tool, args.clone()).await);
        assert!(msg.contains(field), "{tool} {args}: {msg}");
    }
    let msg = error_text(
        &call(
            &app,
            &a.token,
            "get_note",
            json!({"project_id": a.project, "note_id": "00000000-0000-0000-0000-000000000000"}),
        )
        .await,
    );
    assert!(msg.contains("No note"));

    // Unknown tool: JSON-RPC -32602.
    let body = rpc(
        &app,
        &a.token,
        "tools/call",
        json!({"name": "launch_rocket", "arguments": {}}),
    )
    .await;
    assert_eq!(body["error"]["code"], -32602);

    // Audit: tool, outcome, project, duration — never arguments or results.
    let audit = app.store.recent_audit(50).await.unwrap();
    let created = audit
        .iter()
        .find(|e| {
            e.event == "tool_call"
                && e.subject.as_deref() == Some("create_note")
                && e.outcome == "success"
        })
        .expect("create_note audited");
    assert_eq!(created.account_id.as_deref(), Some(a.id.as_str()));
    assert!(created.client_id.is_some());
    let detail = created.detail.as_deref().unwrap();
    assert!(detail.contains(&format!("project={}", a.project)) && detail.contains("duration_ms="));
    assert!(
        audit.iter().any(
            |e| e.subject.as_deref() == Some("create_note") && e.outcome == "invalid_arguments"
        )
    );
    for e in &audit {
        let all = format!("{e:?}");
        assert!(
            !all.contains("zeppelin") && !all.contains("Launch plan"),
            "{all}"
        );
    }
}

#[tokio::test]
async fn other_accounts_projects_look_like_missing_ones() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    let (_, bob_token, bob_id) = bob(&app, "mcp:read mcp:write").await;
    let bobs = app
        .store
        .create_project("Bob's secrets", &bob_id, gatehouse::store::now())
        .await
        .unwrap();
    ok(&call(
        &app,
        &bob_token,
        "create_note",
        json!({"project_id": bobs, "title": "diary", "body": "secret words"}),
    )
    .await);
    let missing = "3f2b7a44-0000-4000-8000-000000000000";

    for (tool, extra) in [
        ("get_project", json!({})),
        ("search_notes", json!({"query": "secret"})),
        ("export_project", json!({})),
        ("create_note", json!({"title": "x", "body": "y"})),
    ] {
        let mut theirs = extra.clone();
        theirs["project_id"] = json!(bobs);
        let mut nowhere = extra.clone();
        nowhere["project_id"] = json!(missing);
        let t = error_text(&call(&app, &a.token, tool, theirs).await);
        let n = error_text(&call(&app, &a.token, tool, nowhere).await);
        assert_eq!(t.replace(&bobs, "ID"), n.replace(missing, "ID"), "{tool}");
    }
    // Resources too: not found, with the revision's code.
    let uri = format!("gatehouse://projects/{bobs}");
    let body = rpc(&app, &a.token, "resources/read", json!({"uri": uri})).await;
    assert_eq!(body["error"]["code"], -32602);
    assert_eq!(body["error"]["data"]["uri"], uri.as_str());
    let (_, _, body) = send(legacy(
        &app,
        &a.token,
        Some("2025-11-25"),
        "resources/read",
        json!({"uri": uri}),
    ))
    .await;
    assert_eq!(body["error"]["code"], -32002);
    let names: Vec<String> =
        ok(&call(&app, &a.token, "list_projects", json!({})).await)["projects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect();
    assert_eq!(names, ["Research"]);

    // A membership added after the consent is reachable with the same token.
    app.store
        .add_member(&bobs, &a.id, Role::Write, gatehouse::store::now())
        .await
        .unwrap();
    let sc = ok(&call(
        &app,
        &a.token,
        "search_notes",
        json!({"project_id": bobs, "query": "secret"}),
    )
    .await);
    assert_eq!(sc["results"].as_array().unwrap().len(), 1);
    let body = rpc(&app, &a.token, "resources/read", json!({"uri": uri})).await;
    assert_eq!(body["result"]["contents"][0]["uri"], uri.as_str());
}
