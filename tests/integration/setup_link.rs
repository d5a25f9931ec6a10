//! The first-run setup link is void once any account exists (issue 30, finding 12): an
//! account made on the command line the next day must not leave the link creating another.

use reqwest::StatusCode;

use crate::helpers::{hidden_input, new_client, spawn_app};
use crate::oauth_helpers::{EMAIL, PASSWORD};

#[tokio::test]
async fn the_setup_link_is_void_once_an_account_exists() {
    let app = spawn_app().await;
    let token = gatehouse::domain::secret::Secret::generate(
        gatehouse::domain::secret::TokenKind::SetupToken,
    );
    let now = gatehouse::store::now();
    app.store
        .create_setup_token(&token.hash(), now, now + 24 * 3600)
        .await
        .unwrap();
    let client = new_client();
    let link = app.url(&format!("/setup?token={}", token.expose()));
    // The form shows while nobody has an account; keep its CSRF token for later.
    let page = client.get(&link).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let csrf = hidden_input(&page.text().await.unwrap(), "csrf_token").unwrap();
    // The operator makes the first account on the command line instead.
    app.create_account(EMAIL, PASSWORD).await;
    let page = client.get(&link).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::NOT_FOUND, "the link is void");
    let r = client
        .post(app.url("/setup"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("token", token.expose()),
            ("email", "intruder@example.com"),
            ("password", "an-intruders-password"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        app.store.count_accounts().await.unwrap(),
        1,
        "no second account"
    );
}
