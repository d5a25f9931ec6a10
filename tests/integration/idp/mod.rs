//! Trusted identity providers: the registry and its command line (`gatehouse idp …`), and
//! signing in at a provider with OpenID Connect ([`signin`]), against a provider of the tests'
//! own ([`provider`]) that can hand out spoiled ID tokens, and against node-oidc-provider
//! ([`node_provider`]).

mod id_jag;
mod node_provider;
mod provider;
mod signin;

use std::io::Write as _;

use crate::helpers::{TestApp, spawn_app_with};

/// The server key the server and the command line share in these tests.
pub(crate) const TEST_KEY: &str =
    "0303030303030303030303030303030303030303030303030303030303030303";

/// Starts the server with [`TEST_KEY`] and `adjust`'s variables.
pub(crate) async fn spawn_with_key(
    adjust: impl FnOnce(&mut std::collections::HashMap<String, String>),
) -> TestApp {
    spawn_app_with(|vars| {
        vars.insert("GATEHOUSE_SECRET_KEY".into(), TEST_KEY.into());
        adjust(vars);
    })
    .await
}

/// A finished `gatehouse` command: (exit code, stdout, stderr).
pub(crate) type Run = (i32, String, String);

/// Runs `gatehouse ARGS…` on `app`'s database with [`TEST_KEY`], `stdin` on its standard input.
pub(crate) async fn cli(app: &TestApp, args: &[&str], stdin: &str) -> Run {
    let args: Vec<String> = args.iter().map(|a| (*a).to_string()).collect();
    let (db, mcp, issuer) = (
        app.db.url.clone(),
        app.config.mcp_server_url.clone(),
        app.config.issuer.clone(),
    );
    let stdin = stdin.to_string();
    tokio::task::spawn_blocking(move || {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
            .args(&args)
            .env("DATABASE_URL", db)
            .env("MCP_SERVER_URL", mcp)
            .env("GATEHOUSE_ISSUER", issuer)
            .env("GATEHOUSE_SECRET_KEY", TEST_KEY)
            .env("RUST_LOG", "error")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
    .await
    .unwrap()
}

/// Runs `gatehouse ARGS…`, which must succeed; its standard output.
pub(crate) async fn cli_ok(app: &TestApp, args: &[&str], stdin: &str) -> String {
    let (code, out, err) = cli(app, args, stdin).await;
    assert_eq!(code, 0, "{args:?}: {err}");
    out
}

/// Runs `gatehouse ARGS…`, which must fail; its message.
pub(crate) async fn cli_refused(app: &TestApp, args: &[&str], stdin: &str) -> String {
    let (code, out, err) = cli(app, args, stdin).await;
    assert_ne!(code, 0, "{args:?} succeeded: {out}");
    err
}

#[tokio::test]
async fn idp_commands_add_list_and_remove_with_the_secret_sealed() {
    let app = spawn_with_key(|_| {}).await;
    let out = cli_ok(
        &app,
        &[
            "idp",
            "add",
            "acme",
            "--issuer",
            "https://login.acme.example",
            "--client-id",
            "gh-client",
            "--client-secret-stdin",
            "--display-name",
            "Acme SSO",
            "--domains",
            "acme.example,Example.ORG",
            "--create-accounts",
        ],
        "the-client-secret\n",
    )
    .await;
    assert!(
        out.contains("added identity provider acme (signin"),
        "{out}"
    );
    assert!(
        out.contains(&format!("{}/signin/idp/acme/callback", app.address)),
        "the redirect URI to register: {out}"
    );
    cli_ok(
        &app,
        &[
            "idp",
            "add",
            "corp",
            "--issuer",
            "https://idp.corp.example/",
            "--jwks-uri",
            "https://idp.corp.example/keys",
            "--assertions",
        ],
        "",
    )
    .await;
    let list = cli_ok(&app, &["idp", "list"], "").await;
    let acme = list.lines().find(|l| l.starts_with("acme ")).unwrap();
    assert!(
        acme.contains("signin  https://login.acme.example "),
        "{acme}"
    );
    assert!(acme.contains("client_id=gh-client  secret=set"), "{acme}");
    assert!(acme.contains("button=\"Acme SSO\""), "{acme}");
    assert!(acme.contains("domains=acme.example,example.org"), "{acme}");
    assert!(acme.contains("create-accounts"), "{acme}");
    let corp = list.lines().find(|l| l.starts_with("corp ")).unwrap();
    assert!(
        corp.contains("assertions  https://idp.corp.example/ "),
        "the issuer is kept as given, trailing slash included: {corp}"
    );
    assert!(
        corp.contains("jwks_uri=https://idp.corp.example/keys"),
        "{corp}"
    );
    assert!(
        !list.contains("the-client-secret"),
        "never the secret: {list}"
    );

    // The secret is stored sealed, not as given.
    let stored: String = sqlx::query_scalar(
        "SELECT client_secret_sealed FROM identity_providers WHERE name = 'acme'",
    )
    .fetch_one(app.db.pool().await)
    .await
    .unwrap();
    assert!(stored.starts_with("gh1."), "{stored}");
    assert!(!stored.contains("the-client-secret"));

    // The sign-in page shows a button for the provider that signs in, not for the other.
    let page = app
        .client
        .get(app.url("/signin"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("href=\"/signin/idp/acme?next=/\""), "{page}");
    assert!(page.contains("Sign in with Acme SSO"), "{page}");
    assert!(!page.contains("/signin/idp/corp"), "{page}");

    let taken = cli_refused(
        &app,
        &[
            "idp",
            "add",
            "acme",
            "--issuer",
            "https://x.example",
            "--client-id",
            "c",
        ],
        "",
    )
    .await;
    assert!(
        taken.contains("an identity provider named acme exists"),
        "{taken}"
    );

    assert_eq!(
        cli_ok(&app, &["idp", "remove", "acme"], "").await.trim(),
        "removed identity provider acme"
    );
    let gone = cli_refused(&app, &["idp", "remove", "acme"], "").await;
    assert!(gone.contains("no identity provider named acme"), "{gone}");
    let list = cli_ok(&app, &["idp", "list"], "").await;
    assert!(!list.contains("acme"), "{list}");
    let page = app
        .client
        .get(app.url("/signin"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !page.contains("/signin/idp/acme"),
        "the button went with it"
    );
}

#[tokio::test]
async fn idp_add_refuses_what_would_not_work() {
    let app = spawn_with_key(|_| {}).await;
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &[
                "idp",
                "add",
                "a",
                "--issuer",
                "http://login.example.com",
                "--client-id",
                "c",
            ],
            "",
            "plain http only on a loopback address",
        ),
        (
            &[
                "idp",
                "add",
                "Bad!",
                "--issuer",
                "https://login.example.com",
                "--client-id",
                "c",
            ],
            "",
            "invalid identity provider name",
        ),
        (
            &[
                "idp",
                "add",
                "a",
                "--issuer",
                "https://login.example.com",
                "--client-id",
                "c",
                "--create-accounts",
            ],
            "",
            "--create-accounts needs --domains",
        ),
        (
            &["idp", "add", "a", "--issuer", "https://login.example.com"],
            "",
            "give --client-id",
        ),
        (
            &[
                "idp",
                "add",
                "a",
                "--issuer",
                "https://login.example.com",
                "--assertions",
            ],
            "",
            "--assertions and --jwks-uri go together",
        ),
        (
            &[
                "idp",
                "add",
                "a",
                "--issuer",
                "https://login.example.com",
                "--client-id",
                "c",
                "--client-secret-stdin",
            ],
            "",
            "standard input held no secret",
        ),
        (
            &[
                "idp",
                "add",
                "a",
                "--issuer",
                "https://login.example.com",
                "--client-id",
                "c",
                "--domains",
                "not a domain",
            ],
            "",
            "is not a domain",
        ),
    ];
    for (args, stdin, expected) in cases {
        let message = cli_refused(&app, args, stdin).await;
        assert!(message.contains(expected), "{args:?}: {message}");
    }
    let list = cli_ok(&app, &["idp", "list"], "").await;
    assert!(
        list.starts_with("no identity providers"),
        "nothing added: {list}"
    );
}
