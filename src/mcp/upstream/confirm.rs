//! The person's confirmation of each call of a destructive upstream tool the operator allowed
//! (`gatehouse upstream allow-destructive NAME TOOL`; issue "Upstream MCP servers behind
//! Gatehouse" §4, seed 002: confirm irreversible calls whatever the description says).
//!
//! A client that declares elicitation and speaks MCP 2026-07-28 is asked through a
//! multi-round-trip request (MCP `client/elicitation`, SEP-2322): the first `tools/call` is
//! answered with an `InputRequiredResult` holding one form-mode `elicitation/create` request
//! (`"Run TOOL on UPSTREAM?"`, one required boolean `confirm`) and a `requestState`; the client
//! shows the form and calls again with the person's answer in `inputResponses.confirm` and the
//! same `requestState`. The call is forwarded only when the answer is `accept` with
//! `confirm: true` and the state opens.
//!
//! The `requestState` is sealed with the server key ([`crate::domain::server_key`]) and binds
//! the account, the tool, the SHA-256 of the arguments and an expiry ([`CONFIRMATION_SECS`]):
//! it cannot be forged, replayed for other arguments or another account, or used late (MCP
//! 2026-07-28 §Multi round-trip: `requestState` is integrity-protected and bound to the
//! principal). It is answered once: the first answer sent back with it, accepted or declined,
//! spends it on every instance ([`crate::store::Store::spend_confirmation`]), so one
//! confirmation runs one call; the same request sent again is refused and asks for a new
//! confirmation.
//!
//! Any other client gets an `isError` result saying the call needs a confirmation its client
//! cannot ask for; nothing is forwarded.

use rmcp::model::{CallToolResult, ContentBlock, InputRequiredResult, InputResponses, JsonObject};
use serde_json::json;
use sha2::{Digest as _, Sha256};

use crate::domain::audit::Outcome;
use crate::state::AppState;

/// How long a confirmation request stays valid, in seconds.
pub const CONFIRMATION_SECS: i64 = 300;

/// The key of the confirmation in `inputRequests` and `inputResponses`.
pub const INPUT_KEY: &str = "confirm";

/// What the server key seals the `requestState` for.
const SEAL_CONTEXT: &[u8] = b"gatehouse\0upstream-confirmation";

/// Where a destructive call stands.
#[derive(Debug)]
pub enum Confirmation {
    /// The person confirmed this very call: forward it.
    Confirmed,
    /// Ask the person (the answer to send back).
    Ask(Box<InputRequiredResult>),
    /// Not forwarded: the result to answer and the audit outcome.
    Refused(CallToolResult, Outcome),
}

/// The call being confirmed.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The caller's account.
    pub account_id: &'a str,
    /// The upstream's name.
    pub upstream: &'a str,
    /// The upstream's own name for the tool.
    pub tool: &'a str,
    /// The catalog name, `NAME__TOOL`.
    pub public_name: &'a str,
    /// The call's arguments.
    pub arguments: Option<&'a JsonObject>,
}

/// What the client sent back and can do.
#[derive(Debug, Clone, Copy)]
pub struct Round<'a> {
    /// `inputResponses` of the request, if any.
    pub input_responses: Option<&'a InputResponses>,
    /// `requestState` of the request, if any.
    pub request_state: Option<&'a str>,
    /// The client declares elicitation and speaks a revision with multi round-trip requests.
    pub can_ask: bool,
}

fn arguments_hash(arguments: Option<&JsonObject>) -> String {
    let bytes = serde_json::to_vec(&arguments).unwrap_or_default();
    hex::encode(Sha256::digest(&bytes))
}

fn refused(text: String, outcome: Outcome) -> Confirmation {
    Confirmation::Refused(
        CallToolResult::error(vec![ContentBlock::text(text)]),
        outcome,
    )
}

