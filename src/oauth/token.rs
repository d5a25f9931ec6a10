//! The token endpoint `POST /oauth/token` (OAuth 2.1 §3.2, §4.1.3, §4.3): one function per grant.
//!
//! Access tokens are opaque (`gate_at_` + 256 random bits), stored as SHA-256, bound to
//! `MCP_SERVER_URL` or to the registered resource the grant is for (RFC 8707), and last that
//! resource's access-token lifetime. Refresh tokens rotate on every use, belong to a family (one
//! redeemed authorization), and never expire by time. A rotated token presented again within the
//! grace window, while its successor is unused, receives the same successor pair (sealed under a
//! key derived from the presented token); otherwise it is reuse and revokes the whole family.
//!
//! A code or refresh token is redeemed only by the issuer that issued it and only for the
//! resource it was issued for (RFC 8707 §2.2), and only while its grant allows it: the consent
//! it was minted under live, its account active, and the scope within what the consent approves
//! (checked again in the transaction that redeems or rotates; RFC 7009 §2.1, RFC 6749 §3.3).

use std::collections::HashMap;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};

use super::client_auth::ClientForm;
pub use super::token_response::TokenResponse;
use super::token_response::served_resource_only;
use super::{OAuthError, jwt};
use crate::client_addr::ClientAddr;
use crate::domain::audit::{Event, Outcome};
use crate::domain::device::{DEVICE_CODE_GRANT, PollAnswer, decide_poll};
use crate::domain::dpop::{self, ProofError};
use crate::domain::grant::GrantType;
use crate::domain::pkce::verify_s256;
use crate::domain::refresh::{self, RefreshDecision};
use crate::domain::registry::TokenFormat;
use crate::domain::resource::ResourceIndicator;
use crate::domain::scope::{Scope, ScopeSet, is_scope_token};
use crate::domain::secret::TokenHash;
use crate::domain::secret::{Secret, TokenKind, random_urlsafe};
use crate::domain::successor;
use crate::state::AppState;
use crate::store::audit::AuditEvent;
use crate::store::now;
use crate::store::oauth::{
    ClientRecord, CodeRecord, GrantRefusal, NewTokens, Redeemed, RefreshState, Rotation,
};

/// What a successor pair's sealed record holds.
#[derive(Serialize, Deserialize)]
struct SealedPair {
    refresh_token: String,
    access_token: String,
    access_expires_at: i64,
    scope: String,
    /// The access token's `token_type` (absent in pairs sealed before DPoP: `Bearer`).
    #[serde(default)]
    token_type: Option<String>,
}

struct Ctx<'a> {
    state: &'a AppState,
    client: &'a ClientRecord,
    params: &'a HashMap<String, String>,
    ip: &'a str,
    now: i64,
    /// The thumbprint of the key of the request's valid DPoP proof (RFC 9449 §5), if any: the
    /// access token issued is bound to it.
    jkt: Option<String>,
}

impl Ctx<'_> {
    /// The `token_type` of the access token this request gets.
    fn token_type(&self) -> String {
        if self.jkt.is_some() {
            dpop::TOKEN_TYPE.into()
        } else {
            "Bearer".into()
        }
    }
}

/// The key thumbprint of the request's DPoP proof (RFC 9449 §4.3, §5), `None` without a `DPoP`
/// header: `typ`, `alg`, `jwk`, signature, `htm` `POST`, `htu` the token endpoint, `iat`
/// within [`dpop::PROOF_WINDOW_SECS`], and its `jti` spent once across instances
/// ([`crate::store::Store::spend_dpop_proof`]).
///
/// Errors: `invalid_dpop_proof` (400) naming the check that failed.
async fn dpop_key(
    state: &AppState,
    headers: &HeaderMap,
    now: i64,
) -> Result<Option<String>, OAuthError> {
    let refused = |e: ProofError| OAuthError::InvalidDpopProof(e.to_string());
    let mut values = headers.get_all(dpop::HEADER).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(refused(ProofError::NotOne));
    }
    let proof = value.to_str().map_err(|_| refused(ProofError::NotOne))?;
    let url = state.config.url("/oauth/token");
    let verified = dpop::verify_proof(
        proof.trim(),
        &dpop::Expected {
            method: "POST",
            url: &url,
            access_token: None,
            now,
        },
    )
    .map_err(refused)?;
    if !state
        .store
        .spend_dpop_proof(&verified.replay_key(), verified.remember_until(), now)
        .await?
    {
        return Err(refused(ProofError::Replayed));
    }
    Ok(Some(verified.jkt))
}

