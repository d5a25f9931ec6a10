//! The variables of the MCP surface's identity, the audit's retention and the events sent out:
//! `GATEHOUSE_SERVER_NAME`, `GATEHOUSE_SERVER_TITLE`, `GATEHOUSE_AUDIT_RETENTION_DAYS`,
//! `GATEHOUSE_EVENTS_URL` and `GATEHOUSE_EVENTS_TOKEN`.

use std::collections::HashMap;

use url::Url;

use super::{ConfigError, parse_http_url, parse_int};

/// Default of `GATEHOUSE_SERVER_NAME`.
pub const DEFAULT_SERVER_NAME: &str = "gatehouse";
/// Default of `GATEHOUSE_SERVER_TITLE`.
pub const DEFAULT_SERVER_TITLE: &str = "Gatehouse";
/// Default of `GATEHOUSE_AUDIT_RETENTION_DAYS`.
pub const DEFAULT_AUDIT_RETENTION_DAYS: i64 = 90;

/// What the MCP surface calls itself, how long the audit is kept and where events go.
#[derive(Clone)]
pub struct SurfaceConfig {
    /// `GATEHOUSE_SERVER_NAME`: `serverInfo.name` (MCP `basic/lifecycle` §Initialization,
    /// `Implementation.name`): 1 to 64 characters of letters, digits, `-`, `_`, `.`, `/`, `@`.
    pub server_name: String,
    /// `GATEHOUSE_SERVER_TITLE`: `serverInfo.title`, shown to people: 1 to 100 characters
    /// without control or bidirectional formatting characters.
    pub server_title: String,
    /// `GATEHOUSE_AUDIT_RETENTION_DAYS`: audit rows older than this many days are deleted by
    /// the upkeep task (1 to 36500; 0 keeps them for ever).
    pub audit_retention_days: i64,
    /// `GATEHOUSE_EVENTS_URL`: where audit events are posted as NDJSON batches; `None`: no
    /// events are sent.
    pub events_url: Option<Url>,
    /// `GATEHOUSE_EVENTS_TOKEN`: sent as `Authorization: Bearer` with every batch, if set.
    pub events_token: Option<String>,
}

impl std::fmt::Debug for SurfaceConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SurfaceConfig")
            .field("server_name", &self.server_name)
            .field("server_title", &self.server_title)
            .field("audit_retention_days", &self.audit_retention_days)
            .field("events_url", &self.events_url.as_ref().map(Url::as_str))
            .field("events_token", &self.events_token.as_ref().map(|_| "…"))
            .finish()
    }
}

impl SurfaceConfig {
    /// Reads the variables from `vars` (missing or empty = default).
    ///
    /// Errors: one [`ConfigError`] naming the first bad variable.
    pub fn from_vars(vars: &HashMap<String, String>) -> Result<SurfaceConfig, ConfigError> {
        let get = |name: &str| vars.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
        let server_name = get("GATEHOUSE_SERVER_NAME").unwrap_or(DEFAULT_SERVER_NAME);
        let name_ok = server_name.chars().count() <= 64
            && server_name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./@".contains(c));
        if !name_ok {
            return Err(ConfigError::new(
                "GATEHOUSE_SERVER_NAME",
                format!(
                    "must be 1 to 64 letters, digits or - _ . / @ (got \"{}\")",
                    server_name.escape_debug()
                ),
            ));
        }
        let server_title = get("GATEHOUSE_SERVER_TITLE").unwrap_or(DEFAULT_SERVER_TITLE);
        if server_title.chars().count() > 100
            || crate::domain::text::forbidden_char(server_title, false).is_some()
        {
            return Err(ConfigError::new(
                "GATEHOUSE_SERVER_TITLE",
                "must be 1 to 100 characters without control or formatting characters",
            ));
        }
        let audit_retention_days = parse_int(
            "GATEHOUSE_AUDIT_RETENTION_DAYS",
            get("GATEHOUSE_AUDIT_RETENTION_DAYS"),
            DEFAULT_AUDIT_RETENTION_DAYS,
            (0, 36_500),
        )?;
        let events_url = match get("GATEHOUSE_EVENTS_URL") {
            None => None,
            Some(raw) => Some(parse_http_url("GATEHOUSE_EVENTS_URL", raw)?),
        };
        let events_token = get("GATEHOUSE_EVENTS_TOKEN").map(str::to_string);
        if events_token.is_some() && events_url.is_none() {
            return Err(ConfigError::new(
                "GATEHOUSE_EVENTS_TOKEN",
                "is set but GATEHOUSE_EVENTS_URL is not",
            ));
        }
        Ok(SurfaceConfig {
            server_name: server_name.to_string(),
            server_title: server_title.to_string(),
            audit_retention_days,
            events_url,
            events_token,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_and_bad_values() {
        let c = SurfaceConfig::from_vars(&HashMap::new()).unwrap();
        assert_eq!(c.server_name, "gatehouse");
        assert_eq!(c.server_title, "Gatehouse");
        assert_eq!(c.audit_retention_days, 90);
        assert!(c.events_url.is_none());
        let c = SurfaceConfig::from_vars(&vars(&[
            ("GATEHOUSE_SERVER_NAME", "acme-notes"),
            ("GATEHOUSE_SERVER_TITLE", "Acme Notes"),
            ("GATEHOUSE_AUDIT_RETENTION_DAYS", "0"),
            ("GATEHOUSE_EVENTS_URL", "https://events.example.com/in"),
            ("GATEHOUSE_EVENTS_TOKEN", "s3cret"),
        ]))
        .unwrap();
        assert_eq!(c.server_name, "acme-notes");
        assert_eq!(c.audit_retention_days, 0);
        assert!(!format!("{c:?}").contains("s3cret"));
        for (variable, value) in [
            ("GATEHOUSE_SERVER_NAME", "has space"),
            ("GATEHOUSE_SERVER_TITLE", "bad\u{202e}title"),
            ("GATEHOUSE_AUDIT_RETENTION_DAYS", "-1"),
            ("GATEHOUSE_EVENTS_URL", "ftp://x"),
            ("GATEHOUSE_EVENTS_TOKEN", "alone"),
        ] {
            let e = SurfaceConfig::from_vars(&vars(&[(variable, value)])).unwrap_err();
            assert_eq!(e.variable, variable, "{e}");
        }
    }
}
