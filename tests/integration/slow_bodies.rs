//! Slow request bodies and many connections from one address (issue 30, finding 1): a body
//! has one deadline for all of it (a byte now and then does not keep it alive), one source
//! address holds at most `GATEHOUSE_MAX_CONNECTIONS_PER_ADDRESS` connections, and the form
//! routes refuse what they can before reading a body.

use std::time::{Duration, Instant};

use crate::helpers::{TestApp, new_client_from, spawn_app_with};
use reqwest::StatusCode;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// A connection to `app` from the loopback address `source` (127.0.0.0/8 is this machine).
async fn connect_from(app: &TestApp, source: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    socket
        .connect(format!("127.0.0.1:{}", app.port).parse().unwrap())
        .await
        .unwrap()
}

/// Reads until the server closes the connection or `limit` passes: what was read, and
/// whether it was closed.
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

// The probe's attack in small: a token request whose body trickles in a byte every 300 ms
// never pauses for the 1 s limit, yet is refused once 1 s has passed since its head, in the
// RFC 6749 §5.2 shape, while the trickle goes on.
#[tokio::test]
async fn a_trickling_body_is_refused_at_its_deadline() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_BODY_READ_TIMEOUT".into(), "1".into());
    })
    .await;
    let mut stream = connect_from(&app, "127.0.0.1").await;
    let started = Instant::now();
    stream
        .write_all(
            b"POST /oauth/token HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
              Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 200\r\n\r\n",
        )
        .await
        .unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let trickle = tokio::spawn(async move {
        for _ in 0..200 {
            if writer.write_all(b"a").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    });
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), reader.read_to_end(&mut answer)).await;
    let elapsed = started.elapsed();
    trickle.abort();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(3),
        "answered after {elapsed:?}"
    );
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["error"], "invalid_request", "{body}");
}

// One address holds at most its cap of connections: the next one from it is closed at once,
// unanswered, while another address is served; a closed connection gives its place back.
#[tokio::test]
async fn one_address_holds_at_most_its_cap_of_connections() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_MAX_CONNECTIONS_PER_ADDRESS".into(), "4".into());
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(connect_from(&app, "127.0.0.2").await);
    }
    // Let the server accept all four.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut fifth = connect_from(&app, "127.0.0.2").await;
    let _ = fifth
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await;
    let (answer, closed) = read_until_closed(&mut fifth, Duration::from_secs(3)).await;
    assert!(
        closed && answer.is_empty(),
        "the fifth connection was served: {answer:?}"
    );
    let other = new_client_from("127.0.0.3")
        .get(app.url("/healthz"))
        .timeout(Duration::from_secs(3))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    drop(held.pop());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let again = new_client_from("127.0.0.2")
        .get(app.url("/healthz"))
        .timeout(Duration::from_secs(3))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::OK, "a place was given back");
}

/// Sends `head` (a request whose declared body is never sent) and returns the answer read
/// within two seconds: a route that refuses without the body answers at once.
async fn answer_without_body(app: &TestApp, head: &str) -> String {
    let mut stream = connect_from(app, "127.0.0.1").await;
    stream.write_all(head.as_bytes()).await.unwrap();
    let (answer, _) = read_until_closed(&mut stream, Duration::from_secs(10)).await;
    answer
}

// The form routes refuse what needs no body without waiting for one: a sign-in form from a
// browser that holds no CSRF token (403), a token request declaring more than the form limit
// (400 invalid_request), a malformed HTTP Basic header (401 invalid_client), a registration
// declaring more than its limit (400). The bodies are never sent; each answer comes at once
// although the body deadline is 30 s.
#[tokio::test]
async fn form_routes_refuse_before_reading_a_body() {
    let app = spawn_app_with(|_| {}).await;
    let form = "Content-Type: application/x-www-form-urlencoded";
    let cases = [
        (
            format!(
                "POST /signin HTTP/1.1\r\nHost: 127.0.0.1\r\n{form}\r\nContent-Length: 100\r\n\r\n"
            ),
            "HTTP/1.1 403",
        ),
        (
            format!(
                "POST /oauth/token HTTP/1.1\r\nHost: 127.0.0.1\r\n{form}\r\nContent-Length: 10000000\r\n\r\n"
            ),
            "HTTP/1.1 400",
        ),
        (
            format!(
                "POST /oauth/token HTTP/1.1\r\nHost: 127.0.0.1\r\n{form}\r\nAuthorization: Basic !!!\r\nContent-Length: 100\r\n\r\n"
            ),
            "HTTP/1.1 401",
        ),
        (
            "POST /oauth/register HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n"
                .to_string(),
            "HTTP/1.1 400",
        ),
        (
            "POST /keys/create HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n"
                .to_string(),
            "HTTP/1.1 403",
        ),
    ];
    for (head, expected) in cases {
        let started = Instant::now();
        let answer = answer_without_body(&app, &head).await;
        assert!(
            answer.starts_with(expected),
            "{} answered {answer:?}",
            head.lines().next().unwrap()
        );
        // Far below the 30 s body deadline: the answer did not wait for the body (the
        // margin is for a loaded machine; on a quiet one each answer takes milliseconds).
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}

// An address over its sign-in limit is refused (429) before its form is read; the password
// queue is not touched.
#[tokio::test]
async fn an_address_over_its_signin_limit_is_refused_before_its_form_is_read() {
    let app = spawn_app_with(|_| {}).await;
    let limit = gatehouse::signin::address_limit("127.0.0.1".parse().unwrap());
    let now = gatehouse::store::now();
    for _ in 0..gatehouse::signin::MAX_FAILURES_PER_ADDRESS {
        app.store
            .admit(std::slice::from_ref(&limit), now)
            .await
            .unwrap();
    }
    let head = "POST /signin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nCookie: gatehouse_csrf=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\nContent-Length: 100\r\n\r\n";
    let answer = answer_without_body(&app, head).await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer:?}");
    assert!(answer.contains("Retry-After") || answer.contains("retry-after"));
}
