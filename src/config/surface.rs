//! The variables of the MCP surface's identity, the retention of audit rows and ended
//! credentials and the events sent out: `GATEHOUSE_SERVER_NAME`, `GATEHOUSE_SERVER_TITLE`,
//! `GATEHOUSE_AUDIT_RETENTION_DAYS`, `GATEHOUSE_AUDIT_RETENTION_SECONDS`,
//! `GATEHOUSE_CREDENTIAL_RETENTION_SECONDS`, `GATEHOUSE_UPKEEP_INTERVAL`,
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
/// Default of `GATEHOUSE_UPKEEP_INTERVAL`, in seconds: ten minutes.
pub const DEFAULT_UPKEEP_INTERVAL_SECS: i64 = 600;
/// Shortest `GATEHOUSE_AUDIT_RETENTION_SECONDS` and `GATEHOUSE_CREDENTIAL_RETENTION_SECONDS`,
/// in seconds.
pub const MIN_RETENTION_SECS: i64 = 10;
/// Longest `GATEHOUSE_AUDIT_RETENTION_SECONDS` and `GATEHOUSE_CREDENTIAL_RETENTION_SECONDS`,
/// in seconds: 100 years, as `GATEHOUSE_AUDIT_RETENTION_DAYS`.
pub const MAX_RETENTION_SECS: i64 = 36_500 * 86_400;

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
    /// `GATEHOUSE_AUDIT_RETENTION_SECONDS`: when set, audit rows older than this many seconds
    /// are deleted, in place of `GATEHOUSE_AUDIT_RETENTION_DAYS` (10 s to 100 years; for
    /// staging and soak runs, where days are too long to watch). `None`: the days apply.
    pub audit_retention_secs: Option<i64>,
    /// `GATEHOUSE_CREDENTIAL_RETENTION_SECONDS`: when set, how long ended credentials are kept
    /// before the upkeep task deletes them, in place of the built-in times (expired tokens and
    /// codes one day past their expiry, rotated refresh tokens and revoked families 30 days).
    /// A rotated refresh token presented after it is gone is refused as unknown rather than
    /// revoking its family as a replay (RFC 9700 §4.14.2), so a short value weakens replay
    /// detection. 10 s to 100 years; `None`: the built-in times.
    pub credential_retention_secs: Option<i64>,
    /// `GATEHOUSE_UPKEEP_INTERVAL`: seconds between two rounds of the upkeep task's pruning
    /// (1 to 86400, default 600); the first round runs a minute after start, or one interval
    /// when that is shorter.
    pub upkeep_interval_secs: i64,
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
            .field("audit_retention_secs", &self.audit_retention_secs)
            .field("credential_retention_secs", &self.credential_retention_secs)
            .field("upkeep_interval_secs", &self.upkeep_interval_secs)
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
        let seconds = |variable: &'static str| match get(variable) {
            None => Ok(None),
            Some(raw) => parse_int(
                variable,
                Some(raw),
                0,
                (MIN_RETENTION_SECS, MAX_RETENTION_SECS),
            )
            .map(Some),
        };
        let audit_retention_secs = seconds("GATEHOUSE_AUDIT_RETENTION_SECONDS")?;
        let credential_retention_secs = seconds("GATEHOUSE_CREDENTIAL_RETENTION_SECONDS")?;
        let upkeep_interval_secs = parse_int(
            "GATEHOUSE_UPKEEP_INTERVAL",
            get("GATEHOUSE_UPKEEP_INTERVAL"),
            DEFAULT_UPKEEP_INTERVAL_SECS,
            (1, 86_400),
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
            audit_retention_secs,
            credential_retention_secs,
            upkeep_interval_secs,
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
        assert_eq!(c.audit_retention_secs, None);
        assert_eq!(c.credential_retention_secs, None);
        assert_eq!(c.upkeep_interval_secs, 600);
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
        let c = SurfaceConfig::from_vars(&vars(&[
            ("GATEHOUSE_AUDIT_RETENTION_SECONDS", "120"),
            ("GATEHOUSE_CREDENTIAL_RETENTION_SECONDS", "30"),
            ("GATEHOUSE_UPKEEP_INTERVAL", "5"),
        ]))
        .unwrap();
        assert_eq!(c.audit_retention_secs, Some(120));
        assert_eq!(c.credential_retention_secs, Some(30));
        assert_eq!(c.upkeep_interval_secs, 5);
        for (variable, value) in [
            ("GATEHOUSE_SERVER_NAME", "has space"),
            ("GATEHOUSE_SERVER_TITLE", "bad\u{202e}title"),
            ("GATEHOUSE_AUDIT_RETENTION_DAYS", "-1"),
            ("GATEHOUSE_AUDIT_RETENTION_SECONDS", "9"),
            ("GATEHOUSE_AUDIT_RETENTION_SECONDS", "1d"),
            ("GATEHOUSE_CREDENTIAL_RETENTION_SECONDS", "0"),
            ("GATEHOUSE_UPKEEP_INTERVAL", "0"),
            ("GATEHOUSE_UPKEEP_INTERVAL", "86401"),
            ("GATEHOUSE_EVENTS_URL", "ftp://x"),
            ("GATEHOUSE_EVENTS_TOKEN", "alone"),
        ] {
            let e = SurfaceConfig::from_vars(&vars(&[(variable, value)])).unwrap_err();
            assert_eq!(e.variable, variable, "{e}");
        }
    }
}
