//! The OAuth client identifier as clients send it.

use std::fmt;

use super::cimd;

/// Longest `client_id` read, in bytes: room for a client ID metadata document URL
/// (draft-ietf-oauth-client-id-metadata-document) and far more than the 25 characters of
/// one this server issues.
pub const MAX_CLIENT_ID_BYTES: usize = 2048;

/// Largest client registration request body accepted (RFC 7591 §3.1), in bytes. Also the
/// floor of the hourly registration byte budget (`GATEHOUSE_REGISTRATION_BYTES_PER_HOUR`):
/// one registration of the largest size must fit.
pub const MAX_REGISTRATION_BYTES: usize = 16 * 1024;

/// An OAuth `client_id` (RFC 6749 §2.2; its characters per Appendix A.1: `*VSCHAR`, the
/// printable ASCII range `%x20-7E`): one this server issued at registration (RFC 7591,
/// `gc_…`), or an `https` URL naming a client ID metadata document. Reading one checks only
/// its shape; whether such a client exists is the client resolver's question.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ClientId(String);

/// Why a `client_id` was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientIdError {
    /// Nothing was sent.
    #[error("client_id is empty")]
    Empty,
    /// Longer than [`MAX_CLIENT_ID_BYTES`].
    #[error("client_id is longer than {MAX_CLIENT_ID_BYTES} bytes")]
    TooLong,
    /// A character outside `%x20-7E`.
    #[error("client_id may hold only printable ASCII characters")]
    Character,
}

impl ClientId {
    /// Reads a `client_id` as sent.
    ///
    /// Errors: [`ClientIdError`].
    pub fn parse(raw: &str) -> Result<Self, ClientIdError> {
        if raw.is_empty() {
            return Err(ClientIdError::Empty);
        }
        if raw.len() > MAX_CLIENT_ID_BYTES {
            return Err(ClientIdError::TooLong);
        }
        if !raw.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
            return Err(ClientIdError::Character);
        }
        Ok(ClientId(raw.to_string()))
    }

    /// The identifier as sent.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether it names a client ID metadata document (an `https` URL) rather than a
    /// registered client.
    pub fn is_metadata_document(&self) -> bool {
        cimd::is_url_client_id(&self.0)
    }
}

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClientId({:?})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_ids_are_printable_ascii_and_bounded() {
        for ok in [
            "gc_zpWftU2vAvnZwGsvdTIkgj41",
            "https://app.example/oauth/client.json",
            "a b~",
        ] {
            assert_eq!(ClientId::parse(ok).unwrap().as_str(), ok);
        }
        assert_eq!(ClientId::parse(""), Err(ClientIdError::Empty));
        assert_eq!(
            ClientId::parse(&"a".repeat(MAX_CLIENT_ID_BYTES + 1)),
            Err(ClientIdError::TooLong)
        );
        assert!(ClientId::parse(&"a".repeat(MAX_CLIENT_ID_BYTES)).is_ok());
        for bad in ["gc_\u{0}", "gc_\n", "gc_é", "gc_\u{7f}", "\u{202e}gc"] {
            assert_eq!(
                ClientId::parse(bad),
                Err(ClientIdError::Character),
                "{bad:?}"
            );
        }
        assert!(
            ClientId::parse("https://app.example/c.json")
                .unwrap()
                .is_metadata_document()
        );
        assert!(!ClientId::parse("gc_x").unwrap().is_metadata_document());
    }
}
