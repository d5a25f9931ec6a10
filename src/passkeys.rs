//! Passkeys (issue 36, item 2): `WebAuthn` Level 3 registration and discoverable sign-in, built
//! on `webauthn-rs`, which does every check of the ceremonies (challenge, origin, relying party
//! id hash, user presence and verification, signature, counter, backup flags).
//!
//! The relying party is the console: its id is the host of `FRONTEND_URL` (the issuer when
//! unset) and the only origin accepted is that URL's origin. A ceremony's state is kept in the
//! database (`webauthn_ceremonies`) for [`CEREMONY_LIFETIME_SECS`], so any instance can finish
//! a ceremony another began, and it is taken by the first answer, so a challenge is answered
//! at most once.

use webauthn_rs::prelude::{
    CreationChallengeResponse, PasskeyRegistration, RequestChallengeResponse, Url, Uuid, Webauthn,
    WebauthnBuilder,
};
use webauthn_rs_proto::ResidentKeyRequirement;

use crate::config::Config;

/// How long a ceremony may take from its options to its answer: 5 minutes, in seconds (also
/// the timeout the browser is given).
pub const CEREMONY_LIFETIME_SECS: i64 = 300;

/// The name a passkey gets when the person gives none.
pub const DEFAULT_NAME: &str = "Passkey";

/// Longest passkey name, in characters.
pub const MAX_NAME_CHARS: usize = 60;

/// The relying party of this server: id = the host of `FRONTEND_URL`, origin = its origin.
/// Errors (a message for the log) when the host cannot be a relying party id.
pub fn relying_party(config: &Config) -> Result<Webauthn, String> {
    let frontend = config.frontend_url.url();
    // A relying party id is a domain (WebAuthn Level 2 §5.1.3): an address cannot be one,
    // and is told apart here rather than by the builder, which logs every refusal as an error.
    let host = match frontend.host() {
        Some(url::Host::Domain(host)) => host,
        Some(_) => {
            return Err(format!(
                "FRONTEND_URL {frontend} is an address, not a domain"
            ));
        }
        None => return Err(format!("FRONTEND_URL {frontend} has no host")),
    };
    let origin = Url::parse(&frontend.origin().ascii_serialization())
        .map_err(|e| format!("FRONTEND_URL origin: {e}"))?;
    WebauthnBuilder::new(host, &origin)
        .and_then(|b| {
            b.rp_name("Gatehouse")
                .timeout(std::time::Duration::from_secs(
                    CEREMONY_LIFETIME_SECS as u64,
                ))
                .build()
        })
        .map_err(|e| format!("relying party {host}: {e}"))
}

/// The `WebAuthn` user handle of an account: its id, a UUID. `None` for an id that is not one.
pub fn user_handle(account_id: &str) -> Option<Uuid> {
    Uuid::parse_str(account_id).ok()
}

/// The options and state of a registration for the account (`email` shown by the
/// authenticator), excluding the credentials it already has. The options ask for a
/// discoverable credential (`residentKey: required`), so that it signs in without an email,
/// and user verification.
pub fn start_registration(
    rp: &Webauthn,
    user: Uuid,
    email: &str,
    existing: Vec<webauthn_rs::prelude::CredentialID>,
) -> Result<(CreationChallengeResponse, PasskeyRegistration), String> {
    let exclude = (!existing.is_empty()).then_some(existing);
    let (mut options, state) = rp
        .start_passkey_registration(user, email, email, exclude)
        .map_err(|e| e.to_string())?;
    if let Some(selection) = options.public_key.authenticator_selection.as_mut() {
        selection.resident_key = Some(ResidentKeyRequirement::Required);
        selection.require_resident_key = true;
    }
    Ok((options, state))
}

/// The options and state of a discoverable sign-in: no credential listed, the authenticator
/// offers the passkeys it holds for this relying party. Asked for with a button (modal), not
/// conditional mediation.
pub fn start_sign_in(
    rp: &Webauthn,
) -> Result<
    (
        RequestChallengeResponse,
        webauthn_rs::prelude::DiscoverableAuthentication,
    ),
    String,
> {
    let (mut options, state) = rp
        .start_discoverable_authentication()
        .map_err(|e| e.to_string())?;
    options.mediation = None;
    Ok((options, state))
}

/// A passkey name as given, cleaned: trimmed, control characters removed, at most
/// [`MAX_NAME_CHARS`]; [`DEFAULT_NAME`] when nothing is left.
pub fn clean_name(raw: &str) -> String {
    let name: String = raw
        .chars()
        .filter(|c| !c.is_control())
        .collect::<String>()
        .trim()
        .chars()
        .take(MAX_NAME_CHARS)
        .collect();
    if name.trim().is_empty() {
        DEFAULT_NAME.to_string()
    } else {
        name.trim().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_trimmed_cut_and_never_empty() {
        assert_eq!(clean_name("  Laptop \n"), "Laptop");
        assert_eq!(clean_name(""), "Passkey");
        assert_eq!(clean_name("\u{7}\t "), "Passkey");
        assert_eq!(clean_name(&"x".repeat(100)).chars().count(), MAX_NAME_CHARS);
    }

    #[test]
    fn account_ids_are_user_handles() {
        let id = "6f1c1a52-3a53-4a0e-9a43-3f1f1b3c2d11";
        assert_eq!(user_handle(id).map(|u| u.to_string()).as_deref(), Some(id));
        assert_eq!(user_handle("not-a-uuid"), None);
    }
}
