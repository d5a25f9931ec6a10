//! Resumable cut results (issue "The rest of the MCP surface", part 4): a result over
//! `GATEHOUSE_MAX_RESULT_BYTES` is cut between whole items and names how to get the rest — a
//! `cursor` argument for `search_notes`, a `?from=N` page of the export job's resource — so that
//! a model paging to the end gets every item exactly once.

use std::time::Duration;

use crate::helpers::{TestApp, spawn_app_with};
use crate::keys::{ALICE, create_key};
use crate::mcp::{call, error_text, ok, rpc};
use gatehouse::store::notes::NewNote;
use serde_json::{Value, json};

/// An app cutting results at `max_bytes`, Alice with one project of `notes` notes (each
/// mentioning "alpha", with a body of about `body_len` bytes), and her key.
async fn app_with_notes(
    max_bytes: &str,
    notes: usize,
    body_len: usize,
) -> (TestApp, String, String) {
    let max_bytes = max_bytes.to_string();
    let app = spawn_app_with(move |vars| {
        vars.insert("GATEHOUSE_MAX_RESULT_BYTES".into(), max_bytes);
    })
    .await;
    let alice = app.create_account(ALICE, "a-long-password").await;
    let now = gatehouse::store::now();
    let project = app
        .store
        .create_project("Research", &alice, now)
        .await
        .unwrap();
    for i in 0..notes {
        let body = format!("alpha note {i}: {}", "lorem ipsum ".repeat(body_len / 12));
        let title = format!("Alpha {i:03}");
        let tags = vec![format!("t{i}")];
        app.store
            .create_note(
                &NewNote {
                    project_id: &project,
                    author_account_id: &alice,
                    title: &title,
                    body: &body,
                    tags: &tags,
                },
                now + i as i64,
            )
            .await
            .unwrap();
    }
    let (_, key) = create_key(&app, &["--account", ALICE]);
    (app, project, key)
}

#[tokio::test]
async fn a_cut_search_is_paged_to_the_end_with_no_hit_lost_or_repeated() {
    let (app, project, key) = app_with_notes("2048", 40, 300).await;
    let expected: Vec<Value> = app
        .store
        .search_notes_from(&project, "alpha", 0, 50)
        .await
        .unwrap()
        .into_iter()
        .map(|h| json!({"id": h.id, "title": h.title, "snippet": h.snippet}))
        .collect();
    assert_eq!(expected.len(), 40);

    let mut got = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut args = json!({"project_id": project, "query": "alpha", "limit": 50});
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let result = call(&app, &key, "search_notes", args).await;
        assert!(
            serde_json::to_string(&result).unwrap().len() <= 2048,
            "each page fits the limit"
        );
        assert_eq!(result["isError"], false, "{result}");
        let sc = result["structuredContent"].clone();
        pages += 1;
        for hit in sc["results"].as_array().unwrap() {
            got.push(json!({"id": hit["id"], "title": hit["title"], "snippet": hit["snippet"]}));
        }
        match sc.get("nextCursor").and_then(Value::as_str) {
            Some(next) => {
                assert_eq!(sc["truncated"], true);
                let text = result["content"][0]["text"].as_str().unwrap();
                assert!(
                    text.contains(&format!("\"cursor\": \"{next}\"")),
                    "the note names the cursor: {text}"
                );
                cursor = Some(next.to_string());
            }
            None => break,
        }
        assert!(pages < 100, "paging ends");
    }
    assert!(pages > 2, "the search needed several pages ({pages})");
    assert_eq!(got, expected, "every hit once, whole, in order");

    // A cursor continues only the search it came from.
    let first = call(
        &app,
        &key,
        "search_notes",
        json!({"project_id": project, "query": "alpha", "limit": 50}),
    )
    .await;
    let next = first["structuredContent"]["nextCursor"].as_str().unwrap();
    let text = error_text(
        &call(
            &app,
            &key,
            "search_notes",
            json!({"project_id": project, "query": "lorem", "cursor": next}),
        )
        .await,
    );
    assert!(text.contains("`cursor` does not continue"), "{text}");
}

