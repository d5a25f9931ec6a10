//! `gatehouse doctor URL`: walks an MCP server's discovery chain the way current MCP clients
//! (Claude, `ChatGPT`, Cursor, VS Code, the MCP Inspector) do, and names what breaks.
//!
//! The steps, in the clients' order (each a function in [`checks`]):
//! 1. unauthenticated `POST` in the `initialize` form and the 2026-07-28 stateless form →
//!    `401` with a `Bearer` challenge carrying `resource_metadata` and `scope`
//!    (RFC 9728 §5.1, RFC 6750 §3);
//! 2. protected-resource metadata at the challenge's URL, the path-suffixed and the root
//!    well-known URLs (RFC 9728 §3; MCP 2025-11-25 §Protected Resource Metadata Discovery);
//! 3. authorization-server metadata by RFC 8414 path insertion, then the `OpenID` Connect
//!    fallbacks (MCP 2025-11-25 §Authorization Server Metadata Discovery), and its members;
//! 4. CORS preflights on the metadata, registration and token endpoints with the MCP
//!    Inspector's origin;
//! 5. dynamic registration (RFC 7591) as each well-known client sends it ([`clients`]);
//! 6. the authorization endpoint with PKCE S256 and `resource` for each registered client;
//! 7. `/.well-known/openai-apps-challenge` with `--openai`;
//! 8. https and host rules over every URL the documents name;
//! 9. with `--interactive`: the authorization-code flow in the browser with the `oauth2` crate,
//!    then one refresh ([`interactive`]);
//! 10. with `--token` (or the token of step 9): `initialize` and `tools/list` ([`token`]).
//!
//! Steps 5 and 6 reuse the clients saved by an earlier run against the same issuer
//! ([`state`]), or the client given with `--client-id`, so repeated runs do not spend the
//! server's registration budget. Each step is handed to the caller as it finishes
//! ([`run_with`]), so lines print as checks end.
//!
//! Nothing here panics on network input: errors, timeouts, redirects and bodies that are not
//! JSON are findings. Every request is bounded in time ([`http::Probe`]) and size.

use std::time::Duration;

use serde::Serialize;

pub mod challenge;
pub mod checks;
pub mod clients;
pub mod http;
pub mod interactive;
pub mod state;
pub mod token;

use checks::{PostForm, ServerMetadata};
use url::Url;

/// `gatehouse doctor` arguments.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "The doctor follows every URL the server's documents name (metadata, registration, \
authorization and token endpoints, JWKS) to whatever host and port they name, as real clients \
do: run it against servers you trust, from a machine where reaching those hosts does no harm. \
Text the server sends is shown with control characters escaped; --interactive opens only https \
URLs (or http on a loopback host) in the browser."
)]
pub struct DoctorArgs {
    /// The MCP endpoint URL exactly as clients are given it, e.g. <https://mcp.example.com/mcp>.
    pub url: String,
    /// An access token: also call `initialize` and `tools/list` with it.
    #[arg(long, env = "GATEHOUSE_DOCTOR_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Also check `/.well-known/openai-apps-challenge` (`ChatGPT` Apps domain verification).
    #[arg(long)]
    pub openai: bool,
    /// Also run a full authorization-code flow in the browser (sign in and approve there),
    /// then refresh once; the token obtained calls `tools/list` unless `--token` is given.
    #[arg(long)]
    pub interactive: bool,
    /// Print one JSON document instead of lines for people.
    #[arg(long)]
    pub json: bool,
    /// Seconds each request may take (1 to 120).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=120))]
    pub timeout: u64,
    /// Show each step's request, what came back and what was expected (by default one short
    /// line per step, and the fix for each failure).
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Check the authorization request with this already registered client instead of
    /// registering the well-known clients (needs --redirect-uri).
    #[arg(long, requires = "redirect_uri")]
    pub client_id: Option<String>,
    /// The redirect URI registered for --client-id.
    #[arg(long, requires = "client_id")]
    pub redirect_uri: Option<String>,
    /// Where the clients registered by earlier runs are kept, one per well-known client and
    /// issuer (default $XDG_STATE_HOME/gatehouse/doctor-clients.json, else
    /// ~/.local/state/gatehouse/doctor-clients.json; mode 0600).
    #[arg(long, env = "GATEHOUSE_DOCTOR_STATE_FILE")]
    pub state_file: Option<std::path::PathBuf>,
    /// Register new clients even when saved ones exist (and save the new ones).
    #[arg(long, conflicts_with = "client_id")]
    pub register: bool,
}

