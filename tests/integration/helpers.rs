//! The test harness: [`spawn_app`] starts Gatehouse on port 0 against a fresh database.

use std::collections::HashMap;
use std::sync::Arc;

use gatehouse::app::Application;
use gatehouse::config::Config;
use gatehouse::domain::account::Email;
use gatehouse::oauth::clients::{HttpsFetcher, MetadataFetcher};
use gatehouse::store::Store;

/// A fresh database for one test: a `SQLite` file in a temporary folder, or a new `PostgreSQL`
/// database that is dropped when this value is dropped.
pub(crate) struct TestDb {
    /// The `DATABASE_URL` of the database.
    pub url: String,
    _dir: Option<tempfile::TempDir>,
    pg: Option<(String, String)>,
    raw: tokio::sync::OnceCell<sqlx::AnyPool>,
}

impl TestDb {
    /// A `SQLite` database.
    pub(crate) fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("gatehouse.db").display()
        );
        TestDb {
            url,
            _dir: Some(dir),
            pg: None,
            raw: Default::default(),
        }
    }

    /// An empty `PostgreSQL` database on the server named by `GATEHOUSE_TEST_POSTGRES`, if set.
    pub(crate) async fn postgres() -> Option<TestDb> {
        TestDb::postgres_from(None).await
    }

    /// A `PostgreSQL` database with every migration applied, copied from a template database
    /// that is migrated once per set of migration files (see [`pg_template`]); a copy takes a
    /// tenth of a second where migrating a new database takes two.
    async fn postgres_migrated() -> Option<TestDb> {
        let server = std::env::var("GATEHOUSE_TEST_POSTGRES").ok()?;
        let template = tokio::task::spawn_blocking(move || pg_template(&server))
            .await
            .expect("the template task ends");
        TestDb::postgres_from(Some(template)).await
    }

    async fn postgres_from(template: Option<&'static str>) -> Option<TestDb> {
        let server = std::env::var("GATEHOUSE_TEST_POSTGRES").ok()?;
        // The process id in the name lets a later run drop what a run that ended early left.
        let name = format!(
            "gatehouse_test_{}_{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        );
        pg_janitor(&server, None);
        let admin = sqlx::PgPool::connect(&server)
            .await
            .expect("connect to GATEHOUSE_TEST_POSTGRES");
        let create = match template {
            Some(template) => format!("CREATE DATABASE {name} TEMPLATE {template}"),
            None => format!("CREATE DATABASE {name}"),
        };
        sqlx::query(&create)
            .execute(&admin)
            .await
            .expect("create test database");
        admin.close().await;
        let base = server.rsplit_once('/').map(|(b, _)| b).unwrap_or(&server);
        Some(TestDb {
            url: format!("{base}/{name}"),
            _dir: None,
            pg: Some((server, name)),
            raw: Default::default(),
        })
    }

    /// Another handle on an existing database (`DATABASE_URL`), for a second server instance;
    /// dropping it leaves the database alone (its owner drops it).
    pub(crate) fn shared(url: &str) -> TestDb {
        TestDb {
            url: url.to_string(),
            _dir: None,
            pg: None,
            raw: Default::default(),
        }
    }

    /// A small connection pool of the test's own on this database, for what a test checks or
    /// sets up below the server's API (a stored hash, an expiry moved into the past). The
    /// server's own pool stays private to it.
    pub(crate) async fn pool(&self) -> &sqlx::AnyPool {
        self.raw
            .get_or_init(|| async {
                sqlx::any::install_default_drivers();
                sqlx::any::AnyPoolOptions::new()
                    .max_connections(2)
                    .connect(&self.url)
                    .await
                    .expect("a test connection to the database")
            })
            .await
    }

    /// The database the integration tests use: `PostgreSQL` when
    /// `GATEHOUSE_TEST_BACKEND=postgres`, `SQLite` otherwise.
    pub(crate) async fn for_app() -> TestDb {
        if std::env::var("GATEHOUSE_TEST_BACKEND").as_deref() == Ok("postgres") {
            TestDb::postgres_migrated()
                .await
                .expect("GATEHOUSE_TEST_BACKEND=postgres needs GATEHOUSE_TEST_POSTGRES")
        } else {
            TestDb::sqlite()
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some((server, name)) = self.pg.take() {
            // At once: no new connections, and the open ones (pools of servers whose tasks
            // outlive the test) ended, so that they do not add up while the drop waits its
            // turn. Drop runs outside any runtime guarantee: a small runtime on its own thread.
            let fence = (server.clone(), name.clone());
            let _ = std::thread::spawn(move || {
                let (server, name) = fence;
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime")
                    .block_on(async move {
                        use sqlx::Connection;
                        if let Ok(mut admin) = sqlx::PgConnection::connect(&server).await {
                            let _ = sqlx::query(&format!(
                                "ALTER DATABASE {name} ALLOW_CONNECTIONS false"
                            ))
                            .execute(&mut admin)
                            .await;
                            let _ = sqlx::query(
                                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                                 WHERE datname = $1",
                            )
                            .bind(&name)
                            .execute(&mut admin)
                            .await;
                            let _ = admin.close().await;
                        }
                    });
            })
            .join();
            pg_janitor(&server, Some(name));
        }
    }
}

/// The name of a database on `server` with every `PostgreSQL` migration applied, made once
/// per set of migration files (its name carries their SHA-256) and kept for later runs. Other
/// processes making the same template at the same time wait on an advisory lock; the template
/// is migrated under a temporary name and renamed when done, so a half-made one is never used.
/// Blocking: call it off the async runtime.
fn pg_template(server: &str) -> &'static str {
    static TEMPLATE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEMPLATE.get_or_init(|| {
        use sha2::Digest;
        let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/postgres");
        let mut files: Vec<_> = std::fs::read_dir(folder)
            .expect("the migrations folder")
            .map(|e| e.expect("a migration file").path())
            .collect();
        files.sort();
        let mut digest = sha2::Sha256::new();
        for file in &files {
            digest.update(file.file_name().unwrap().as_encoded_bytes());
            digest.update(std::fs::read(file).expect("a migration file"));
        }
        let name = format!("gatehouse_tpl_{}", &hex::encode(digest.finalize())[..16]);
        let server = server.to_string();
        let template = name.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                use sqlx::Connection;
                let mut admin = sqlx::PgConnection::connect(&server)
                    .await
                    .expect("connect to GATEHOUSE_TEST_POSTGRES");
                sqlx::query("SELECT pg_advisory_lock(7210113)")
                    .execute(&mut admin)
                    .await
                    .expect("the template lock");
                let exists: bool = sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)",
                )
                .bind(&template)
                .fetch_one(&mut admin)
                .await
                .expect("look for the template");
                if !exists {
                    let scratch = format!("{template}_{}", uuid::Uuid::new_v4().simple());
                    sqlx::query(&format!("CREATE DATABASE {scratch}"))
                        .execute(&mut admin)
                        .await
                        .expect("create the template database");
                    let base = server.rsplit_once('/').map(|(b, _)| b).unwrap_or(&server);
                    let url = format!("{base}/{scratch}");
                    // Migrated on a runtime of its own: when it ends, every connection and
                    // task of the store has ended too, and the database can be renamed.
                    std::thread::spawn(move || {
                        tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                            .expect("runtime")
                            .block_on(async move {
                                let store = Store::connect(&url).await.expect("connect");
                                store.migrate().await.expect("migrate the template");
                            });
                    })
                    .join()
                    .expect("the template's migration");
                    sqlx::query(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
                    )
                    .bind(&scratch)
                    .execute(&mut admin)
                    .await
                    .expect("end the template's connections");
                    sqlx::query(&format!("ALTER DATABASE {scratch} RENAME TO {template}"))
                        .execute(&mut admin)
                        .await
                        .expect("publish the template");
                }
                let _ = admin.close().await;
            });
        })
        .join()
        .expect("the template is made");
        name
    })
}

