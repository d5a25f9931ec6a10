//! `gatehouse doctor`: the same checks the command runs, against Gatehouse itself (every step
//! passes) and against deployments broken on purpose by small local stubs: a proxy that drops
//! the challenge header, a proxy that strips the path, `MCP_SERVER_URL` left at the listen
//! address behind a proxy, an issuer with a trailing slash, and servers that answer HTML,
//! redirect, hang or are not there.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use gatehouse::doctor::{self, Options, Report, Status};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::helpers::{spawn_app, spawn_app_with};
use crate::oauth_helpers::full_grant;

fn options(url: &str) -> Options {
    Options {
        url: url.to_string(),
        token: None,
        openai: false,
        timeout: Duration::from_secs(5),
        interactive: None,
        interactive_wait: Duration::from_secs(30),
        client: None,
        state_file: None,
        register: false,
    }
}

async fn listener() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

fn serve(listener: TcpListener, router: Router) {
    tokio::spawn(async move { axum::serve(listener, router).await });
}

#[track_caller]
fn assert_step(report: &Report, check: &str, status: Status) -> doctor::Step {
    let step = report
        .step(check)
        .unwrap_or_else(|| panic!("no step {check}:\n{}", doctor::render_text(report)))
        .clone();
    assert_eq!(
        step.status,
        status,
        "step {check}:\n{}",
        doctor::render_text(report)
    );
    step
}

/// What the proxy in front of Gatehouse does wrong.
#[derive(Clone, Default)]
struct ProxyFaults {
    /// A response header it drops.
    drop_header: Option<&'static str>,
    /// A path prefix it forwards with the prefix cut off (and 404 for anything else).
    strip_prefix: Option<&'static str>,
}

struct Proxy {
    upstream: String,
    faults: ProxyFaults,
    client: reqwest::Client,
}

async fn forward(State(proxy): State<Arc<Proxy>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let mut path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    if let Some(prefix) = proxy.faults.strip_prefix {
        match path.strip_prefix(prefix) {
            Some(rest) if rest.starts_with('/') => path = rest.to_string(),
            _ => return (StatusCode::NOT_FOUND, "no route").into_response(),
        }
    }
    let body = to_bytes(body, 1 << 20).await.unwrap_or_default();
    let mut upstream = proxy
        .client
        .request(parts.method, format!("{}{path}", proxy.upstream))
        .body(body);
    for (name, value) in &parts.headers {
        if name != header::HOST && name != header::CONTENT_LENGTH {
            upstream = upstream.header(name, value);
        }
    }
    let Ok(answer) = upstream.send().await else {
        return (StatusCode::BAD_GATEWAY, "upstream down").into_response();
    };
    let mut response = Response::builder().status(answer.status().as_u16());
    for (name, value) in answer.headers() {
        let dropped = proxy
            .faults
            .drop_header
            .is_some_and(|d| name.as_str().eq_ignore_ascii_case(d));
        if !dropped && name != header::TRANSFER_ENCODING && name != header::CONNECTION {
            response = response.header(name, value);
        }
    }
    let bytes = answer.bytes().await.unwrap_or_default();
    response.body(Body::from(bytes)).unwrap()
}

fn start_proxy(listener: TcpListener, upstream: &str, faults: ProxyFaults) {
    let proxy = Arc::new(Proxy {
        upstream: upstream.to_string(),
        faults,
        client: crate::helpers::client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
    });
    serve(listener, Router::new().fallback(forward).with_state(proxy));
}

