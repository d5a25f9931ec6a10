//! Broken request bodies and the note text rules.

use super::*;

/// A POST of `body` as it is, with the usual headers of `version` and `content_type`.
pub(crate) fn raw(
    app: &TestApp,
    token: Option<&str>,
    version: &str,
    content_type: Option<&str>,
    body: &str,
) -> reqwest::RequestBuilder {
    let mut r = app
        .client
        .post(mcp_url(app))
        .header("accept", ACCEPT)
        .header("mcp-protocol-version", version)
        .body(body.to_string());
    if let Some(ct) = content_type {
        r = r.header("content-type", ct);
    }
    if let Some(token) = token {
        r = r.bearer_auth(token);
    }
    r
}

#[tokio::test]
async fn broken_request_bodies_get_json_rpc_errors() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    let json_ct = Some("application/json");

    // Authentication comes first.
    let (s, h, _) = send(raw(&app, None, V26, json_ct, "{not json")).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert!(h.contains_key("www-authenticate"));

    // Not JSON (or no JSON-RPC message at all): HTTP 400, -32700 Parse error, id null
    // (JSON-RPC 2.0 §5.1).
    let parse_error =
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}});
    for body in [
        "{not json",
        "",
        "null",
        "{\"jsonrpc\":\"2.0\",",
        "\u{feff}x",
    ] {
        for version in ["2025-06-18", V26] {
            let (s, h, got) = send(raw(&app, Some(&a.token), version, json_ct, body)).await;
            assert_eq!(s, StatusCode::BAD_REQUEST, "{body:?} {version}: {got}");
            assert_eq!(got, parse_error, "{body:?} {version}");
            assert!(
                h["content-type"]
                    .to_str()
                    .unwrap()
                    .starts_with("application/json")
            );
        }
    }

    // JSON but not a JSON-RPC message object: HTTP 400, -32600 Invalid Request.
    for body in [
        "[1]",
        "[]",
        "{}",
        "7",
        "\"tools/list\"",
        r#"{"jsonrpc":"2.0","id":1}"#,
        r#"{"id":1,"method":"tools/list"}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#,
    ] {
        for version in ["2025-06-18", V26] {
            let (s, _, got) = send(raw(&app, Some(&a.token), version, json_ct, body)).await;
            assert_eq!(s, StatusCode::BAD_REQUEST, "{body} {version}: {got}");
            assert_eq!(got["jsonrpc"], "2.0", "{body}");
            assert_eq!(got["error"]["code"], -32600, "{body} {version}: {got}");
            assert_eq!(got["error"]["message"], "Invalid Request", "{body}");
        }
    }
    let (_, _, got) = send(raw(&app, Some(&a.token), V26, json_ct, "{}")).await;
    assert_eq!(got["id"], Value::Null);

    // A request whose params do not fit its method: -32602 Invalid params, with its id.
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": V26,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "gatehouse-tests", "version": "1"}
    });
    let cases = [
        ("tools/call", json!([1])),
        ("tools/call", json!({"_meta": meta, "arguments": {}})),
        ("tools/call", json!({"_meta": meta, "name": 7})),
        ("resources/read", json!({"_meta": meta})),
        ("resources/read", json!({"_meta": meta, "uri": ["x"]})),
        ("tools/list", json!("all")),
    ];
    for (method, params) in cases {
        let body = json!({"jsonrpc": "2.0", "id": 41, "method": method, "params": params});
        let (s, _, got) = send(
            raw(&app, Some(&a.token), V26, json_ct, &body.to_string()).header("mcp-method", method),
        )
        .await;
        assert_eq!(got["error"]["code"], -32602, "{body}: {s} {got}");
        assert_eq!(got["error"]["message"], "Invalid params", "{body}");
        assert_eq!(got["id"], 41, "{body}");
        assert_eq!(s, StatusCode::OK, "in-band, like other errors of a request");
    }
    // The same in an older revision, without a params member at all.
    let body = json!({"jsonrpc": "2.0", "id": "r1", "method": "tools/call"});
    let (_, _, got) = send(raw(
        &app,
        Some(&a.token),
        "2025-06-18",
        json_ct,
        &body.to_string(),
    ))
    .await;
    assert_eq!(got["error"]["code"], -32602, "{got}");
    assert_eq!(got["id"], "r1");
    // An unknown method is still -32601.
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "rockets/launch", "params": {}});
    let (_, _, got) = send(raw(
        &app,
        Some(&a.token),
        "2025-06-18",
        json_ct,
        &body.to_string(),
    ))
    .await;
    assert_eq!(got["error"]["code"], -32601, "{got}");
    assert_eq!(
        got["error"]["message"], "Method not found: rockets/launch",
        "{got}"
    );
    // Methods removed in 2026-07-28 answer 404 with -32601, whatever their params (SEP-2575).
    for method in ["initialize", "ping"] {
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": V26,
            "io.modelcontextprotocol/clientCapabilities": {}
        }}});
        let (s, _, got) = send(
            raw(&app, Some(&a.token), V26, json_ct, &body.to_string()).header("mcp-method", method),
        )
        .await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{method}: {got}");
        assert_eq!(got["error"]["code"], -32601, "{method}: {got}");
        assert!(
            got["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("Method not found"),
            "{method}: {got}"
        );
    }

    // No or another Content-Type: rmcp's 415, as a JSON-RPC error naming the header.
    for ct in [None, Some("text/plain")] {
        let (s, _, got) = send(raw(&app, Some(&a.token), V26, ct, "{not json")).await;
        assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{ct:?}");
        assert_eq!(got["error"]["code"], -32600, "{got}");
        assert!(
            got["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Content-Type must be application/json"),
            "{got}"
        );
    }

    // A well-formed request still goes through.
    let l = rpc(&app, &a.token, "tools/list", json!({})).await;
    assert_eq!(tool_names(&l), ALL_TOOLS);
}

