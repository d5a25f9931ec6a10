//! Upstream MCP servers behind Gatehouse: the rules of what the operator may register with
//! `gatehouse upstream add` (names, URLs, headers, commands, environment, limits) and of the
//! names their tools get in Gatehouse's own catalog.
//!
//! An upstream is reached either over Streamable HTTP (MCP `basic/transports` §Streamable
//! HTTP) at a URL, with optional headers that carry its own credential (never the caller's:
//! MCP security best practices §Token Passthrough), or as a local child process spoken to over
//! stdio (MCP `basic/transports` §stdio).

use std::time::Duration;

/// The longest upstream name.
pub const MAX_NAME_LEN: usize = 20;
/// The separator between an upstream's name and its tool's name in the catalog.
pub const SEPARATOR: &str = "__";
/// The longest tool name Gatehouse publishes (what every client, `OpenAI`'s function names
/// included, accepts).
pub const MAX_TOOL_NAME_LEN: usize = 64;
/// The per-call timeout when `--timeout` is not given.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest per-call timeout accepted.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// Calls in flight per upstream and instance when `--max-concurrency` is not given.
pub const DEFAULT_MAX_CONCURRENCY: u32 = 16;
/// The most calls in flight per upstream and instance accepted.
pub const MAX_CONCURRENCY: u32 = 1024;
/// The longest tool description accepted from an upstream, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 2048;
/// The largest input or output schema accepted from an upstream, in bytes of JSON.
pub const MAX_SCHEMA_BYTES: usize = 16 * 1024;
/// The most tools one upstream may list; beyond, the upstream is left out whole.
pub const MAX_TOOLS: usize = 200;
/// The most headers one upstream may be given.
pub const MAX_HEADERS: usize = 32;
/// The most `--env` variables one stdio upstream may be given.
pub const MAX_ENV: usize = 64;

/// Why a value given for an upstream was refused; the text is one line for the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UpstreamInputError(pub String);

fn refuse<T>(message: impl Into<String>) -> Result<T, UpstreamInputError> {
    Err(UpstreamInputError(message.into()))
}

/// An upstream's name: `[a-z0-9-]{1,20}`, the prefix of its tools' names in the catalog.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UpstreamName(String);

impl UpstreamName {
    /// Parses a name.
    ///
    /// Errors: empty, longer than [`MAX_NAME_LEN`], or a character outside `[a-z0-9-]`.
    pub fn parse(text: &str) -> Result<UpstreamName, UpstreamInputError> {
        if text.is_empty() || text.len() > MAX_NAME_LEN {
            return refuse(format!(
                "invalid upstream name \"{}\": 1 to {MAX_NAME_LEN} characters of a-z, 0-9 and -",
                text.escape_debug()
            ));
        }
        if !text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return refuse(format!(
                "invalid upstream name \"{}\": use only a-z, 0-9 and -",
                text.escape_debug()
            ));
        }
        Ok(UpstreamName(text.to_string()))
    }

    /// Parses an operator's name ([`UpstreamName::parse`]) or a person's own upstream's name
    /// ([`UpstreamName::personal`]): what the registry and the catalog accept.
    ///
    /// Errors: neither shape.
    pub fn parse_any(text: &str) -> Result<UpstreamName, UpstreamInputError> {
        if is_personal_name(text) {
            return Ok(UpstreamName(text.to_string()));
        }
        UpstreamName::parse(text)
    }

    /// The name of a person's own upstream: `p_LABEL_SUFFIX`, `label` a checked
    /// [`parse_personal_label`] and `suffix` [`PERSONAL_SUFFIX_LEN`] lowercase hex digits
    /// (random, so that two people's labels never meet). The underscores keep it apart from
    /// every operator name (`[a-z0-9-]`) and built-in tool (no `__`).
    pub fn personal(label: &str, suffix: &str) -> Option<UpstreamName> {
        let name = format!("{PERSONAL_PREFIX}{label}_{suffix}");
        is_personal_name(&name).then_some(UpstreamName(name))
    }

    /// Whether this is a person's own upstream's name.
    pub fn is_personal(&self) -> bool {
        is_personal_name(&self.0)
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The start of every personal upstream's name (and so of its tools' names).
pub const PERSONAL_PREFIX: &str = "p_";
/// The longest label a person gives their own upstream.
pub const MAX_PERSONAL_LABEL_LEN: usize = 16;
/// The hex digits that end a personal upstream's name.
pub const PERSONAL_SUFFIX_LEN: usize = 6;
/// The most upstreams of their own one account may keep.
pub const MAX_PERSONAL_UPSTREAMS: usize = 10;
/// Calls in flight per personal upstream and instance.
pub const PERSONAL_MAX_CONCURRENCY: u32 = 4;
/// The per-call timeout of a personal upstream.
pub const PERSONAL_TIMEOUT: Duration = Duration::from_secs(30);