/// `POST /oauth/token`: the authenticated client's grant, answered with `Cache-Control:
/// no-store` (OAuth 2.1 §3.2.3); errors as RFC 6749 §5.2 JSON.
///
/// A workload's JWT-bearer grant authenticates no client ([`super::workload::route`] tells it
/// apart); every other request is [`ClientForm`]'s.
pub async fn token(
    State(state): State<AppState>,
    addr: ClientAddr,
    req: axum::extract::Request,
) -> Result<impl IntoResponse, OAuthError> {
    let (parts, body) = req.into_parts();
    // A malformed `Authorization: Basic` is refused before the body is read.
    super::client_auth::basic_credentials(&parts.headers)?;
    let params = super::client_auth::read_form(&parts.headers, body).await?;
    let ip = addr.to_string();
    let now = now();
    let body = match super::workload::route(&state, &parts.headers, &params).await? {
        super::workload::Route::Workload(candidates) => {
            // A workload asks for a bound token as any client does (RFC 9449 §5); a malformed
            // proof is refused before the assertion is spent.
            let jkt = dpop_key(&state, &parts.headers, now).await?;
            super::workload::grant(&state, &candidates, &params, &ip, now, jkt).await?
        }
        super::workload::Route::Client => {
            let ClientForm { client, params, .. } =
                ClientForm::authenticate(&state, &parts, params).await?;
            // The proof after the client: a request that fails client authentication spends
            // no proof.
            let jkt = dpop_key(&state, &parts.headers, now).await?;
            let ctx = Ctx {
                state: &state,
                client: &client,
                params: &params,
                ip: &ip,
                now,
                jkt,
            };
            grant(&ctx).await?
        }
    };
    let no_store = [
        (header::CACHE_CONTROL, "no-store"),
        (header::PRAGMA, "no-cache"),
    ];
    Ok((no_store, Json(body)))
}

/// Dispatches on `grant_type`: `unauthorized_client` for a grant the client did not register,
/// `unsupported_grant_type` for one this server does not offer.
async fn grant(ctx: &Ctx<'_>) -> Result<TokenResponse, OAuthError> {
    let grant = ctx
        .params
        .get("grant_type")
        .ok_or_else(|| OAuthError::InvalidRequest("grant_type is required".into()))?;
    if !super::metadata::permits_grant(&ctx.client.grant_types, grant)
        && super::metadata::GRANT_TYPES.contains(&grant.as_str())
    {
        return Err(OAuthError::UnauthorizedClient(format!(
            "this client is not registered for the {grant} grant"
        )));
    }
    match GrantType::parse(grant) {
        Some(GrantType::AuthorizationCode) => authorization_code(ctx).await,
        Some(GrantType::RefreshToken) => refresh_token(ctx).await,
        Some(GrantType::ClientCredentials) => client_credentials(ctx).await,
        Some(GrantType::JwtBearer) => {
            super::id_jag::grant(
                ctx.state,
                ctx.client,
                ctx.params,
                ctx.ip,
                ctx.now,
                ctx.jkt.as_deref(),
            )
            .await
        }
        Some(GrantType::DeviceCode) => device_code(ctx).await,
        None => Err(OAuthError::UnsupportedGrantType(format!(
            "grant_type {grant} is not supported (use one of {})",
            GrantType::ALL.map(GrantType::as_str).join(", ")
        ))),
    }
}

/// What the resource of a grant asks of the access tokens issued for it.
struct Target {
    /// Their lifetime, in seconds.
    ttl: i64,
    /// The key to sign them with when they are JWTs (RFC 9068); `None`: opaque.
    jwt: Option<jwt::SigningKey>,
}

impl Target {
    /// The access token for `account` and `client` with `scope` on `resource`, issued at
    /// `now`: an opaque random string, or a signed JWT.
    fn access_token(
        &self,
        ctx: &Ctx<'_>,
        account: &str,
        resource: &str,
        scope: &str,
    ) -> Result<Secret, OAuthError> {
        let Some(key) = &self.jwt else {
            return Ok(Secret::generate(TokenKind::AccessToken));
        };
        let claims = jwt::AccessClaims {
            iss: &ctx.state.config.issuer,
            sub: account,
            aud: resource,
            client_id: &ctx.client.client_id,
            scope,
            exp: ctx.now + self.ttl,
            iat: ctx.now,
            jti: random_urlsafe(16),
            cnf: ctx
                .jkt
                .as_ref()
                .map(|jkt| jwt::Confirmation { jkt: jkt.clone() }),
        };
        Ok(Secret::from_presented(jwt::sign(key, &claims)?))
    }

