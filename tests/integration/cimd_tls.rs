//! Client ID metadata documents and key sets fetched by the real fetcher over real TLS (MCP
//! 2025-11-25, CIMD draft; RFC 7523 `jwks_uri`): the harness serves its own https host on
//! loopback with a certificate from a certificate authority made for this run (rcgen, rustls),
//! which only a fetcher built with [`HttpsFetcher::for_harness`] (debug builds only) trusts.
//! Everything else the fetcher does is the release behaviour: https only, no redirects
//! followed, the size cap, `Cache-Control`, status codes, certificate checks, and no other
//! loopback host.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use gatehouse::oauth::clients::{HarnessHosts, HttpsFetcher};
use jsonwebtoken::Header;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;

use crate::helpers::{TestApp, new_client, spawn_app_full};
use crate::oauth_helpers::*;
use crate::private_key_jwt::{TestKey, es256};

const HOST: &str = "client.example.test";
const ROGUE: &str = "rogue.example.test";

/// One canned answer: status, extra header lines, body.
#[derive(Clone)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn json(doc: &Value, cache_control: &str) -> Self {
        Reply {
            status: 200,
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("cache-control".into(), cache_control.into()),
            ],
            body: doc.to_string().into_bytes(),
        }
    }
}

/// An https host on loopback: answers by path, counts requests per path.
struct TlsHost {
    addr: SocketAddr,
    replies: Arc<Mutex<HashMap<String, Reply>>>,
    hits: Arc<Mutex<HashMap<String, usize>>>,
}

impl TlsHost {
    fn serve(&self, path: &str, reply: Reply) {
        self.replies.lock().unwrap().insert(path.into(), reply);
    }

    fn hits(&self, path: &str) -> usize {
        self.hits.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    fn url(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}{path}", self.addr.port())
    }
}

/// A certificate authority made for this run: its certificate (PEM) and what signs with it.
struct Authority {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

fn authority(name: &str) -> Authority {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key).unwrap();
    Authority { cert, key }
}

/// Starts an https server on loopback for `host`, its certificate signed by `ca`.
async fn start_host(ca: &Authority, host: &str) -> TlsHost {
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec![host.to_string()])
        .unwrap()
        .signed_by(&key, &ca.cert, &ca.key)
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![leaf.der().clone()],
        rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let replies: Arc<Mutex<HashMap<String, Reply>>> = Arc::default();
    let hits: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let (r, h) = (replies.clone(), hits.clone());
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, replies, hits) = (acceptor.clone(), r.clone(), h.clone());
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake: nothing to answer.
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head);
                let path = text.split(' ').nth(1).unwrap_or("/").to_string();
                *hits.lock().unwrap().entry(path.clone()).or_default() += 1;
                let reply = replies
                    .lock()
                    .unwrap()
                    .get(&path)
                    .cloned()
                    .unwrap_or(Reply {
                        status: 404,
                        headers: vec![],
                        body: vec![],
                    });
                let mut out = format!(
                    "HTTP/1.1 {} X\r\ncontent-length: {}\r\nconnection: close\r\n",
                    reply.status,
                    reply.body.len()
                );
                for (name, value) in &reply.headers {
                    out.push_str(&format!("{name}: {value}\r\n"));
                }
                out.push_str("\r\n");
                let _ = tls.write_all(out.as_bytes()).await;
                let _ = tls.write_all(&reply.body).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    TlsHost {
        addr,
        replies,
        hits,
    }
}

/// The harness: the client's host (certificate from the run's authority) and a rogue host
/// whose certificate comes from another authority; a server whose fetcher trusts the run's
/// authority and knows both hosts' addresses.
async fn setup() -> (TestApp, TlsHost, TlsHost) {
    let ca = authority("Gatehouse test authority");
    let other = authority("Someone else's authority");
    let host = start_host(&ca, HOST).await;
    let rogue = start_host(&other, ROGUE).await;
    let fetcher = HttpsFetcher::for_harness(HarnessHosts {
        root_pem: ca.cert.pem().into_bytes(),
        hosts: HashMap::from([
            (HOST.to_string(), host.addr),
            (ROGUE.to_string(), rogue.addr),
        ]),
    });
    let app = spawn_app_full(|_| {}, Arc::new(fetcher)).await;
    (app, host, rogue)
}

/// A `private_key_jwt` assertion by `key` of `client_id` for this server (`aud` its issuer,
/// as the TypeScript SDK makes them).
fn assertion(app: &TestApp, key: &TestKey, client_id: &str) -> String {
    let now = gatehouse::store::now();
    let mut header = Header::new(key.alg);
    header.kid = Some(key.kid.clone());
    let claims = json!({
        "iss": client_id, "sub": client_id, "aud": app.address, "iat": now, "exp": now + 120,
        "jti": gatehouse::domain::secret::random_urlsafe(16),
    });
    jsonwebtoken::encode(&header, &claims, &key.encoding).unwrap()
}