#[tokio::test]
async fn every_step_passes_against_gatehouse_and_the_clients_are_listed() {
    let app = spawn_app_with(|v| {
        v.insert("OPENAI_APPS_CHALLENGE".into(), "doctor-check-token".into());
    })
    .await;
    let (_, tokens) = full_grant(&app).await;
    let token = tokens["access_token"].as_str().unwrap().to_string();
    let mut opts = options(&app.config.mcp_server_url);
    opts.token = Some(token);
    opts.openai = true;
    let report = doctor::run(&opts).await;
    let text = doctor::render_text(&report);
    assert!(report.passed, "{text}");
    for check in [
        "challenge",
        "challenge-2026",
        "prm-path",
        "prm-root",
        "as-metadata",
        "issuer",
        "response-type-code",
        "pkce-s256",
        "registration-or-cimd",
        "auth-method-none",
        "cors-resource-metadata",
        "cors-server-metadata",
        "cors-registration",
        "cors-token",
        "register-claude",
        "authorize-claude",
        "register-chatgpt",
        "authorize-chatgpt",
        "register-cursor",
        "authorize-cursor",
        "register-vscode",
        "authorize-vscode",
        "openai-challenge",
        "https",
        "same-host",
        "token-initialize",
        "token-tools-list",
    ] {
        assert_step(&report, check, Status::Pass);
    }
    assert_eq!(report.steps.len(), 27, "{text}");
    assert!(
        text.lines().filter(|l| l.starts_with('✓')).count() == 27,
        "{text}"
    );
    // Claude registers with a secret sent in the form; the others as public clients.
    let claude = app
        .store
        .client(&report.registered_clients[0].client_id)
        .await
        .unwrap()
        .expect("the Claude client is stored");
    assert_eq!(claude.token_endpoint_auth_method, "client_secret_post");
    assert_eq!(
        claude.redirect_uris,
        vec!["https://claude.ai/api/mcp/auth_callback".to_string()]
    );
    let names: Vec<&str> = report
        .registered_clients
        .iter()
        .map(|c| c.client.as_str())
        .collect();
    assert_eq!(names, ["Claude", "ChatGPT", "Cursor", "VS Code"]);
    for c in &report.registered_clients {
        assert!(app.store.client(&c.client_id).await.unwrap().is_some());
        assert!(text.contains(&c.client_id), "ids are listed: {text}");
    }
    // The negotiated revision and the tools the token reaches.
    assert_eq!(report.protocol_version.as_deref(), Some("2025-11-25"));
    assert!(
        report
            .tools
            .as_ref()
            .unwrap()
            .contains(&"list_projects".to_string())
    );
    assert!(text.contains("negotiated protocol revision: 2025-11-25"));
    // The JSON form says the same.
    let parsed: Value = serde_json::from_str(&doctor::render_json(&report)).unwrap();
    assert_eq!(parsed["passed"], json!(true));
    assert_eq!(parsed["steps"].as_array().unwrap().len(), 27);
    assert_eq!(parsed["registered_clients"].as_array().unwrap().len(), 4);
}

#[tokio::test]
async fn a_proxy_that_drops_the_challenge_header_is_named() {
    let (proxy_listener, proxy_port) = listener().await;
    let public = format!("http://127.0.0.1:{proxy_port}/mcp");
    let app = spawn_app_with(|v| {
        v.insert("MCP_SERVER_URL".into(), public.clone());
    })
    .await;
    start_proxy(
        proxy_listener,
        &app.address,
        ProxyFaults {
            drop_header: Some("www-authenticate"),
            ..Default::default()
        },
    );
    let report = doctor::run(&options(&public)).await;
    let step = assert_step(&report, "challenge", Status::Fail);
    assert_eq!(step.got, "401 without WWW-Authenticate");
    assert!(
        step.fix
            .unwrap()
            .starts_with("Pass the WWW-Authenticate header through the proxy unchanged")
    );
    assert_step(&report, "challenge-2026", Status::Fail);
    // Clients fall back to the well-known URLs, which the proxy serves correctly.
    assert_step(&report, "prm-path", Status::Pass);
    assert_step(&report, "issuer", Status::Pass);
    assert_step(&report, "register-vscode", Status::Pass);
    assert!(!report.passed);
}

#[tokio::test]
async fn a_proxy_that_strips_the_path_is_named() {
    let (proxy_listener, proxy_port) = listener().await;
    let public = format!("http://127.0.0.1:{proxy_port}/gatehouse/mcp");
    let app = spawn_app_with(|v| {
        v.insert("MCP_SERVER_URL".into(), public.clone());
    })
    .await;
    start_proxy(
        proxy_listener,
        &app.address,
        ProxyFaults {
            strip_prefix: Some("/gatehouse"),
            ..Default::default()
        },
    );
    let report = doctor::run(&options(&public)).await;
    let step = assert_step(&report, "challenge", Status::Fail);
    assert!(step.got.starts_with("404"), "{}", step.got);
    assert!(
        step.fix
            .as_deref()
            .unwrap()
            .contains("a proxy forwards the path unchanged"),
        "{step:?}"
    );
    let step = assert_step(&report, "prm-path", Status::Fail);
    assert!(step.got.starts_with("404"));
    assert!(step.fix.unwrap().contains(&format!(
        "http://127.0.0.1:{proxy_port}/.well-known/oauth-protected-resource/gatehouse/mcp"
    )));
    assert_step(&report, "as-metadata", Status::Skip);
    assert!(!report.passed);
}