/// What a run checks.
#[derive(Debug, Clone)]
pub struct Options {
    /// The MCP URL as given.
    pub url: String,
    /// A bearer token for the `tools/list` steps.
    pub token: Option<String>,
    /// Whether to check the `ChatGPT` Apps challenge.
    pub openai: bool,
    /// Per-request time limit.
    pub timeout: Duration,
    /// With `--interactive`: how to open the browser.
    pub interactive: Option<interactive::BrowserOpener>,
    /// With `--interactive`: how long the person has in the browser.
    pub interactive_wait: Duration,
    /// With `--client-id`: the client (and its redirect URI) to check the authorization
    /// request with; nothing is registered.
    pub client: Option<(String, String)>,
    /// The saved-clients file ([`state`]); `None` registers new clients on every run.
    pub state_file: Option<std::path::PathBuf>,
    /// Register even when saved clients exist (the new ones are saved).
    pub register: bool,
}

impl From<&DoctorArgs> for Options {
    fn from(a: &DoctorArgs) -> Self {
        Options {
            url: a.url.clone(),
            token: a.token.clone(),
            openai: a.openai,
            timeout: Duration::from_secs(a.timeout),
            interactive: a.interactive.then(interactive::BrowserOpener::desktop),
            interactive_wait: Duration::from_secs(300),
            client: a.client_id.clone().zip(a.redirect_uri.clone()),
            state_file: a.state_file.clone().or_else(state::default_path),
            register: a.register,
        }
    }
}

/// The outcome of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// ✓
    Pass,
    /// ✗
    Fail,
    /// Not run, because an earlier step it needs failed (counts as not passed).
    Skip,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// A stable id (`challenge`, `prm-path`, `issuer`, `register-claude`, …).
    pub check: String,
    /// Its outcome.
    pub status: Status,
    /// The request made.
    pub request: String,
    /// What came back.
    pub got: String,
    /// What was expected.
    pub expected: String,
    /// The fix, in one sentence, when the step failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// A client registered during the run (listed so an operator can remove it).
#[derive(Debug, Clone, Serialize)]
pub struct RegisteredClient {
    /// The client imitated.
    pub client: String,
    /// The id issued.
    pub client_id: String,
}

/// Everything a run found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The URL checked.
    pub url: String,
    /// Whether every step passed (the exit status is 0 only then).
    pub passed: bool,
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// Clients registered by this run.
    pub registered_clients: Vec<RegisteredClient>,
    /// With `--token`: the protocol revision the server chose.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// With `--token`: the tools listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Remarks that are not findings about the server (a saved-clients file that could not be
    /// written, …).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Options {
    fn client_id_given(&self) -> Option<(&str, &str)> {
        self.client
            .as_ref()
            .map(|(id, uri)| (id.as_str(), uri.as_str()))
    }
}

impl Report {
    /// The step with id `check`, if it ran.
    pub fn step(&self, check: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.check == check)
    }
}

/// The steps of a run so far; each is handed to the sink as it is recorded.
struct Recorder<'a> {
    steps: Vec<Step>,
    sink: &'a mut (dyn FnMut(&Step) + Send),
}

impl Recorder<'_> {
    fn push(&mut self, step: Step) {
        (self.sink)(&step);
        self.steps.push(step);
    }

    fn extend(&mut self, steps: impl IntoIterator<Item = Step>) {
        for s in steps {
            self.push(s);
        }
    }
}

/// Runs every check against `options.url`; [`run_with`] without watching the steps.
pub async fn run(options: &Options) -> Report {
    run_with(options, &mut |_| {}).await
}