/// Drops test databases on a thread of its own, one after another, so that a test does not
/// wait for the checkpoint each `DROP DATABASE` costs; `None` only starts the thread. On its
/// first use it also drops what
/// earlier runs on this machine left (databases named after a process that no longer runs),
/// when the server is on loopback. Drops still queued when the process ends are left for that.
fn pg_janitor(server: &str, name: Option<String>) {
    use std::sync::mpsc;
    static QUEUE: std::sync::OnceLock<std::sync::Mutex<mpsc::Sender<String>>> =
        std::sync::OnceLock::new();
    let queue = QUEUE.get_or_init(|| {
        let (send, receive) = mpsc::channel::<String>();
        let server = server.to_string();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let Ok(admin) = sqlx::PgPool::connect(&server).await else {
                    return;
                };
                let local = server.contains("@127.0.0.1") || server.contains("@localhost");
                if local && std::path::Path::new("/proc/self").exists() {
                    let names: Vec<String> = sqlx::query_scalar(
                        "SELECT datname FROM pg_database WHERE datname LIKE 'gatehouse\\_test\\_%'",
                    )
                    .fetch_all(&admin)
                    .await
                    .unwrap_or_default();
                    for left in names {
                        let pid = left.split('_').nth(2).and_then(|p| p.parse::<u32>().ok());
                        let ended = pid.is_some_and(|pid| {
                            !std::path::Path::new(&format!("/proc/{pid}")).exists()
                        });
                        if ended {
                            let _ = sqlx::query(&format!(
                                "DROP DATABASE IF EXISTS {left} WITH (FORCE)"
                            ))
                            .execute(&admin)
                            .await;
                        }
                    }
                }
                while let Ok(name) = receive.recv() {
                    let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .execute(&admin)
                        .await;
                }
            });
        });
        std::sync::Mutex::new(send)
    });
    if let Some(name) = name {
        let _ = queue.lock().expect("the drop queue").send(name);
    }
}

