//! The authorization server's metadata (RFC 8414, `OpenID` Connect Discovery) and the members
//! clients rely on.

use serde_json::Value;
use url::Url;

use super::{PROTOCOL_REVISION, ServerMetadata, json_object};
use crate::doctor::Step;
use crate::doctor::http::Probe;

/// The metadata URLs clients try for `issuer`, in their order (MCP 2025-11-25 §Authorization
/// Server Metadata Discovery): RFC 8414 §3.1 path insertion, then `OpenID` Connect Discovery 1.0
/// §4 with the well-known segment inserted, then appended; for an issuer without a path, RFC
/// 8414 then `OpenID` Connect.
pub fn server_metadata_urls(issuer: &Url) -> Vec<String> {
    let origin = issuer.origin().ascii_serialization();
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    }
}

/// Finds the authorization-server metadata of `issuer` at the first URL of
/// [`server_metadata_urls`] answering `200` with a JSON object, as clients do.
pub async fn server_metadata(probe: &Probe, issuer: &str) -> (Step, Option<ServerMetadata>) {
    let check = "as-metadata";
    let expected = "200 JSON at one of the RFC 8414 / OpenID Connect discovery URLs";
    let Ok(issuer_url) = Url::parse(issuer) else {
        return (
            Step::fail(
                check,
                format!("issuer \"{issuer}\""),
                "not an absolute URL".into(),
                expected,
                "authorization_servers must hold absolute issuer URLs.",
            ),
            None,
        );
    };
    let urls = server_metadata_urls(&issuer_url);
    let mut tried = Vec::new();
    for u in &urls {
        let builder = probe
            .client()
            .get(u)
            .header("accept", "application/json")
            .header("mcp-protocol-version", PROTOCOL_REVISION);
        match probe.send(builder).await {
            Ok(f) if f.status == 200 => match json_object(&f) {
                Ok(document) => {
                    tried.push(format!("{u} → 200"));
                    return (
                        Step::pass(
                            check,
                            format!("GET {}", urls.join(", then ")),
                            tried.join("; "),
                            expected,
                        ),
                        Some(ServerMetadata {
                            url: u.clone(),
                            document,
                        }),
                    );
                }
                Err(got) => tried.push(format!("{u} → {got}")),
            },
            Ok(f) => tried.push(format!("{u} → {}", f.summary())),
            Err(e) => tried.push(format!("{u} → {e}")),
        }
    }
    (
        Step::fail(
            check,
            format!("GET {}", urls.join(", then ")),
            tried.join("; "),
            expected,
            format!(
                "Serve RFC 8414 metadata at {}: a proxy must forward /.well-known/ paths to the authorization server.",
                urls[0]
            ),
        ),
        None,
    )
}

/// The members of the metadata clients rely on: `issuer` byte-identical to the issuer
/// (RFC 8414 §3.3; MCP 2026-07-28 clients reject a mismatch), `response_types_supported` with
/// `code`, `code_challenge_methods_supported` with `S256` (MCP 2025-11-25 §Authorization Code
/// Protection), a `registration_endpoint` (RFC 7591) or `client_id_metadata_document_supported`
/// (MCP 2025-11-25 §Client Registration), and `none` among `token_endpoint_auth_methods_supported`
/// (RFC 8414 §2: absent means `client_secret_basic` only).
pub fn server_metadata_members(issuer: &str, meta: &ServerMetadata) -> Vec<Step> {
    let request = format!("GET {}", meta.url);
    let mut steps = Vec::new();
    let doc_issuer = meta.str("issuer").unwrap_or("");
    let got = format!("issuer \"{doc_issuer}\"");
    let expected = format!("issuer \"{issuer}\" (as named in authorization_servers)");
    steps.push(if doc_issuer == issuer {
        Step::pass("issuer", request.clone(), got, expected)
    } else if doc_issuer.trim_end_matches('/') == issuer.trim_end_matches('/') {
        Step::fail(
            "issuer",
            request.clone(),
            got,
            expected,
            "The issuer differs by a trailing slash: write it the same way in the metadata and in authorization_servers (RFC 8414 §3.3 compares byte for byte; Gatehouse: GATEHOUSE_ISSUER without a trailing slash).",
        )
    } else {
        Step::fail(
            "issuer",
            request.clone(),
            got,
            expected,
            "Make authorization_servers name the issuer exactly as the metadata states it (RFC 8414 §3.3): set GATEHOUSE_ISSUER (or MCP_SERVER_URL) to the public URL.",
        )
    });
    let member = |name: &str| {
        meta.document
            .get(name)
            .map(ToString::to_string)
            .unwrap_or_else(|| "absent".into())
    };
    for (check, name, value, fix) in [
        (
            "response-type-code",
            "response_types_supported",
            "code",
            "Support and advertise the authorization-code flow (RFC 8414 §2).",
        ),
        (
            "pkce-s256",
            "code_challenge_methods_supported",
            "S256",
            "Advertise code_challenge_methods_supported [\"S256\"]: clients refuse a server that does not (MCP 2025-11-25 §Authorization Code Protection).",
        ),
    ] {
        steps.push(
            Step::fail(
                check,
                request.clone(),
                format!("{name} {}", member(name)),
                format!("\"{value}\" listed"),
                fix,
            )
            .passed_if(meta.list_contains(name, value) == Some(true)),
        );
    }
    let registration = meta.str("registration_endpoint");
    let cimd = meta
        .document
        .get("client_id_metadata_document_supported")
        .and_then(Value::as_bool)
        == Some(true);
    let got = format!(
        "registration_endpoint {}, client_id_metadata_document_supported {}",
        member("registration_endpoint"),
        member("client_id_metadata_document_supported")
    );
    steps.push(
        Step::fail(
            "registration-or-cimd",
            request.clone(),
            got,
            "a registration endpoint or client ID metadata documents",
            "Offer dynamic registration (RFC 7591) or client ID metadata documents: clients without a preconfigured client ID cannot register otherwise.",
        )
        .passed_if(registration.is_some() || cimd),
    );
    let got = format!(
        "token_endpoint_auth_methods_supported {}",
        member("token_endpoint_auth_methods_supported")
    );
    steps.push(
        match meta.list_contains("token_endpoint_auth_methods_supported", "none") {
            Some(true) => Step::pass("auth-method-none", request.clone(), got, "\"none\" listed"),
            _ => Step::fail(
                "auth-method-none",
                request,
                got,
                "\"none\" listed",
                "Accept public clients at the token endpoint and list \"none\" (absent, RFC 8414 §2 means client_secret_basic only).",
            ),
        },
    );
    steps
}