#[tokio::test]
async fn a_signed_assertion_client_whose_document_and_keys_are_on_https_connects() {
    let (app, host, _) = setup().await;
    let client_id = host.url(HOST, "/oauth/client.json");
    let key = es256("tls-1");
    // The shape of ChatGPT's and Codex's documents.
    host.serve(
        "/oauth/client.json",
        Reply::json(
            &json!({
                "client_id": client_id, "client_name": "TLS App", "redirect_uris": [REDIRECT],
                "token_endpoint_auth_method": "private_key_jwt",
                "jwks_uri": host.url(HOST, "/jwks.json"),
            }),
            "public, max-age=600",
        ),
    );
    host.serve(
        "/jwks.json",
        Reply::json(&json!({"keys": [key.jwk]}), "max-age=600"),
    );
    // Twice: the second time the document and the key set are served from the cache their
    // `Cache-Control` allowed, not fetched again.
    let browser = new_client();
    for _ in 0..2 {
        let (verifier, challenge) = pkce();
        let loc = walk(
            &app,
            &browser,
            &authorize_url(&app, &client_id, &challenge, &[]),
            "approve",
        )
        .await;
        let code = query_of(&loc)["code"].clone();
        let jwt = assertion(&app, &key, &client_id);
        let (s, b, _) = exchange(
            &app,
            &client_id,
            &code,
            &verifier,
            &[
                (
                    "client_assertion_type",
                    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                ),
                ("client_assertion", &jwt),
            ],
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{b}");
        assert!(b["access_token"].is_string(), "{b}");
    }
    assert_eq!(host.hits("/oauth/client.json"), 1, "the document once");
    assert_eq!(host.hits("/jwks.json"), 1, "the key set once");
}

#[tokio::test]
async fn what_an_https_host_answers_is_judged_as_the_release_build_judges_it() {
    let (app, host, rogue) = setup().await;
    let (_, challenge) = pkce();
    let authorize = |client_id: String| {
        let (app, challenge) = (&app, challenge.clone());
        async move {
            let r = app
                .client
                .get(authorize_url(app, &client_id, &challenge, &[]))
                .send()
                .await
                .unwrap();
            let status = r.status();
            let location = r.headers().get("location").cloned();
            (status, location, r.text().await.unwrap())
        }
    };
    // A redirect is the host's answer, not followed: the client is refused, on a page.
    host.serve(
        "/moved.json",
        Reply {
            status: 302,
            headers: vec![("location".into(), host.url(HOST, "/oauth/client.json"))],
            body: vec![],
        },
    );
    let (status, location, _) = authorize(host.url(HOST, "/moved.json")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(location.is_none(), "never redirects");
    assert_eq!(
        host.hits("/oauth/client.json"),
        0,
        "the redirect was not followed"
    );

    // A document over the 5 KiB cap is refused.
    let big = host.url(HOST, "/big.json");
    host.serve(
        "/big.json",
        Reply::json(
            &json!({"client_id": big, "client_name": "x".repeat(6000), "redirect_uris": [REDIRECT]}),
            "max-age=60",
        ),
    );
    let (status, _, _) = authorize(big).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // A host that fails for now: "try again" (503), and not cached: once it answers, the
    // client goes on to sign in.
    let flaky = host.url(HOST, "/flaky.json");
    host.serve(
        "/flaky.json",
        Reply {
            status: 503,
            headers: vec![],
            body: vec![],
        },
    );
    let (status, _, page) = authorize(flaky.clone()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{page}");
    assert!(page.contains("could not be fetched"), "{page}");
    host.serve(
        "/flaky.json",
        Reply::json(
            &json!({"client_id": flaky, "client_name": "Flaky App", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}),
            "max-age=60",
        ),
    );
    let (status, _, _) = authorize(flaky).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "on to sign-in");
    assert_eq!(host.hits("/flaky.json"), 2);

    // A certificate from another authority is not trusted: the handshake fails, nothing is
    // requested, and the answer is the one for a host that cannot be reached.
    rogue.serve(
        "/client.json",
        Reply::json(
            &json!({"client_id": rogue.url(ROGUE, "/client.json"), "client_name": "Rogue", "redirect_uris": [REDIRECT]}),
            "max-age=60",
        ),
    );
    let (status, _, _) = authorize(rogue.url(ROGUE, "/client.json")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        rogue.hits("/client.json"),
        0,
        "no request over an untrusted connection"
    );

    // Only the harness's own names reach loopback: the same host by another name is a
    // forbidden address, never fetched.
    let (status, _, _) = authorize(format!(
        "https://localhost:{}/oauth/client.json",
        host.addr.port()
    ))
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(host.hits("/oauth/client.json"), 0);
}
