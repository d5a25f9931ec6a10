//! Parsing a `WWW-Authenticate` value the way an MCP client reads it: the `Bearer` challenge
//! and its auth-params (RFC 9110 §11.6.1, RFC 6750 §3), in particular `resource_metadata`
//! (RFC 9728 §5.1) and `scope` (RFC 6750 §3; MCP 2025-11-25 §Scope Selection Strategy).

/// The `Bearer` challenge of a `WWW-Authenticate` value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BearerChallenge {
    /// `resource_metadata`: where the protected-resource metadata is (RFC 9728 §5.1).
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes the client should ask for (RFC 6750 §3).
    pub scope: Option<String>,
    /// `error`, when a token was sent (RFC 6750 §3.1).
    pub error: Option<String>,
    /// Every auth-param, names lowercased, in order.
    pub params: Vec<(String, String)>,
}

/// Why a `WWW-Authenticate` value could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChallengeError {
    /// No challenge with the `Bearer` scheme.
    #[error("no Bearer challenge")]
    NoBearer,
    /// The auth-params do not follow RFC 9110 §11.2 (`name=token` or `name="quoted"`).
    #[error("malformed auth-param at byte {0}")]
    Malformed(usize),
    /// A parameter appears twice (RFC 9110 §11.2: each at most once).
    #[error("parameter {0} appears more than once")]
    Duplicate(String),
}

/// Finds the `Bearer` challenge in `value` (which may hold several challenges, comma-separated)
/// and reads its auth-params. The scheme is matched case-insensitively (RFC 9110 §11.1).
pub fn parse_bearer(value: &str) -> Result<BearerChallenge, ChallengeError> {
    let bytes = value.as_bytes();
    let mut i = 0;
    // Walk challenges: a scheme token, then auth-params until the next scheme.
    loop {
        i = skip(bytes, i, |b| b == b' ' || b == b'\t' || b == b',');
        if i >= bytes.len() {
            return Err(ChallengeError::NoBearer);
        }
        let start = i;
        i = skip(bytes, i, is_tchar);
        if i == start {
            return Err(ChallengeError::Malformed(i));
        }
        let scheme = &value[start..i];
        let (params, next) = read_params(value, i)?;
        if scheme.eq_ignore_ascii_case("bearer") {
            let mut challenge = BearerChallenge::default();
            for (name, v) in &params {
                if challenge.params.iter().any(|(n, _)| n == name) {
                    return Err(ChallengeError::Duplicate(name.clone()));
                }
                match name.as_str() {
                    "resource_metadata" => challenge.resource_metadata = Some(v.clone()),
                    "scope" => challenge.scope = Some(v.clone()),
                    "error" => challenge.error = Some(v.clone()),
                    _ => {}
                }
                challenge.params.push((name.clone(), v.clone()));
            }
            return Ok(challenge);
        }
        i = next;
    }
}

fn skip(bytes: &[u8], mut i: usize, pred: impl Fn(u8) -> bool) -> usize {
    while i < bytes.len() && pred(bytes[i]) {
        i += 1;
    }
    i
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Reads `name=value` pairs from `i` (after a scheme) until the next scheme or the end.
/// Returns the pairs and where the next challenge starts.
fn read_params(
    value: &str,
    mut i: usize,
) -> Result<(Vec<(String, String)>, usize), ChallengeError> {
    let bytes = value.as_bytes();
    let mut params = Vec::new();
    loop {
        i = skip(bytes, i, |b| b == b' ' || b == b'\t' || b == b',');
        if i >= bytes.len() {
            return Ok((params, i));
        }
        let start = i;
        i = skip(bytes, i, is_tchar);
        let name_end = i;
        let after_ws = skip(bytes, i, |b| b == b' ' || b == b'\t');
        if name_end == start {
            return Err(ChallengeError::Malformed(i));
        }
        if after_ws >= bytes.len() || bytes[after_ws] != b'=' {
            // Not a parameter: the next challenge's scheme starts here.
            return Ok((params, start));
        }
        let name = value[start..name_end].to_ascii_lowercase();
        i = skip(bytes, after_ws + 1, |b| b == b' ' || b == b'\t');
        if i < bytes.len() && bytes[i] == b'"' {
            i += 1;
            let mut v = String::new();
            let mut closed = false;
            while i < bytes.len() {
                match bytes[i] {
                    b'\\' if i + 1 < bytes.len() => {
                        // quoted-pair: the next character, whatever its UTF-8 length.
                        let ch = value[i + 1..].chars().next().unwrap_or('\u{fffd}');
                        v.push(ch);
                        i += 1 + ch.len_utf8();
                    }
                    b'"' => {
                        i += 1;
                        closed = true;
                        break;
                    }
                    _ => {
                        // Push the whole UTF-8 character.
                        let ch = value[i..].chars().next().unwrap_or('\u{fffd}');
                        v.push(ch);
                        i += ch.len_utf8().max(1);
                    }
                }
            }
            if !closed {
                return Err(ChallengeError::Malformed(i));
            }
            params.push((name, v));
        } else {
            let vstart = i;
            i = skip(bytes, i, is_tchar);
            if i == vstart {
                return Err(ChallengeError::Malformed(i));
            }
            params.push((name, value[vstart..i].to_string()));
        }
        let j = skip(bytes, i, |b| b == b' ' || b == b'\t');
        if j < bytes.len() && bytes[j] != b',' {
            return Err(ChallengeError::Malformed(j));
        }
        i = j;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_gatehouse_challenge() {
        let c = parse_bearer(
            r#"Bearer resource_metadata="http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp", scope="mcp:read mcp:write""#,
        )
        .unwrap();
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(c.scope.as_deref(), Some("mcp:read mcp:write"));
        assert_eq!(c.error, None);
    }

    #[test]
    fn finds_bearer_among_several_challenges_and_any_case() {
        let c = parse_bearer(
            r#"Basic realm="x", bearer error=invalid_token, Resource_Metadata="https://a/b""#,
        )
        .unwrap();
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(c.resource_metadata.as_deref(), Some("https://a/b"));
    }

    #[test]
    fn quoted_pairs_are_unescaped() {
        let c = parse_bearer(r#"Bearer scope="a \"b\"""#).unwrap();
        assert_eq!(c.scope.as_deref(), Some(r#"a "b""#));
    }

    #[test]
    fn broken_values_are_errors_not_panics() {
        assert_eq!(parse_bearer(""), Err(ChallengeError::NoBearer));
        assert_eq!(
            parse_bearer(r#"Basic realm="x""#),
            Err(ChallengeError::NoBearer)
        );
        assert!(parse_bearer(r#"Bearer scope="unterminated"#).is_err());
        assert!(matches!(
            parse_bearer(r#"Bearer scope="a", scope="b""#),
            Err(ChallengeError::Duplicate(_))
        ));
        for junk in [
            "Bearer =",
            "Bearer a=",
            "Bearer a=\"é",
            "Bearer a=\"\\é\"",
            "Bearer a=\"\\",
            "Bearer ,,, é",
            "\u{0}",
        ] {
            let _ = parse_bearer(junk);
        }
    }

    #[test]
    fn bare_bearer_has_no_params() {
        let c = parse_bearer("Bearer").unwrap();
        assert!(c.params.is_empty());
        assert_eq!(c.resource_metadata, None);
    }
}