/// Parses the label a person gives their own upstream: `[a-z0-9-]{1,16}`.
///
/// Errors: anything else, in one sentence for the page.
pub fn parse_personal_label(text: &str) -> Result<String, UpstreamInputError> {
    let text = text.trim();
    if text.is_empty()
        || text.len() > MAX_PERSONAL_LABEL_LEN
        || !text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return refuse(format!(
            "The name must be 1 to {MAX_PERSONAL_LABEL_LEN} characters of a-z, 0-9 and -."
        ));
    }
    Ok(text.to_string())
}

/// Whether `text` is `p_LABEL_SUFFIX` ([`UpstreamName::personal`]).
fn is_personal_name(text: &str) -> bool {
    let Some(rest) = text.strip_prefix(PERSONAL_PREFIX) else {
        return false;
    };
    let Some((label, suffix)) = rest.rsplit_once('_') else {
        return false;
    };
    parse_personal_label(label).is_ok_and(|l| l == label)
        && suffix.len() == PERSONAL_SUFFIX_LEN
        && suffix
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl std::fmt::Display for UpstreamName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses an upstream's Streamable HTTP endpoint: an absolute `http` or `https` URL with a
/// host, no user name or password (an upstream's credential goes in `--header`, sealed at
/// rest) and no fragment. Returns it as given, normalised by the URL parser.
///
/// Errors: anything else, in one line.
pub fn parse_url(text: &str) -> Result<url::Url, UpstreamInputError> {
    let url = match url::Url::parse(text) {
        Ok(url) => url,
        Err(e) => {
            return refuse(format!(
                "invalid upstream URL \"{}\": {e}",
                text.escape_debug()
            ));
        }
    };
    if !matches!(url.scheme(), "http" | "https") {
        return refuse(format!(
            "invalid upstream URL \"{}\": use http:// or https://",
            text.escape_debug()
        ));
    }
    // The URL parser is lenient with http(s) (WHATWG URL): `http:///mcp`, `http:mcp` and
    // `http:\\mcp` all read as the host `mcp`. Only a URL written `SCHEME://HOST…` is taken,
    // so that a missing host is refused rather than taken from the path.
    let written_host = text.trim().split_once("://").is_some_and(|(scheme, rest)| {
        scheme.eq_ignore_ascii_case(url.scheme())
            && !rest.is_empty()
            && !rest.starts_with(['/', '\\'])
    });
    if !written_host || url.host_str().is_none_or(str::is_empty) {
        return refuse(format!(
            "invalid upstream URL \"{}\": it has no host (write http://HOST/… or https://HOST/…)",
            text.escape_debug()
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return refuse(
            "invalid upstream URL: no user or password in the URL; give the upstream's credential with --header 'Authorization: …'",
        );
    }
    if url.fragment().is_some() {
        return refuse(format!(
            "invalid upstream URL \"{}\": no #fragment",
            text.escape_debug()
        ));
    }
    Ok(url)
}

/// Headers the transport sets itself, which `--header` may not replace.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "accept",
    "connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-connection",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// One `--header 'Name: value'`: the name a valid HTTP field name (RFC 9110 §5.1) that the
/// transport does not set itself, the value a valid, non-empty field value (§5.5). The value is
/// a secret (an upstream's API key): it is sealed at rest and never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct HeaderPair {
    /// The field name, lowercased.
    pub name: String,
    /// The field value, surrounding whitespace removed.
    pub value: String,
}

impl std::fmt::Debug for HeaderPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeaderPair")
            .field("name", &self.name)
            .field("value", &"[redacted]")
            .finish()
    }
}

