//! Per-app project choice (issue 37 item 2): on the consent page a person chooses every project
//! or named ones, reading only or reading and writing, and for how long; the app's page narrows
//! or widens it later. Every credential path of the grant follows the choice — access tokens,
//! refresh, introspection, `tools/list`, every tool — on this instance and on another one
//! sharing the database, and nothing revoked comes back.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, behind_the_back, hidden_input, spawn_app, spawn_twin_with_fetcher};
use crate::mcp::{call, error_text, modern, ok, rpc, send};
use crate::oauth_helpers::{
    REDIRECT, authorize_url, exchange, pkce, query_of, refresh, register_public, signed_in_browser,
};

/// Alice signed in, with two projects: (browser, account id, "Research", "Private").
async fn alice_with_two_projects(app: &TestApp) -> (reqwest::Client, String, String, String) {
    let browser = signed_in_browser(app).await;
    let id = crate::mcp::account_id(app, crate::oauth_helpers::EMAIL).await;
    let now = gatehouse::store::now();
    let research = app
        .store
        .create_project("Research", &id, now)
        .await
        .unwrap();
    let private = app.store.create_project("Private", &id, now).await.unwrap();
    (browser, id, research, private)
}

/// Opens the consent page for `client_id` asking `scope` and answers it with `choice` (the
/// page's own fields: `reach`, `project`, `access`, `duration`); returns the consent page's
/// HTML and the token response.
async fn approve_with(
    app: &TestApp,
    browser: &reqwest::Client,
    client_id: &str,
    scope: &str,
    choice: &[(&str, &str)],
) -> (String, Value) {
    let (page, code, verifier) = approved_code(app, browser, client_id, scope, choice).await;
    let (status, body, _) = exchange(app, client_id, &code, &verifier, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    (page, body)
}

/// [`approve_with`] without redeeming the code: (consent page HTML, code, `code_verifier`).
async fn approved_code(
    app: &TestApp,
    browser: &reqwest::Client,
    client_id: &str,
    scope: &str,
    choice: &[(&str, &str)],
) -> (String, String, String) {
    let (verifier, challenge) = pkce();
    let url = authorize_url(app, client_id, &challenge, &[("scope", scope)]);
    let r = browser.get(url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "the consent page");
    let page = r.text().await.unwrap();
    let csrf = hidden_input(&page, "csrf_token").unwrap();
    let request = hidden_input(&page, "request").unwrap();
    let mut form = vec![
        ("csrf_token", csrf.as_str()),
        ("request", request.as_str()),
        ("decision", "approve"),
    ];
    form.extend_from_slice(choice);
    let d = browser
        .post(app.url("/oauth/authorize/decision"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(d.status(), StatusCode::SEE_OTHER);
    let location = d.headers()["location"].to_str().unwrap().to_string();
    let code = query_of(&location)
        .remove("code")
        .unwrap_or_else(|| panic!("a code in {location}"));
    (page, code, verifier)
}

/// The ids `list_projects` answers with.
async fn listed(app: &TestApp, token: &str) -> Vec<String> {
    let sc = ok(&call(app, token, "list_projects", json!({})).await);
    sc["projects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect()
}

/// A confidential client allowed to introspect: (id, secret).
async fn introspector(app: &TestApp) -> (&'static str, &'static str) {
    let (id, secret) = ("gc_choice_introspector", "choice-introspection-secret");
    app.store
        .create_client(&gatehouse::store::oauth::ClientRecord {
            client_id: id.into(),
            client_secret_hash: Some(gatehouse::domain::secret::TokenHash::of(secret)),
            token_endpoint_auth_method: "client_secret_basic".into(),
            client_name: Some("Resource server".into()),
            redirect_uris: Vec::new(),
            grant_types: Vec::new(),
            scope: None,
            metadata: json!({}),
            can_introspect: true,
            created_at: gatehouse::store::now(),
        })
        .await
        .unwrap();
    (id, secret)
}

async fn introspect(app: &TestApp, (id, secret): (&str, &str), token: &str) -> Value {
    let r = app
        .client
        .post(app.url("/oauth/introspect"))
        .basic_auth(id, Some(secret))
        .form(&[("token", token)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    r.json().await.unwrap()
}

/// `tools/call` status (HTTP) and body, for calls that may be refused before the tool runs.
async fn call_status(app: &TestApp, token: &str, name: &str, args: Value) -> (StatusCode, Value) {
    let (status, _, body) = send(modern(
        app,
        Some(token),
        "tools/call",
        json!({"name": name, "arguments": args}),
    ))
    .await;
    (status, body)
}

/// The consent id of the only app on the account's connected-apps page.
async fn consent_id(app: &TestApp, account_id: &str) -> String {
    let apps = app.store.connected_apps(account_id).await.unwrap();
    assert_eq!(apps.len(), 1);
    apps[0].consent_id.clone()
}

/// Changes the app's choice through its page (`GET` for the form, `POST` it); the response.
async fn change_on_app_page(
    app: &TestApp,
    browser: &reqwest::Client,
    consent: &str,
    choice: &[(&str, &str)],
) -> reqwest::Response {
    let page = browser
        .get(app.url(&format!("/apps/{consent}/access")))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let page = page.text().await.unwrap();
    let csrf = hidden_input(&page, "csrf_token").unwrap();
    let mut form = vec![("csrf_token", csrf.as_str())];
    form.extend_from_slice(choice);
    browser
        .post(app.url(&format!("/apps/{consent}/access")))
        .form(&form)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn named_projects_limit_every_tool_refresh_and_introspection() {
    let app = spawn_app().await;
    let (browser, _, research, private) = alice_with_two_projects(&app).await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (page, tokens) = approve_with(
        &app,
        &browser,
        &client_id,
        "mcp:read mcp:write",
        &[
            ("reach", "named"),
            ("project", research.as_str()),
            ("access", "write"),
            ("duration", "revoked"),
        ],
    )
    .await;
    // The page offers both projects by name and the three durations.
    for words in [
        "Research",
        "Private",
        "including ones I join later",
        "30 days",
        "1 day",
    ] {
        assert!(page.contains(words), "the consent page offers {words}");
    }
    let token = tokens["access_token"].as_str().unwrap().to_string();

    // Only the chosen project: listed, readable, writable; the other is "not found".
    assert_eq!(listed(&app, &token).await, std::slice::from_ref(&research));
    ok(&call(&app, &token, "get_project", json!({"project_id": research})).await);
    let text = error_text(&call(&app, &token, "get_project", json!({"project_id": private})).await);
    assert!(text.contains("No project with id"), "{text}");
    let text = error_text(
        &call(
            &app,
            &token,
            "search_notes",
            json!({"project_id": private, "query": "plans"}),
        )
        .await,
    );
    assert!(text.contains("No project with id"), "{text}");
    let text = error_text(
        &call(
            &app,
            &token,
            "create_note",
            json!({"project_id": private, "title": "t", "body": "b"}),
        )
        .await,
    );
    assert!(text.contains("No project with id"), "{text}");
    let note = ok(&call(
        &app,
        &token,
        "create_note",
        json!({"project_id": research, "title": "Plans", "body": "b"}),
    )
    .await);
    assert!(
        note["id"].is_string() || note["note"]["id"].is_string(),
        "{note}"
    );
    // A project made later is not among the named ones.
    let id = crate::mcp::account_id(&app, crate::oauth_helpers::EMAIL).await;
    let later = app
        .store
        .create_project("Later", &id, gatehouse::store::now())
        .await
        .unwrap();
    assert_eq!(listed(&app, &token).await, std::slice::from_ref(&research));
    assert!(
        error_text(&call(&app, &token, "get_project", json!({"project_id": later})).await)
            .contains("No project with id")
    );

    // Introspection says which projects.
    let rs = introspector(&app).await;
    let answer = introspect(&app, rs, &token).await;
    assert_eq!(answer["active"], true);
    assert_eq!(answer["gatehouse_projects"], json!([research]));
    assert_eq!(answer["scope"], "mcp:read mcp:write");

    // A refreshed token keeps the choice.
    let (status, refreshed) = refresh(
        &app,
        &client_id,
        tokens["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{refreshed}");
    let next = refreshed["access_token"].as_str().unwrap();
    assert_eq!(listed(&app, next).await, std::slice::from_ref(&research));
    assert_eq!(
        introspect(&app, rs, next).await["gatehouse_projects"],
        json!([research])
    );
}

#[tokio::test]
async fn reading_only_answers_writes_with_the_step_up_challenge_and_a_step_up_keeps_the_projects() {
    let app = spawn_app().await;
    let (browser, _, research, private) = alice_with_two_projects(&app).await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (_, tokens) = approve_with(
        &app,
        &browser,
        &client_id,
        "mcp:read mcp:write",
        &[
            ("reach", "named"),
            ("project", research.as_str()),
            ("access", "read"),
            ("duration", "revoked"),
        ],
    )
    .await;
    let token = tokens["access_token"].as_str().unwrap().to_string();
    // The writing tools are not listed, and calling one asks for more (403, RFC 6750 §3.1).
    let list = rpc(&app, &token, "tools/list", json!({})).await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"get_project"), "{names:?}");
    assert!(!names.contains(&"create_note"), "{names:?}");
    let (status, _) = call_status(
        &app,
        &token,
        "create_note",
        json!({"project_id": research, "title": "t", "body": "b"}),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let rs = introspector(&app).await;
    assert_eq!(introspect(&app, rs, &token).await["scope"], "mcp:read");

    // Asking again for writing is a step-up: the page is shown (not answered by the remembered
    // grant) and starts from the chosen project, with read and write offered.
    let (_, challenge) = pkce();
    let page = browser
        .get(authorize_url(&app, &client_id, &challenge, &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK, "a step-up shows the page");
    let page = page.text().await.unwrap();
    assert!(page.contains("asks for more access"), "a step-up page");
    assert!(
        page.contains(&format!("value=\"{research}\" checked")),
        "the chosen project stays ticked"
    );
    assert!(!page.contains(&format!("value=\"{private}\" checked")));
    assert!(page.contains("name=\"reach\" value=\"named\" checked"));

    // Approving read and write with the same project: writes there, still nothing elsewhere.
    let (_, tokens) = approve_with(
        &app,
        &browser,
        &client_id,
        "mcp:read mcp:write",
        &[
            ("reach", "named"),
            ("project", research.as_str()),
            ("access", "write"),
            ("duration", "revoked"),
        ],
    )
    .await;
    let token = tokens["access_token"].as_str().unwrap();
    ok(&call(
        &app,
        token,
        "create_note",
        json!({"project_id": research, "title": "t", "body": "b"}),
    )
    .await);
    assert_eq!(listed(&app, token).await, [research]);
}

#[tokio::test]
async fn narrowing_on_the_app_page_reaches_another_instance_at_once_and_revives_nothing() {
    let app = spawn_app().await;
    let twin = spawn_twin_with_fetcher(
        &app,
        Arc::new(gatehouse::oauth::clients::HttpsFetcher::default()),
    )
    .await;
    let (browser, id, research, private) = alice_with_two_projects(&app).await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let (_, tokens) = approve_with(
        &app,
        &browser,
        &client_id,
        "mcp:read mcp:write",
        &[
            ("reach", "all"),
            ("access", "write"),
            ("duration", "revoked"),
        ],
    )
    .await;
    let token = tokens["access_token"].as_str().unwrap().to_string();
    let both = {
        let mut v = vec![research.clone(), private.clone()];
        v.sort();
        v
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    // Both instances answer (and cache) the grant for every project.
    for _ in 0..3 {
        assert_eq!(sorted(listed(&twin, &token).await), both);
        assert_eq!(sorted(listed(&app, &token).await), both);
    }
    let consent = consent_id(&app, &id).await;

    // Narrowed on the first instance's app page: the very next call on the second one sees it.
    let r = change_on_app_page(
        &app,
        &browser,
        &consent,
        &[
            ("reach", "named"),
            ("project", research.as_str()),
            ("access", "read"),
            ("duration", "revoked"),
        ],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(listed(&twin, &token).await, std::slice::from_ref(&research));
    assert!(
        error_text(&call(&twin, &token, "get_project", json!({"project_id": private})).await)
            .contains("No project with id")
    );
    let (status, _) = call_status(
        &twin,
        &token,
        "create_note",
        json!({"project_id": research, "title": "t", "body": "b"}),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "reading only now");
    let apps = browser.get(app.url("/apps")).send().await.unwrap();
    let apps = apps.text().await.unwrap();
    assert!(
        apps.contains("Only Research"),
        "the app page says what it reaches"
    );
    assert!(apps.contains("Read only"));
    assert!(
        !apps.contains("Create and change notes in your projects"),
        "what it may do now leaves writing out"
    );

    // Named with nothing ticked is refused with the reason, and changes nothing.
    let r = change_on_app_page(
        &app,
        &browser,
        &consent,
        &[
            ("reach", "named"),
            ("access", "read"),
            ("duration", "revoked"),
        ],
    )
    .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("Choose at least one project")
    );
    assert_eq!(listed(&twin, &token).await, std::slice::from_ref(&research));

    // A form that carries no choice at all changes nothing and says so, not that the app
    // "now reaches only what you chose".
    let r = change_on_app_page(&app, &browser, &consent, &[]).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let apps = browser.get(app.url("/apps")).send().await.unwrap();
    let apps = apps.text().await.unwrap();
    assert!(
        apps.contains("access is unchanged: the form chose nothing"),
        "{apps}"
    );
    assert!(!apps.contains("now reaches only what you chose"), "{apps}");
    assert_eq!(listed(&twin, &token).await, std::slice::from_ref(&research));

    // Widened again: every project and writing, on the other instance at once.
    let r = change_on_app_page(
        &app,
        &browser,
        &consent,
        &[
            ("reach", "all"),
            ("access", "write"),
            ("duration", "revoked"),
        ],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(sorted(listed(&twin, &token).await), both);
    ok(&call(
        &twin,
        &token,
        "create_note",
        json!({"project_id": private, "title": "t", "body": "b"}),
    )
    .await);

    // Nothing revoked comes back: a token its client revoked stays refused through a
    // narrowing and a widening.
    let r = app
        .client
        .post(app.url("/oauth/revoke"))
        .form(&[("token", token.as_str()), ("client_id", client_id.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    for choice in [
        vec![
            ("reach", "named"),
            ("project", research.as_str()),
            ("access", "read"),
            ("duration", "revoked"),
        ],
        vec![
            ("reach", "all"),
            ("access", "write"),
            ("duration", "revoked"),
        ],
    ] {
        let r = change_on_app_page(&app, &browser, &consent, &choice).await;
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        for instance in [&app, &twin] {
            let (status, _) = call_status(instance, &token, "list_projects", json!({})).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED);
        }
    }
    // The refresh token of the same grant still works and reaches what is chosen now.
    let (status, refreshed) = refresh(
        &app,
        &client_id,
        tokens["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{refreshed}");
    let next = refreshed["access_token"].as_str().unwrap();
    assert_eq!(sorted(listed(&twin, next).await), both);
}

#[tokio::test]
async fn a_one_day_grant_ends_refuses_refresh_and_starts_again_only_by_consent() {
    let app = spawn_app().await;
    let (browser, id, research, _) = alice_with_two_projects(&app).await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let before = gatehouse::store::now();
    let (_, tokens) = approve_with(
        &app,
        &browser,
        &client_id,
        "mcp:read mcp:write",
        &[("reach", "all"), ("access", "write"), ("duration", "1d")],
    )
    .await;
    let token = tokens["access_token"].as_str().unwrap().to_string();
    let apps = app.store.connected_apps(&id).await.unwrap();
    let end = apps[0].expires_at.expect("a one-day grant ends");
    assert!((before + 86_400..=gatehouse::store::now() + 86_400).contains(&end));
    assert!(listed(&app, &token).await.contains(&research));
    let rs = introspector(&app).await;
    let answer = introspect(&app, rs, &token).await;
    assert!(answer["exp"].as_i64().unwrap() <= end);

    // A day later (the end moved to the past in the database, as another process would).
    let consent = apps[0].consent_id.clone();
    grant_ends_at(&app, &consent, gatehouse::store::now() - 1).await;
    let (status, _) = call_status(&app, &token, "list_projects", json!({})).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(introspect(&app, rs, &token).await, json!({"active": false}));
    let (status, body) = refresh(
        &app,
        &client_id,
        tokens["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_grant");
    // The app page says it ended and offers no change.
    let page = browser.get(app.url("/apps")).send().await.unwrap();
    assert!(page.text().await.unwrap().contains("Ended"));
    let r = browser
        .get(app.url(&format!("/apps/{consent}/access")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // Asking again shows the consent page (the ended grant is not remembered); approving
    // starts a new grant, and the ended one's token stays refused.
    let (_, again) = approve_with(
        &app,
        &browser,
        &client_id,
        "mcp:read mcp:write",
        &[
            ("reach", "all"),
            ("access", "write"),
            ("duration", "revoked"),
        ],
    )
    .await;
    let fresh = again["access_token"].as_str().unwrap();
    assert!(listed(&app, fresh).await.contains(&research));
    let (status, _) = call_status(&app, &token, "list_projects", json!({})).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let apps = app.store.connected_apps(&id).await.unwrap();
    assert_eq!(apps.len(), 1, "the ended grant was revoked");
    assert_ne!(apps[0].consent_id, consent);
    assert_eq!(apps[0].expires_at, None);
}

/// Moves the end of the grant `consent` to `end` (Unix seconds) in the database, as time
/// passing (or another process) would.
async fn grant_ends_at(app: &TestApp, consent: &str, end: i64) {
    sqlx::any::install_default_drivers();
    let other = sqlx::AnyPool::connect(&app.db.url).await.unwrap();
    behind_the_back(app, async {
        sqlx::query("UPDATE consents SET expires_at = $1 WHERE id = $2")
            .bind(end)
            .bind(consent)
            .execute(&other)
            .await
            .unwrap();
    })
    .await;
}

#[tokio::test]
async fn codes_and_refreshes_near_a_grants_end_give_tokens_that_end_with_it() {
    let app = spawn_app().await;
    let (browser, id, research, _) = alice_with_two_projects(&app).await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let choice = [("reach", "all"), ("access", "write"), ("duration", "1d")];
    let (_, first, first_verifier) =
        approved_code(&app, &browser, &client_id, "mcp:read", &choice).await;
    // The grant is remembered: asking again gets a second code of the same grant at once.
    let (second_verifier, challenge) = pkce();
    let r = browser
        .get(authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("scope", "mcp:read")],
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "no consent page again");
    let location = r.headers()["location"].to_str().unwrap().to_string();
    let second = query_of(&location).remove("code").unwrap();
    let consent = consent_id(&app, &id).await;

    // Thirty seconds before the day is over, the first code is redeemed: its access token
    // (and the next one a refresh gives) ends with the grant, and `expires_in` says so.
    let end = gatehouse::store::now() + 30;
    grant_ends_at(&app, &consent, end).await;
    let (status, tokens, _) = exchange(&app, &client_id, &first, &first_verifier, &[]).await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    let expires_in = tokens["expires_in"].as_i64().unwrap();
    assert!((1..=30).contains(&expires_in), "{tokens}");
    let token = tokens["access_token"].as_str().unwrap();
    assert!(listed(&app, token).await.contains(&research));
    let rs = introspector(&app).await;
    assert!(introspect(&app, rs, token).await["exp"].as_i64().unwrap() <= end);
    let (status, refreshed) = refresh(
        &app,
        &client_id,
        tokens["refresh_token"].as_str().unwrap(),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{refreshed}");
    let expires_in = refreshed["expires_in"].as_i64().unwrap();
    assert!((1..=30).contains(&expires_in), "{refreshed}");

    // Once it is over, the second code (still within its own ten minutes) is refused like
    // the grant's refresh token, and writes nothing.
    grant_ends_at(&app, &consent, gatehouse::store::now() - 1).await;
    let (status, body, _) = exchange(&app, &client_id, &second, &second_verifier, &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"], "invalid_grant");
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("the authorization has ended"),
        "{body}"
    );
    let issued: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM token_families WHERE consent_id = $1")
            .bind(&consent)
            .fetch_one(app.db.pool().await)
            .await
            .unwrap();
    assert_eq!(issued, 1, "only the first code made a family");
    // The connection timeline says why, and what to do.
    let timeline = browser
        .get(app.url(&format!("/apps/timeline?client_id={client_id}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        timeline.contains("The time you allowed this app had passed"),
        "{timeline}"
    );
}