/// A running server.
pub(crate) struct TestApp {
    /// `http://127.0.0.1:PORT` (the issuer).
    pub address: String,
    /// The bound port.
    pub port: u16,
    /// The port of the metrics listener, when `GATEHOUSE_METRICS_BIND` is set.
    pub metrics_port: Option<u16>,
    /// Direct access to the server's database.
    pub store: Store,
    /// The configuration the server runs with.
    pub config: Config,
    /// A client with a cookie jar that does not follow redirects.
    pub client: reqwest::Client,
    /// Stops the server when the test ends (dropped before [`TestApp::db`]): it stops
    /// accepting, and its lanes, pools and background tasks end with its runtime. Left
    /// running, every finished test's server kept its threads and kept reconnecting to its
    /// fenced database, and on `PostgreSQL` those attempts crowded out the running tests'
    /// connections (503s).
    pub stop: ServerStop,
    /// Keeps the database alive for the test.
    pub db: TestDb,
}

/// Stops a test's server when dropped; [`ServerStop::none`] for a server the test stops itself.
pub(crate) struct ServerStop(Option<tokio::sync::oneshot::Sender<()>>);

impl ServerStop {
    /// Nothing to stop.
    pub(crate) fn none() -> ServerStop {
        ServerStop(None)
    }
}

/// Starts the server with default settings.
pub(crate) async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// Starts the server; `adjust` may add or change environment variables first.
pub(crate) async fn spawn_app_with(adjust: impl FnOnce(&mut HashMap<String, String>)) -> TestApp {
    spawn_app_full(adjust, Arc::new(HttpsFetcher::default())).await
}

/// Starts the server with a chosen fetcher of client metadata documents.
pub(crate) async fn spawn_app_full(
    adjust: impl FnOnce(&mut HashMap<String, String>),
    fetcher: Arc<dyn MetadataFetcher>,
) -> TestApp {
    spawn_on(TestDb::for_app().await, adjust, fetcher).await
}

/// Starts another instance on `first`'s database, as a deployment with several instances
/// sharing one database runs; by default it has its own port, issuer and `MCP_SERVER_URL`, and
/// `adjust` may change its environment variables first.
pub(crate) async fn spawn_instance(
    first: &TestApp,
    adjust: impl FnOnce(&mut HashMap<String, String>),
) -> TestApp {
    spawn_on(
        TestDb::shared(&first.db.url),
        adjust,
        Arc::new(HttpsFetcher::default()),
    )
    .await
}

/// Another instance of `first`'s deployment: its database, its issuer and `MCP_SERVER_URL`
/// (one public name in front of both), on a port of its own, with a chosen fetcher of client
/// metadata documents and key sets.
pub(crate) async fn spawn_twin_with_fetcher(
    first: &TestApp,
    fetcher: Arc<dyn MetadataFetcher>,
) -> TestApp {
    let mcp = first.config.mcp_server_url.clone();
    let issuer = first.config.issuer.clone();
    spawn_on(
        TestDb::shared(&first.db.url),
        |v| {
            v.insert("MCP_SERVER_URL".into(), mcp);
            v.insert("GATEHOUSE_ISSUER".into(), issuer);
        },
        fetcher,
    )
    .await
}

