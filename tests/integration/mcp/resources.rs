//! Resources, background jobs and result bounds.

use super::*;
use crate::helpers::behind_the_back;

#[tokio::test]
async fn resources_are_listed_in_pages_templated_and_readable() {
    let app = spawn_app_with(|v| {
        v.insert("FRONTEND_URL".into(), "https://console.example".into());
    })
    .await;
    let a = alice(&app).await;
    let now = gatehouse::store::now();
    for i in 0..55 {
        app.store
            .create_note(
                &gatehouse::store::notes::NewNote {
                    project_id: &a.project,
                    author_account_id: &a.id,
                    title: &format!("note {i}"),
                    body: "body",
                    tags: &[],
                },
                now + i,
            )
            .await
            .unwrap();
    }
    let mut uris = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let body = rpc(&app, &a.token, "resources/list", params).await;
        let r = &body["result"];
        assert_eq!(r["cacheScope"], "private");
        for item in r["resources"].as_array().unwrap() {
            uris.push(item["uri"].as_str().unwrap().to_string());
        }
        pages += 1;
        match r["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, 2);
    assert_eq!(uris.len(), 56);
    assert_eq!(uris[0], format!("gatehouse://projects/{}", a.project));
    let unique: std::collections::HashSet<_> = uris.iter().collect();
    assert_eq!(unique.len(), 56, "no duplicates across pages");
    let body = rpc(&app, &a.token, "resources/list", json!({"cursor": "bogus"})).await;
    assert_eq!(body["error"]["code"], -32602);

    let body = rpc(&app, &a.token, "resources/templates/list", json!({})).await;
    let templates: Vec<&str> = body["result"]["resourceTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["uriTemplate"].as_str().unwrap())
        .collect();
    assert_eq!(
        templates,
        [
            "gatehouse://projects/{project_id}",
            "gatehouse://projects/{project_id}/notes/{note_id}",
            "gatehouse://jobs/{kind}/{job_id}"
        ]
    );

    let body = rpc(&app, &a.token, "resources/read", json!({"uri": uris[0]})).await;
    let content = &body["result"]["contents"][0];
    assert_eq!(content["mimeType"], "application/json");
    let project: Value = serde_json::from_str(content["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        project["console_url"],
        format!("https://console.example/projects/{}", a.project).as_str()
    );
    assert_eq!(project["note_count"], 55);
    let body = rpc(&app, &a.token, "resources/read", json!({"uri": uris[1]})).await;
    let note: Value =
        serde_json::from_str(body["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(note["title"], "note 0");
    for bad in ["gatehouse://projects/nope/extra", "file:///etc/passwd"] {
        let body = rpc(&app, &a.token, "resources/read", json!({"uri": bad})).await;
        assert_eq!(body["error"]["code"], -32602, "{bad}");
    }
}

#[tokio::test]
async fn export_runs_in_the_background_and_is_read_as_a_job_resource() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    ok(&call(
        &app,
        &a.token,
        "create_note",
        json!({"project_id": a.project, "title": "one", "body": "first"}),
    )
    .await);
    let r = call(
        &app,
        &a.token,
        "export_project",
        json!({"project_id": a.project}),
    )
    .await;
    let receipt = ok(&r);
    let id = receipt["id"].as_str().unwrap().to_string();
    assert_eq!(receipt["kind"], "export");
    assert!(["pending", "running", "completed"].contains(&receipt["status"].as_str().unwrap()));
    let resource = format!("gatehouse://jobs/export/{id}");
    assert_eq!(receipt["resource"], resource.as_str());
    assert_eq!(r["content"][1]["uri"], resource.as_str());

    let mut job = Value::Null;
    for _ in 0..50 {
        job = ok(&call(&app, &a.token, "get_job", json!({"job_id": id})).await);
        if job["status"] == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(job["note_count"], 1);
    let body = rpc(&app, &a.token, "resources/read", json!({"uri": resource})).await;
    let doc: Value =
        serde_json::from_str(body["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(doc["document"]["notes"][0]["title"], "one");

    // Another account cannot see the job.
    let (_, bob_token, _) = bob(&app, "mcp:read").await;
    let msg = error_text(&call(&app, &bob_token, "get_job", json!({"job_id": id})).await);
    assert!(msg.contains("No job"));
}

#[tokio::test]
async fn large_results_are_cut_with_a_note() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_MAX_RESULT_BYTES".into(), "2048".into());
    })
    .await;
    let a = alice(&app).await;
    let body = "lorem ipsum ".repeat(1000);
    let r = call(
        &app,
        &a.token,
        "create_note",
        json!({"project_id": a.project, "title": "big", "body": body}),
    )
    .await;
    assert!(serde_json::to_string(&r).unwrap().len() <= 2048, "bounded");
    let sc = &r["structuredContent"];
    assert_eq!(sc["truncated"], true);
    assert_eq!(sc["title"], "big");
    assert!(sc["body"].as_str().unwrap().ends_with('…'));
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("[Result cut to fit 2048 bytes")
    );
    // The note itself was stored whole.
    let id = sc["id"].as_str().unwrap();
    let stored = app.store.note(&a.project, id).await.unwrap().unwrap();
    assert_eq!(stored.body, body);
}

#[tokio::test]
async fn resource_reads_are_bounded_like_tool_results() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_MAX_RESULT_BYTES".into(), "2048".into());
    })
    .await;
    let a = alice(&app).await;
    let now = gatehouse::store::now();
    let big = "é".repeat(20_000);
    let note = app
        .store
        .create_note(
            &gatehouse::store::notes::NewNote {
                project_id: &a.project,
                author_account_id: &a.id,
                title: "big",
                body: &big,
                tags: &["t".to_string()],
            },
            now,
        )
        .await
        .unwrap();
    for i in 0..30 {
        app.store
            .create_note(
                &gatehouse::store::notes::NewNote {
                    project_id: &a.project,
                    author_account_id: &a.id,
                    title: &format!("note {i}"),
                    body: &"lorem ipsum ".repeat(50),
                    tags: &[],
                },
                now + 1 + i,
            )
            .await
            .unwrap();
    }

    // One note larger than the bound.
    let uri = format!("gatehouse://projects/{}/notes/{}", a.project, note.id);
    let body = rpc(&app, &a.token, "resources/read", json!({"uri": uri})).await;
    let result = &body["result"];
    let size = serde_json::to_string(result).unwrap().len();
    assert!(size <= 2048, "bounded: {size}");
    let content = &result["contents"][0];
    assert_eq!(content["uri"], uri.as_str());
    assert_eq!(content["mimeType"], "application/json");
    let doc: Value = serde_json::from_str(content["text"].as_str().unwrap())
        .expect("the cut text is still JSON");
    assert_eq!(doc["truncated"], true);
    assert_eq!(doc["id"], note.id.as_str());
    assert_eq!(doc["uri"], uri.as_str());
    assert_eq!(doc["title"], "big");
    let cut = doc["body"].as_str().unwrap();
    assert!(cut.ends_with('…') && cut.len() < big.len());
    let notice = doc["truncation_notice"].as_str().unwrap();
    assert!(notice.contains("2048"), "{notice}");

    // A finished export larger than the bound.
    let receipt = ok(&call(
        &app,
        &a.token,
        "export_project",
        json!({"project_id": a.project}),
    )
    .await);
    let id = receipt["id"].as_str().unwrap().to_string();
    let mut job = Value::Null;
    for _ in 0..50 {
        job = ok(&call(&app, &a.token, "get_job", json!({"job_id": id})).await);
        if job["status"] == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(job["status"], "completed", "{job}");
    let resource = format!("gatehouse://jobs/export/{id}");
    let body = rpc(&app, &a.token, "resources/read", json!({"uri": resource})).await;
    let result = &body["result"];
    let size = serde_json::to_string(result).unwrap().len();
    assert!(size <= 2048, "bounded: {size}");
    let doc: Value = serde_json::from_str(result["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(doc["truncated"], true);
    assert_eq!(doc["id"], id.as_str());
    assert_eq!(doc["status"], "completed");
    assert_eq!(doc["note_count"], 31);
    let kept = doc["document"]["notes"].as_array().unwrap().len();
    assert!(kept < 31, "{kept}");
    let notice = doc["truncation_notice"].as_str().unwrap();
    assert!(notice.contains("get_note"), "{notice}");

    // A small resource is sent whole, without the marks.
    let uri = format!("gatehouse://projects/{}", a.project);
    let body = rpc(&app, &a.token, "resources/read", json!({"uri": uri})).await;
    let doc: Value =
        serde_json::from_str(body["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert!(doc.get("truncated").is_none() && doc.get("truncation_notice").is_none());
    assert_eq!(doc["note_count"], 31);
}

#[tokio::test]
async fn resources_need_the_read_scope_and_cursors_are_bounded() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    // A token without scopes (the token endpoint never issues one; written in the store here).
    let bare = token_for(&app, &a.browser, "mcp:read").await;
    let hash = gatehouse::domain::secret::Secret::from_presented(bare.clone()).hash();
    behind_the_back(
        &app,
        sqlx::query("UPDATE access_tokens SET scope = '' WHERE token_hash = $1")
            .bind(hash.as_str().to_string())
            .execute(app.db.pool().await),
    )
    .await
    .unwrap();
    let project_uri = format!("gatehouse://projects/{}", a.project);
    for (method, params) in [
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        ("resources/read", json!({"uri": project_uri})),
    ] {
        let (status, headers, _) = send(modern(&app, Some(&bare), method, params)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method}");
        let challenge = headers["www-authenticate"].to_str().unwrap();
        assert!(
            challenge.contains("error=\"insufficient_scope\""),
            "{method}: {challenge}"
        );
    }
    let got = rpc(&app, &a.token, "resources/list", json!({})).await;
    assert!(got["result"]["resources"].is_array(), "{got}");
    // A cursor whose offset would overflow is an invalid cursor, not a crash.
    for offset in ["18446744073709551600", "9223372036854775808", "-1"] {
        use base64::Engine;
        let cursor = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("n:{offset}"));
        let (status, _, got) = send(modern(
            &app,
            Some(&a.token),
            "resources/list",
            json!({"cursor": cursor}),
        ))
        .await;
        assert_eq!(got["error"]["code"], -32602, "{offset}: {status} {got}");
    }
}