#[tokio::test]
async fn control_and_bidi_characters_are_refused_in_notes() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    let good = ok(&call(
        &app,
        &a.token,
        "create_note",
        json!({"project_id": a.project, "title": "Plan", "body": "one\ntwo\r\n\tthree", "tags": ["ops"]}),
    )
    .await);
    assert_eq!(
        good["body"], "one\ntwo\r\n\tthree",
        "newlines and tabs are fine in a body"
    );
    let note_id = good["id"].as_str().unwrap().to_string();

    let bad_title = [
        "invoice\u{202e}gpj.exe",
        "a\u{0000}b",
        "tab\there",
        "line\nbreak",
        "del\u{007f}",
        "c1\u{0085}",
        "c1\u{009b}",
        "lre\u{202a}",
        "pdf\u{202c}",
        "lri\u{2066}",
        "pdi\u{2069}",
        "lrm\u{200e}",
        "rlm\u{200f}",
        "alm\u{061c}",
    ];
    for title in bad_title {
        let msg = error_text(
            &call(
                &app,
                &a.token,
                "create_note",
                json!({"project_id": a.project, "title": title, "body": "b"}),
            )
            .await,
        );
        assert!(msg.contains("`title`"), "{title:?}: {msg}");
        let msg = error_text(
            &call(
                &app,
                &a.token,
                "update_note",
                json!({"project_id": a.project, "note_id": note_id, "title": title}),
            )
            .await,
        );
        assert!(msg.contains("`title`"), "{title:?}: {msg}");
    }
    for tag in ["a\u{0000}b", "x\u{202e}", "new\nline", "t\u{2067}"] {
        let msg = error_text(
            &call(
                &app,
                &a.token,
                "create_note",
                json!({"project_id": a.project, "title": "t", "body": "b", "tags": ["ok", tag]}),
            )
            .await,
        );
        assert!(msg.contains("`tags[1]`"), "{tag:?}: {msg}");
        let msg = error_text(
            &call(
                &app,
                &a.token,
                "update_note",
                json!({"project_id": a.project, "note_id": note_id, "tags": [tag]}),
            )
            .await,
        );
        assert!(msg.contains("`tags[0]`"), "{tag:?}: {msg}");
    }
    for body in [
        "bell\u{0007}",
        "nul\u{0000}",
        "esc\u{001b}[31m",
        "rlo\u{202e}",
        "c1\u{0090}",
    ] {
        let msg = error_text(
            &call(
                &app,
                &a.token,
                "create_note",
                json!({"project_id": a.project, "title": "t", "body": body}),
            )
            .await,
        );
        assert!(msg.contains("`body`"), "{body:?}: {msg}");
        let msg = error_text(
            &call(
                &app,
                &a.token,
                "update_note",
                json!({"project_id": a.project, "note_id": note_id, "body": body}),
            )
            .await,
        );
        assert!(msg.contains("`body`"), "{body:?}: {msg}");
    }
    // Nothing was stored or changed.
    assert_eq!(app.store.count_notes(&a.project).await.unwrap(), 1);
    let stored = app.store.note(&a.project, &note_id).await.unwrap().unwrap();
    assert_eq!(stored.title, "Plan");
    assert_eq!(stored.body, "one\ntwo\r\n\tthree");
    assert_eq!(stored.tags, ["ops"]);
    // Other non-ASCII text is fine.
    let sc = ok(&call(
        &app,
        &a.token,
        "update_note",
        json!({"project_id": a.project, "note_id": note_id, "title": "Café: שלום عربي 😀", "tags": ["日本"]}),
    )
    .await);
    assert_eq!(sc["title"], "Café: שלום عربي 😀");
}