impl HeaderPair {
    /// Parses `Name: value`.
    ///
    /// Errors: no colon, an invalid or reserved name, an empty or invalid value; the message
    /// never repeats the value.
    pub fn parse(text: &str) -> Result<HeaderPair, UpstreamInputError> {
        let Some((name, value)) = text.split_once(':') else {
            return refuse("invalid --header: write it as 'Name: value'");
        };
        let name = name.trim();
        let value = value.trim();
        let Ok(parsed) = http::HeaderName::from_bytes(name.as_bytes()) else {
            return refuse(format!("invalid --header name \"{}\"", name.escape_debug()));
        };
        let name = parsed.as_str().to_string();
        if RESERVED_HEADERS.contains(&name.as_str()) {
            return refuse(format!(
                "--header {name}: set by Gatehouse itself, it cannot be configured"
            ));
        }
        if value.is_empty() || http::HeaderValue::from_str(value).is_err() {
            return refuse(format!(
                "invalid --header {name}: the value must be non-empty visible text"
            ));
        }
        Ok(HeaderPair {
            name,
            value: value.to_string(),
        })
    }
}

/// Parses every `--header`, refusing more than [`MAX_HEADERS`] or one name twice.
pub fn parse_headers(texts: &[String]) -> Result<Vec<HeaderPair>, UpstreamInputError> {
    if texts.len() > MAX_HEADERS {
        return refuse(format!("at most {MAX_HEADERS} --header"));
    }
    let mut headers: Vec<HeaderPair> = Vec::with_capacity(texts.len());
    for text in texts {
        let header = HeaderPair::parse(text)?;
        if headers.iter().any(|h| h.name == header.name) {
            return refuse(format!("--header {} given twice", header.name));
        }
        headers.push(header);
    }
    Ok(headers)
}

/// One `--env K=V` of a stdio upstream: `K` is `[A-Za-z_][A-Za-z0-9_]*`. The value may be a
/// secret: it is sealed at rest and never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct EnvPair {
    /// The variable's name.
    pub name: String,
    /// Its value.
    pub value: String,
}

impl std::fmt::Debug for EnvPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvPair")
            .field("name", &self.name)
            .field("value", &"[redacted]")
            .finish()
    }
}

/// Parses every `--env K=V`, refusing more than [`MAX_ENV`], a bad name, a NUL byte, or one
/// name twice.
pub fn parse_env(texts: &[String]) -> Result<Vec<EnvPair>, UpstreamInputError> {
    if texts.len() > MAX_ENV {
        return refuse(format!("at most {MAX_ENV} --env"));
    }
    let mut pairs: Vec<EnvPair> = Vec::with_capacity(texts.len());
    for text in texts {
        let Some((name, value)) = text.split_once('=') else {
            return refuse("invalid --env: write it as NAME=value");
        };
        let mut bytes = name.bytes();
        let good_name = bytes
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !good_name {
            return refuse(format!(
                "invalid --env name \"{}\": use A-Z, a-z, 0-9 and _, not starting with a digit",
                name.escape_debug()
            ));
        }
        if value.contains('\0') {
            return refuse(format!("invalid --env {name}: the value has a NUL byte"));
        }
        if pairs.iter().any(|p| p.name == name) {
            return refuse(format!("--env {name} given twice"));
        }
        pairs.push(EnvPair {
            name: name.to_string(),
            value: value.to_string(),
        });
    }
    Ok(pairs)
}

/// Splits `--command 'PROGRAM ARGS…'` as a POSIX shell would split words (quotes and
/// backslashes; no expansion, no pipes: nothing is run through a shell).
///
/// Errors: empty, unbalanced quotes, a NUL byte, or a word holding a line break (a quoted
/// newline: the command is shown as one line, by `upstream list` among others, and
/// [`command_line`] could not give it back as one; a line break between words only
/// separates them).
pub fn parse_command(text: &str) -> Result<Vec<String>, UpstreamInputError> {
    if text.contains('\0') {
        return refuse("invalid --command: it has a NUL byte");
    }
    match shlex::split(text) {
        Some(words) if words.iter().any(|w| w.contains(['\n', '\r'])) => {
            refuse("invalid --command: a word holds a line break; give the command on one line")
        }
        Some(words) if !words.is_empty() && !words[0].is_empty() => Ok(words),
        Some(_) => refuse("invalid --command: name the program to run"),
        None => refuse("invalid --command: unbalanced quotes"),
    }
}

