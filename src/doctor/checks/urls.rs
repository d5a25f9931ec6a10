//! The scheme and host rules over every URL the challenge and the metadata name.

use url::Url;

use crate::doctor::Step;

/// Every URL the documents name is `https` when the given URL is (OAuth 2.1 §1.5), and on the
/// given URL's host and port unless the documents say otherwise: the protected-resource side
/// (`resource_metadata`, `resource`) on the MCP URL's origin, the authorization server's
/// endpoints on the issuer's origin (which `authorization_servers` may place elsewhere).
pub fn url_rules(
    given: &Url,
    resource_side: &[(String, String)],
    issuer: Option<&str>,
    server_side: &[(String, String)],
) -> Vec<Step> {
    let all: Vec<&(String, String)> = resource_side.iter().chain(server_side).collect();
    if all.is_empty() {
        // Nothing was read, so nothing was checked: never a pass.
        let why = "no challenge or metadata named any URL";
        return vec![Step::skip("https", why), Step::skip("same-host", why)];
    }
    let request = "the URLs named by the challenge and the metadata".to_string();
    let https = if given.scheme() == "https" {
        let plain: Vec<String> = all
            .iter()
            .filter(|(_, u)| !u.starts_with("https://"))
            .map(|(name, u)| format!("{name} {u}"))
            .collect();
        if plain.is_empty() {
            Step::pass(
                "https",
                request.clone(),
                format!("{} URLs, all https", all.len()),
                "every URL https",
            )
        } else {
            Step::fail(
                "https",
                request.clone(),
                plain.join(", "),
                "every URL https",
                "TLS is terminated in front of the server and it names http URLs: set MCP_SERVER_URL (and GATEHOUSE_ISSUER) to the https URL.",
            )
        }
    } else {
        Step::pass(
            "https",
            request.clone(),
            "the given URL is http: nothing to compare".into(),
            "every URL https when the given URL is",
        )
    };
    let given_authority = authority(given.as_str());
    let issuer_authority = issuer.and_then(authority);
    let mut stray = Vec::new();
    for (name, u) in resource_side {
        if authority(u) != given_authority {
            stray.push(format!("{name} {u}"));
        }
    }
    for (name, u) in server_side {
        let a = authority(u);
        if a != given_authority && a != issuer_authority {
            stray.push(format!("{name} {u}"));
        }
    }
    let expected = "resource URLs on the MCP URL's host, server endpoints on the issuer's host";
    let hosts = if stray.is_empty() {
        Step::pass(
            "same-host",
            request,
            format!("{} URLs on the expected hosts", all.len()),
            expected,
        )
    } else {
        Step::fail(
            "same-host",
            request,
            stray.join(", "),
            expected,
            "The documents name another host or port than clients use: set MCP_SERVER_URL (and GATEHOUSE_ISSUER) to the public URL, and have the proxy pass the original Host.",
        )
    };
    vec![https, hosts]
}

fn authority(u: &str) -> Option<(String, String, Option<u16>)> {
    let url = Url::parse(u).ok()?;
    Some((
        url.scheme().to_string(),
        url.host_str()?.to_ascii_lowercase(),
        url.port_or_known_default(),
    ))
}