    /// The same tokens, ending by `grant_end` (Unix seconds; `None`: until revoked) at the
    /// latest when issued at `now`: a grant the person allowed for a limited time (issue 37)
    /// gives no token that outlives it, and `expires_in` says so (RFC 6749 §5.1).
    fn ending_by(mut self, grant_end: Option<i64>, now: i64) -> Target {
        if let Some(end) = grant_end {
            self.ttl = self.ttl.min(end - now).max(0);
        }
        self
    }
}

/// RFC 8707 §2.2 on the token endpoint: a grant (code or refresh token) issued for `granted`
/// (its resource) by `issuer` is redeemed only here if this server serves that resource (its
/// own MCP endpoint, or a resource still registered), the `resource` parameter, when sent,
/// names it, and this server is that issuer. Returns what that resource asks of its access
/// tokens. The registry is read only for a registered resource's grant. Errors:
/// `invalid_target` for another resource, `invalid_grant` for another issuer (`None` = a grant
/// stored before issuers were recorded, judged by its resource alone).
async fn check_target(
    ctx: &Ctx<'_>,
    granted: &str,
    issuer: Option<&str>,
) -> Result<Target, OAuthError> {
    let config = &ctx.state.config;
    let asked = ctx.params.get("resource");
    let target = if config.resource.matches(granted) {
        if asked.is_some_and(|r| !config.resource.matches(r)) {
            return Err(OAuthError::InvalidTarget(format!(
                "resource must be {granted}, the resource this grant was issued for"
            )));
        }
        Target {
            ttl: config.access_token_ttl_secs,
            jwt: None,
        }
    } else {
        let Some(registered) = ctx.state.store.resource_by_url(granted).await? else {
            return Err(OAuthError::InvalidTarget(
                "this grant was issued for a resource that is not served here".into(),
            ));
        };
        let indicator = ResourceIndicator::parse(&registered.url).map_err(|_| {
            OAuthError::InvalidTarget("the registered resource URL is not valid".into())
        })?;
        if asked.is_some_and(|r| !indicator.matches(r)) {
            return Err(OAuthError::InvalidTarget(format!(
                "resource must be {granted}, the resource this grant was issued for"
            )));
        }
        let jwt = match registered.token_format {
            TokenFormat::Jwt => Some(jwt::current_key(ctx.state, ctx.now).await?),
            TokenFormat::Opaque => None,
        };
        Target {
            ttl: registered.token_ttl,
            jwt,
        }
    };
    if issuer.is_some_and(|i| i != config.issuer) {
        return Err(OAuthError::InvalidGrant(
            "this grant was issued by another authorization server".into(),
        ));
    }
    Ok(target)
}

/// Audits a refused redemption or rotation and gives its `invalid_grant`.
async fn refused(
    ctx: &Ctx<'_>,
    event: Event,
    account: &str,
    subject: Option<&str>,
    why: GrantRefusal,
) -> OAuthError {
    audit(
        ctx,
        event,
        Outcome::Denied,
        Some(account),
        subject,
        Some(why.as_str()),
    )
    .await;
    OAuthError::InvalidGrant(format!("{}; authorize again", why.as_str()))
}

/// A new refresh and access token pair for `account` on `resource` with `scope`, the access
/// token made as `target` asks.
fn new_pair(
    ctx: &Ctx<'_>,
    target: &Target,
    account: &str,
    resource: &str,
    scope: &str,
) -> Result<(Secret, Secret, NewTokens), OAuthError> {
    let refresh = Secret::generate(TokenKind::RefreshToken);
    let access = target.access_token(ctx, account, resource, scope)?;
    let tokens = NewTokens {
        refresh_hash: refresh.hash(),
        access_hash: access.hash(),
        access_expires_at: ctx.now + target.ttl,
        scope: scope.to_string(),
        jkt: ctx.jkt.clone(),
        // RFC 9449 §5: a public client's refresh tokens are bound to the key too.
        refresh_jkt: ctx.jkt.clone().filter(|_| !ctx.client.is_confidential()),
    };
    Ok((refresh, access, tokens))
}

fn response(
    ctx: &Ctx<'_>,
    refresh: &Secret,
    access: &Secret,
    ttl: i64,
    scope: &str,
) -> TokenResponse {
    TokenResponse {
        access_token: access.expose().to_string(),
        token_type: ctx.token_type(),
        expires_in: ttl,
        refresh_token: Some(refresh.expose().to_string()),
        scope: scope.to_string(),
    }
}