/// Runs every check against `options.url`, handing each step to `on_step` as soon as it is
/// done, and returns the whole report.
pub async fn run_with(options: &Options, on_step: &mut (dyn FnMut(&Step) + Send)) -> Report {
    let mut steps = Recorder {
        steps: Vec::new(),
        sink: on_step,
    };
    let mut registered = Vec::new();
    let mut notes = Vec::new();
    let Some((url, probe)) = start(options, &mut steps) else {
        return Report::finished(options, steps.steps, registered, notes);
    };

    // 1. to 3. The challenge, the resource metadata, the authorization-server metadata.
    let Some(found) = discover(&probe, options, &url, &mut steps).await else {
        return Report::finished(options, steps.steps, registered, notes);
    };
    let (prm, meta, issuer) = (
        found.prm.as_ref(),
        found.meta.as_ref(),
        found.issuer.as_deref(),
    );

    // 4. CORS preflights as a browser-based client sends them.
    cors_steps(&probe, &mut steps, prm, meta).await;
    let registration_endpoint = meta.and_then(|m| m.str("registration_endpoint").map(String::from));

    // 5. and 6. Registration as each well-known client, then its authorization request.
    let scope = found.scope.as_deref();
    let mut clients = ClientSteps {
        probe: &probe,
        options,
        steps: &mut steps,
        registered: &mut registered,
        notes: &mut notes,
    };
    clients
        .run(meta, issuer, registration_endpoint.as_deref(), scope)
        .await;

    // 7. ChatGPT Apps' domain verification.
    if options.openai {
        steps.push(checks::openai_apps_challenge(&probe, &url).await);
    }

    // 8. Schemes and hosts of everything named.
    steps.extend(url_steps(
        &url,
        found.from_header.as_deref(),
        prm,
        meta,
        issuer,
    ));

    // 9. With --interactive: the whole flow in the browser, then one refresh.
    let flow_token =
        interactive_steps(&probe, options, &mut steps, &mut registered, meta, scope).await;

    // 10. With a token: the negotiated revision and the tools.
    let mut outcome = token::TokenOutcome::default();
    if let Some(t) = options.token.as_ref().or(flow_token.as_ref()) {
        let (token_steps, o) = token::with_token(&probe, &url, t).await;
        steps.extend(token_steps);
        outcome = o;
    }

    let mut r = Report::finished(options, steps.steps, registered, notes);
    r.protocol_version = outcome.protocol_version;
    r.tools = outcome.tools;
    r
}

/// What steps 1 to 3 found, which the later steps check, follow and name.
struct Discovered {
    /// The challenge's `resource_metadata` URL.
    from_header: Option<String>,
    /// The challenge's `scope`.
    scope: Option<String>,
    /// The first usable protected-resource metadata.
    prm: Option<checks::ResourceMetadata>,
    /// The first authorization server it names.
    issuer: Option<String>,
    /// That server's metadata.
    meta: Option<ServerMetadata>,
}

/// Steps 1 to 3: the challenge ([`challenge_steps`]), the protected-resource metadata
/// ([`resource_metadata_steps`]) and the authorization-server metadata
/// ([`server_metadata_steps`]). `None` when the server was not reached (the run stops).
async fn discover(
    probe: &http::Probe,
    options: &Options,
    url: &Url,
    steps: &mut Recorder<'_>,
) -> Option<Discovered> {
    // 1. The challenge, in both request forms.
    let challenge = challenge_steps(probe, url, steps).await?;

    // 2. Protected-resource metadata: where the challenge points, then the well-known URLs.
    let from_header = challenge.as_ref().and_then(|c| c.resource_metadata.clone());
    let prm = resource_metadata_steps(probe, options, url, from_header.as_deref(), steps).await;

    // 3. Authorization-server metadata.
    let issuer = prm.as_ref().map(|p| p.authorization_servers[0].clone());
    let meta = server_metadata_steps(probe, issuer.as_deref(), steps).await;
    Some(Discovered {
        from_header,
        scope: challenge.and_then(|c| c.scope),
        prm,
        issuer,
        meta,
    })
}