#[tokio::test]
async fn a_cut_export_document_is_read_page_by_page_and_reassembles_exactly() {
    let (app, project, key) = app_with_notes("8192", 30, 1000).await;
    let receipt = ok(&call(&app, &key, "export_project", json!({"project_id": project})).await);
    let job_id = receipt["id"].as_str().unwrap().to_string();
    let mut done = false;
    for _ in 0..200 {
        let job = ok(&call(&app, &key, "get_job", json!({"job_id": job_id})).await);
        if job["status"] == "completed" {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(done, "the export completed");
    let stored = app.store.job(&job_id).await.unwrap().unwrap();
    let whole: Value = serde_json::from_str(stored.result.as_deref().unwrap()).unwrap();
    let expected = whole["notes"].as_array().unwrap().clone();
    assert_eq!(expected.len(), 30);

    let mut uri = format!("gatehouse://jobs/export/{job_id}");
    let mut got: Vec<Value> = Vec::new();
    let mut pages = 0;
    loop {
        let body = rpc(&app, &key, "resources/read", json!({"uri": uri})).await;
        let size = serde_json::to_string(&body["result"]).unwrap().len();
        assert!(size <= 8192, "each page fits the limit: {size}");
        let contents = &body["result"]["contents"][0];
        assert_eq!(contents["uri"], uri.as_str());
        let text = contents["text"].as_str().unwrap();
        let document: Value = serde_json::from_str(text).unwrap();
        pages += 1;
        assert_eq!(document["status"], "completed");
        assert_eq!(document["document"]["project_id"], project.as_str());
        assert_eq!(
            document["document"]["notes_from"].as_u64().unwrap_or(0),
            got.len() as u64,
            "each page starts where the last one ended"
        );
        got.extend(
            document["document"]["notes"]
                .as_array()
                .unwrap()
                .iter()
                .cloned(),
        );
        match document.get("next_page").and_then(Value::as_str) {
            Some(next) => {
                assert_eq!(document["truncated"], true);
                let notice = document["truncation_notice"].as_str().unwrap();
                assert!(notice.contains(next), "{notice}");
                uri = next.to_string();
            }
            None => break,
        }
        assert!(pages < 100, "paging ends");
    }
    assert!(pages > 2, "the export needed several pages ({pages})");
    assert_eq!(got, expected, "every note once, whole, in order");

    // Only a job takes a page, and only a well-formed one.
    for bad in [
        format!("gatehouse://projects/{project}?from=1"),
        format!("gatehouse://jobs/export/{job_id}?from=x"),
        format!("gatehouse://jobs/export/{job_id}?page=1"),
    ] {
        let body = rpc(&app, &key, "resources/read", json!({"uri": bad})).await;
        assert!(body["error"]["code"].is_i64(), "{bad}: {body}");
    }
}

#[tokio::test]
async fn a_note_too_long_for_one_result_is_read_in_parts_to_its_end() {
    let (app, project, key) = app_with_notes("4096", 1, 20).await;
    let alice = app
        .store
        .account_by_email(&gatehouse::domain::account::Email::parse(ALICE).unwrap())
        .await
        .unwrap()
        .unwrap();
    // 19,000 characters with multi-byte letters, quotes and line breaks (the costliest to send).
    let body: String = (0..1900)
        .map(|i| format!("é\"{:04}\n\\ab", i % 10_000))
        .collect::<String>()[..]
        .chars()
        .take(19_000)
        .collect();
    let note = app
        .store
        .create_note(
            &NewNote {
                project_id: &project,
                author_account_id: &alice.id,
                title: "Long",
                body: &body,
                tags: &[],
            },
            gatehouse::store::now(),
        )
        .await
        .unwrap();
    let mut read = String::new();
    let mut from: Option<u64> = None;
    let mut parts = 0;
    loop {
        let mut args = json!({"project_id": project, "note_id": note.id});
        if let Some(f) = from {
            args["body_from"] = json!(f);
        }
        let result = call(&app, &key, "get_note", args).await;
        assert!(
            serde_json::to_string(&result).unwrap().len() <= 4096,
            "each part fits the limit"
        );
        let sc = ok(&result);
        assert!(sc.get("truncated").is_none(), "a part is never cut: {sc}");
        assert_eq!(sc["body_from"], json!(from.unwrap_or(0)));
        assert_eq!(sc["body_chars"], json!(19_000));
        read.push_str(sc["body"].as_str().unwrap());
        parts += 1;
        match sc.get("next_body_from").and_then(Value::as_u64) {
            Some(next) => from = Some(next),
            None => break,
        }
        assert!(parts < 1000, "paging ends");
    }
    assert!(parts > 5, "the text needed several parts ({parts})");
    assert_eq!(read, body, "the whole text, once, in order");

    // An offset past the end is refused, naming the length.
    let past = call(
        &app,
        &key,
        "get_note",
        json!({"project_id": project, "note_id": note.id, "body_from": 19_001}),
    )
    .await;
    assert_eq!(past["isError"], true, "{past}");
    assert!(
        error_text(&past).contains("past the end of the text (19000 characters)"),
        "{past}"
    );

    // A note that fits comes whole, with no paging members.
    let notes = app.store.notes_of_project(&project).await.unwrap();
    let small = notes.iter().find(|n| n.id != note.id).unwrap();
    let whole = ok(&call(
        &app,
        &key,
        "get_note",
        json!({"project_id": project, "note_id": small.id}),
    )
    .await);
    assert_eq!(whole["body"], json!(small.body));
    for member in ["body_from", "next_body_from", "body_chars"] {
        assert!(whole.get(member).is_none(), "{member}: {whole}");
    }
}