async fn audit(
    ctx: &Ctx<'_>,
    event: Event,
    outcome: Outcome,
    account: Option<&str>,
    subject: Option<&str>,
    detail: Option<&str>,
) {
    if let Some(counted) = event.token_event() {
        crate::metrics::token_event(counted);
    }
    let record = AuditEvent {
        event,
        outcome,
        account_id: account,
        client_id: Some(&ctx.client.client_id),
        subject,
        source_ip: Some(ctx.ip),
        detail,
    };
    if event == Event::TokenRefreshed {
        // Routine: the rotation it records is already committed; batched like tool calls.
        ctx.state.store.audit_batched(record, ctx.now).await;
    } else {
        ctx.state.store.audit(record, ctx.now).await;
    }
}

/// The `client_credentials` grant (RFC 6749 §4.4; OAuth 2.1 §4.2) for service clients made
/// with `gatehouse client add NAME --service`: the client authenticates with its secret; the
/// token acts for the service's owner (or its one project), is bound to `MCP_SERVER_URL`
/// (`resource` optional, and if sent it must name it: `invalid_target`), carries the service's
/// scope or the narrower `scope` asked for (`invalid_scope` beyond it), lasts the access-token
/// lifetime and comes without a refresh token (§4.4.3). Any other client, public, registered
/// or dynamically registered, gets `unauthorized_client`; a service whose owner is disabled or
/// whose approval was revoked gets `invalid_grant`.
async fn client_credentials(ctx: &Ctx<'_>) -> Result<TokenResponse, OAuthError> {
    let store = &ctx.state.store;
    let client_id = &ctx.client.client_id;
    if !ctx.client.is_confidential() || !store.is_service_client(client_id).await? {
        return Err(OAuthError::UnauthorizedClient(
            "only service clients made with gatehouse client add --service may use client_credentials".into(),
        ));
    }
    let config = &ctx.state.config;
    served_resource_only(config, ctx.params)?;
    let Some(service) = store.service_client(client_id).await? else {
        audit(
            ctx,
            Event::TokenIssued,
            Outcome::Denied,
            None,
            None,
            Some("service_not_live"),
        )
        .await;
        return Err(OAuthError::InvalidGrant(
            "this service client's owner is disabled or its access was revoked".into(),
        ));
    };
    let allowed = ScopeSet::parse(&service.scope)
        .map_err(|_| OAuthError::InvalidGrant("the service's stored scope is invalid".into()))?;
    let scope = match ctx
        .params
        .get("scope")
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
    {
        None => allowed,
        Some(asked) => {
            let asked =
                ScopeSet::parse(asked).map_err(|e| OAuthError::InvalidScope(e.to_string()))?;
            if asked.contains(Scope::OfflineAccess) {
                return Err(OAuthError::InvalidScope(
                    "offline_access is not available: client_credentials issues no refresh token"
                        .into(),
                ));
            }
            if !asked.iter().all(|s| allowed.satisfies(s)) {
                return Err(OAuthError::InvalidScope(format!(
                    "this service client may get at most \"{allowed}\""
                )));
            }
            asked
        }
    };
    let scope = scope.to_string();
    let access = Secret::generate(TokenKind::AccessToken);
    let ttl = config.access_token_ttl_secs;
    store
        .insert_service_token(
            &service,
            &access.hash(),
            &scope,
            &config.mcp_server_url,
            ctx.now,
            ctx.now + ttl,
            ctx.jkt.as_deref(),
            GrantType::ClientCredentials,
        )
        .await?;
    crate::metrics::resource_token_event(
        crate::domain::audit::ResourceTokenEvent::Issued,
        &config.mcp_server_url,
    );
    audit(
        ctx,
        Event::TokenIssued,
        Outcome::Success,
        Some(&service.account_id),
        None,
        Some(&format!(
            "grant=client_credentials resource={}",
            config.mcp_server_url
        )),
    )
    .await;
    Ok(TokenResponse {
        access_token: access.expose().to_string(),
        token_type: ctx.token_type(),
        expires_in: ttl,
        refresh_token: None,
        scope,
    })
}

/// The one answer for an unknown, expired, used or another client's code (a stolen code is not
/// confirmed as real).
fn invalid_code() -> OAuthError {
    OAuthError::InvalidGrant("the authorization code is invalid, expired or already used".into())
}

