//! With a bearer token: `initialize` (the negotiated protocol revision, MCP lifecycle
//! §Version Negotiation) and `tools/list` (MCP server/tools §Listing Tools), over Streamable HTTP
//! (MCP transports: a JSON or an SSE answer).

use serde_json::{Value, json};
use url::Url;

use super::Step;
use super::checks::PROTOCOL_REVISION;
use super::http::{Fetched, Probe};

/// What the token steps learned.
#[derive(Debug, Default, Clone)]
pub struct TokenOutcome {
    /// The revision the server chose in `initialize`.
    pub protocol_version: Option<String>,
    /// The names `tools/list` returned.
    pub tools: Option<Vec<String>>,
}

/// Calls `initialize` then `tools/list` with `token`.
pub async fn with_token(probe: &Probe, url: &Url, token: &str) -> (Vec<Step>, TokenOutcome) {
    let mut steps = Vec::new();
    let mut outcome = TokenOutcome::default();
    let (version, session) = match initialize(probe, url, token).await {
        Ok((step, version, session)) => {
            steps.push(step);
            (version, session)
        }
        Err(step) => {
            steps.push(*step);
            steps.push(Step::skip("token-tools-list", "initialize failed"));
            return (steps, outcome);
        }
    };
    outcome.protocol_version = Some(version.clone());
    // The lifecycle's notification; its answer does not matter to the check.
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let _ = call(
        probe,
        url,
        token,
        &initialized,
        Some(&version),
        session.as_deref(),
    )
    .await;
    let (step, tools) = tools_list(probe, url, token, &version, session.as_deref()).await;
    steps.push(step);
    outcome.tools = tools;
    (steps, outcome)
}

/// `initialize` at `url` with `token` (MCP lifecycle §Version Negotiation): the passing step,
/// the protocol revision the server chose and its `Mcp-Session-Id`, if any; or the failing
/// step.
async fn initialize(
    probe: &Probe,
    url: &Url,
    token: &str,
) -> Result<(Step, String, Option<String>), Box<Step>> {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL_REVISION, "capabilities": {},
        "clientInfo": {"name": "gatehouse-doctor", "version": env!("CARGO_PKG_VERSION")}}});
    let request = format!("POST {url} initialize ({PROTOCOL_REVISION}) with the token");
    let expected = "200 with a JSON-RPC result naming protocolVersion";
    let answer = call(probe, url, token, &init, None, None).await;
    let (result, session) = match answer {
        Ok((fetched, Ok(result))) => (result, fetched.header("mcp-session-id").map(String::from)),
        Ok((fetched, Err(why))) => {
            return Err(Box::new(Step::fail(
                "token-initialize",
                request,
                why,
                expected,
                token_fix(&fetched),
            )));
        }
        Err(e) => {
            return Err(Box::new(Step::fail(
                "token-initialize",
                request,
                e,
                expected,
                "Make the MCP URL reachable from here.",
            )));
        }
    };
    let version = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .map(String::from);
    let Some(version) = version else {
        return Err(Box::new(Step::fail(
            "token-initialize",
            request,
            format!("result without protocolVersion: {}", excerpt(&result)),
            expected,
            "Answer initialize with the protocol revision chosen (MCP lifecycle §Version Negotiation).",
        )));
    };
    let step = Step::pass(
        "token-initialize",
        request,
        format!("protocol revision {version}"),
        expected,
    );
    Ok((step, version, session))
}

/// `tools/list` at `url` with `token`, the negotiated `version` and the `session` (MCP
/// server/tools §Listing Tools): the step, and the tool names when it passed.
async fn tools_list(
    probe: &Probe,
    url: &Url,
    token: &str,
    version: &str,
    session: Option<&str>,
) -> (Step, Option<Vec<String>>) {
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
    let request = format!("POST {url} tools/list (MCP-Protocol-Version {version})");
    let expected = "a JSON-RPC result with tools";
    match call(probe, url, token, &list, Some(version), session).await {
        Ok((_, Ok(result))) => match result.get("tools").and_then(Value::as_array) {
            Some(tools) => {
                let names: Vec<String> = tools
                    .iter()
                    .filter_map(|t| t.get("name").and_then(Value::as_str).map(String::from))
                    .collect();
                let step = Step::pass(
                    "token-tools-list",
                    request,
                    format!("{} tools: {}", names.len(), names.join(", ")),
                    expected,
                );
                (step, Some(names))
            }
            None => (
                Step::fail(
                    "token-tools-list",
                    request,
                    format!("result without tools: {}", excerpt(&result)),
                    expected,
                    "Answer tools/list with a tools array (MCP server/tools).",
                ),
                None,
            ),
        },
        Ok((fetched, Err(why))) => (
            Step::fail(
                "token-tools-list",
                request,
                why,
                expected,
                token_fix(&fetched),
            ),
            None,
        ),
        Err(e) => (
            Step::fail(
                "token-tools-list",
                request,
                e,
                expected,
                "Make the MCP URL reachable from here.",
            ),
            None,
        ),
    }
}

fn token_fix(fetched: &Fetched) -> &'static str {
    match fetched.status {
        401 => {
            "The token was refused: it may have expired or been revoked, or be bound to another resource (its audience must be MCP_SERVER_URL, RFC 8707)."
        }
        403 => {
            "The token lacks a scope this call needs (insufficient_scope), or the Origin/Host was refused."
        }
        _ => {
            "The MCP endpoint must answer a JSON-RPC request with a result (MCP transports §Sending Messages)."
        }
    }
}

fn excerpt(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 120 {
        format!("{}…", s.chars().take(120).collect::<String>())
    } else {
        s
    }
}

/// Posts one JSON-RPC message; for a request, the `result` (or why there is none).
async fn call(
    probe: &Probe,
    url: &Url,
    token: &str,
    message: &Value,
    version: Option<&str>,
    session: Option<&str>,
) -> Result<(Fetched, Result<Value, String>), String> {
    let mut builder = probe
        .client()
        .post(url.clone())
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(message.to_string());
    if let Some(v) = version {
        builder = builder.header("mcp-protocol-version", v);
    }
    if let Some(s) = session {
        builder = builder.header("mcp-session-id", s);
    }
    let fetched = probe.send(builder).await?;
    let result = read_result(&fetched);
    Ok((fetched, result))
}

/// The JSON-RPC `result` of an answer given as JSON or as an SSE stream (the first `data:`
/// event holding a response).
pub fn read_result(fetched: &Fetched) -> Result<Value, String> {
    if fetched.is_redirect() || !(200..300).contains(&fetched.status) {
        return Err(format!("{} {}", fetched.summary(), fetched.excerpt()));
    }
    let messages: Vec<Value> = if fetched.media_type() == "text/event-stream" {
        fetched
            .body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    } else {
        serde_json::from_str(&fetched.body)
            .ok()
            .into_iter()
            .collect()
    };
    let Some(response) = messages
        .into_iter()
        .find(|m| m.get("result").is_some() || m.get("error").is_some())
    else {
        return Err(format!(
            "{} no JSON-RPC response: {}",
            fetched.status,
            fetched.excerpt()
        ));
    };
    if let Some(error) = response.get("error") {
        return Err(format!("JSON-RPC error {}", excerpt(error)));
    }
    Ok(response.get("result").cloned().unwrap_or(Value::Null))
}
