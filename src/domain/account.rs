//! Account fields: email addresses, password policy, account status and
//! project roles.

use std::fmt;
use std::str::FromStr;

/// Longest address, in bytes (RFC 5321 §4.5.3.1.3 path limit minus `<>`,
/// RFC 3696 errata 1690).
const MAX_EMAIL_LEN: usize = 254;
/// Longest local part, in bytes (RFC 5321 §4.5.3.1.1).
const MAX_LOCAL_LEN: usize = 64;
/// Shortest password, in characters (NIST SP 800-63B §5.1.1.2).
const MIN_PASSWORD_CHARS: usize = 8;
/// Longest password, in characters (bounds the cost of hashing it).
const MAX_PASSWORD_CHARS: usize = 1024;

/// Why an email address was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmailError {
    /// Longer than 254 bytes after trimming.
    #[error("email address must be at most 254 characters")]
    TooLong,
    /// Whitespace, or a control, invisible or formatting character
    /// ([`super::text::is_forbidden_in_line`]) inside the address, which is shown on pages.
    #[error(
        "email address must not contain spaces, or control, invisible or formatting characters"
    )]
    InvalidCharacter,
    /// Zero or several `@`.
    #[error("email address must contain exactly one @")]
    AtSign,
    /// Empty local part, or longer than 64 bytes.
    #[error("the part before @ must be 1 to 64 characters")]
    LocalPart,
    /// Nothing after the `@`.
    #[error("the part after @ must not be empty")]
    EmptyDomain,
}

/// A normalised email address: trimmed and lowercased, at most 254 bytes,
/// exactly one `@` with a local part of 1–64 bytes (RFC 5321 §4.5.3.1) and a
/// non-empty domain. Deliberately looser than RFC 5322 `addr-spec`; whether
/// the address works is proven by sending mail to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Email(String);

impl Email {
    /// Trims surrounding whitespace, lowercases and checks `s` (see
    /// [`Email`]). Errors: [`EmailError`] naming the first rule broken.
    pub fn parse(s: &str) -> Result<Email, EmailError> {
        let email = s.trim().to_lowercase();
        if email.len() > MAX_EMAIL_LEN {
            return Err(EmailError::TooLong);
        }
        if email
            .chars()
            .any(|c| c.is_whitespace() || super::text::is_forbidden_in_line(c))
        {
            return Err(EmailError::InvalidCharacter);
        }
        let mut parts = email.split('@');
        let (Some(local), Some(domain), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(EmailError::AtSign);
        };
        if local.is_empty() || local.len() > MAX_LOCAL_LEN {
            return Err(EmailError::LocalPart);
        }
        if domain.is_empty() {
            return Err(EmailError::EmptyDomain);
        }
        Ok(Email(email))
    }

    /// The normalised address.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why a password was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PasswordError {
    /// Fewer than 8 characters.
    #[error("password must be at least 8 characters")]
    TooShort,
    /// More than 1024 characters.
    #[error("password must be at most 1024 characters")]
    TooLong,
}

/// Checks the password policy: 8 to 1024 characters (Unicode scalar values,
/// not bytes), no composition rules (NIST SP 800-63B §5.1.1.2).
pub fn validate_password(p: &str) -> Result<(), PasswordError> {
    match p.chars().count() {
        n if n < MIN_PASSWORD_CHARS => Err(PasswordError::TooShort),
        n if n > MAX_PASSWORD_CHARS => Err(PasswordError::TooLong),
        _ => Ok(()),
    }
}

/// Whether an account may sign in and use its tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccountStatus {
    /// May sign in; its tokens work.
    Active,
    /// May not sign in; its tokens are refused.
    Disabled,
}

impl AccountStatus {
    /// The stored form: `"active"` or `"disabled"`.
    pub fn as_str(self) -> &'static str {
        match self {
            AccountStatus::Active => "active",
            AccountStatus::Disabled => "disabled",
        }
    }
}

/// A string that is not an [`AccountStatus`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown account status \"{0}\": expected \"active\" or \"disabled\"")]
pub struct UnknownAccountStatus(pub String);

/// Read from its stored spelling (`accounts.status`).
impl TryFrom<String> for AccountStatus {
    type Error = UnknownAccountStatus;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl FromStr for AccountStatus {
    type Err = UnknownAccountStatus;

    /// Parses `"active"` or `"disabled"` exactly.
    fn from_str(s: &str) -> Result<AccountStatus, UnknownAccountStatus> {
        match s {
            "active" => Ok(AccountStatus::Active),
            "disabled" => Ok(AccountStatus::Disabled),
            _ => Err(UnknownAccountStatus(s.to_owned())),
        }
    }
}

impl fmt::Display for AccountStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A member's role in a project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// May read the project's notes.
    Read,
    /// May read, create and change the project's notes.
    Write,
}