/// The checks of an unused code against the token request (OAuth 2.1 §4.1.3): the redirect URI
/// of the authorization request when one is sent, the resource and issuer it was issued for,
/// the PKCE verifier (RFC 7636 §4.6), then its expiry. Returns what its resource asks of its
/// access tokens ([`check_target`]).
async fn check_unused_code(
    ctx: &Ctx<'_>,
    record: &CodeRecord,
    verifier: Option<&str>,
) -> Result<Target, OAuthError> {
    if let Some(uri) = ctx.params.get("redirect_uri")
        && uri != &record.redirect_uri
    {
        return Err(OAuthError::InvalidGrant(
            "redirect_uri differs from the one in the authorization request".into(),
        ));
    }
    let target = check_target(ctx, &record.resource, record.issuer.as_deref()).await?;
    match verifier {
        None => {
            return Err(OAuthError::InvalidGrant(
                "code_verifier is required: the code was issued with a code_challenge (PKCE)"
                    .into(),
            ));
        }
        Some(v) if !verify_s256(v, &record.code_challenge) => {
            return Err(OAuthError::InvalidGrant(
                "code_verifier does not match the code_challenge".into(),
            ));
        }
        Some(_) => {}
    }
    if record.expires_at <= ctx.now {
        return Err(invalid_code());
    }
    // RFC 9449 §10: a code whose request named a key is redeemed only with a proof by it.
    if let Some(bound) = &record.dpop_jkt
        && ctx.jkt.as_ref() != Some(bound)
    {
        return Err(OAuthError::InvalidGrant(
            "the authorization request named a DPoP key (dpop_jkt): send a DPoP proof signed with that key".into(),
        ));
    }
    // A grant allowed for a limited time gives no token outliving it; one that has ended is
    // refused under the consent's lock in `Store::redeem_code` (`GrantRefusal::Ended`).
    Ok(target.ending_by(record.grant_expires_at, ctx.now))
}

/// The `authorization_code` grant (OAuth 2.1 §4.1.3): the code is bound to the client, the
/// redirect URI, the PKCE challenge, the resource, the scopes and the account; single use; a
/// replay revokes every token the first redemption issued.
async fn authorization_code(ctx: &Ctx<'_>) -> Result<TokenResponse, OAuthError> {
    let code = ctx
        .params
        .get("code")
        .ok_or_else(|| OAuthError::InvalidRequest("code is required".into()))?;
    // Every code is issued with a code_challenge, so a missing verifier is a failed PKCE
    // verification: invalid_grant, like a wrong one (OAuth 2.1 §4.1.3, RFC 7636 §4.6).
    let verifier = ctx.params.get("code_verifier");
    let hash = Secret::from_presented(code.clone()).hash();
    let Some(record) = ctx.state.store.code(&hash).await? else {
        return Err(invalid_code());
    };
    if record.client_id != ctx.client.client_id {
        // The same answer as for an unknown code: a stolen code is not confirmed as real.
        return Err(invalid_code());
    }
    // A used code is a replay: no token is issued, so its form does not matter.
    let target = match record.used_at {
        None => match check_unused_code(ctx, &record, verifier.map(String::as_str)).await {
            Ok(target) => target,
            Err(e) => {
                code_refused(ctx, &record, &e).await;
                return Err(e);
            }
        },
        Some(_) => Target {
            ttl: ctx.state.config.access_token_ttl_secs,
            jwt: None,
        },
    };
    redeem(ctx, &record, &target, invalid_code).await
}

/// Audits why an unused code of this client was refused (`code_refused`, for the connection
/// timeline): the client's own mistake (PKCE, redirect URI, resource, an expired code, a
/// missing DPoP proof), never this server's trouble.
async fn code_refused(ctx: &Ctx<'_>, record: &CodeRecord, e: &OAuthError) {
    if !matches!(
        e,
        OAuthError::InvalidGrant(_) | OAuthError::InvalidTarget(_)
    ) {
        return;
    }
    let expired;
    let reason = if record.expires_at <= ctx.now && e.description() == invalid_code().description()
    {
        expired = format!(
            "the authorization code expired: it must be redeemed within {} minutes",
            crate::oauth::authorize::CODE_TTL_SECS / 60
        );
        expired.as_str()
    } else {
        e.description()
    };
    audit(
        ctx,
        Event::CodeRefused,
        Outcome::Denied,
        Some(&record.account_id),
        None,
        Some(reason),
    )
    .await;
}