/// Starts the server on a database the test prepared (a fixture at an older migration level):
/// the real startup path migrates it.
pub(crate) async fn spawn_app_on(
    db: TestDb,
    adjust: impl FnOnce(&mut HashMap<String, String>),
) -> TestApp {
    spawn_on(db, adjust, Arc::new(HttpsFetcher::default())).await
}

/// A server on the database at `url` (not dropped with it) that answers as `first`'s
/// deployment: `first`'s issuer and `MCP_SERVER_URL` (the audience its tokens are bound to), on
/// a port of its own. For a deployment moved to a restored copy of its database.
pub(crate) async fn spawn_successor(
    first: &TestApp,
    url: &str,
    adjust: impl FnOnce(&mut HashMap<String, String>),
) -> TestApp {
    let mcp = first.config.mcp_server_url.clone();
    let issuer = first.config.issuer.clone();
    spawn_on(
        TestDb::shared(url),
        |v| {
            v.insert("MCP_SERVER_URL".into(), mcp);
            v.insert("GATEHOUSE_ISSUER".into(), issuer);
            adjust(v);
        },
        Arc::new(HttpsFetcher::default()),
    )
    .await
}

async fn spawn_on(
    db: TestDb,
    adjust: impl FnOnce(&mut HashMap<String, String>),
    fetcher: Arc<dyn MetadataFetcher>,
) -> TestApp {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    std_listener
        .set_nonblocking(true)
        .expect("non-blocking listener");
    let port = std_listener.local_addr().unwrap().port();
    let address = format!("http://127.0.0.1:{port}");
    let mut vars = HashMap::new();
    vars.insert("MCP_SERVER_URL".to_string(), format!("{address}/mcp"));
    vars.insert("DATABASE_URL".to_string(), db.url.clone());
    vars.insert("GATEHOUSE_BIND".to_string(), format!("127.0.0.1:{port}"));
    adjust(&mut vars);
    let config = Config::from_vars(&vars).expect("test configuration");
    // The server runs on a runtime of its own, as the real binary does: a test that blocks
    // its own thread (waiting for a command-line process, say) never stops the server in the
    // middle of a write, which would hold SQLite's write lock against that very process.
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server_config = config.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("server runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).expect("listener");
            let app = Application::build_with_fetcher(server_config, listener, fetcher)
                .await
                .expect("build app");
            let store = app.state().store.clone();
            let metrics_port = app.metrics_port();
            let _ = ready_tx.send((store, metrics_port));
            // Until the test's `ServerStop` is dropped (its sender gone).
            let _ = app
                .run_until(async move {
                    let _ = stop_rx.await;
                })
                .await;
        });
        runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    });
    let (store, metrics_port) = ready_rx.await.expect("the server started");
    TestApp {
        address,
        port,
        metrics_port,
        store,
        config,
        client: new_client(),
        stop: ServerStop(Some(stop_tx)),
        db,
    }
}

/// How long a test client keeps reusing an idle connection: less than the server's own idle
/// limit (`GATEHOUSE_HEADER_READ_TIMEOUT`, 10 s by default), past which the server closes it.
/// A test that blocks its thread (waiting for a command-line process, say) cannot notice that
/// close meanwhile, and a request sent on such a connection fails with hyper's
/// `IncompleteMessage`; a connection idle for longer than this is never reused.
pub(crate) const CLIENT_IDLE: std::time::Duration = std::time::Duration::from_secs(5);

/// `reqwest::Client::builder()` with [`CLIENT_IDLE`]: where every test's HTTP client starts.
pub(crate) fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().pool_idle_timeout(CLIENT_IDLE)
}