#[tokio::test]
async fn mcp_server_url_left_at_the_listen_address_behind_a_proxy_is_named() {
    // The operator put a proxy in front but kept MCP_SERVER_URL at the listen address.
    let app = spawn_app().await;
    let (proxy_listener, proxy_port) = listener().await;
    start_proxy(proxy_listener, &app.address, ProxyFaults::default());
    let public = format!("http://127.0.0.1:{proxy_port}/mcp");
    let report = doctor::run(&options(&public)).await;
    assert_step(&report, "challenge", Status::Pass);
    for check in ["prm-challenge", "prm-path", "prm-root"] {
        let step = assert_step(&report, check, Status::Fail);
        assert!(
            step.got
                .contains(&format!("resource \"{}\"", app.config.mcp_server_url)),
            "{step:?}"
        );
        assert_eq!(
            step.fix.as_deref().unwrap(),
            format!(
                "Set MCP_SERVER_URL to exactly the URL clients are given ({public}): behind a proxy that is the public URL, not the listen address (RFC 9728 §3.3)."
            )
        );
    }
    let step = assert_step(&report, "same-host", Status::Fail);
    assert!(step.got.contains(&format!(
        "resource_metadata {}/.well-known/oauth-protected-resource/mcp",
        app.address
    )));
    assert!(!report.passed);
}

async fn challenge_401(State(origin): State<String>) -> Response {
    let mut r = StatusCode::UNAUTHORIZED.into_response();
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_str(&format!(
            "Bearer resource_metadata=\"{origin}/.well-known/oauth-protected-resource/mcp\", scope=\"read\""
        ))
        .unwrap(),
    );
    r
}

#[tokio::test]
async fn an_issuer_with_a_trailing_slash_is_named() {
    let (l, port) = listener().await;
    let origin = format!("http://127.0.0.1:{port}");
    let prm = {
        let origin = origin.clone();
        move || {
            let origin = origin.clone();
            async move {
                axum::Json(
                    json!({"resource": format!("{origin}/mcp"), "authorization_servers": [origin]}),
                )
            }
        }
    };
    let metadata = {
        let origin = origin.clone();
        move || {
            let origin = origin.clone();
            async move {
                axum::Json(json!({
                    "issuer": format!("{origin}/"),
                    "authorization_endpoint": format!("{origin}/authorize"),
                    "token_endpoint": format!("{origin}/token"),
                    "registration_endpoint": format!("{origin}/register"),
                    "response_types_supported": ["code"],
                    "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": ["none"],
                }))
            }
        }
    };
    let router = Router::new()
        .route("/mcp", post(challenge_401))
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(prm.clone()),
        )
        .route("/.well-known/oauth-protected-resource", get(prm))
        .route("/.well-known/oauth-authorization-server", get(metadata))
        .with_state(origin.clone());
    serve(l, router);
    let report = doctor::run(&options(&format!("{origin}/mcp"))).await;
    assert_step(&report, "challenge", Status::Pass);
    assert_step(&report, "prm-path", Status::Pass);
    assert_step(&report, "as-metadata", Status::Pass);
    let step = assert_step(&report, "issuer", Status::Fail);
    assert_eq!(step.got, format!("issuer \"{origin}/\""));
    assert!(
        step.fix
            .unwrap()
            .starts_with("The issuer differs by a trailing slash")
    );
    assert_step(&report, "pkce-s256", Status::Pass);
    assert_step(&report, "auth-method-none", Status::Pass);
    // The stub has no registration endpoint behind its metadata: a finding, not a panic.
    let step = assert_step(&report, "register-claude", Status::Fail);
    assert!(step.got.starts_with("404"), "{step:?}");
    assert_step(&report, "authorize-claude", Status::Skip);
    assert!(!report.passed);
}

