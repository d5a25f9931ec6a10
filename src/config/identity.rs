//! The variables of sign-in: `GATEHOUSE_SMTP_URL` and `GATEHOUSE_SMTP_FROM`, the mail server
//! that "Forgot your password?" sends reset links through ([`crate::mail`]), and
//! `GATEHOUSE_REQUIRE_2FA`.

use std::collections::HashMap;

use url::Url;

use super::ConfigError;

/// How people get back into their accounts.
#[derive(Clone, PartialEq, Eq)]
pub struct IdentityConfig {
    /// `GATEHOUSE_SMTP_URL`: the SMTP server reset links are mailed through, as `lettre`
    /// reads it: `smtp://[user:password@]host[:port]` (plain, or `?tls=required` for
    /// STARTTLS) or `smtps://…` (implicit TLS). `None`: no mail is sent and the sign-in page
    /// offers no "Forgot your password?" (the operator makes a link with
    /// `gatehouse account reset-link`).
    pub smtp_url: Option<String>,
    /// `GATEHOUSE_SMTP_FROM`: the `From` of the mails, a mailbox such as
    /// `Gatehouse <gatehouse@example.com>`. Default: `gatehouse@` the issuer's host.
    pub smtp_from: Option<String>,
    /// `GATEHOUSE_REQUIRE_2FA`: `on` makes every password sign-in need a second factor; a
    /// person without one enrols at the next sign-in. Default `off`.
    pub require_2fa: bool,
}

impl std::fmt::Debug for IdentityConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The SMTP URL may carry a password: only whether it is set is shown.
        f.debug_struct("IdentityConfig")
            .field("smtp_url", &self.smtp_url.as_ref().map(|_| "…"))
            .field("smtp_from", &self.smtp_from)
            .field("require_2fa", &self.require_2fa)
            .finish()
    }
}

impl IdentityConfig {
    /// Reads the variables from `vars` (missing or empty = default).
    ///
    /// Errors: one [`ConfigError`] naming the first bad variable: an SMTP URL that is not
    /// `smtp://` or `smtps://` with a host, a `From` that is not a mailbox, or a `From`
    /// without a URL.
    pub fn from_vars(vars: &HashMap<String, String>) -> Result<IdentityConfig, ConfigError> {
        let get = |name: &str| vars.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
        let smtp_url = match get("GATEHOUSE_SMTP_URL") {
            None => None,
            Some(raw) => {
                let url = Url::parse(raw).map_err(|_| {
                    ConfigError::new(
                        "GATEHOUSE_SMTP_URL",
                        "must be a URL such as smtp://mail.example.com:587?tls=required",
                    )
                })?;
                if !matches!(url.scheme(), "smtp" | "smtps")
                    || url.host_str().is_none_or(str::is_empty)
                {
                    return Err(ConfigError::new(
                        "GATEHOUSE_SMTP_URL",
                        "must be smtp://host[:port] or smtps://host[:port]",
                    ));
                }
                Some(raw.to_string())
            }
        };
        let smtp_from = match get("GATEHOUSE_SMTP_FROM") {
            None => None,
            Some(_) if smtp_url.is_none() => {
                return Err(ConfigError::new(
                    "GATEHOUSE_SMTP_FROM",
                    "is set but GATEHOUSE_SMTP_URL is not",
                ));
            }
            Some(raw) => {
                raw.parse::<lettre::message::Mailbox>().map_err(|_| {
                    ConfigError::new(
                        "GATEHOUSE_SMTP_FROM",
                        format!(
                            "must be a mailbox such as Gatehouse <gatehouse@example.com> (got \"{}\")",
                            raw.escape_debug()
                        ),
                    )
                })?;
                Some(raw.to_string())
            }
        };
        let require_2fa =
            super::switch("GATEHOUSE_REQUIRE_2FA", get("GATEHOUSE_REQUIRE_2FA"), false)?;
        Ok(IdentityConfig {
            smtp_url,
            smtp_from,
            require_2fa,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn smtp_settings_are_checked() {
        let c = IdentityConfig::from_vars(&vars(&[])).unwrap();
        assert_eq!(c.smtp_url, None);
        let c = IdentityConfig::from_vars(&vars(&[
            ("GATEHOUSE_SMTP_URL", "smtp://user:pw@127.0.0.1:2525"),
            ("GATEHOUSE_SMTP_FROM", "Gatehouse <gh@example.com>"),
        ]))
        .unwrap();
        assert_eq!(c.smtp_from.as_deref(), Some("Gatehouse <gh@example.com>"));
        assert!(
            !format!("{c:?}").contains("pw"),
            "the password is not shown"
        );
        for (k, v) in [
            ("GATEHOUSE_SMTP_URL", "http://mail.example.com"),
            ("GATEHOUSE_SMTP_URL", "not a url"),
            ("GATEHOUSE_SMTP_FROM", "someone@example.com"),
        ] {
            let e = IdentityConfig::from_vars(&vars(&[(k, v)])).unwrap_err();
            assert_eq!(e.variable, k);
        }
        let e = IdentityConfig::from_vars(&vars(&[
            ("GATEHOUSE_SMTP_URL", "smtp://127.0.0.1:25"),
            ("GATEHOUSE_SMTP_FROM", "not a mailbox"),
        ]))
        .unwrap_err();
        assert_eq!(e.variable, "GATEHOUSE_SMTP_FROM");
    }
}
