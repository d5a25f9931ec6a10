//! Data-gated `tools/list` (issue "The rest of the MCP surface", part 2): a tool whose data the
//! caller cannot have is not listed. A caller with no project within reach sees only
//! `list_projects`, whose description says how projects are made; the writing tools need the
//! write role in some project. The list is computed per request, so it follows memberships at
//! once.

use crate::helpers::{TestApp, spawn_app};
use crate::keys::{ALICE, create_key};
use crate::mcp::{account_id, call, ok, rpc};
use gatehouse::domain::account::Role;
use serde_json::{Value, json};

const CAROL: &str = "carol@example.com";

const READERS: [&str; 6] = [
    "list_projects",
    "get_project",
    "search_notes",
    "get_note",
    "export_project",
    "get_job",
];
const EVERY_TOOL: [&str; 8] = [
    "list_projects",
    "get_project",
    "search_notes",
    "get_note",
    "create_note",
    "update_note",
    "export_project",
    "get_job",
];

/// `tools/list` with `key`: the tools, in order.
async fn listed(app: &TestApp, key: &str) -> Vec<Value> {
    let body = rpc(app, key, "tools/list", json!({})).await;
    body["result"]["tools"].as_array().unwrap().clone()
}

async fn names(app: &TestApp, key: &str) -> Vec<String> {
    listed(app, key)
        .await
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_caller_without_a_project_sees_only_list_projects_until_it_has_one() {
    let app = spawn_app().await;
    let alice = app.create_account(ALICE, "a-long-password").await;
    let (_, key) = create_key(&app, &["--account", ALICE, "--write"]);

    let tools = listed(&app, &key).await;
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert_eq!(tools[0]["name"], "list_projects");
    let description = tools[0]["description"].as_str().unwrap();
    assert!(
        description.contains("gatehouse project add NAME --owner EMAIL"),
        "{description}"
    );
    assert!(description.contains("console"), "{description}");
    // The listed tool works and says there is nothing yet.
    let sc = ok(&call(&app, &key, "list_projects", json!({})).await);
    assert_eq!(sc["projects"], json!([]));

    // The next list follows the new membership: everything, the write tools included.
    app.store
        .create_project("Research", &alice, gatehouse::store::now())
        .await
        .unwrap();
    assert_eq!(names(&app, &key).await, EVERY_TOOL);
}

#[tokio::test]
async fn the_writing_tools_need_the_write_role_somewhere() {
    let app = spawn_app().await;
    let alice = app.create_account(ALICE, "a-long-password").await;
    let project = app
        .store
        .create_project("Research", &alice, gatehouse::store::now())
        .await
        .unwrap();
    app.create_account(CAROL, "carols-long-password").await;
    let carol = account_id(&app, CAROL).await;
    app.store
        .add_member(&project, &carol, Role::Read, gatehouse::store::now())
        .await
        .unwrap();
    // A write key of a reader: the write scope alone does not list tools it cannot use.
    let (_, carol_key) = create_key(&app, &["--account", CAROL, "--write"]);
    assert_eq!(names(&app, &carol_key).await, READERS);

    // Given the write role, the same key lists them on the next request.
    app.store
        .add_member(&project, &carol, Role::Write, gatehouse::store::now())
        .await
        .unwrap();
    assert_eq!(names(&app, &carol_key).await, EVERY_TOOL);

    // A read key never lists them, whatever the role.
    let (_, read_key) = create_key(&app, &["--account", CAROL]);
    assert_eq!(names(&app, &read_key).await, READERS);
}

#[tokio::test]
async fn a_project_key_is_gated_by_its_one_project() {
    let app = spawn_app().await;
    let alice = app.create_account(ALICE, "a-long-password").await;
    let now = gatehouse::store::now();
    let mine = app.store.create_project("Mine", &alice, now).await.unwrap();
    app.create_account(CAROL, "carols-long-password").await;
    let carol = account_id(&app, CAROL).await;
    let shared = app
        .store
        .create_project("Shared", &carol, now)
        .await
        .unwrap();
    app.store
        .add_member(&shared, &alice, Role::Read, now)
        .await
        .unwrap();
    // Alice writes in her own project, but this key reaches only the shared one, where she
    // reads: the writing tools are not listed for it.
    let (_, key) = create_key(&app, &["--account", ALICE, "--project", &shared, "--write"]);
    assert_eq!(names(&app, &key).await, READERS);
    let (_, own) = create_key(&app, &["--account", ALICE, "--project", &mine, "--write"]);
    assert_eq!(names(&app, &own).await, EVERY_TOOL);
}