/// A fresh HTTP client with its own cookie jar, never following redirects.
pub(crate) fn new_client() -> reqwest::Client {
    client_builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Like [`new_client`], with its connections coming from `source` (any address of
/// 127.0.0.0/8 is this machine on Linux), so tests can act as several source addresses.
pub(crate) fn new_client_from(source: &str) -> reqwest::Client {
    client_builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .local_address(source.parse::<std::net::IpAddr>().expect("an IP address"))
        .build()
        .unwrap()
}

impl TestApp {
    /// `address` + `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    /// Creates an active account directly in the store; returns its id.
    pub(crate) async fn create_account(&self, email: &str, password: &str) -> String {
        let hash = gatehouse::password::hash_password(password.to_string())
            .await
            .unwrap();
        self.store
            .create_account(
                &Email::parse(email).unwrap(),
                &hash,
                gatehouse::store::now(),
            )
            .await
            .unwrap()
            .id
    }

    /// Signs `client` in through the real form (GET for the CSRF token, then POST).
    pub(crate) async fn sign_in(
        &self,
        client: &reqwest::Client,
        email: &str,
        password: &str,
    ) -> reqwest::Response {
        let page = client
            .get(self.url("/signin"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let csrf = hidden_input(&page, "csrf_token").expect("csrf_token on the sign-in page");
        client
            .post(self.url("/signin"))
            .form(&[
                ("csrf_token", csrf.as_str()),
                ("next", "/"),
                ("email", email),
                ("password", password),
            ])
            .send()
            .await
            .unwrap()
    }
}

/// The `value` of `<input type="hidden" name="NAME" value="…">` in an HTML page, unescaped.
pub(crate) fn hidden_input(html: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker)? + marker.len();
    let end = html[start..].find('"')? + start;
    Some(html_unescape(&html[start..end]))
}

/// Undoes HTML escaping: the named entities askama emits and numeric `&#NN;` / `&#xHH;` ones.
pub(crate) fn html_unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let Some(end) = rest.find(';') else { break };
        let entity = &rest[1..end];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ if entity.starts_with("#x") || entity.starts_with("#X") => {
                u32::from_str_radix(&entity[2..], 16)
                    .ok()
                    .and_then(char::from_u32)
            }
            _ if entity.starts_with('#') => entity[1..].parse().ok().and_then(char::from_u32),
            _ => None,
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Runs `change` — a write to rows the credential or client lookups read, made through a
/// connection of its own as another process (an operator, another instance) would — and
/// returns once `app` has heard of it. With the validation cache on `PostgreSQL` (the default
/// there) another process's change reaches the cache by notification (docs/design-notes.md
/// "Validation cache"), which must come within a second; otherwise every lookup reads the
/// database and there is nothing to wait for.
pub(crate) async fn behind_the_back<F: Future>(app: &TestApp, change: F) -> F::Output {
    let waits = app.store.auth_cache_waits_for_notifications();
    let before = app.store.auth_cache_epoch();
    let out = change.await;
    let start = std::time::Instant::now();
    while waits && app.store.auth_cache_epoch() == before {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(1),
            "a change made behind the server's back was not announced within a second"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    out
}

/// A minimal SMTP server (RFC 5321 §4.1: EHLO, MAIL, RCPT, DATA, QUIT) on a random port of
/// 127.0.0.1 that sends every message it receives, dot-unstuffed, on the returned channel.
pub(crate) async fn smtp_sink() -> (u16, tokio::sync::mpsc::UnboundedReceiver<String>) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let mut lines = tokio::io::BufReader::new(read).lines();
                write.write_all(b"220 sink ESMTP\r\n").await.ok();
                let mut data: Option<String> = None;
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Some(body) = data.as_mut() {
                        if line == "." {
                            let _ = tx.send(data.take().unwrap());
                            write.write_all(b"250 OK\r\n").await.ok();
                        } else {
                            body.push_str(line.strip_prefix('.').unwrap_or(&line));
                            body.push('\n');
                        }
                        continue;
                    }
                    let verb = line.get(..4).unwrap_or("").to_ascii_uppercase();
                    let reply: &[u8] = match verb.as_str() {
                        "EHLO" => b"250-sink\r\n250 8BITMIME\r\n",
                        "DATA" => {
                            data = Some(String::new());
                            b"354 go on\r\n"
                        }
                        "QUIT" => {
                            write.write_all(b"221 bye\r\n").await.ok();
                            break;
                        }
                        _ => b"250 OK\r\n",
                    };
                    write.write_all(reply).await.ok();
                }
            });
        }
    });
    (port, rx)
}

/// Decodes a quoted-printable body (RFC 2045 §6.7): soft line breaks joined, `=XX` as bytes.
/// A body that is not quoted-printable (no `=` escapes) comes back as it is.
pub(crate) fn quoted_printable_decode(body: &str) -> String {
    let joined = body.replace("=\n", "");
    let bytes = joined.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'='
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&joined[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}