/// The words of a stdio upstream's command as one line that [`parse_command`] reads back to
/// the same words: each word quoted the way a POSIX shell needs (`'my server.js'`), so that what
/// `upstream list` and the console show can be pasted into `--command` again.
pub fn command_line(words: &[String]) -> String {
    // Quoting fails only for a NUL byte, which `parse_command` never lets in.
    shlex::try_join(words.iter().map(String::as_str)).unwrap_or_else(|_| words.join(" "))
}

/// Parses `--timeout`: a whole number with the unit `ms`, `s` or `m` (e.g. `30s`, `1500ms`,
/// `2m`), from 1 s to [`MAX_TIMEOUT`].
///
/// Errors: another shape or a value out of range.
pub fn parse_timeout(text: &str) -> Result<Duration, UpstreamInputError> {
    let bad = || {
        UpstreamInputError(format!(
            "invalid --timeout \"{}\": a whole number of ms, s or m from 1s to {}s, e.g. 30s",
            text.escape_debug(),
            MAX_TIMEOUT.as_secs()
        ))
    };
    let (digits, unit_ms) = if let Some(d) = text.strip_suffix("ms") {
        (d, 1u64)
    } else if let Some(d) = text.strip_suffix('s') {
        (d, 1000)
    } else if let Some(d) = text.strip_suffix('m') {
        (d, 60_000)
    } else {
        return Err(bad());
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let ms = digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit_ms))
        .ok_or_else(bad)?;
    let timeout = Duration::from_millis(ms);
    if timeout < Duration::from_secs(1) || timeout > MAX_TIMEOUT {
        return Err(bad());
    }
    Ok(timeout)
}

/// Checks `--max-concurrency`: 1 to [`MAX_CONCURRENCY`].
pub fn check_max_concurrency(n: u32) -> Result<u32, UpstreamInputError> {
    if n == 0 || n > MAX_CONCURRENCY {
        return refuse(format!(
            "invalid --max-concurrency {n}: from 1 to {MAX_CONCURRENCY}"
        ));
    }
    Ok(n)
}

/// What the sealed header and environment values are bound to (the server key's associated
/// data), so a value sealed for one upstream or purpose does not open for another.
pub fn seal_context(name: &UpstreamName, what: &str) -> Vec<u8> {
    format!("upstream\0{}\0{what}", name.as_str()).into_bytes()
}

/// The name an upstream's tool has in Gatehouse's catalog: `NAME__TOOL`, when that is only
/// `[A-Za-z0-9_-]` and at most [`MAX_TOOL_NAME_LEN`] characters; `None` otherwise (the tool is
/// refused and logged, never renamed silently into a name another tool may have).
pub fn namespaced_tool(upstream: &UpstreamName, tool: &str) -> Option<String> {
    let full = format!("{}{SEPARATOR}{tool}", upstream.as_str());
    let ok = !tool.is_empty()
        && full.len() <= MAX_TOOL_NAME_LEN
        && tool
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    ok.then_some(full)
}

/// Whether a tool with these annotations may destroy data (MCP `server/tools` §Tool
/// annotations: `destructiveHint` defaults to `true` and means something only when
/// `readOnlyHint` is not `true`; a tool without annotations is possibly destructive).
pub fn is_destructive(read_only: Option<bool>, destructive: Option<bool>) -> bool {
    read_only != Some(true) && destructive != Some(false)
}

/// The prefix of an upstream's resource URIs in Gatehouse's catalog; the upstream's name and
/// `/` follow, then the upstream's own URI.
pub const RESOURCE_URI_PREFIX: &str = "gatehouse://upstreams/";

/// The URI (or URI template) an upstream's resource has in Gatehouse's catalog:
/// `gatehouse://upstreams/NAME/` followed by the upstream's own URI, unchanged.
pub fn namespaced_uri(upstream: &UpstreamName, uri: &str) -> String {
    format!("{RESOURCE_URI_PREFIX}{}/{uri}", upstream.as_str())
}

/// Splits a catalog resource URI into the upstream's name and the upstream's own URI, if it
/// has the [`namespaced_uri`] shape.
pub fn split_uri(uri: &str) -> Option<(UpstreamName, &str)> {
    let rest = uri.strip_prefix(RESOURCE_URI_PREFIX)?;
    let (upstream, own) = rest.split_once('/')?;
    let upstream = UpstreamName::parse_any(upstream).ok()?;
    (!own.is_empty()).then_some((upstream, own))
}