#[tokio::test]
async fn html_redirects_timeouts_and_closed_ports_are_findings() {
    let (l, port) = listener().await;
    let origin = format!("http://127.0.0.1:{port}");
    let router = Router::new()
        .route(
            "/mcp",
            post(|| async { (StatusCode::FOUND, [(header::LOCATION, "/login")]) }),
        )
        .route(
            "/slow",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "late"
            }),
        )
        .fallback(|| async {
            (
                [(header::CONTENT_TYPE, "text/html")],
                "<html><body>Welcome</body></html>",
            )
        });
    serve(l, router);

    let report = doctor::run(&options(&format!("{origin}/mcp"))).await;
    let step = assert_step(&report, "challenge", Status::Fail);
    assert_eq!(step.got, "302 redirect to /login");
    assert!(step.fix.unwrap().contains("do not follow redirects"));
    let step = assert_step(&report, "prm-path", Status::Fail);
    assert!(step.got.contains("not JSON (text/html)"), "{step:?}");
    assert_step(&report, "as-metadata", Status::Skip);

    let mut slow = options(&format!("{origin}/slow"));
    slow.timeout = Duration::from_secs(1);
    let report = doctor::run(&slow).await;
    let step = assert_step(&report, "challenge", Status::Fail);
    assert_eq!(step.got, "no answer within 1 s");

    let (closed, closed_port) = listener().await;
    drop(closed);
    let report = doctor::run(&options(&format!("http://127.0.0.1:{closed_port}/mcp"))).await;
    let step = assert_step(&report, "challenge", Status::Fail);
    assert!(step.got.starts_with("cannot connect"), "{step:?}");
    assert!(!report.passed);

    let report = doctor::run(&options("not a url")).await;
    assert_step(&report, "url", Status::Fail);
}

#[tokio::test]
async fn a_registration_limit_is_reported_with_the_setting_to_raise() {
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_REGISTRATIONS_PER_HOUR".into(), "2".into());
    })
    .await;
    let report = doctor::run(&options(&app.config.mcp_server_url)).await;
    assert_step(&report, "register-claude", Status::Pass);
    assert_step(&report, "register-chatgpt", Status::Pass);
    let step = assert_step(&report, "register-cursor", Status::Fail);
    assert!(step.got.starts_with("429"), "{step:?}");
    assert!(
        step.fix
            .unwrap()
            .contains("GATEHOUSE_REGISTRATIONS_PER_HOUR")
    );
    assert_step(&report, "authorize-cursor", Status::Skip);
    assert_eq!(report.registered_clients.len(), 2);
}

#[tokio::test]
async fn the_command_exits_zero_only_when_every_step_passes() {
    let app = spawn_app().await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("doctor-clients.json");
    let run = |url: String| {
        let state = state.clone();
        async move {
            tokio::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
                .args(["doctor", &url, "--json", "--timeout", "5"])
                .env_remove("GATEHOUSE_DOCTOR_TOKEN")
                .env("GATEHOUSE_DOCTOR_STATE_FILE", &state)
                .output()
                .await
                .unwrap()
        }
    };
    let out = run(app.config.mcp_server_url.clone()).await;
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["passed"], json!(true), "{report:#}");
    assert_eq!(out.status.code(), Some(0));

    let (closed, port) = listener().await;
    drop(closed);
    let out = run(format!("http://127.0.0.1:{port}/mcp")).await;
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["passed"], json!(false));
    assert_eq!(out.status.code(), Some(1));
}

#[tokio::test]
async fn interactive_runs_the_whole_flow_with_one_refresh_and_lists_the_tools() {
    let app = spawn_app().await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut opts = options(&app.config.mcp_server_url);
    opts.interactive = Some(doctor::interactive::BrowserOpener(Arc::new(
        move |url: &str| tx.send(url.to_string()).map_err(|e| e.to_string()),
    )));
    // The person: signs in, approves, and the browser follows the redirect to the doctor.
    let person = async {
        let url = rx.recv().await.expect("the doctor opens the browser");
        assert!(url.contains("code_challenge_method=S256"), "{url}");
        assert!(url.contains("resource="), "{url}");
        let browser = crate::helpers::new_client();
        let location = crate::oauth_helpers::walk(&app, &browser, &url, "approve").await;
        assert!(location.starts_with("http://127.0.0.1:"), "{location}");
        let page = browser.get(&location).send().await.unwrap();
        assert_eq!(page.status(), StatusCode::OK);
    };
    let (report, ()) = tokio::join!(doctor::run(&opts), person);
    let text = doctor::render_text(&report);
    assert!(report.passed, "{text}");
    for check in [
        "interactive-register",
        "interactive-authorize",
        "interactive-token",
        "interactive-refresh",
        "token-initialize",
        "token-tools-list",
    ] {
        assert_step(&report, check, Status::Pass);
    }
    assert_eq!(
        report.step("interactive-refresh").unwrap().got,
        "access token, refresh token rotated"
    );
    assert_eq!(report.registered_clients.len(), 5);
    assert_eq!(report.registered_clients[4].client, "interactive");
    // The account has no project yet, so the data-gated list holds only list_projects.
    assert_eq!(report.tools.unwrap(), ["list_projects"]);
}