impl Report {
    /// The report of a run against `options.url` that recorded `steps`, registered
    /// `registered` and noted `notes`: passed only when there are steps and every one passed;
    /// no protocol revision or tools yet.
    fn finished(
        options: &Options,
        steps: Vec<Step>,
        registered: Vec<RegisteredClient>,
        notes: Vec<String>,
    ) -> Report {
        Report {
            url: options.url.clone(),
            passed: !steps.is_empty() && steps.iter().all(|s| s.status == Status::Pass),
            steps,
            registered_clients: registered,
            protocol_version: None,
            tools: None,
            notes,
        }
    }
}

/// Before any request: the given URL checked and the HTTP client built. Both, or `None` once
/// the failing step (`url`, or `client` when no HTTP client can be built) is recorded.
fn start(options: &Options, steps: &mut Recorder<'_>) -> Option<(Url, http::Probe)> {
    let url = match checks::given_url(&options.url) {
        Ok(u) => u,
        Err(step) => {
            steps.push(*step);
            return None;
        }
    };
    match http::Probe::new(options.timeout) {
        Ok(p) => Some((url, p)),
        Err(e) => {
            steps.push(Step::fail(
                "client",
                String::new(),
                e,
                "",
                "Report this as a bug.",
            ));
            None
        }
    }
}

/// Step 1: the unauthenticated `POST` in the `initialize` form, then in the stateless form;
/// the challenge of the first. `None` when the server gave no HTTP answer at all: the
/// `discovery` step is then recorded as skipped and the run stops.
async fn challenge_steps(
    probe: &http::Probe,
    url: &Url,
    steps: &mut Recorder<'_>,
) -> Option<Option<challenge::BearerChallenge>> {
    let (step, challenge) = checks::unauthenticated_post(probe, url, PostForm::Initialize).await;
    steps.push(step);
    if !probe.reached() {
        // No HTTP answer at all: every later step would fail the same way, one timeout each.
        steps.push(Step::skip(
            "discovery",
            "the server was not reached, so nothing else was checked",
        ));
        return None;
    }
    let (step, _) = checks::unauthenticated_post(probe, url, PostForm::Stateless).await;
    steps.push(step);
    Some(challenge)
}

/// Step 2: the protected-resource metadata where the challenge points (`from_header`, when
/// it is not one of the well-known URLs), then at the path-suffixed and the root well-known
/// URLs (RFC 9728 §3.1); the first usable document found.
async fn resource_metadata_steps(
    probe: &http::Probe,
    options: &Options,
    url: &Url,
    from_header: Option<&str>,
    steps: &mut Recorder<'_>,
) -> Option<checks::ResourceMetadata> {
    let (suffixed, root) = checks::resource_metadata_urls(url);
    let mut prm = None;
    if let Some(h) = from_header.filter(|h| *h != suffixed && *h != root) {
        let (step, found) =
            checks::protected_resource_metadata(probe, "prm-challenge", h, &options.url).await;
        steps.push(step);
        prm = prm.or(found);
    }
    for (check, u) in [("prm-path", &suffixed), ("prm-root", &root)] {
        let (step, found) =
            checks::protected_resource_metadata(probe, check, u, &options.url).await;
        steps.push(step);
        prm = prm.or(found);
    }
    prm
}

/// Step 3: the authorization-server metadata of `issuer` (RFC 8414, then the `OpenID`
/// Connect fallbacks) and a step per member checked; skipped when no resource metadata names
/// an issuer. The metadata found, if any.
async fn server_metadata_steps(
    probe: &http::Probe,
    issuer: Option<&str>,
    steps: &mut Recorder<'_>,
) -> Option<ServerMetadata> {
    let Some(issuer) = issuer else {
        steps.push(Step::skip(
            "as-metadata",
            "no usable protected-resource metadata names an authorization server (clients stop here)",
        ));
        return None;
    };
    let (step, found) = checks::server_metadata(probe, issuer).await;
    steps.push(step);
    if let Some(m) = &found {
        steps.extend(checks::server_metadata_members(issuer, m));
    }
    found
}