impl Role {
    /// The stored form: `"read"` or `"write"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
        }
    }
}

/// A string that is not a [`Role`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role \"{0}\": expected \"read\" or \"write\"")]
pub struct UnknownRole(pub String);

/// Read from its stored spelling (`memberships.role`).
impl TryFrom<String> for Role {
    type Error = UnknownRole;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl FromStr for Role {
    type Err = UnknownRole;

    /// Parses `"read"` or `"write"` exactly.
    fn from_str(s: &str) -> Result<Role, UnknownRole> {
        match s {
            "read" => Ok(Role::Read),
            "write" => Ok(Role::Write),
            _ => Err(UnknownRole(s.to_owned())),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Longest project name, in characters.
pub const MAX_PROJECT_NAME_CHARS: usize = 200;

/// A project name as people type it: trimmed, 1 to [`MAX_PROJECT_NAME_CHARS`] characters, and a
/// line people can read ([`crate::domain::text::check_line`]). Errors: what is wrong, in words.
pub fn parse_project_name(name: &str) -> Result<&str, String> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_PROJECT_NAME_CHARS {
        return Err(format!(
            "a project name must be 1 to {MAX_PROJECT_NAME_CHARS} characters"
        ));
    }
    crate::domain::text::check_line(name).map_err(|e| format!("the project name {e}"))?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn email_is_trimmed_and_lowercased() {
        let email = Email::parse("  Alice.Smith+Notes@Example.COM \n").unwrap();
        assert_eq!(email.as_str(), "alice.smith+notes@example.com");
    }

    #[test]
    fn email_rules() {
        assert_eq!(Email::parse(""), Err(EmailError::AtSign));
        assert_eq!(Email::parse("alice"), Err(EmailError::AtSign));
        assert_eq!(Email::parse("a@b@c"), Err(EmailError::AtSign));
        assert_eq!(Email::parse("@example.com"), Err(EmailError::LocalPart));
        assert_eq!(Email::parse("alice@"), Err(EmailError::EmptyDomain));
        assert_eq!(
            Email::parse("al ice@example.com"),
            Err(EmailError::InvalidCharacter)
        );
        assert_eq!(
            Email::parse("alice@exa\u{7}mple.com"),
            Err(EmailError::InvalidCharacter)
        );
        for invisible in ['\u{200B}', '\u{2060}', '\u{00AD}', '\u{3164}'] {
            assert_eq!(
                Email::parse(&format!("ali{invisible}ce@example.com")),
                Err(EmailError::InvalidCharacter)
            );
        }
        assert!(Email::parse("a@b").is_ok());
    }

    #[test]
    fn email_length_limits() {
        let local64 = "a".repeat(64);
        assert!(Email::parse(&format!("{local64}@example.com")).is_ok());
        assert_eq!(
            Email::parse(&format!("a{local64}@example.com")),
            Err(EmailError::LocalPart)
        );
        // 254 bytes in total is the maximum.
        let domain = format!("{}.com", "d".repeat(254 - 2 - 4));
        assert_eq!(format!("a@{domain}").len(), 254);
        assert!(Email::parse(&format!("a@{domain}")).is_ok());
        assert_eq!(
            Email::parse(&format!("ab@{domain}")),
            Err(EmailError::TooLong)
        );
    }

    #[test]
    fn password_length_counts_characters() {
        assert_eq!(validate_password(""), Err(PasswordError::TooShort));
        assert_eq!(validate_password("1234567"), Err(PasswordError::TooShort));
        assert_eq!(validate_password("12345678"), Ok(()));
        // 7 characters but 14 bytes: still too short.
        assert_eq!(validate_password("ééééééé"), Err(PasswordError::TooShort));
        assert_eq!(validate_password(&"é".repeat(1024)), Ok(()));
        assert_eq!(
            validate_password(&"a".repeat(1025)),
            Err(PasswordError::TooLong)
        );
        assert_eq!(
            PasswordError::TooShort.to_string(),
            "password must be at least 8 characters"
        );
        assert_eq!(
            PasswordError::TooLong.to_string(),
            "password must be at most 1024 characters"
        );
    }

    #[test]
    fn status_and_role_round_trip() {
        for status in [AccountStatus::Active, AccountStatus::Disabled] {
            assert_eq!(status.as_str().parse::<AccountStatus>(), Ok(status));
        }
        assert_eq!(AccountStatus::Active.as_str(), "active");
        assert_eq!(AccountStatus::Disabled.as_str(), "disabled");
        assert!("Active".parse::<AccountStatus>().is_err());
        for role in [Role::Read, Role::Write] {
            assert_eq!(role.as_str().parse::<Role>(), Ok(role));
        }
        assert_eq!(Role::Read.as_str(), "read");
        assert_eq!(Role::Write.as_str(), "write");
        let err = "admin".parse::<Role>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown role \"admin\": expected \"read\" or \"write\""
        );
    }
}