#[tokio::test]
async fn a_proxy_that_drops_cors_headers_is_named_for_each_endpoint() {
    let (proxy_listener, proxy_port) = listener().await;
    let public = format!("http://127.0.0.1:{proxy_port}/mcp");
    let app = spawn_app_with(|v| {
        v.insert("MCP_SERVER_URL".into(), public.clone());
    })
    .await;
    start_proxy(
        proxy_listener,
        &app.address,
        ProxyFaults {
            drop_header: Some("access-control-allow-origin"),
            ..Default::default()
        },
    );
    let report = doctor::run(&options(&public)).await;
    for check in [
        "cors-resource-metadata",
        "cors-server-metadata",
        "cors-registration",
        "cors-token",
    ] {
        let step = assert_step(&report, check, Status::Fail);
        assert!(
            step.got.contains("Access-Control-Allow-Origin \"\""),
            "{step:?}"
        );
        assert!(step.fix.unwrap().starts_with("Answer CORS preflights on"));
    }
    // Clients that are not browsers are unaffected.
    assert_step(&report, "challenge", Status::Pass);
    assert_step(&report, "register-claude", Status::Pass);
}

#[tokio::test]
async fn repeated_runs_reuse_one_client_per_deployment_within_the_registration_limit() {
    // One run's worth of registrations an hour (the doctor imitates four clients): without
    // the saved clients the second run would meet 429.
    let app = spawn_app_with(|v| {
        v.insert("GATEHOUSE_REGISTRATIONS_PER_HOUR".into(), "4".into());
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("gatehouse").join("doctor-clients.json");
    let mut opts = options(&app.config.mcp_server_url);
    opts.state_file = Some(state.clone());
    let mut first_ids = Vec::new();
    for run in 0..6 {
        let report = doctor::run(&opts).await;
        let text = doctor::render_text(&report);
        assert!(report.passed, "run {run}:\n{text}");
        if run == 0 {
            assert_eq!(report.registered_clients.len(), 4, "{text}");
            first_ids = report
                .registered_clients
                .iter()
                .map(|c| c.client_id.clone())
                .collect();
        } else {
            assert!(report.registered_clients.is_empty(), "run {run}:\n{text}");
            assert!(report.step("register-claude").is_none(), "{text}");
            let step = assert_step(&report, "authorize-claude", Status::Pass);
            assert!(step.got.contains(&first_ids[0]), "{step:?}");
        }
    }
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&state).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let saved: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert_eq!(
        saved["deployments"][&app.config.issuer]["Claude"],
        json!(first_ids[0])
    );

    // The command keeps its clients in the file the environment names: a seventh run, no
    // registration, exit 0.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(["doctor", &app.config.mcp_server_url, "--json"])
        .env("GATEHOUSE_DOCTOR_STATE_FILE", &state)
        .env_remove("GATEHOUSE_DOCTOR_TOKEN")
        .output()
        .await
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["passed"], json!(true), "{report:#}");
    assert_eq!(report["registered_clients"], json!([]), "{report:#}");
    assert_eq!(out.status.code(), Some(0));

    // --client-id: the authorization request with that client, nothing registered.
    let mut given = options(&app.config.mcp_server_url);
    given.client = Some((
        first_ids[2].clone(),
        "cursor://anysphere.cursor-mcp/oauth/callback".into(),
    ));
    let report = doctor::run(&given).await;
    assert!(report.passed, "{}", doctor::render_text(&report));
    assert_step(&report, "authorize", Status::Pass);
    assert!(report.step("register-cursor").is_none());
    assert!(report.registered_clients.is_empty());
}

