//! Hostile clients: slow headers and bodies (slowloris), oversized headers, idle connections by
//! the hundred, huge and deeply nested JSON. The limits are hyper's settings, the accepting
//! loop's caps and the body deadline (`gatehouse::app::serve`); these tests show that they hold and that authenticated MCP
//! calls are still served meanwhile.

use std::time::{Duration, Instant};

use crate::helpers::{TestApp, new_client, spawn_app, spawn_app_with};
use crate::mcp::{rpc, send, token_for};
use crate::oauth_helpers::{REDIRECT, register_public};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn connect(app: &TestApp) -> TcpStream {
    TcpStream::connect(("127.0.0.1", app.port)).await.unwrap()
}

/// A connection from the loopback address `source`.
async fn connect_from(app: &TestApp, source: &str) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    socket
        .connect(format!("127.0.0.1:{}", app.port).parse().unwrap())
        .await
        .unwrap()
}

/// Reads until the server closes the connection (or `limit` passes); returns what was read
/// and whether the connection was closed.
async fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (String, bool) {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&out).into_owned(), true),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => return (String::from_utf8_lossy(&out).into_owned(), false),
        }
    }
}

/// Sends `head` (a whole request without a body) on a fresh connection; returns the status
/// line of the answer.
async fn raw_status(app: &TestApp, head: &str) -> String {
    let mut stream = connect(app).await;
    // The server may answer and close before it has read everything; a failed write is fine.
    let _ = stream.write_all(head.as_bytes()).await;
    let (answer, _) = read_until_closed(&mut stream, Duration::from_secs(5)).await;
    answer.lines().next().unwrap_or("").to_string()
}

// Slowloris: a client that sends its headers a byte at a time never completes a request and
// holds the connection only for GATEHOUSE_HEADER_READ_TIMEOUT.
#[tokio::test]
async fn slow_headers_and_idle_connections_are_cut_at_the_header_timeout() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_HEADER_READ_TIMEOUT".into(), "1".into());
    })
    .await;
    let mut slow = connect(&app).await;
    let started = Instant::now();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let mut closed = false;
    for _ in 0..40 {
        if slow.write_all(b"X").await.is_err() {
            closed = true;
            break;
        }
        let mut buf = [0u8; 256];
        match tokio::time::timeout(Duration::from_millis(100), slow.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                closed = true;
                break;
            }
            Ok(Ok(n)) => {
                // hyper may answer 408 before closing; never a 200 for a request that never ended.
                let text = String::from_utf8_lossy(&buf[..n]);
                assert!(!text.starts_with("HTTP/1.1 200"), "{text}");
            }
            Err(_) => {}
        }
    }
    let elapsed = started.elapsed();
    assert!(closed, "the slow connection was still open after 4 s");
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_millis(2500),
        "{elapsed:?}"
    );

    // An idle keep-alive connection (a request answered, then silence) is closed as well.
    let mut idle = connect(&app).await;
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let (answer, closed) = read_until_closed(&mut idle, Duration::from_secs(4)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(closed, "the idle connection was still open after 4 s");
    assert!(started.elapsed() < Duration::from_millis(2500));
}

// RFC 6585 §5: a request whose header section is too large is refused with 431.
#[tokio::test]
async fn oversized_or_too_many_headers_get_431() {
    let app = spawn_app().await;
    let big = format!(
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(gatehouse::app::MAX_HEADER_BYTES + 1)
    );
    let status = raw_status(&app, &big).await;
    assert!(status.starts_with("HTTP/1.1 431"), "{status}");

    let mut many = String::from("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    for i in 0..=gatehouse::app::MAX_HEADERS {
        many.push_str(&format!("X-H{i}: 1\r\n"));
    }
    many.push_str("\r\n");
    let status = raw_status(&app, &many).await;
    assert!(status.starts_with("HTTP/1.1 431"), "{status}");

    // Just under the limits, the request is served.
    let fine = format!(
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Big: {}\r\n\r\n",
        "a".repeat(gatehouse::app::MAX_HEADER_BYTES / 2)
    );
    let status = raw_status(&app, &fine).await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
}

