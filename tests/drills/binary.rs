//! The real `gatehouse` binary as a child process, for the drills that kill it or take its
//! disk away: started on a fixed loopback port (so that the issuer and the resource its tokens
//! are bound to stay the same across restarts) with its log appended to one file.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

pub(crate) const EMAIL: &str = "drill@example.com";
pub(crate) const PASSWORD: &str = "a-long-drill-password";
pub(crate) const REDIRECT: &str = "http://127.0.0.1:7777/callback";
const V26: &str = "2026-07-28";

/// A free loopback port (bound, then released for the server to take).
pub(crate) fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().unwrap().port()
}

/// One server process and what it takes to start it again.
pub(crate) struct Server {
    child: std::sync::Mutex<Option<Child>>,
    /// The binary started: this build's, or another release's.
    program: PathBuf,
    vars: HashMap<String, String>,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Where stdout and stderr of every start go (appended).
    pub log: PathBuf,
}

impl Server {
    /// Starts the binary on `database_url` at `port`; `extra` adds environment variables.
    pub(crate) async fn start(
        database_url: &str,
        port: u16,
        log: &Path,
        extra: &[(&str, &str)],
    ) -> Server {
        Server::start_program(
            Path::new(env!("CARGO_BIN_EXE_gatehouse")),
            database_url,
            port,
            log,
            extra,
        )
        .await
    }

    /// [`Server::start`] with the binary `program` (another release's, for the rolling
    /// upgrade drill).
    pub(crate) async fn start_program(
        program: &Path,
        database_url: &str,
        port: u16,
        log: &Path,
        extra: &[(&str, &str)],
    ) -> Server {
        let base = format!("http://127.0.0.1:{port}");
        let mut vars = HashMap::new();
        vars.insert("DATABASE_URL".to_string(), database_url.to_string());
        vars.insert("GATEHOUSE_BIND".to_string(), format!("127.0.0.1:{port}"));
        vars.insert("MCP_SERVER_URL".to_string(), format!("{base}/mcp"));
        vars.insert("GATEHOUSE_REGISTRATIONS_PER_HOUR".into(), "1000000".into());
        vars.insert(
            "GATEHOUSE_REGISTRATION_BYTES_PER_HOUR".into(),
            "1073741824".into(),
        );
        vars.insert("GATEHOUSE_QUOTA_CALLS_PER_HOUR".into(), "0".into());
        vars.insert("RUST_LOG".into(), "info".into());
        for (k, v) in extra {
            vars.insert((*k).to_string(), (*v).to_string());
        }
        let server = Server {
            child: std::sync::Mutex::new(None),
            program: program.to_path_buf(),
            vars,
            base,
            log: log.to_path_buf(),
        };
        server.restart().await;
        server
    }

    /// Starts the process (again) and waits until `/readyz` answers 200.
    pub(crate) async fn restart(&self) {
        if let Err(e) = self.try_restart(Duration::from_secs(60)).await {
            panic!("{e}");
        }
    }

    /// Starts the process (again) and waits until `/readyz` answers 200; the error says why
    /// not within `within` (the process ended, or never became ready).
    pub(crate) async fn try_restart(&self, within: Duration) -> Result<(), String> {
        assert!(
            self.child.lock().unwrap().is_none(),
            "the server is still running"
        );
        let started = Instant::now();
        loop {
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.log)
                .expect("the server log");
            let mut command = Command::new(&self.program);
            command
                .env_clear()
                .envs(&self.vars)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log);
            let mut child = command.spawn().expect("start gatehouse");
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    // The port may still be held by the killed process's sockets: retry.
                    if started.elapsed() > within {
                        return Err(format!(
                            "the server did not start ({status}); see {}",
                            self.log.display()
                        ));
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    break;
                }
                if let Ok(r) = reqwest::Client::new()
                    .get(format!("{}/readyz", self.base))
                    .timeout(Duration::from_secs(2))
                    .send()
                    .await
                    && r.status() == StatusCode::OK
                {
                    *self.child.lock().unwrap() = Some(child);
                    return Ok(());
                }
                if started.elapsed() > within {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "the server did not become ready; see {}",
                        self.log.display()
                    ));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// SIGTERM, then waits for the process to end (an orderly stop).
    pub(crate) fn stop(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            child.wait().expect("reap");
        }
    }

    /// SIGKILL, then waits for the process to be gone.
    pub(crate) fn kill9(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            child.kill().expect("SIGKILL");
            child.wait().expect("reap");
        }
    }

    /// The process id of the running server, if it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.lock().unwrap().as_ref().map(Child::id)
    }

    /// Appends a marker line to the log (to find what one phase of a drill logged).
    pub(crate) fn mark(&self, text: &str) -> u64 {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.log)
            .unwrap();
        writeln!(f, "=== drill: {text}").unwrap();
        f.metadata().unwrap().len()
    }

    /// The log written since byte `from`.
    pub(crate) fn log_since(&self, from: u64) -> String {
        let all = std::fs::read(&self.log).unwrap_or_default();
        String::from_utf8_lossy(&all[(from as usize).min(all.len())..]).into_owned()
    }

    /// `base` + `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A client with a cookie jar that does not follow redirects and gives up after 10 s.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// What a request got: `None` when no complete answer arrived (the server died under it).
