//! Events out (issue 38 part 6): with `GATEHOUSE_EVENTS_URL` the audit records reach a local
//! HTTP receiver as NDJSON batches, retried after a failure, metadata only.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use crate::helpers::spawn_app_with;
use crate::keys::{ALICE, alice, create_key};
use crate::mcp::{call, ok};

#[derive(Clone, Default)]
struct Receiver {
    /// (content type, authorization, body) of each batch accepted.
    batches: Arc<Mutex<Vec<(String, String, String)>>>,
    /// Requests still to be answered 503.
    failures_left: Arc<Mutex<u32>>,
    /// Requests seen, accepted or not.
    requests: Arc<Mutex<u32>>,
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: String) -> StatusCode {
    *r.requests.lock().unwrap() += 1;
    {
        let mut left = r.failures_left.lock().unwrap();
        if *left > 0 {
            *left -= 1;
            return StatusCode::SERVICE_UNAVAILABLE;
        }
    }
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    r.batches
        .lock()
        .unwrap()
        .push((header("content-type"), header("authorization"), body));
    StatusCode::NO_CONTENT
}

async fn start_receiver(failures: u32) -> (String, Receiver) {
    let receiver = Receiver::default();
    *receiver.failures_left.lock().unwrap() = failures;
    let app = axum::Router::new()
        .route("/events", axum::routing::post(receive))
        .with_state(receiver.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/events", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, receiver)
}

fn events(r: &Receiver) -> Vec<Value> {
    r.batches
        .lock()
        .unwrap()
        .iter()
        .flat_map(|(_, _, body)| {
            body.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test]
async fn audit_events_reach_the_receiver_as_ndjson_batches_after_a_retry() {
    let (url, receiver) = start_receiver(1).await;
    let app = spawn_app_with(move |vars| {
        vars.insert("GATEHOUSE_EVENTS_URL".into(), url);
        vars.insert("GATEHOUSE_EVENTS_TOKEN".into(), "evt-token".into());
        vars.insert("GATEHOUSE_SERVER_NAME".into(), "acme-notes".into());
    })
    .await;
    let (_, research, _) = alice(&app).await;
    let (_, key) = create_key(&app, &["--account", ALICE]);
    let secret_words = "zebra-argument-7";
    ok(&call(
        &app,
        &key,
        "search_notes",
        json!({"project_id": research, "query": secret_words}),
    )
    .await);
    ok(&call(&app, &key, "list_projects", json!({})).await);
    let mut tool_calls = Vec::new();
    for _ in 0..100 {
        tool_calls = events(&receiver)
            .into_iter()
            .filter(|e| e["event"] == "tool_call")
            .collect();
        if tool_calls.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(tool_calls.len(), 2, "each call once: {tool_calls:?}");
    assert!(
        *receiver.requests.lock().unwrap() >= 2,
        "the 503 was retried"
    );
    let search = tool_calls
        .iter()
        .find(|e| e["subject"] == "search_notes")
        .unwrap();
    assert_eq!(search["server"], "acme-notes");
    assert_eq!(search["outcome"], "success");
    assert_eq!(search["project_id"], research.as_str());
    assert_eq!(search["credential"], "account_key");
    assert!(
        search["account_id"].is_string() && search["duration_ms"].is_u64(),
        "{search}"
    );
    for (content_type, authorization, body) in receiver.batches.lock().unwrap().iter() {
        assert_eq!(content_type, "application/x-ndjson");
        assert_eq!(authorization, "Bearer evt-token");
        assert!(body.ends_with('\n'));
        for never in [
            secret_words,
            key.as_str(),
            &key[9..],
            ALICE,
            "127.0.0.1",
            "source_ip",
        ] {
            assert!(!body.contains(never), "{never} in {body}");
        }
    }
}