#[tokio::test]
async fn a_saved_client_the_server_no_longer_knows_is_registered_again() {
    let app = spawn_app().await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("doctor-clients.json");
    std::fs::write(
        &state,
        json!({"version": 1, "deployments": {app.config.issuer.clone(): {
            "Claude": "deleted-long-ago", "ChatGPT": "deleted-long-ago",
            "Cursor": "deleted-long-ago", "VS Code": "deleted-long-ago"}}})
        .to_string(),
    )
    .unwrap();
    let mut opts = options(&app.config.mcp_server_url);
    opts.state_file = Some(state.clone());
    let report = doctor::run(&opts).await;
    assert!(report.passed, "{}", doctor::render_text(&report));
    assert_eq!(report.registered_clients.len(), 4);
    assert_step(&report, "register-vscode", Status::Pass);
    let saved: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert_eq!(
        saved["deployments"][&app.config.issuer]["VS Code"],
        json!(report.registered_clients[3].client_id)
    );
}

#[tokio::test]
async fn https_against_the_plain_port_is_told_to_use_http_and_nothing_passes() {
    let app = spawn_app().await;
    let url = app.config.mcp_server_url.replacen("http://", "https://", 1);
    let report = doctor::run(&options(&url)).await;
    let step = assert_step(&report, "challenge", Status::Fail);
    let fix = step.fix.unwrap();
    assert!(fix.contains("This port speaks plain HTTP"), "{fix}");
    assert!(fix.contains(&app.config.mcp_server_url), "{fix}");
    assert!(!fix.contains("start the server"), "{fix}");
    assert_step(&report, "discovery", Status::Skip);
    assert!(
        report.steps.iter().all(|s| s.status != Status::Pass),
        "{}",
        doctor::render_text(&report)
    );

    // A closed port: nothing reached, so nothing passed (the URL rules included).
    let (closed, port) = listener().await;
    drop(closed);
    let report = doctor::run(&options(&format!("http://127.0.0.1:{port}/mcp"))).await;
    let step = assert_step(&report, "challenge", Status::Fail);
    assert!(step.fix.unwrap().contains("Nothing listens on 127.0.0.1:"));
    assert!(
        report.steps.iter().all(|s| s.status != Status::Pass),
        "{}",
        doctor::render_text(&report)
    );
}

#[tokio::test]
async fn lines_stream_as_checks_end_short_and_without_colour_off_a_terminal() {
    // The challenge answers at once; the protected-resource metadata never does.
    let (l, port) = listener().await;
    let origin = format!("http://127.0.0.1:{port}");
    let router = Router::new()
        .route("/mcp", post(challenge_401))
        .fallback(|| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            "late"
        })
        .with_state(origin.clone());
    serve(l, router);
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(["doctor", &format!("{origin}/mcp"), "--timeout", "4"])
        .env_remove("GATEHOUSE_DOCTOR_TOKEN")
        .env("GATEHOUSE_DOCTOR_STATE_FILE", "/nonexistent/doctor.json")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let header = lines.next_line().await.unwrap().unwrap();
    assert_eq!(header, format!("gatehouse doctor {origin}/mcp"));
    let first = lines.next_line().await.unwrap().unwrap();
    assert!(first.starts_with("✓ challenge: 401"), "{first:?}");
    // Printed while the later checks still wait for their timeouts.
    assert!(
        child.try_wait().unwrap().is_none(),
        "the line came only at the end"
    );
    let mut rest = Vec::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        rest.push(line);
    }
    assert_eq!(child.wait().await.unwrap().code(), Some(1));
    for line in std::iter::once(&first).chain(&rest) {
        assert!(!line.contains('\u{1b}'), "colour off a terminal: {line:?}");
        if !line.starts_with("    fix: ") {
            assert!(line.chars().count() <= 160, "long line: {line:?}");
        }
    }
    assert!(
        rest.iter()
            .any(|l| l.starts_with("✗ prm-path: no answer within 4 s")),
        "{rest:#?}"
    );
    assert!(rest.iter().any(|l| l.starts_with("    fix: ")), "{rest:#?}");
}