pub(crate) type Answer = Option<(StatusCode, reqwest::header::HeaderMap, Value)>;

/// Sends and reads the whole answer (JSON, or the text as a JSON string).
pub(crate) async fn send(r: reqwest::RequestBuilder) -> Answer {
    let r = r.send().await.ok()?;
    let status = r.status();
    let headers = r.headers().clone();
    let text = r.text().await.ok()?;
    Some((
        status,
        headers,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    ))
}

/// `POST /oauth/register` of a public client.
pub(crate) fn register(s: &Server, c: &reqwest::Client) -> reqwest::RequestBuilder {
    c.post(s.url("/oauth/register")).json(&json!({
        "redirect_uris": [REDIRECT],
        "token_endpoint_auth_method": "none",
        "client_name": "Drill Client",
    }))
}

/// The authorize URL for `client_id` with PKCE `challenge`, asking for read and write.
pub(crate) fn authorize_url(s: &Server, client_id: &str, challenge: &str) -> String {
    let q: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("response_type", "code"),
            ("client_id", client_id),
            ("redirect_uri", REDIRECT),
            ("code_challenge", challenge),
            ("code_challenge_method", "S256"),
            ("state", "drill"),
            ("scope", "mcp:read mcp:write"),
            ("resource", &s.url("/mcp")),
        ])
        .finish();
    s.url(&format!("/oauth/authorize?{q}"))
}

/// The `value` of a hidden input of an HTML page.
pub(crate) fn hidden(html: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker)? + marker.len();
    let end = html[start..].find('"')? + start;
    Some(crate::helpers::html_unescape(&html[start..end]))
}

/// Walks `browser` through sign-in (when asked) and consent; returns the code, or what went
/// wrong (a step got no complete or no expected answer).
pub(crate) async fn authorize(
    s: &Server,
    browser: &reqwest::Client,
    client_id: &str,
    challenge: &str,
) -> Result<String, String> {
    let mut r = browser
        .get(authorize_url(s, client_id, challenge))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if r.status() == StatusCode::SEE_OTHER {
        let loc = r.headers()["location"]
            .to_str()
            .map_err(|e| e.to_string())?
            .to_string();
        if !loc.starts_with("/signin") {
            return code_of(&loc);
        }
        let page = browser
            .get(s.url(&loc))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .text()
            .await
            .map_err(|e| e.to_string())?;
        let csrf = hidden(&page, "csrf_token").ok_or("no csrf_token")?;
        let next = hidden(&page, "next").ok_or("no next")?;
        let signed = browser
            .post(s.url("/signin"))
            .form(&[
                ("csrf_token", csrf.as_str()),
                ("next", next.as_str()),
                ("email", EMAIL),
                ("password", PASSWORD),
            ])
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if signed.status() != StatusCode::SEE_OTHER {
            return Err(format!("sign-in: {}", signed.status()));
        }
        let next = signed.headers()["location"]
            .to_str()
            .map_err(|e| e.to_string())?
            .to_string();
        r = browser
            .get(s.url(&next))
            .send()
            .await
            .map_err(|e| e.to_string())?;
    }
    if r.status() == StatusCode::SEE_OTHER {
        return code_of(
            r.headers()["location"]
                .to_str()
                .map_err(|e| e.to_string())?,
        );
    }
    if r.status() != StatusCode::OK {
        let status = r.status();
        let text = r.text().await.unwrap_or_default();
        let text = text.split("<main").nth(1).unwrap_or(&text);
        return Err(format!(
            "authorize: {status} {}",
            &text[..text.len().min(600)]
        ));
    }
    let page = r.text().await.map_err(|e| e.to_string())?;
    let csrf = hidden(&page, "csrf_token").ok_or("no csrf_token")?;
    let request = hidden(&page, "request")
        .ok_or_else(|| format!("no consent form: {}", &page[..page.len().min(300)]))?;
    let d = browser
        .post(s.url("/oauth/authorize/decision"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("request", request.as_str()),
            ("decision", "approve"),
        ])
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if d.status() != StatusCode::SEE_OTHER {
        return Err(format!("decision: {}", d.status()));
    }
    code_of(
        d.headers()["location"]
            .to_str()
            .map_err(|e| e.to_string())?,
    )
}

