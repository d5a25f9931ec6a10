//! The one layer of `POST <mcp path>` and `POST <mcp path>/<secret>`: the steps the module
//! documentation of [`super`] lists, in that order, before rmcp answers. Each step gives the
//! request back to go on or answers it itself; the answer of every step after the content
//! negotiation, rmcp's included, is reshaped to the representation negotiated
//! ([`accept::reshape`]).

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::upstream::serving_as;
use super::{McpState, accept, auth, body, guard, stepup};
use crate::domain::principal::Principal;

/// Where the credential of a request is taken from.
#[derive(Debug, Clone, Copy)]
enum Credential {
    /// `Authorization: Bearer …` or `X-Api-Key` ([`auth::authenticate`]).
    Header,
    /// The personal URL's secret in the path ([`auth::authenticate_personal`]).
    Path,
}

/// Middleware of `POST <mcp path>`: the steps of [`super`], the credential from a header.
pub async fn endpoint(State(mcp): State<McpState>, request: Request, next: Next) -> Response {
    run(&mcp, request, next, Credential::Header).await
}

/// Middleware of `POST <mcp path>/<secret>`: the steps of [`super`], the credential from the
/// path.
pub async fn personal(State(mcp): State<McpState>, request: Request, next: Next) -> Response {
    run(&mcp, request, next, Credential::Path).await
}

async fn run(mcp: &McpState, mut request: Request, next: Next, from: Credential) -> Response {
    if let Err(refused) = guard::check(mcp, &request) {
        return refused;
    }
    let wanted = match accept::negotiate(&mut request) {
        Ok(wanted) => wanted,
        Err(refused) => return refused,
    };
    let response = match checked(mcp, request, from).await {
        Ok(request) => {
            let caller = request
                .extensions()
                .get::<Principal>()
                .map(|p| p.account_id.clone());
            serving_as(caller, next.run(request)).await
        }
        Err(refused) => refused,
    };
    accept::reshape(wanted, response).await
}

/// The steps after the content negotiation: the request to hand to rmcp, or the answer of the
/// step that refused it.
async fn checked(mcp: &McpState, request: Request, from: Credential) -> Result<Request, Response> {
    let request = match from {
        Credential::Header => auth::authenticate(mcp, request).await?,
        Credential::Path => auth::authenticate_personal(mcp, request).await?,
    };
    let request = body::read(request).await?;
    let request = stepup::step_up(mcp, request).await?;
    body::check_request(request)
}