/// Redeems the authorization code `record` (checked by the caller) for a new family and its
/// first token pair made as `target` asks; a replay revokes the family the first redemption
/// made. `invalid` is the answer for an unknown, expired or replayed code.
async fn redeem(
    ctx: &Ctx<'_>,
    record: &CodeRecord,
    target: &Target,
    invalid: fn() -> OAuthError,
) -> Result<TokenResponse, OAuthError> {
    let (refresh, access, tokens) = new_pair(
        ctx,
        target,
        &record.account_id,
        &record.resource,
        &record.scope,
    )?;
    match ctx
        .state
        .store
        .redeem_code(record, &tokens, ctx.now)
        .await?
    {
        Redeemed::Issued { family_id } => {
            crate::metrics::resource_token_event(
                crate::domain::audit::ResourceTokenEvent::Issued,
                &record.resource,
            );
            audit(
                ctx,
                Event::CodeRedeemed,
                Outcome::Success,
                Some(&record.account_id),
                Some(&family_id),
                Some(&if record.redirect_uri == DEVICE_CODE_GRANT {
                    format!("grant=device_code resource={}", record.resource)
                } else {
                    format!("resource={}", record.resource)
                }),
            )
            .await;
            Ok(response(ctx, &refresh, &access, target.ttl, &record.scope))
        }
        Redeemed::Replayed { family_id } => {
            audit(
                ctx,
                Event::CodeReplay,
                Outcome::Denied,
                Some(&record.account_id),
                family_id.as_deref(),
                None,
            )
            .await;
            if let Some(f) = &family_id {
                audit(
                    ctx,
                    Event::FamilyRevoked,
                    Outcome::Success,
                    Some(&record.account_id),
                    Some(f),
                    Some("authorization code replayed"),
                )
                .await;
            }
            Err(invalid())
        }
        Redeemed::Refused(why) => {
            Err(refused(ctx, Event::CodeRefused, &record.account_id, None, why).await)
        }
        Redeemed::Invalid => Err(invalid()),
    }
}

/// The one answer for an unknown, used or another client's device code.
fn invalid_device_code() -> OAuthError {
    OAuthError::InvalidGrant("the device code is invalid or was already used".into())
}

/// The device access token request (RFC 8628 §3.4–3.5), polled by the client that started
/// the device authorization: `authorization_pending` while the person has not answered,
/// `slow_down` (the interval grown by 5 seconds) for a poll sooner than the interval,
/// `access_denied` after a denial, `expired_token` once it expired unanswered; after an
/// approval, the authorization code stored with it is redeemed as in the code flow (same
/// family, consent and resource rules, [`check_target`]): a refresh and access token pair,
/// once. An unknown device code and another client's get the same `invalid_grant`.
async fn device_code(ctx: &Ctx<'_>) -> Result<TokenResponse, OAuthError> {
    let presented = ctx
        .params
        .get("device_code")
        .ok_or_else(|| OAuthError::InvalidRequest("device_code is required".into()))?;
    let hash = Secret::from_presented(presented.clone()).hash();
    let store = &ctx.state.store;
    let Some(device) = store.device_authorization(&hash).await? else {
        return Err(invalid_device_code());
    };
    if device.client_id != ctx.client.client_id {
        return Err(invalid_device_code());
    }
    match decide_poll(&device.facts(), ctx.now) {
        PollAnswer::Issue => {}
        PollAnswer::Denied => {
            return Err(OAuthError::AccessDenied(
                "the user denied the request".into(),
            ));
        }
        PollAnswer::Expired => {
            return Err(OAuthError::ExpiredToken(
                "the device code expired before the user answered; start again".into(),
            ));
        }
        PollAnswer::SlowDown(interval) => {
            store.note_device_poll(&hash, interval, ctx.now).await?;
            return Err(OAuthError::SlowDown(format!(
                "polled too soon; wait at least {interval} seconds between requests"
            )));
        }
        PollAnswer::Pending => {
            store
                .note_device_poll(&hash, device.poll_interval, ctx.now)
                .await?;
            return Err(OAuthError::AuthorizationPending(
                "the user has not answered yet".into(),
            ));
        }
    }
    let Some(code_hash) = &device.code_hash else {
        return Err(invalid_device_code());
    };
    let Some(record) = store.code(code_hash).await? else {
        return Err(invalid_device_code());
    };
    let target = match record.used_at {
        None => {
            let target = check_target(ctx, &record.resource, record.issuer.as_deref()).await?;
            if record.expires_at <= ctx.now {
                return Err(OAuthError::ExpiredToken(
                    "the approval was not collected in time; start again".into(),
                ));
            }
            target
        }
        // A replay: no token is issued.
        Some(_) => Target {
            ttl: ctx.state.config.access_token_ttl_secs,
            jwt: None,
        },
    };
    redeem(ctx, &record, &target, invalid_device_code).await
}

