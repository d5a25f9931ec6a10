//! After setup the console leads somewhere: the MCP URL and steps per client, a project made in
//! the console; notes readable there, with search snippets and who changed a note last (issue
//! 37, parts 4 and 5).

use crate::console::{account_id, page, post_form};
use crate::helpers::{html_unescape, spawn_app};
use crate::mcp::{alice, call};
use crate::oauth_helpers::{EMAIL, signed_in_browser};
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test]
async fn home_gives_the_mcp_url_and_steps_and_creates_projects() {
    let app = spawn_app().await;
    let browser = signed_in_browser(&app).await;
    let alice = account_id(&app, EMAIL).await;
    let home = html_unescape(&page(&app, &browser, "/").await);
    let mcp_url = app.url("/mcp");
    assert!(
        home.contains(&format!(
            "<input id=\"mcp-url\" type=\"text\" readonly value=\"{mcp_url}\">"
        )),
        "{home}"
    );
    for client in [
        "Claude (claude.ai, Claude Desktop)",
        "ChatGPT",
        "Cursor",
        "VS Code",
        "Claude Code",
    ] {
        assert!(
            home.contains(&format!("<dt>{client}</dt>")),
            "{client}: {home}"
        );
    }
    assert!(home.contains(&format!(
        "claude mcp add --transport http gatehouse {mcp_url}"
    )));
    assert!(
        home.contains("You are not a member of any project yet."),
        "{home}"
    );
    // The empty Connected apps page leads to the same steps.
    let apps = page(&app, &browser, "/apps").await;
    assert!(apps.contains("id=\"mcp-url\""), "{apps}");

    // A project made in the console belongs to its maker.
    let r = post_form(
        &app,
        &browser,
        "/",
        "/projects",
        &[("name", "  Garden plans ")],
    )
    .await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let location = r.headers()["location"].to_str().unwrap().to_string();
    let projects = app.store.projects_of_account(&alice).await.unwrap();
    assert_eq!(projects.len(), 1);
    assert_eq!(projects[0].name, "Garden plans");
    assert_eq!(location, format!("/projects/{}", projects[0].project_id));
    assert_eq!(
        app.store
            .project_owner(&projects[0].project_id)
            .await
            .unwrap()
            .as_deref(),
        Some(alice.as_str())
    );
    let project = html_unescape(&page(&app, &browser, &location).await);
    assert!(
        project.contains("Project Garden plans created."),
        "{project}"
    );
    assert!(
        project.contains("href=\"/#connect-title\""),
        "an empty project points to the steps"
    );
    // A name people cannot read is refused on the page, what was typed kept.
    for bad in ["   ", "bad\u{0007}name", &"x".repeat(201)] {
        let r = post_form(&app, &browser, "/", "/projects", &[("name", bad)]).await;
        assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY, "{bad:?}");
        let html = r.text().await.unwrap();
        assert!(html.contains("Not created: "), "{html}");
        assert!(
            html.contains("aria-invalid=\"true\" aria-describedby=\"project-name-error\""),
            "{html}"
        );
    }
    assert_eq!(
        app.store.projects_of_account(&alice).await.unwrap().len(),
        1
    );
}

#[tokio::test]
async fn a_note_written_by_an_app_is_readable_in_the_console_with_who_changed_it() {
    let app = spawn_app().await;
    let a = alice(&app).await;
    let created = call(
        &app,
        &a.token,
        "create_note",
        json!({"project_id": a.project, "title": "Spring launch", "body": "Check the consent page\non a phone.", "tags": ["launch", "ux"]}),
    )
    .await;
    let note_id = created["structuredContent"]["id"]
        .as_str()
        .expect("the note id")
        .to_string();
    // The project page links the title to the note page.
    let project = page(&app, &a.browser, &format!("/projects/{}", a.project)).await;
    let note_path = format!("/projects/{}/notes/{note_id}", a.project);
    assert!(
        project.contains(&format!("<a href=\"{note_path}\">Spring launch</a>")),
        "{project}"
    );
    let note = html_unescape(&page(&app, &a.browser, &note_path).await);
    assert!(note.contains("<h1>Spring launch</h1>"), "{note}");
    assert!(
        note.contains("Check the consent page\non a phone."),
        "{note}"
    );
    assert!(
        note.contains("<span class=\"tag\">launch</span> <span class=\"tag\">ux</span>"),
        "{note}"
    );
    assert!(
        note.contains(&format!("by {EMAIL} through Test Client, ")),
        "{note}"
    );
    // A search shows where the words matched.
    let found = page(
        &app,
        &a.browser,
        &format!("/projects/{}?q=phone", a.project),
    )
    .await;
    assert!(found.contains("<mark>phone</mark>"), "{found}");
    assert!(
        found.contains(&format!("<a href=\"{note_path}\">Spring launch</a>")),
        "{found}"
    );
    // Someone who is not a member gets the same 404 as for a missing note.
    app.create_account("eve@example.com", "eve-password-1")
        .await;
    let eve = crate::helpers::new_client();
    app.sign_in(&eve, "eve@example.com", "eve-password-1").await;
    for path in [
        note_path.clone(),
        format!("/projects/{}/notes/not-a-note", a.project),
    ] {
        let r = eve.get(app.url(&path)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
    }
    let r = a
        .browser
        .get(app.url(&format!("/projects/{}/notes/not-a-note", a.project)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}