/// Decides a call of an allowed destructive tool (module documentation); `now` in Unix
/// seconds. Spending an answered state is one database write; when it fails the call is
/// refused (nothing is forwarded on a confirmation that could not be spent).
pub async fn check(app: &AppState, call: Call<'_>, round: Round<'_>, now: i64) -> Confirmation {
    let question = format!("Run {} on {}?", call.tool, call.upstream);
    let Ok(keys) = app.keyring() else {
        return refused(
            format!(
                "{question} This tool can destroy data and needs the person's confirmation, which this server cannot ask for without a server key (GATEHOUSE_SECRET_KEY)."
            ),
            Outcome::ConfirmationNeeded,
        );
    };
    let args = arguments_hash(call.arguments);
    if let Some(state) = round.request_state {
        return answered(app, keys, call, round, state, &args, now).await;
    }
    if !round.can_ask {
        return refused(
            format!(
                "{question} This tool can destroy data: each call needs the person's confirmation, which Gatehouse asks through MCP elicitation in a multi round-trip request (MCP 2026-07-28), and this request does not offer it: it must speak 2026-07-28 and declare elicitation in its own `_meta` (`io.modelcontextprotocol/clientCapabilities`); a capability declared at `initialize` by an earlier revision is not remembered, as this server keeps no sessions. Use a client that does to run {}.",
                call.public_name
            ),
            Outcome::ConfirmationNeeded,
        );
    }
    // A random nonce makes every state distinct, so that two confirmations of the same call
    // in the same second are spent apart.
    let state = json!({
        "account": call.account_id,
        "tool": call.public_name,
        "arguments": args,
        "expires": now + CONFIRMATION_SECS,
        "nonce": hex::encode(rand::random::<[u8; 16]>()),
    });
    let sealed = keys.seal(SEAL_CONTEXT, state.to_string().as_bytes());
    let result = json!({
        "resultType": "input_required",
        "inputRequests": {
            INPUT_KEY: {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": question,
                    "requestedSchema": {
                        "type": "object",
                        "properties": {
                            INPUT_KEY: {
                                "type": "boolean",
                                "title": format!("Run {}", call.tool),
                                "description": format!(
                                    "{} on the upstream server {} can destroy data.",
                                    call.tool, call.upstream
                                ),
                            }
                        },
                        "required": [INPUT_KEY],
                    },
                },
            },
        },
        "requestState": sealed,
    });
    match serde_json::from_value::<InputRequiredResult>(result) {
        Ok(result) => Confirmation::Ask(Box::new(result)),
        Err(e) => {
            tracing::error!(error = %e, "could not build a confirmation request");
            refused(
                format!("{question} The confirmation could not be asked; try again."),
                Outcome::ConfirmationNeeded,
            )
        }
    }
}

/// The call sent back with `state`: refused unless the state opens, is bound to this very
/// call, has not expired and was not answered before (it is spent now, accepted or not);
/// then confirmed only when the person accepted with `confirm: true`.
async fn answered(
    app: &AppState,
    keys: &crate::domain::server_key::Keyring,
    call: Call<'_>,
    round: Round<'_>,
    state: &str,
    args: &str,
    now: i64,
) -> Confirmation {
    let expires = keys
        .open(SEAL_CONTEXT, state)
        .ok()
        .and_then(|plain| serde_json::from_slice::<serde_json::Value>(&plain).ok())
        .filter(|v| {
            v["account"] == call.account_id
                && v["tool"] == call.public_name
                && v["arguments"] == args
        })
        .and_then(|v| v["expires"].as_i64())
        .filter(|e| *e >= now);
    let invalid = || {
        refused(
            format!(
                "The confirmation of {} is invalid, expired or already used; call the tool again to be asked again.",
                call.public_name
            ),
            Outcome::ConfirmationInvalid,
        )
    };
    let Some(expires) = expires else {
        return invalid();
    };
    match app
        .store
        .spend_confirmation(&crate::domain::secret::TokenHash::of(state), expires)
        .await
    {
        Ok(true) => {}
        Ok(false) => return invalid(),
        Err(e) => {
            tracing::warn!(error = %e, "could not record a confirmation as used");
            return refused(
                format!(
                    "The confirmation of {} could not be checked; try again shortly.",
                    call.public_name
                ),
                Outcome::ConfirmationInvalid,
            );
        }
    }
    let answer = round.input_responses.and_then(|r| r.get(INPUT_KEY));
    let accepted = answer.is_some_and(|a| {
        a["action"] == "accept" && a["content"][INPUT_KEY] == serde_json::Value::Bool(true)
    });
    if accepted {
        return Confirmation::Confirmed;
    }
    refused(
        format!(
            "The person did not confirm: {} was not run on {}.",
            call.tool, call.upstream
        ),
        Outcome::Declined,
    )
}