/// Audits a refused refresh (`refresh_refused`, the family as subject) and gives its error.
async fn refresh_refused(ctx: &Ctx<'_>, state: &RefreshState, why: GrantRefusal) -> OAuthError {
    refused(
        ctx,
        Event::RefreshRefused,
        &state.account_id,
        Some(&state.family_id),
        why,
    )
    .await
}

/// The scope of the successor pair: the `scope` asked for (within the granted scope;
/// `invalid_scope` beyond it), or the granted scope when none (or only `offline_access`) is
/// asked for (OAuth 2.1 §4.3.1, as at authorize).
fn refreshed_scope(ctx: &Ctx<'_>, granted: &str) -> Result<String, OAuthError> {
    let Some(asked) = ctx.params.get("scope") else {
        return Ok(granted.to_string());
    };
    let Ok(held) = ScopeSet::parse(granted) else {
        // A registered resource's scopes: compared token by token.
        return registered_refreshed_scope(granted, asked);
    };
    let asked = ScopeSet::parse(asked).map_err(|e| OAuthError::InvalidScope(e.to_string()))?;
    let asked = asked.without_offline_access();
    if !asked.is_subset(&held) {
        return Err(OAuthError::InvalidScope(format!(
            "the requested scope exceeds the granted scope \"{held}\""
        )));
    }
    Ok(if asked.is_empty() {
        granted.to_string()
    } else {
        asked.to_string()
    })
}

/// [`refreshed_scope`] for a grant of a registered resource: the asked tokens (without
/// `offline_access`) in the granted order, each of them granted (`invalid_scope` otherwise).
fn registered_refreshed_scope(granted: &str, asked: &str) -> Result<String, OAuthError> {
    let held: Vec<&str> = granted.split_ascii_whitespace().collect();
    let asked: Vec<&str> = asked
        .split_ascii_whitespace()
        .filter(|t| *t != Scope::OfflineAccess.as_str())
        .collect();
    if let Some(beyond) = asked.iter().find(|t| !held.contains(t)) {
        return Err(OAuthError::InvalidScope(if is_scope_token(beyond) {
            format!("the requested scope exceeds the granted scope \"{granted}\"")
        } else {
            "scope contains a character not allowed by RFC 6749 §3.3".into()
        }));
    }
    Ok(if asked.is_empty() {
        granted.to_string()
    } else {
        held.iter()
            .filter(|t| asked.contains(t))
            .copied()
            .collect::<Vec<_>>()
            .join(" ")
    })
}

/// The `refresh_token` grant (OAuth 2.1 §4.3) with rotation, families, the grace window and
/// reuse detection: reads the stored state, validates the request, and carries out
/// [`refresh::decide`]. A request that fails validation leaves the token usable.
async fn refresh_token(ctx: &Ctx<'_>) -> Result<TokenResponse, OAuthError> {
    let presented = ctx
        .params
        .get("refresh_token")
        .ok_or_else(|| OAuthError::InvalidRequest("refresh_token is required".into()))?;
    let hash = Secret::from_presented(presented.clone()).hash();
    let invalid = || OAuthError::InvalidGrant("the refresh token is invalid".into());
    // An unknown token and another client's token get the same answer: a stolen token is not
    // confirmed as real.
    let read = || async {
        match ctx.state.store.refresh_state(&hash).await? {
            Some(s) if s.client_id == ctx.client.client_id => Ok::<_, OAuthError>(s),
            _ => Err(invalid()),
        }
    };
    let mut state = read().await?;
    // The person allowed the app for a limited time (issue 37) and it has passed: the grant
    // has ended, like a revoked one, and the client must ask again.
    if state.grant_ended(ctx.now) {
        return Err(OAuthError::InvalidGrant(
            GrantRefusal::Ended.as_str().into(),
        ));
    }
    // RFC 9449 §5: a bound refresh token is used only with a proof by its key.
    if let Some(bound) = &state.jkt
        && ctx.jkt.as_ref() != Some(bound)
    {
        return Err(OAuthError::InvalidGrant(
            "the refresh token is bound to a DPoP key: send a DPoP proof signed with that key"
                .into(),
        ));
    }
    let grace = ctx.state.config.refresh_grace_secs;
    let mut decision = refresh::decide(&state.facts(), ctx.now, grace);
    if let RefreshDecision::Refuse(why) = decision {
        return Err(refresh_refused(ctx, &state, why).await);
    }
    // Validation comes before rotation, replay and reuse, and leaves the token as it is.
    let target = check_target(ctx, &state.resource, state.issuer.as_deref())
        .await?
        .ending_by(state.consent_expires_at, ctx.now);
    let scope = refreshed_scope(ctx, &state.scope)?;
    if decision == RefreshDecision::Rotate {
        match rotate(ctx, &hash, &state, presented, &scope, &target).await? {
            Ok(pair) => return Ok(pair),
            Err(Rotation::Refused(why)) => decision = RefreshDecision::Refuse(why),
            Err(_) => {
                // Another request rotated it first: decide again on what it stored.
                state = read().await?;
                decision = match refresh::decide(&state.facts(), ctx.now, grace) {
                    RefreshDecision::Rotate => return Err(invalid()),
                    d => d,
                };
            }
        }
    }
    match decision {
        RefreshDecision::Refuse(why) => Err(refresh_refused(ctx, &state, why).await),
        RefreshDecision::ReplayInGrace => match grace_successor(ctx, &state, presented) {
            Some(pair) => Ok(pair),
            // A successor that cannot be opened is not a retry's answer: reuse.
            None => Err(reuse(ctx, &state).await?),
        },
        RefreshDecision::ReuseRevoke | RefreshDecision::Rotate => Err(reuse(ctx, &state).await?),
    }
}

