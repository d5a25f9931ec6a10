//! A client's connection timeline (issue "console" item 3): `GET /apps/timeline?client_id=…`
//! lists, for the signed-in person, the steps of connecting an app in order — registered,
//! asked for access or refused (a redirect URI not registered, no PKCE), signed in, approved,
//! a code refused (PKCE failed) or redeemed, a token not used yet, the first MCP call — each
//! failure with a reason to act on; an operator sees every account's steps with `all=1`.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestApp, hidden_input, new_client, spawn_app};
use crate::oauth_helpers::{
    EMAIL, REDIRECT, authorize_url, decide, exchange, pkce, query_of, register_public,
    signed_in_browser,
};

async fn page(browser: &reqwest::Client, url: &str) -> (StatusCode, String) {
    let r = browser.get(url).send().await.unwrap();
    (r.status(), r.text().await.unwrap())
}

fn timeline_url(app: &TestApp, client_id: &str, all: bool) -> String {
    let q: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("client_id", client_id)
        .finish();
    app.url(&format!(
        "/apps/timeline?{q}{}",
        if all { "&all=1" } else { "" }
    ))
}

/// The text of the table rows, tags removed, one line a step, in page order.
fn steps(html: &str) -> Vec<String> {
    html.split("<tr class=\"step")
        .skip(1)
        .map(|row| {
            let row = &row[..row.find("</tr>").unwrap_or(row.len())];
            let mut text = String::new();
            let mut in_tag = false;
            for c in row.chars() {
                match c {
                    '<' => in_tag = true,
                    '>' => {
                        in_tag = false;
                        text.push(' ');
                    }
                    c if !in_tag => text.push(c),
                    _ => {}
                }
            }
            crate::helpers::html_unescape(&text.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .collect()
}

/// The index of the first step containing `needle`, failing with the steps when none does.
fn at(steps: &[String], needle: &str) -> usize {
    steps
        .iter()
        .position(|s| s.contains(needle))
        .unwrap_or_else(|| panic!("no step with {needle:?} in {steps:#?}"))
}

#[tokio::test]
async fn a_persons_timeline_names_each_step_and_what_went_wrong() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let browser = signed_in_browser(&app).await;

    // Refused: a redirect URI the app did not register (an error page, never a redirect).
    let (_, challenge) = pkce();
    let (status, _) = page(
        &browser,
        &authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("redirect_uri", "https://elsewhere.example/cb")],
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // Refused: no PKCE (answered at the redirect URI).
    let r = browser
        .get(authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("code_challenge", "")],
        ))
        .send()
        .await
        .unwrap();
    assert!(
        r.headers()["location"]
            .to_str()
            .unwrap()
            .contains("error=invalid_request")
    );

    // Approved; the code is first redeemed with the wrong verifier, then with the right one.
    let (verifier, challenge) = pkce();
    let consent = browser
        .get(authorize_url(&app, &client_id, &challenge, &[]))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = hidden_input(&consent, "csrf_token").unwrap();
    let request = hidden_input(&consent, "request").unwrap();
    let d = decide(&app, &browser, &csrf, &request, "approve").await;
    let code = query_of(d.headers()["location"].to_str().unwrap())["code"].clone();
    let (wrong, _) = pkce();
    let (status, body, _) = exchange(&app, &client_id, &code, &wrong, &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body, _) = exchange(&app, &client_id, &code, &verifier, &[]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let token = body["access_token"].as_str().unwrap().to_string();

    let (status, html) = page(&browser, &timeline_url(&app, &client_id, false)).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    let s = steps(&html);
    let registered = at(&s, "Registered with this server");
    let signed_in = at(&s, "Signed in (password)");
    let unregistered = at(&s, "an address it did not register");
    let no_pkce = at(&s, "code_challenge is required (PKCE with S256)");
    let asked = at(&s, "Asked for access");
    let approved = at(&s, "Approved on the consent page");
    let pkce_failed = at(&s, "PKCE failed");
    let redeemed = at(&s, "Authorization code redeemed: tokens issued");
    let unused = at(&s, "Token issued but not used yet");
    assert!(
        registered < signed_in
            && signed_in < unregistered
            && unregistered < no_pkce
            && no_pkce < asked
            && asked < approved
            && approved < pkce_failed
            && pkce_failed < redeemed
            && redeemed < unused,
        "in the order they happened: {s:#?}"
    );
    assert!(
        s[unused].contains(&format!("{}/mcp", app.address)),
        "names the MCP URL to check: {}",
        s[unused]
    );
    assert!(
        html.contains("<tr class=\"step failed\">"),
        "failures stand out"
    );

    // The first MCP call ends the warning.
    let r = crate::mcp::rpc(
        &app,
        &token,
        "tools/call",
        json!({"name": "list_projects", "arguments": {}}),
    )
    .await;
    assert!(r.get("result").is_some(), "{r}");
    let (_, html) = page(&browser, &timeline_url(&app, &client_id, false)).await;
    let s = steps(&html);
    at(&s, "First MCP call: tool list_projects (Done)");
    assert!(
        !s.iter().any(|step| step.contains("not used yet")),
        "{s:#?}"
    );

    // The app's page and the apps list link the timeline.
    let (_, apps) = page(&browser, &app.url("/apps")).await;
    assert!(apps.contains("(timeline)</a>"), "{apps}");

    // Another person sees none of Alice's steps, and not every account's.
    app.create_account("bob@example.com", "bobs-long-password")
        .await;
    let bob = new_client();
    app.sign_in(&bob, "bob@example.com", "bobs-long-password")
        .await;
    let (status, html) = page(&bob, &timeline_url(&app, &client_id, false)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        steps(&html),
        vec![s[registered].clone()],
        "only the registration"
    );
    let (status, _) = page(&bob, &timeline_url(&app, &client_id, true)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = page(&bob, &timeline_url(&app, "no-such-client", false)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // An operator sees every account's steps, with the account, and requests made before
    // anyone signed in.
    let (status, _) = page(
        &new_client(),
        &authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("redirect_uri", "https://elsewhere.example/cb")],
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    sqlx::query("UPDATE accounts SET admin = 1 WHERE email = $1")
        .bind("bob@example.com")
        .execute(app.db.pool().await)
        .await
        .unwrap();
    let (status, html) = page(&bob, &timeline_url(&app, &client_id, true)).await;
    assert_eq!(status, StatusCode::OK);
    let s = steps(&html);
    assert!(
        s[at(&s, "Approved on the consent page")].contains(EMAIL),
        "{s:#?}"
    );
    let anonymous = s
        .iter()
        .filter(|step| step.contains("did not register") && step.contains("not signed in"))
        .count();
    assert_eq!(anonymous, 1, "{s:#?}");
}

#[tokio::test]
async fn an_app_that_never_got_access_is_listed_with_its_timeline() {
    let app = spawn_app().await;
    let client_id = register_public(&app, &[REDIRECT]).await;
    let browser = signed_in_browser(&app).await;
    let (_, apps) = page(&browser, &app.url("/apps")).await;
    assert!(!apps.contains("Apps that tried to connect"));

    let (_, challenge) = pkce();
    let r = browser
        .get(authorize_url(
            &app,
            &client_id,
            &challenge,
            &[("resource", "https://other.example/mcp")],
        ))
        .send()
        .await
        .unwrap();
    assert!(
        r.headers()["location"]
            .to_str()
            .unwrap()
            .contains("error=invalid_target"),
        "refused at the redirect URI"
    );
    let (_, apps) = page(&browser, &app.url("/apps")).await;
    assert!(apps.contains("Apps that tried to connect"), "{apps}");
    let link = format!(
        "/apps/timeline?{}",
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("client_id", &client_id)
            .finish()
    );
    assert!(apps.contains(&link), "{apps}");
    let (_, html) = page(&browser, &app.url(&link)).await;
    let s = steps(&html);
    let refused = &s[at(&s, "Its request for access was refused")];
    assert!(refused.contains("https://other.example/mcp"), "{refused}");
}