/// Step 4: the CORS preflights a browser-based client sends, to the resource metadata, the
/// server metadata, the registration and the token endpoints (skipped where not known).
async fn cors_steps(
    probe: &http::Probe,
    steps: &mut Recorder<'_>,
    prm: Option<&checks::ResourceMetadata>,
    meta: Option<&ServerMetadata>,
) {
    let endpoint = |name: &str| meta.and_then(|m| m.str(name).map(String::from));
    let (registration_endpoint, token_endpoint) = (
        endpoint("registration_endpoint"),
        endpoint("token_endpoint"),
    );
    let prm_url = prm.map(|p| p.url.clone());
    let metadata_url = meta.map(|m| m.url.clone());
    let preflights: [(&str, Option<&String>, &str, &[&str]); 4] = [
        (
            "cors-resource-metadata",
            prm_url.as_ref(),
            "GET",
            &["mcp-protocol-version"],
        ),
        (
            "cors-server-metadata",
            metadata_url.as_ref(),
            "GET",
            &["mcp-protocol-version"],
        ),
        (
            "cors-registration",
            registration_endpoint.as_ref(),
            "POST",
            &["content-type"],
        ),
        (
            "cors-token",
            token_endpoint.as_ref(),
            "POST",
            &["content-type", "authorization"],
        ),
    ];
    for (check, target, method, headers) in preflights {
        match target {
            Some(t) => steps.push(checks::cors_preflight(probe, check, t, method, headers).await),
            None => steps.push(Step::skip(check, "the endpoint is not known")),
        }
    }
}

/// Steps 5 and 6: what a run records while it registers clients and sends their
/// authorization requests.
struct ClientSteps<'r, 's> {
    probe: &'r http::Probe,
    options: &'r Options,
    steps: &'r mut Recorder<'s>,
    registered: &'r mut Vec<RegisteredClient>,
    notes: &'r mut Vec<String>,
}

impl ClientSteps<'_, '_> {
    /// The authorization request of the client given with `--client-id` (nothing
    /// registered), or registration as each well-known client ([`clients::PROFILES`]), a client
    /// saved by an earlier run checked first, then its authorization request.
    async fn run(
        &mut self,
        meta: Option<&ServerMetadata>,
        issuer: Option<&str>,
        registration_endpoint: Option<&str>,
        scope: Option<&str>,
    ) {
        let authorization_endpoint =
            meta.and_then(|m| m.str("authorization_endpoint").map(String::from));
        let mut saved = self
            .options
            .state_file
            .as_deref()
            .map(state::SavedClients::load);
        let options = self.options;
        if let Some((client_id, redirect_uri)) = options.client_id_given() {
            // --client-id: the authorization request with that client; nothing is registered.
            self.given_client(
                client_id,
                redirect_uri,
                authorization_endpoint.as_deref(),
                scope,
            )
            .await;
        }
        for profile in clients::PROFILES
            .iter()
            .filter(|_| options.client.is_none())
        {
            let Some(endpoint) = registration_endpoint else {
                let why = if meta.is_some() {
                    "no registration_endpoint (clients would use a client ID metadata document)"
                } else {
                    "no authorization-server metadata"
                };
                self.steps.push(Step::skip(profile.register_check, why));
                continue;
            };
            // A client saved by an earlier run against this issuer is checked first; one the
            // server no longer accepts (unused clients expire) is replaced by a new
            // registration.
            let saved_id = match (&saved, issuer, &authorization_endpoint) {
                (Some(store), Some(iss), Some(_)) if !options.register => {
                    store.get(iss, profile.name).map(String::from)
                }
                _ => None,
            };
            if let (Some(id), Some(a)) = (&saved_id, &authorization_endpoint)
                && self.saved_client_authorizes(profile, id, a, scope).await
            {
                continue;
            }
            let Some(reg) = self.register(profile, endpoint).await else {
                continue;
            };
            if let (Some(store), Some(iss)) = (saved.as_mut(), issuer)
                && let Err(e) = store.save(iss, profile.name, &reg.client_id)
            {
                self.notes.push(format!(
                    "{e}: the next run registers again (set --state-file or GATEHOUSE_DOCTOR_STATE_FILE)"
                ));
            }
            match &authorization_endpoint {
                Some(a) => {
                    let client = checks::AuthorizeAs::registered(&reg);
                    let step =
                        checks::authorize(self.probe, a, client, &self.options.url, scope).await;
                    self.steps.push(step);
                }
                None => self.steps.push(Step::skip(
                    profile.authorize_check,
                    "no authorization_endpoint in the metadata",
                )),
            }
        }
    }

