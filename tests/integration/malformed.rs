//! The malformed-request corpus (`tests/corpus/malformed.json`, made by
//! `tests/corpus/generate.py`): every case is answered without a 5xx, and every protocol
//! route answers in its own error shape (RFC 6749 §5.2 JSON on the OAuth endpoints, a
//! JSON-RPC 2.0 error or the RFC 6750 challenge on MCP, an HTML page at the authorization
//! endpoint).

use base64::Engine;
use serde_json::Value;

use crate::helpers::{new_client, spawn_app};
use crate::mcp::token_for;

#[tokio::test]
async fn every_malformed_request_gets_a_protocol_shaped_4xx_and_none_a_5xx() {
    let app = spawn_app().await;
    let browser = new_client();
    let token = token_for(&app, &browser, "mcp:read").await;
    let corpus: Vec<Value> =
        serde_json::from_str(include_str!("../corpus/malformed.json")).expect("the corpus");
    assert!(corpus.len() > 150);
    let mut failures = Vec::new();
    for (i, case) in corpus.iter().enumerate() {
        let method: reqwest::Method = case["method"].as_str().unwrap().parse().unwrap();
        let path = case["path"].as_str().unwrap().replace("{TOKEN}", &token);
        let shape = case["shape"].as_str().unwrap();
        // A fresh connection per case: a refused body may leave a connection unusable.
        let client = crate::helpers::client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let mut request = client.request(method, app.url(&path));
        for (name, value) in case["headers"].as_object().unwrap() {
            request = request.header(name, value.as_str().unwrap().replace("{TOKEN}", &token));
        }
        if let Some(body) = case["body"].as_str() {
            request = request.body(body.to_string());
        } else if let Some(b64) = case["body_b64"].as_str() {
            request = request.body(
                base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .unwrap(),
            );
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let challenge = response.headers().contains_key("www-authenticate");
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let text = response.text().await.unwrap_or_default();
        let json: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let shaped = match shape {
            "oauth" => status.is_client_error() && json["error"].is_string(),
            // In-band errors of a request come with 200 (JSON-RPC over HTTP); a missing or bad
            // credential gets the RFC 6750 §3 challenge.
            "jsonrpc" => {
                ((status.is_client_error() || status == reqwest::StatusCode::OK)
                    && json["jsonrpc"] == "2.0"
                    && json["error"]["code"].is_i64())
                    || (matches!(status.as_u16(), 401 | 403)
                        && challenge
                        && json["error"].is_string())
            }
            "html" => status.is_client_error() && content_type.starts_with("text/html"),
            _ => !status.is_server_error(),
        };
        if !shaped {
            let shown: String = text.chars().take(200).collect();
            failures.push(format!(
                "case {i} {path:.80}: {status} {content_type} {shown}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        corpus.len(),
        failures.join("\n")
    );
}