fn code_of(location: &str) -> Result<String, String> {
    url::Url::parse(location)
        .map_err(|e| format!("{location}: {e}"))?
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .ok_or_else(|| format!("no code in {location}"))
}

/// `POST /oauth/token` with `form`.
pub(crate) fn token(
    s: &Server,
    c: &reqwest::Client,
    form: &[(&str, &str)],
) -> reqwest::RequestBuilder {
    c.post(s.url("/oauth/token")).form(form)
}

/// `POST /oauth/token` redeeming `code` (RFC 6749 §4.1.3 with the PKCE `code_verifier`) for
/// the public client `client_id` at [`REDIRECT`].
pub(crate) fn redeem(
    s: &Server,
    c: &reqwest::Client,
    client_id: &str,
    code: &str,
    verifier: &str,
) -> reqwest::RequestBuilder {
    token(
        s,
        c,
        &[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("code_verifier", verifier),
            ("client_id", client_id),
            ("redirect_uri", REDIRECT),
        ],
    )
}

/// `tools/call list_projects`, stateless, with `token`.
pub(crate) fn list_projects(
    s: &Server,
    c: &reqwest::Client,
    token: &str,
) -> reqwest::RequestBuilder {
    mcp(
        s,
        c,
        token,
        "tools/call",
        json!({"name": "list_projects", "arguments": {}}),
    )
}

/// A stateless (2026-07-28) MCP request.
pub(crate) fn mcp(
    s: &Server,
    c: &reqwest::Client,
    token: &str,
    method: &str,
    mut params: Value,
) -> reqwest::RequestBuilder {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": V26,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "gatehouse-drills", "version": "1"}
    });
    let mut r = c
        .post(s.url("/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", V26)
        .header("mcp-method", method)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    if method == "tools/call"
        && let Some(name) = params["name"].as_str()
    {
        r = r.header("mcp-name", name);
    }
    r
}

/// A PKCE pair (verifier, S256 challenge).
pub(crate) fn pkce() -> (String, String) {
    let verifier = gatehouse::domain::secret::random_urlsafe(32);
    let challenge = gatehouse::domain::pkce::s256_challenge(&verifier);
    (verifier, challenge)
}

/// Creates the bootstrap account's project directly in the database (migrating it first);
/// returns the project id.
pub(crate) async fn prepare(database_url: &str) -> String {
    let store = gatehouse::store::Store::connect(database_url)
        .await
        .expect("connect");
    store.migrate().await.expect("migrate");
    let hash = gatehouse::password::hash_password(PASSWORD.to_string())
        .await
        .unwrap();
    let email = gatehouse::domain::account::Email::parse(EMAIL).unwrap();
    let account = store
        .create_account(&email, &hash, gatehouse::store::now())
        .await
        .unwrap();
    let project = store
        .create_project("Drill", &account.id, gatehouse::store::now())
        .await
        .unwrap();
    store.close().await;
    project
}