    /// `--client-id`: the authorization request at `authorization_endpoint` with
    /// `client_id` and its `redirect_uri` (step `authorize`), skipped when the metadata names
    /// no authorization endpoint.
    async fn given_client(
        &mut self,
        client_id: &str,
        redirect_uri: &str,
        authorization_endpoint: Option<&str>,
        scope: Option<&str>,
    ) {
        match authorization_endpoint {
            Some(a) => {
                let client = checks::AuthorizeAs {
                    check: "authorize",
                    name: "the given client",
                    client_id,
                    redirect_uri,
                };
                let step = checks::authorize(self.probe, a, client, &self.options.url, scope).await;
                self.steps.push(step);
            }
            None => self.steps.push(Step::skip(
                "authorize",
                "no authorization_endpoint in the metadata",
            )),
        }
    }

    /// The authorization request of `profile` with the client `id` saved by an earlier run,
    /// at `authorization_endpoint`. Whether it passed: the step (its answer prefixed with the
    /// saved client) is then recorded; a failing one is not recorded, the caller registers
    /// anew.
    async fn saved_client_authorizes(
        &mut self,
        profile: &clients::ClientProfile,
        id: &str,
        authorization_endpoint: &str,
        scope: Option<&str>,
    ) -> bool {
        let client = checks::AuthorizeAs {
            check: profile.authorize_check,
            name: profile.name,
            client_id: id,
            redirect_uri: profile.redirect_uris[0],
        };
        let mut step = checks::authorize(
            self.probe,
            authorization_endpoint,
            client,
            &self.options.url,
            scope,
        )
        .await;
        if step.status != Status::Pass {
            return false;
        }
        step.got = format!("saved client {id}: {}", step.got);
        self.steps.push(step);
        true
    }

    /// Dynamic registration (RFC 7591) as `profile` at `endpoint`: the step is recorded and
    /// the client issued listed among the registered ones. `None` (with the authorization
    /// step recorded as skipped) when registration failed.
    async fn register(
        &mut self,
        profile: &'static clients::ClientProfile,
        endpoint: &str,
    ) -> Option<checks::Registration> {
        let (step, reg) = checks::register(self.probe, endpoint, profile).await;
        self.steps.push(step);
        let Some(reg) = reg else {
            self.steps
                .push(Step::skip(profile.authorize_check, "registration failed"));
            return None;
        };
        self.registered.push(RegisteredClient {
            client: profile.name.to_string(),
            client_id: reg.client_id.clone(),
        });
        Some(reg)
    }
}

/// Step 8: the scheme and host rules over every URL the documents name (`from_header`, the
/// challenge's `resource_metadata`; the resource metadata `prm`; the server metadata
/// `meta` of `issuer`).
fn url_steps(
    url: &Url,
    from_header: Option<&str>,
    prm: Option<&checks::ResourceMetadata>,
    meta: Option<&ServerMetadata>,
    issuer: Option<&str>,
) -> Vec<Step> {
    let mut resource_side = Vec::new();
    if let Some(h) = from_header {
        resource_side.push(("resource_metadata".to_string(), h.to_string()));
    }
    if let Some(p) = prm {
        resource_side.push(("resource".to_string(), p.resource.clone()));
    }
    // authorization_servers itself may name another host: that is the documents saying so.
    let mut server_side = Vec::new();
    if let Some(m) = meta {
        for name in [
            "issuer",
            "authorization_endpoint",
            "token_endpoint",
            "registration_endpoint",
            "revocation_endpoint",
            "introspection_endpoint",
            "jwks_uri",
        ] {
            if let Some(u) = m.str(name) {
                server_side.push((name.to_string(), u.to_string()));
            }
        }
    }
    let mut url_steps = checks::url_rules(url, &resource_side, issuer, &server_side);
    if let Some(p) = prm {
        // The https rule also covers the issuers named.
        if url.scheme() == "https" {
            let plain: Vec<&String> = p
                .authorization_servers
                .iter()
                .filter(|s| !s.starts_with("https://"))
                .collect();
            if !plain.is_empty() && url_steps[0].status == Status::Pass {
                url_steps[0] = Step::fail(
                    "https",
                    url_steps[0].request.clone(),
                    format!("authorization_servers {plain:?}"),
                    "every URL https",
                    "TLS is terminated in front of the server and it names http URLs: set MCP_SERVER_URL (and GATEHOUSE_ISSUER) to the https URL.",
                );
            }
        }
    }
    url_steps
}

