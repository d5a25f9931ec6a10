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

/// Pages through `search_notes` for "alpha" with `limit` 50: the ids of every hit, in the
/// order they came, and the number of calls.
async fn search_to_the_end(
    app: &TestApp,
    key: &str,
    project: &str,
    max: usize,
) -> (Vec<Value>, usize) {
    let (mut ids, mut calls, mut cursor) = (Vec::new(), 0, None::<String>);
    loop {
        let mut args = json!({"project_id": project, "query": "alpha", "limit": 50});
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let result = call(app, key, "search_notes", args).await;
        assert!(serde_json::to_string(&result).unwrap().len() <= max);
        assert_eq!(result["isError"], false, "{result}");
        let sc = &result["structuredContent"];
        ids.extend(
            sc["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["id"].clone()),
        );
        calls += 1;
        assert!(calls <= 60, "paging ends");
        match sc.get("nextCursor").and_then(Value::as_str) {
            Some(next) => cursor = Some(next.to_string()),
            None => return (ids, calls),
        }
    }
}

/// Reads the export job's resource page by page: its notes, and the number of reads.
async fn export_to_the_end(
    app: &TestApp,
    key: &str,
    job_id: &str,
    max: usize,
) -> (Vec<Value>, usize) {
    let mut uri = format!("gatehouse://jobs/export/{job_id}");
    let (mut notes, mut reads) = (Vec::new(), 0);
    loop {
        let body = rpc(app, key, "resources/read", json!({"uri": uri})).await;
        let sent = serde_json::to_string(&body["result"]).unwrap();
        assert!(sent.len() <= max, "{} bytes: {sent}", sent.len());
        let text = body["result"]["contents"][0]["text"].as_str().unwrap();
        let document: Value = serde_json::from_str(text).unwrap();
        notes.extend(
            document["document"]["notes"]
                .as_array()
                .unwrap()
                .iter()
                .cloned(),
        );
        reads += 1;
        assert!(reads <= 60, "paging ends");
        match document.get("next_page").and_then(Value::as_str) {
            Some(next) => uri = next.to_string(),
            None => return (notes, reads),
        }
    }
}

/// Reads a note with `get_note` part by part: its text and the number of calls.
async fn note_to_the_end(
    app: &TestApp,
    key: &str,
    project: &str,
    note_id: &str,
    max: usize,
) -> (String, usize) {
    let (mut text, mut calls, mut from) = (String::new(), 0, None::<u64>);
    loop {
        let mut args = json!({"project_id": project, "note_id": note_id});
        if let Some(f) = from {
            args["body_from"] = json!(f);
        }
        let result = call(app, key, "get_note", args).await;
        assert!(serde_json::to_string(&result).unwrap().len() <= max);
        let sc = ok(&result);
        text.push_str(sc["body"].as_str().unwrap());
        calls += 1;
        assert!(calls <= 400, "reading ends");
        match sc.get("next_body_from").and_then(Value::as_u64) {
            Some(next) => from = Some(next),
            None => return (text, calls),
        }
    }
}

/// The figures at `GATEHOUSE_MAX_RESULT_BYTES=1024`, the lowest bound (before: one hit
/// of 12 and no `nextCursor`; no note of the export and no `next_page`; one character per
/// `get_note` call) and at 4096 (before: 20,000 characters in 88 calls).
#[tokio::test]
async fn every_tool_pages_to_the_end_at_the_lowest_bound() {
    for (max, most_calls) in [(1024, 90), (4096, 40)] {
        let (app, project, key) = app_with_notes(&max.to_string(), 12, 300).await;
        let expected: Vec<Value> = app
            .store
            .search_notes_from(&project, "alpha", 0, 50)
            .await
            .unwrap()
            .into_iter()
            .map(|h| json!(h.id))
            .collect();
        let (ids, calls) = search_to_the_end(&app, &key, &project, max).await;
        assert_eq!(ids, expected, "every hit once, in order, at {max}");
        eprintln!("search at {max}: 12 hits in {calls} calls");

        let receipt = ok(&call(&app, &key, "export_project", json!({"project_id": project})).await);
        let job_id = receipt["id"].as_str().unwrap().to_string();
        for _ in 0..200 {
            let job = ok(&call(&app, &key, "get_job", json!({"job_id": job_id})).await);
            if job["status"] == "completed" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let stored = app.store.job(&job_id).await.unwrap().unwrap();
        let whole: Value = serde_json::from_str(stored.result.as_deref().unwrap()).unwrap();
        let (notes, reads) = export_to_the_end(&app, &key, &job_id, max).await;
        let ids = |notes: &[Value]| notes.iter().map(|n| n["id"].clone()).collect::<Vec<_>>();
        assert_eq!(
            ids(&notes),
            ids(whole["notes"].as_array().unwrap()),
            "every note once at {max}"
        );
        if max == 4096 {
            assert_eq!(
                &notes,
                whole["notes"].as_array().unwrap(),
                "whole notes at {max}"
            );
        }
        eprintln!("export at {max}: 12 notes in {reads} reads");

        let alice = app
            .store
            .account_by_email(&gatehouse::domain::account::Email::parse(ALICE).unwrap())
            .await
            .unwrap()
            .unwrap();
        let body: String = "lorem ipsum ".repeat(2000).chars().take(20_000).collect();
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
        let (text, calls) = note_to_the_end(&app, &key, &project, &note.id, max).await;
        assert_eq!(text, body, "the whole text, once, in order, at {max}");
        assert!(calls <= most_calls, "{calls} calls at {max}");
        eprintln!("get_note at {max}: 20,000 characters in {calls} calls");
    }
}

/// Continuation calls of one read count once against the quota: with a budget of 3 calls an
/// hour at the lowest bound, a 20,000-character note read in many parts and a search paged to
/// its end spend one call each; a part no answer offered counts like any call; the next call
/// is over budget. The audit rows count the same (outcome `continued` is not counted).
#[tokio::test]
async fn continuation_calls_of_one_read_count_once_against_the_quota() {
    let app = spawn_app_with(|vars| {
        vars.insert("GATEHOUSE_MAX_RESULT_BYTES".into(), "1024".into());
        vars.insert("GATEHOUSE_QUOTA_CALLS_PER_HOUR".into(), "3".into());
    })
    .await;
    let alice = app.create_account(ALICE, "a-long-password").await;
    let now = gatehouse::store::now();
    let project = app
        .store
        .create_project("Research", &alice, now)
        .await
        .unwrap();
    for i in 0..12 {
        let body = format!("alpha note {i}: {}", "lorem ipsum ".repeat(25));
        app.store
            .create_note(
                &NewNote {
                    project_id: &project,
                    author_account_id: &alice,
                    title: &format!("Alpha {i:03}"),
                    body: &body,
                    tags: &[],
                },
                now,
            )
            .await
            .unwrap();
    }
    let body: String = "lorem ipsum ".repeat(2000).chars().take(20_000).collect();
    let note = app
        .store
        .create_note(
            &NewNote {
                project_id: &project,
                author_account_id: &alice,
                title: "Long",
                body: &body,
                tags: &[],
            },
            now,
        )
        .await
        .unwrap();
    let (_, key) = create_key(&app, &["--account", ALICE]);

    let (text, parts) = note_to_the_end(&app, &key, &project, &note.id, 1024).await;
    assert_eq!(text, body);
    assert!(parts > 3, "more parts ({parts}) than the budget");
    let (hits, pages) = search_to_the_end(&app, &key, &project, 1024).await;
    assert_eq!(hits.len(), 12);
    assert!(pages > 3, "more pages ({pages}) than the budget");

    // A body_from no answer offered is not a continuation: it counts (the third call).
    let again = json!({"project_id": project, "note_id": note.id, "body_from": 1});
    let replay = call(&app, &key, "get_note", again.clone()).await;
    assert_eq!(replay["isError"], false, "{replay}");
    let over = call(&app, &key, "get_note", again).await;
    assert!(
        error_text(&over).contains("budget of 3 tool calls per rolling hour is spent"),
        "{over}"
    );

    app.store.flush_audit().await;
    let counted: u64 = app
        .store
        .tool_calls_per_minute(&alice, gatehouse::store::now())
        .await
        .unwrap()
        .iter()
        .map(|(_, n)| n)
        .sum();
    assert_eq!(counted, 3, "the audit rows count the same three calls");
}
