//! `gatehouse upstream add NAME --url URL --per-person-oauth [--client-id ID
//! --client-secret-stdin] [--scope S]`: an upstream where each person connects their own
//! account. Discovery and registration run first ([`crate::upstream_oauth::discovery`]); when
//! either fails the command prints why and stores nothing.

use super::{CliError, cli_audit};
use crate::config::Config;
use crate::domain::audit::Event;
use crate::domain::upstream::UpstreamName;
use crate::store::upstreams::NewUpstream;
use crate::store::vault::UpstreamOAuth;
use crate::store::{Store, StoreError};
use crate::upstream_oauth::discovery::{discover, register};
use crate::upstream_oauth::secret_context;

/// The per-person options of `upstream add`.
#[derive(Debug, Default)]
pub(super) struct PerPersonArgs {
    /// `--client-id`: a client registered at the upstream's authorization server beforehand.
    pub client_id: Option<String>,
    /// `--client-secret-stdin`: its secret, read from the first line of standard input.
    pub client_secret_stdin: bool,
    /// `--scope`: the scope to ask for, instead of what the upstream's challenge names.
    pub scope: Option<String>,
}

fn read_secret() -> Result<String, CliError> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| CliError(format!("cannot read the client secret from stdin: {e}")))?;
    let secret = line.trim_end_matches(['\r', '\n']).to_string();
    if secret.is_empty() {
        return Err(CliError(
            "--client-secret-stdin: standard input held no secret".into(),
        ));
    }
    Ok(secret)
}

/// Adds `new` (an HTTP upstream, already checked) as a per-person upstream: discovery,
/// registration, then the registry entry and the client settings in one transaction.
///
/// Errors: a discovery or registration failure (nothing stored), no server key when a client
/// secret must be sealed, a name taken.
pub(super) async fn add(
    config: &Config,
    store: &Store,
    name: &UpstreamName,
    new: NewUpstream,
    args: PerPersonArgs,
    now: i64,
) -> Result<String, CliError> {
    if args.client_secret_stdin && args.client_id.is_none() {
        return Err(CliError(
            "--client-secret-stdin goes with --client-id".into(),
        ));
    }
    let url_text = new.url.clone().unwrap_or_default();
    let url = url::Url::parse(&url_text).map_err(|e| CliError(e.to_string()))?;
    let given = match args.client_id {
        Some(id) if id.trim().is_empty() => return Err(CliError("--client-id is empty".into())),
        Some(id) => Some((
            id,
            if args.client_secret_stdin {
                Some(read_secret()?)
            } else {
                None
            },
        )),
        None => None,
    };
    let failed = |e: crate::upstream_oauth::discovery::DiscoveryError| {
        CliError(format!("upstream {name} not added: {e}"))
    };
    let discovered = discover(&url, args.scope.as_deref())
        .await
        .map_err(failed)?;
    let client_name = format!("{} (Gatehouse)", config.surface.server_title);
    let registration = register(&discovered, given, config.frontend_url.url(), &client_name)
        .await
        .map_err(failed)?;
    let client_secret_sealed = match &registration.client_secret {
        Some(secret) => {
            let keys = super::secret_key::keyring(config)?;
            Some(keys.seal(&secret_context(name), secret.as_bytes()))
        }
        None => None,
    };
    let oauth = UpstreamOAuth {
        upstream: name.as_str().to_string(),
        resource: discovered.resource.clone(),
        issuer: discovered.issuer.clone(),
        authorization_endpoint: discovered.authorization_endpoint.clone(),
        token_endpoint: discovered.token_endpoint.clone(),
        revocation_endpoint: discovered.revocation_endpoint.clone(),
        registration: registration.method.to_string(),
        client_id: registration.client_id.clone(),
        client_secret_sealed,
        scope: (!discovered.scope.is_empty()).then(|| discovered.scope.clone()),
    };
    store
        .create_per_person_upstream(&new, &oauth, now)
        .await
        .map_err(|e| match e {
            StoreError::Conflict(_) => CliError(format!(
                "an upstream named {name} exists; remove it first to change it"
            )),
            other => other.into(),
        })?;
    cli_audit(
        store,
        Event::UpstreamAdded,
        None,
        Some(name.as_str()),
        Some(&format!(
            "transport=http per_person_oauth=true issuer={} registration={}",
            oauth.issuer, oauth.registration
        )),
        now,
    )
    .await;
    let approval = if new.trust_definitions {
        "its tool definitions are trusted without approval".to_string()
    } else {
        format!(
            "its tools are listed once a person has connected and their definitions are approved: \
             gatehouse upstream approve {name}"
        )
    };
    Ok(format!(
        "added upstream {name} (http {url_text}), per person: each person connects their own account \
         at {} (client {}, {}); {approval}",
        oauth.issuer,
        oauth.client_id,
        match oauth.registration.as_str() {
            "dynamic" => "registered by dynamic registration",
            "metadata-document" => "a client ID metadata document Gatehouse serves",
            _ => "pre-registered",
        }
    ))
}

/// The words `upstream list` adds to a per-person upstream's line.
pub(super) fn describe(oauth: &UpstreamOAuth) -> String {
    format!(
        "  per-person-oauth issuer={} registration={}{}",
        oauth.issuer,
        oauth.registration,
        oauth
            .scope
            .as_deref()
            .map(|s| format!(" scope=\"{s}\""))
            .unwrap_or_default()
    )
}