// A body that stops arriving is refused in the protocol's shape once
// GATEHOUSE_BODY_READ_TIMEOUT passes without a byte.
#[tokio::test]
async fn stalled_bodies_are_refused_in_the_protocols_shape() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_BODY_READ_TIMEOUT".into(), "1".into());
    })
    .await;
    let mut stream = connect(&app).await;
    let started = Instant::now();
    stream
        .write_all(
            b"POST /oauth/token HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
              Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 200\r\n\r\n\
              grant_type=refresh_token",
        )
        .await
        .unwrap();
    let (answer, _) = read_until_closed(&mut stream, Duration::from_secs(5)).await;
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["error"], "invalid_request", "{body}");
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("stopped arriving"),
        "{body}"
    );
}

// serde_json stops at 128 levels of nesting; a deeper or bigger body is a client's mistake
// answered in the route's protocol, never a 5xx or a stack overflow.
#[tokio::test]
async fn huge_and_deeply_nested_json_get_protocol_shaped_4xx() {
    let app = spawn_app().await;
    let browser = new_client();
    let token = token_for(&app, &browser, "mcp:read").await;
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_object = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}{}}}",
        "{\"a\":".repeat(50_000),
        "}".repeat(50_000)
    );
    // Just under the MCP body limit (1 MiB): a huge array, not one message.
    let huge = format!("[{}1]", "1,".repeat(500_000));
    for body in [&deep, &deep_object, &huge] {
        let (status, _, answer) = send(
            app.client
                .post(app.url("/mcp"))
                .bearer_auth(&token)
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .header("mcp-protocol-version", crate::mcp::V26)
                .body(body.clone()),
        )
        .await;
        assert!(status.is_client_error(), "{status} {answer}");
        assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
        assert!(answer["error"]["code"].is_i64(), "{answer}");
    }
    let huge_object = format!("{{\"redirect_uris\":[{}\"x\"]}}", "\"x\",".repeat(3_000));
    for body in [&deep[..15_000], &deep_object[..15_000], &huge_object] {
        let r = app
            .client
            .post(app.url("/oauth/register"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = r.status();
        let answer: Value = r.json().await.unwrap();
        assert!(status.is_client_error(), "{status} {answer}");
        assert!(answer["error"].is_string(), "{answer}");
    }
    let form = format!("grant_type=refresh_token&x={}", "%5B".repeat(4_000));
    let r = app
        .client
        .post(app.url("/oauth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let answer: Value = r.json().await.unwrap();
    assert!(status.is_client_error(), "{status} {answer}");
    assert!(answer["error_description"].is_string(), "{answer}");
}

// While hundreds of idle connections and a slowloris are open from other addresses (one
// address alone holds at most GATEHOUSE_MAX_CONNECTIONS_PER_ADDRESS), an authenticated MCP
// call is still answered promptly.
#[tokio::test]
async fn mcp_is_served_while_idle_connections_and_a_slowloris_are_open() {
    let app = spawn_app().await;
    let browser = new_client();
    let token = token_for(&app, &browser, "mcp:read").await;
    let mut idle = Vec::new();
    for i in 0..500 {
        idle.push(connect_from(&app, if i % 2 == 0 { "127.0.0.4" } else { "127.0.0.5" }).await);
    }
    let mut slow = connect_from(&app, "127.0.0.6").await;
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let drip = tokio::spawn(async move {
        for _ in 0..30 {
            if slow.write_all(b"X").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let mut slowest = Duration::ZERO;
    for _ in 0..20 {
        let started = Instant::now();
        let body = rpc(&app, &token, "tools/list", json!({})).await;
        slowest = slowest.max(started.elapsed());
        assert!(body["result"]["tools"].is_array(), "{body}");
    }
    assert!(slowest < Duration::from_secs(2), "{slowest:?}");
    drip.abort();
    drop(idle);
}

// GATEHOUSE_MAX_CONNECTIONS caps the connections served at once: a request beyond the cap
// waits until a connection closes (here: idle ones cut at the header timeout), then is served.
#[tokio::test]
async fn connections_beyond_the_cap_wait_for_a_free_one() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_MAX_CONNECTIONS".into(), "16".into());
        v.insert("GATEHOUSE_HEADER_READ_TIMEOUT".into(), "2".into());
    })
    .await;
    let mut idle = Vec::new();
    for _ in 0..16 {
        idle.push(connect(&app).await);
    }
    // Let the server accept all sixteen before the request arrives.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let r = crate::helpers::client_builder()
        .build()
        .unwrap()
        .get(app.url("/healthz"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1000) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    drop(idle);
    // Registration still works once the pressure is gone.
    register_public(&app, &[REDIRECT]).await;
}