/// Step 9, with `--interactive`: the whole flow in the browser, then one refresh; the access
/// token it got, if any.
async fn interactive_steps(
    probe: &http::Probe,
    options: &Options,
    steps: &mut Recorder<'_>,
    registered: &mut Vec<RegisteredClient>,
    meta: Option<&ServerMetadata>,
    scope: Option<&str>,
) -> Option<String> {
    let opener = options.interactive.as_ref()?;
    let Some(m) = meta else {
        steps.push(Step::skip(
            "interactive-register",
            "no authorization-server metadata",
        ));
        return None;
    };
    let (flow_steps, flow) = interactive::flow(
        probe,
        m,
        &options.url,
        scope,
        opener,
        options.interactive_wait,
    )
    .await;
    steps.extend(flow_steps);
    if let Some(id) = flow.client_id {
        registered.push(RegisteredClient {
            client: "interactive".into(),
            client_id: id,
        });
    }
    flow.access_token
}

/// `s` safe to print on a terminal: every control character (escape, bell, carriage return,
/// line feed …), C1 control and character that makes text read differently from what it is
/// ([`crate::domain::text::is_forbidden_in_text`]: bidirectional overrides and the like) is
/// shown as `\u{…}`. Every server-supplied string of the text report goes through it.
pub fn terminal_safe(s: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() || crate::domain::text::is_forbidden_in_text(c);
    if !s.chars().any(unsafe_char) {
        return s.into();
    }
    s.chars()
        .map(|c| {
            if unsafe_char(c) {
                format!("\\u{{{:x}}}", u32::from(c))
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

/// How the text report is drawn.
#[derive(Debug, Clone, Copy, Default)]
pub struct TextStyle {
    /// Each step's request, answer and expectation in full (`--verbose`).
    pub verbose: bool,
    /// ANSI colours on the marks (only when writing to a terminal and `NO_COLOR` is unset).
    pub colour: bool,
}

impl TextStyle {
    /// Colour when standard output is a terminal and `NO_COLOR` (no-color.org) is unset or
    /// empty.
    pub fn for_stdout(verbose: bool) -> TextStyle {
        use std::io::IsTerminal;
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        TextStyle {
            verbose,
            colour: std::io::stdout().is_terminal() && !no_color,
        }
    }
}

/// Longest answer shown on a short line, in characters.
pub const SHORT_GOT_CHARS: usize = 100;

fn shortened(s: &str, max: usize) -> String {
    if s.chars().count() > max {
        format!("{}…", s.chars().take(max).collect::<String>())
    } else {
        s.to_string()
    }
}

/// The first line of the text report.
pub fn render_header(url: &str) -> String {
    format!("gatehouse doctor {}\n", terminal_safe(url))
}

/// One step for people: by default a short line (the answer cut at [`SHORT_GOT_CHARS`]) and,
/// for a failure, a second line with the fix; with `verbose` also the request and what was
/// expected. What the server sent is shown through [`terminal_safe`]. Ends with a newline.
pub fn render_step(s: &Step, style: TextStyle) -> String {
    let safe = |s: &str| terminal_safe(s).into_owned();
    let (mark, colour) = match s.status {
        Status::Pass => ("✓", "32"),
        Status::Fail => ("✗", "31"),
        Status::Skip => ("–", "33"),
    };
    let mark = if style.colour {
        format!("\u{1b}[{colour}m{mark}\u{1b}[0m")
    } else {
        mark.to_string()
    };
    let check = safe(&s.check);
    let mut out = if style.verbose {
        match s.status {
            Status::Pass => format!("{mark} {check}: {} → {}\n", safe(&s.request), safe(&s.got)),
            Status::Fail => format!(
                "{mark} {check}: {} → {}; expected {}\n",
                safe(&s.request),
                safe(&s.got),
                safe(&s.expected),
            ),
            Status::Skip => format!("{mark} {check}: skipped, {}\n", safe(&s.got)),
        }
    } else {
        let got = shortened(&safe(&s.got), SHORT_GOT_CHARS);
        match s.status {
            Status::Skip => format!("{mark} {check}: skipped, {got}\n"),
            _ => format!("{mark} {check}: {got}\n"),
        }
    };
    if let Some(fix) = &s.fix {
        out.push_str(&format!("    fix: {}\n", safe(fix)));
    }
    out
}

/// What follows the steps: the negotiated revision, the clients registered, notes, and the
/// counts.
pub fn render_footer(report: &Report) -> String {
    let safe = |s: &str| terminal_safe(s).into_owned();
    let mut out = String::new();
    if let Some(v) = &report.protocol_version {
        out.push_str(&format!("negotiated protocol revision: {}\n", safe(v)));
    }
    if !report.registered_clients.is_empty() {
        out.push_str(
            "clients registered by this run (later runs reuse them; on Gatehouse those that never completed an authorization are deleted after GATEHOUSE_UNUSED_CLIENT_MAX_AGE; revoke an approved one at /apps):\n",
        );
        for c in &report.registered_clients {
            out.push_str(&format!("  {}: {}\n", safe(&c.client), safe(&c.client_id)));
        }
    }
    for n in &report.notes {
        out.push_str(&format!("note: {}\n", safe(n)));
    }
    let count = |st: Status| report.steps.iter().filter(|s| s.status == st).count();
    out.push_str(&format!(
        "{} passed, {} failed, {} skipped: {}\n",
        count(Status::Pass),
        count(Status::Fail),
        count(Status::Skip),
        if report.passed { "all good" } else { "NOT OK" }
    ));
    out
}

/// The whole report for people, verbose and without colour: [`render_header`], every
/// [`render_step`], [`render_footer`].
pub fn render_text(report: &Report) -> String {
    let style = TextStyle {
        verbose: true,
        colour: false,
    };
    let mut out = render_header(&report.url);
    for s in &report.steps {
        out.push_str(&render_step(s, style));
    }
    out.push_str(&render_footer(report));
    out
}

/// The report as one JSON document (for CI).
pub fn render_json(report: &Report) -> String {
    serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

#[cfg(test)]
mod terminal_tests {
    use super::*;

    /// What a hostile server sent back in the probe: a window title, a bell, a cleared screen.
    const HOSTILE: &str = "ok\u{1b}]0;pwned\u{7}\u{1b}[2J\r\u{9b}31m\u{202e}txt.exe";

    #[test]
    fn the_text_report_escapes_what_the_server_sent() {
        let step = Step {
            check: "issuer".into(),
            status: Status::Fail,
            request: format!("GET {HOSTILE}"),
            got: HOSTILE.into(),
            expected: HOSTILE.into(),
            fix: Some(HOSTILE.into()),
        };
        let report = Report {
            url: HOSTILE.into(),
            passed: false,
            steps: vec![step],
            registered_clients: vec![RegisteredClient {
                client: "claude".into(),
                client_id: HOSTILE.into(),
            }],
            protocol_version: Some(HOSTILE.into()),
            tools: None,
            notes: vec![HOSTILE.into()],
        };
        let text = render_text(&report);
        for c in text.chars() {
            assert!(
                c == '\n' || !(c.is_control() || crate::domain::text::is_forbidden_in_text(c)),
                "{c:?} printed raw in {text:?}"
            );
        }
        assert!(text.contains("ok\\u{1b}]0;pwned\\u{7}"), "{text}");
        let short = render_step(
            &report.steps[0],
            TextStyle {
                verbose: false,
                colour: true,
            },
        );
        assert!(
            short.starts_with("\u{1b}[31m✗\u{1b}[0m issuer: "),
            "{short:?}"
        );
        assert!(short.contains("\n    fix: "), "{short:?}");
        assert!(!short.contains("\u{1b}]"), "{short:?}");
        assert_eq!(terminal_safe("plain → text"), "plain → text");
    }
}