/// Rotates the presented token: a new pair with `scope`, its sealed copy stored with the old
/// token, one store transaction. `Ok(Err(_))` when the store did not rotate it
/// ([`Rotation::Lost`] or [`Rotation::Refused`]).
async fn rotate(
    ctx: &Ctx<'_>,
    hash: &TokenHash,
    state: &RefreshState,
    presented: &str,
    scope: &str,
    target: &Target,
) -> Result<Result<TokenResponse, Rotation>, OAuthError> {
    let (refresh, access, tokens) =
        new_pair(ctx, target, &state.account_id, &state.resource, scope)?;
    #[allow(
        clippy::expect_used,
        reason = "a struct of strings and an integer always serializes"
    )]
    let sealed = successor::seal(
        presented,
        &serde_json::to_vec(&SealedPair {
            refresh_token: refresh.expose().to_string(),
            access_token: access.expose().to_string(),
            access_expires_at: tokens.access_expires_at,
            scope: scope.to_string(),
            token_type: Some(ctx.token_type()),
        })
        .expect("serializable"),
    );
    let rotation = ctx
        .state
        .store
        .rotate_refresh(hash, state, &sealed, &tokens, ctx.now)
        .await?;
    if rotation != Rotation::Rotated {
        return Ok(Err(rotation));
    }
    crate::metrics::resource_token_event(
        crate::domain::audit::ResourceTokenEvent::Refreshed,
        &state.resource,
    );
    audit(
        ctx,
        Event::TokenRefreshed,
        Outcome::Success,
        Some(&state.account_id),
        Some(&state.family_id),
        Some(&format!("resource={}", state.resource)),
    )
    .await;
    Ok(Ok(response(ctx, &refresh, &access, target.ttl, scope)))
}

/// Reuse of a rotated token: treated as theft, the family and its access tokens are revoked
/// and audited; gives the `invalid_grant` to answer.
async fn reuse(ctx: &Ctx<'_>, state: &RefreshState) -> Result<OAuthError, OAuthError> {
    ctx.state
        .store
        .revoke_family(&state.family_id, "refresh token reuse", ctx.now)
        .await?;
    let (account, family) = (
        Some(state.account_id.as_str()),
        Some(state.family_id.as_str()),
    );
    audit(
        ctx,
        Event::RefreshReuse,
        Outcome::Denied,
        account,
        family,
        None,
    )
    .await;
    let detail = Some("refresh token reuse");
    audit(
        ctx,
        Event::FamilyRevoked,
        Outcome::Success,
        account,
        family,
        detail,
    )
    .await;
    Ok(OAuthError::InvalidGrant(
        "the refresh token was already used; the authorization has been revoked".into(),
    ))
}

/// The sealed successor pair of a token rotated within the grace window, opened with the
/// presented token (`None` when it cannot be opened).
fn grace_successor(ctx: &Ctx<'_>, state: &RefreshState, presented: &str) -> Option<TokenResponse> {
    let plain = successor::open(presented, state.successor_sealed.as_deref()?)?;
    let pair: SealedPair = serde_json::from_slice(&plain).ok()?;
    Some(TokenResponse {
        access_token: pair.access_token,
        token_type: pair.token_type.unwrap_or_else(|| "Bearer".into()),
        expires_in: (pair.access_expires_at - ctx.now).max(0),
        refresh_token: Some(pair.refresh_token),
        scope: pair.scope,
    })
}
