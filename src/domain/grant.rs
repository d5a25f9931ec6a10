//! The OAuth grant types Gatehouse knows, one name each: the `grant_type` values of the token
//! endpoint (RFC 6749 §4.1.3, §4.4.2, §6; RFC 8628 §3.4; RFC 7523 §2.1), the members of
//! `grant_types_supported` (RFC 8414 §2) and of a client's `grant_types` (RFC 7591 §2), and
//! what introspection names as a token's `grant_type`.

/// A grant type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GrantType {
    /// `authorization_code` (RFC 6749 §4.1, with PKCE as OAuth 2.1 requires).
    AuthorizationCode,
    /// `refresh_token` (RFC 6749 §6).
    RefreshToken,
    /// `client_credentials` (RFC 6749 §4.4): service clients made on the command line.
    ClientCredentials,
    /// `urn:ietf:params:oauth:grant-type:device_code` (RFC 8628 §3.4).
    DeviceCode,
    /// `urn:ietf:params:oauth:grant-type:jwt-bearer` (RFC 7523 §2.1): an enterprise identity
    /// assertion (ID-JAG) or a workload's platform token.
    JwtBearer,
}

impl GrantType {
    /// Every grant type, in the order the metadata lists them.
    pub const ALL: [GrantType; 5] = [
        GrantType::AuthorizationCode,
        GrantType::RefreshToken,
        GrantType::ClientCredentials,
        GrantType::DeviceCode,
        GrantType::JwtBearer,
    ];

    /// The registered name, as sent in `grant_type`.
    pub const fn as_str(self) -> &'static str {
        match self {
            GrantType::AuthorizationCode => "authorization_code",
            GrantType::RefreshToken => "refresh_token",
            GrantType::ClientCredentials => "client_credentials",
            GrantType::DeviceCode => "urn:ietf:params:oauth:grant-type:device_code",
            GrantType::JwtBearer => "urn:ietf:params:oauth:grant-type:jwt-bearer",
        }
    }

    /// The grant type named `name` exactly (names are case-sensitive, RFC 6749 §A.10);
    /// `None` for any other.
    pub fn parse(name: &str) -> Option<GrantType> {
        GrantType::ALL.into_iter().find(|g| g.as_str() == name)
    }
}

impl std::fmt::Display for GrantType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_grant_type_is_read_back_from_its_registered_name_only() {
        for g in GrantType::ALL {
            assert_eq!(GrantType::parse(g.as_str()), Some(g));
        }
        assert_eq!(
            GrantType::parse("password"),
            None,
            "RFC 6749 §4.3 is not offered"
        );
        assert_eq!(GrantType::parse("Authorization_Code"), None);
        assert_eq!(
            GrantType::DeviceCode.as_str(),
            "urn:ietf:params:oauth:grant-type:device_code"
        );
    }
}