/// Splits a catalog name into the upstream's name and its tool's name, if it has the
/// `NAME__TOOL` shape with a valid upstream name.
pub fn split_namespaced(name: &str) -> Option<(UpstreamName, &str)> {
    let (upstream, tool) = name.split_once(SEPARATOR)?;
    let upstream = UpstreamName::parse_any(upstream).ok()?;
    (!tool.is_empty()).then_some((upstream, tool))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn personal_names_never_meet_operator_names() {
        let name = UpstreamName::personal("my-tools", "0a1b2c").unwrap();
        assert_eq!(name.as_str(), "p_my-tools_0a1b2c");
        assert!(name.is_personal());
        assert!(
            UpstreamName::parse(name.as_str()).is_err(),
            "never an operator's name"
        );
        assert_eq!(UpstreamName::parse_any(name.as_str()).unwrap(), name);
        assert!(!UpstreamName::parse_any("everything").unwrap().is_personal());
        for bad in [
            "p_my_tools_0a1b2c",
            "p_my-tools_0A1B2C",
            "p__0a1b2c",
            "p_x_0a1b2",
            "p_abcdefghijklmnopq_0a1b2c",
        ] {
            assert!(UpstreamName::parse_any(bad).is_err(), "{bad}");
        }
        let tool = namespaced_tool(&name, "search").unwrap();
        assert_eq!(tool, "p_my-tools_0a1b2c__search");
        let (back, own) = split_namespaced(&tool).unwrap();
        assert_eq!((back, own), (name, "search"));
        assert!(parse_personal_label("UPPER").is_err());
        assert_eq!(parse_personal_label(" notes ").unwrap(), "notes");
    }

    #[test]
    fn names_are_short_lowercase_words() {
        for good in ["a", "everything", "my-server-2", "a1234567890123456789"] {
            assert_eq!(UpstreamName::parse(good).unwrap().as_str(), good);
        }
        for bad in [
            "",
            "Upper",
            "with_underscore",
            "a b",
            "a12345678901234567890",
            "é",
        ] {
            assert!(UpstreamName::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn urls_are_http_with_a_host_and_no_credentials() {
        assert_eq!(
            parse_url("https://mcp.example.com/mcp").unwrap().as_str(),
            "https://mcp.example.com/mcp"
        );
        assert!(parse_url("http://127.0.0.1:3001/mcp").is_ok());
        for bad in [
            "mcp.example.com",
            "ftp://x/y",
            "https://user:pw@x/mcp",
            "https://x/mcp#frag",
            "file:///etc/passwd",
            "http:///mcp",
            "http:mcp/x",
            "http:\\\\mcp\\x",
            "https:////mcp",
        ] {
            let e = parse_url(bad).unwrap_err();
            assert!(!e.0.contains('\n'), "{e}");
        }
        assert!(parse_url("http:///mcp").unwrap_err().0.contains("no host"));
        assert!(parse_url("HTTP://Example.com/mcp").is_ok());
        assert!(
            !parse_url("https://user:pw@x/mcp")
                .unwrap_err()
                .0
                .contains("pw")
        );
    }

    #[test]
    fn headers_are_parsed_and_their_values_never_shown() {
        let h = HeaderPair::parse("Authorization: Bearer s3cret").unwrap();
        assert_eq!(h.name, "authorization");
        assert_eq!(h.value, "Bearer s3cret");
        assert!(!format!("{h:?}").contains("s3cret"));
        assert!(HeaderPair::parse("no colon").is_err());
        assert!(HeaderPair::parse("Bad Name: v").is_err());
        assert!(HeaderPair::parse("X-Key:   ").is_err());
        let e = HeaderPair::parse("Mcp-Session-Id: abc").unwrap_err();
        assert!(e.0.contains("mcp-session-id"), "{e}");
        let e = parse_headers(&["X-A: 1".into(), "x-a: 2".into()]).unwrap_err();
        assert!(e.0.contains("twice"), "{e}");
        let e = HeaderPair::parse("X-Key: s3cret\u{7f}").unwrap_err();
        assert!(!e.0.contains("s3cret"), "{e}");
    }

    #[test]
    fn a_command_is_shown_as_a_line_that_reads_back_to_the_same_words() {
        let words = parse_command(r#"node '/srv/my server.js' --name "it's" "" plain"#).unwrap();
        assert_eq!(
            words,
            ["node", "/srv/my server.js", "--name", "it's", "", "plain"]
        );
        let line = command_line(&words);
        assert_eq!(
            line, r#"node '/srv/my server.js' --name "it's" '' plain"#,
            "quoted as a POSIX shell needs"
        );
        assert_eq!(parse_command(&line).unwrap(), words);
        let plain = parse_command("npx -y @modelcontextprotocol/server-memory").unwrap();
        assert_eq!(
            command_line(&plain),
            "npx -y @modelcontextprotocol/server-memory"
        );
    }

    #[test]
    fn env_commands_and_limits() {
        let env = parse_env(&["API_KEY=a=b".into(), "_X=".into()]).unwrap();
        assert_eq!(env[0].name, "API_KEY");
        assert_eq!(env[0].value, "a=b");
        assert!(!format!("{env:?}").contains("a=b"));
        assert!(parse_env(&["1X=y".into()]).is_err());
        assert!(parse_env(&["novalue".into()]).is_err());
        assert_eq!(
            parse_command("npx -y '@modelcontextprotocol/server-memory'").unwrap(),
            ["npx", "-y", "@modelcontextprotocol/server-memory"]
        );
        assert!(parse_command("  ").is_err());
        assert!(parse_command("npx 'open").is_err());
        // A line break inside a word is refused; between words it only separates them.
        for quoted in ["node 'a\nb'", "node \"a\r\nb\"", "node a'\r'b"] {
            let error = parse_command(quoted).unwrap_err().0;
            assert_eq!(
                error, "invalid --command: a word holds a line break; give the command on one line",
                "{quoted:?}"
            );
        }
        assert_eq!(
            parse_command("node\nserver.js").unwrap(),
            ["node", "server.js"]
        );
        assert_eq!(parse_timeout("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(
            parse_timeout("1500ms").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(parse_timeout("2m").unwrap(), Duration::from_secs(120));
        for bad in ["", "30", "0s", "999ms", "11m", "-1s", "1.5s", "s"] {
            assert!(parse_timeout(bad).is_err(), "{bad}");
        }
        assert!(check_max_concurrency(0).is_err());
        assert!(check_max_concurrency(1025).is_err());
        assert_eq!(check_max_concurrency(16).unwrap(), 16);
    }

    #[test]
    fn tools_are_destructive_unless_read_only_or_said_otherwise() {
        assert!(is_destructive(None, None));
        assert!(is_destructive(Some(false), None));
        assert!(is_destructive(Some(false), Some(true)));
        assert!(!is_destructive(Some(false), Some(false)));
        assert!(!is_destructive(Some(true), None));
        assert!(!is_destructive(Some(true), Some(true)));
    }

    #[test]
    fn tools_are_namespaced_within_64_safe_characters() {
        let up = UpstreamName::parse("everything").unwrap();
        assert_eq!(namespaced_tool(&up, "echo").unwrap(), "everything__echo");
        assert_eq!(namespaced_tool(&up, "get.env"), None);
        assert_eq!(namespaced_tool(&up, "ech\u{200b}o"), None);
        assert_eq!(namespaced_tool(&up, ""), None);
        // 10 + 2 + 52 = 64 characters.
        assert_eq!(namespaced_tool(&up, &"x".repeat(53)), None);
        assert!(namespaced_tool(&up, &"x".repeat(52)).is_some());
        let (u, t) = split_namespaced("everything__get_env__x").unwrap();
        assert_eq!((u.as_str(), t), ("everything", "get_env__x"));
        assert!(split_namespaced("list_projects").is_none());
        assert!(split_namespaced("Bad__x").is_none());
    }

    #[test]
    fn resource_uris_name_the_upstream_and_come_back_unchanged() {
        let up = UpstreamName::parse("memo").unwrap();
        let uri = namespaced_uri(&up, "memo://notes/first?x=1");
        assert_eq!(uri, "gatehouse://upstreams/memo/memo://notes/first?x=1");
        let (u, own) = split_uri(&uri).unwrap();
        assert_eq!((u.as_str(), own), ("memo", "memo://notes/first?x=1"));
        assert!(split_uri("gatehouse://upstreams/memo/").is_none());
        assert!(split_uri("gatehouse://upstreams/Memo/x").is_none());
        assert!(split_uri("gatehouse://projects/p1").is_none());
    }
}