/// An error that names what the client sent (a tool, prompt or method name, a resource URI)
/// repeats at most its first 128 characters (MCP tool names are at most 128, SEP-986; a URI at
/// most 1,024), so that a 100,000-character name gets a small answer.
#[tokio::test]
async fn errors_repeat_a_bounded_part_of_what_was_sent() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    let long = "a".repeat(100_000);
    let cut = format!("{}…", "a".repeat(128));
    let ask = |method: &str, params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        send(raw(
            &app,
            Some(&a.token),
            "2025-06-18",
            Some("application/json"),
            &body.to_string(),
        ))
    };

    let (_, _, got) = ask("tools/call", json!({"name": long, "arguments": {}})).await;
    assert_eq!(got["error"]["code"], -32602);
    assert!(got.to_string().len() < 2_000, "the answer stays small");
    assert_eq!(got["error"]["message"], format!("Unknown tool: {cut}"));
    assert_eq!(got["error"]["data"]["name"], cut);

    let (_, _, got) = ask("prompts/get", json!({"name": long})).await;
    assert_eq!(got["error"]["code"], -32602);
    assert!(got.to_string().len() < 2_000, "the answer stays small");
    assert_eq!(
        got["error"]["message"],
        format!("Unknown prompt: {cut}. prompts/list shows the prompts you can use.")
    );

    let (_, _, got) = ask(&long, json!({})).await;
    assert_eq!(got["error"]["code"], -32601);
    let message = got["error"]["message"].as_str().unwrap_or_default();
    assert!(message.len() < 1_000, "{}", &message[..64]);
    assert_eq!(message, format!("Method not found: {cut}"));
    // The same for params that are not an object.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": long, "params": []});
    let (_, _, got) = send(raw(
        &app,
        Some(&a.token),
        "2025-06-18",
        Some("application/json"),
        &body.to_string(),
    ))
    .await;
    assert_eq!(got["error"]["data"]["method"], cut);

    let uri = format!("gatehouse://projects/{}", "b".repeat(100_000));
    let (_, _, got) = ask("resources/read", json!({"uri": uri})).await;
    let echoed = got["error"]["data"]["uri"].as_str().unwrap();
    assert_eq!(echoed.chars().count(), 1025, "{}", &echoed[..64]);
    assert!(uri.starts_with(echoed.trim_end_matches('…')));
    assert!(got.to_string().len() < 2_000, "the answer stays small");
}
