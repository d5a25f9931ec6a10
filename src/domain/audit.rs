//! The words of the audit log and of the counters beside it: what happened ([`Event`], the
//! audit row's `event` column), how it ended ([`Outcome`], its `outcome` column and the
//! `outcome` label of the tool, upstream, registration and sign-in counters) and which token
//! counter an event moves ([`TokenEvent`], [`ResourceTokenEvent`]).
//!
//! Each value owns its text: the column value written to the database and the metric label are
//! [`Event::as_str`] and friends, so a misspelt event or label is a compile error, not a row or
//! series nobody reads. Rows written by an older release are read back as text; a page that
//! shows them names them through [`Event::parse`] and [`Outcome::parse`] (an unknown text is
//! `None`, never an error).

/// Declares an enum of label values: each variant with its text, `ALL`, `as_str`, `parse` and
/// `Display` (the text).
macro_rules! labels {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every value, in the order declared.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The value's text: the audit column or metric label it is written as.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }

            /// The value written as `text`, or `None` for a text this release does not know
            /// (a row of another release).
            pub fn parse(text: &str) -> Option<$name> {
                match text {
                    $( $text => Some($name::$variant), )+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

labels! {
    /// What an audit row says happened (its `event` column).
    pub enum Event {
        /// A sign-in at the console (password, passkey, identity provider, second factor).
        Signin = "signin",
        /// Every session of an account was ended by its owner.
        SignedOutEverywhere = "signed_out_everywhere",
        /// An account was made (setup link, invitation, identity provider, command line).
        AccountCreated = "account_created",
        /// The operator disabled an account.
        AccountDisabled = "account_disabled",
        /// The operator enabled an account again.
        AccountEnabled = "account_enabled",
        /// The operator made an account an operator.
        OperatorGranted = "operator_granted",
        /// The operator took an account's operator flag away.
        OperatorRevoked = "operator_revoked",
        /// The operator set an account's hourly budget of calls.
        AccountQuotaSet = "account_quota_set",
        /// An account's password was changed by its owner.
        PasswordChanged = "password_changed",
        /// A password reset link was asked for.
        PasswordResetRequested = "password_reset_requested",
        /// A password was reset through its link.
        PasswordReset = "password_reset",
        /// The password step of a sign-in that asks a second factor next.
        SigninPassword = "signin_password",
        /// A sign-in was refused before its password was checked: its budget was spent.
        SigninThrottled = "signin_throttled",
        /// The second step of a sign-in (a one-time code or recovery code).
        SigninSecondFactor = "signin_second_factor",
        /// A second factor was set up.
        SecondFactorEnrolled = "second_factor_enrolled",
        /// A second factor was removed.
        SecondFactorRemoved = "second_factor_removed",
        /// A passkey was registered.
        PasskeyAdded = "passkey_added",
        /// A passkey was removed.
        PasskeyRemoved = "passkey_removed",
        /// An authorization request reached the consent step (or was refused before it).
        AuthorizationRequest = "authorization_request",
        /// A person answered the consent page (outcome `granted` or `denied`).
        Consent = "consent",
        /// A person took an app's access back.
        ConsentRevoked = "consent_revoked",
        /// A person changed what an app may reach.
        ConsentChanged = "consent_changed",
        /// A person set which tools an app may use.
        AppToolsSet = "app_tools_set",
        /// A device authorization (RFC 8628) was asked for.
        DeviceAuthorization = "device_authorization",
        /// A client registered itself (RFC 7591).
        ClientRegistered = "client_registered",
        /// The operator made a client.
        ClientCreated = "client_created",
        /// The operator revoked a client.
        ClientRevoked = "client_revoked",
        /// An authorization code was redeemed (RFC 6749 §4.1.3).
        CodeRedeemed = "code_redeemed",
        /// An authorization code was refused (expired, another client's, a wrong verifier, …).
        CodeRefused = "code_refused",
        /// A redeemed authorization code was presented again: the grant it made is revoked
        /// (RFC 6749 §4.1.2).
        CodeReplay = "code_replay",
        /// A refresh token was refused (expired, its grant ended, another client's, …).
        RefreshRefused = "refresh_refused",
        /// A refresh token was rotated (RFC 6749 §6).
        TokenRefreshed = "token_refreshed",
        /// A rotated refresh token was presented again: its family is revoked.
        RefreshReuse = "refresh_reuse",
        /// A refresh-token family was revoked (RFC 7009, or by its reuse).
        FamilyRevoked = "family_revoked",
        /// A token was issued for a service or an identity assertion.
        TokenIssued = "token_issued",
        /// An MCP tool was called.
        ToolCall = "tool_call",
        /// An MCP resource was read.
        ResourceRead = "resource_read",
        /// An MCP prompt was got.
        PromptGet = "prompt_get",
        /// An API key was made.
        KeyCreated = "key_created",
        /// An API key was revoked.
        KeyRevoked = "key_revoked",
        /// An API key was used for the first time.
        KeyFirstUse = "key_first_use",
        /// A personal MCP URL was made.
        UrlCreated = "url_created",
        /// A personal MCP URL was revoked.
        UrlRevoked = "url_revoked",
        /// A personal MCP URL was used for the first time.
        UrlFirstUse = "url_first_use",
        /// A project was made.
        ProjectCreated = "project_created",
        /// An invitation to a project was made.
        InvitationCreated = "invitation_created",
        /// An invitation to a project was withdrawn.
        InvitationWithdrawn = "invitation_withdrawn",
        /// An invitation to a project was accepted.
        InvitationAccepted = "invitation_accepted",
        /// A registered resource was added.
        ResourceAdded = "resource_added",
        /// A registered resource was removed.
        ResourceRemoved = "resource_removed",
        /// A registered resource's signing key was rotated.
        SigningKeyRotated = "signing_key_rotated",
        /// The operator added an identity provider.
        IdpAdded = "idp_added",
        /// The operator removed an identity provider.
        IdpRemoved = "idp_removed",
        /// A person connected their account at an upstream service.
        ConnectionConnected = "connection_connected",
        /// A person disconnected their account at an upstream service.
        ConnectionDisconnected = "connection_disconnected",
        /// Renewing a person's connection failed.
        ConnectionRefreshFailed = "connection_refresh_failed",
        /// A person added an MCP server of their own.
        PersonalUpstreamAdded = "personal_upstream_added",
        /// A person's own MCP server was removed.
        PersonalUpstreamRemoved = "personal_upstream_removed",
        /// A person's own MCP server's tools were approved.
        PersonalUpstreamApproved = "personal_upstream_approved",
        /// A person's own MCP server was turned on.
        PersonalUpstreamEnabled = "personal_upstream_enabled",
        /// A person's own MCP server was turned off.
        PersonalUpstreamDisabled = "personal_upstream_disabled",
        /// The operator added an upstream MCP server.
        UpstreamAdded = "upstream_added",
        /// The operator approved an upstream's tool definitions.
        UpstreamApproved = "upstream_approved",
        /// The operator removed an upstream.
        UpstreamRemoved = "upstream_removed",
        /// The operator allowed one of an upstream's destructive tools.
        UpstreamDestructiveAllowed = "upstream_destructive_allowed",
        /// The operator took back the allowance of an upstream's destructive tool.
        UpstreamDestructiveRevoked = "upstream_destructive_revoked",
        /// The operator turned an upstream on.
        UpstreamEnabled = "upstream_enabled",
        /// The operator turned an upstream off.
        UpstreamDisabled = "upstream_disabled",
        /// A member was added to a project.
        MemberAdded = "member_added",
        /// A member's role in a project was changed.
        MemberRoleChanged = "member_role_changed",
        /// A member was removed from a project.
        MemberRemoved = "member_removed",
    }
}

impl Event {
    /// The [`TokenEvent`] counted with this event, if it is one.
    pub const fn token_event(self) -> Option<TokenEvent> {
        match self {
            Event::CodeRedeemed => Some(TokenEvent::Issued),
            Event::TokenRefreshed => Some(TokenEvent::Refreshed),
            Event::RefreshReuse => Some(TokenEvent::Reused),
            Event::FamilyRevoked => Some(TokenEvent::Revoked),
            _ => None,
        }
    }
}

labels! {
    /// How what an audit row records ended (its `outcome` column), and the `outcome` label of
    /// the counters of tool calls, upstream calls, registrations and sign-ins.
    pub enum Outcome {
        /// It was done.
        Success = "success",
        /// It was refused (a wrong password, a bad proof, …).
        Failure = "failure",
        /// Refused before it was looked at (an authorization request the server could not
        /// take to the consent step).
        Refused = "refused",
        /// The upstream service refused a connection's refresh token (RFC 6749 §5.2
        /// `invalid_grant`): the person must connect again.
        InvalidGrant = "invalid_grant",
        /// A confirmation answer that does not match the call it was asked for.
        ConfirmationInvalid = "confirmation_invalid",
        /// A person allowed it.
        Granted = "granted",
        /// A person refused it.
        Denied = "denied",
        /// Refused because a per-address or per-account budget was spent.
        Throttled = "throttled",
        /// Refused because the work pool was full.
        Busy = "busy",
        /// A tool call continued an earlier cut answer.
        Continued = "continued",
        /// The arguments do not fit the tool's input schema.
        InvalidArguments = "invalid_arguments",
        /// The note, project or resource does not exist or is out of reach.
        NotFound = "not_found",
        /// The caller's role does not allow it.
        Forbidden = "forbidden",
        /// An error on this server.
        Error = "error",
        /// The database was busy; the caller may try again.
        Unavailable = "unavailable",
        /// The prompt asked for does not exist.
        UnknownPrompt = "unknown_prompt",
        /// The token's scope does not cover it (RFC 6750 §3.1).
        InsufficientScope = "insufficient_scope",
        /// The account's hourly budget of calls was spent.
        OverQuota = "over_quota",
        /// The upstream tool answered with `isError`.
        ToolError = "tool_error",
        /// The upstream server could not be reached or answered with an error.
        UpstreamError = "upstream_error",
        /// The upstream server did not answer in time.
        Timeout = "timeout",
        /// Not sent: the upstream server failed the calls before it in a row and is cooling
        /// down.
        CoolingDown = "cooling_down",
        /// The person did not confirm a destructive call.
        Declined = "declined",
        /// A destructive call needs a confirmation the client cannot ask for.
        ConfirmationNeeded = "confirmation_needed",
        /// The person must first connect their account at the upstream's service.
        ConnectionRequired = "connection_required",
    }
}

impl Outcome {
    /// The `outcome` values of the tool-call counter: a result, a continued call, or a tool
    /// error's kind.
    pub const TOOL_CALL: [Outcome; 7] = [
        Outcome::Success,
        Outcome::Continued,
        Outcome::InvalidArguments,
        Outcome::NotFound,
        Outcome::Forbidden,
        Outcome::Error,
        Outcome::Unavailable,
    ];

    /// The `outcome` values of the upstream-call counter.
    pub const UPSTREAM_CALL: [Outcome; 6] = [
        Outcome::Success,
        Outcome::ToolError,
        Outcome::UpstreamError,
        Outcome::Timeout,
        Outcome::Busy,
        Outcome::CoolingDown,
    ];

    /// The `outcome` values of the dynamic-registration counter.
    pub const REGISTRATION: [Outcome; 2] = [Outcome::Success, Outcome::Throttled];

    /// The `outcome` values of the sign-in counter.
    pub const SIGNIN: [Outcome; 4] = [
        Outcome::Success,
        Outcome::Failure,
        Outcome::Throttled,
        Outcome::Busy,
    ];
}

labels! {
    /// The `event` label of the token counter.
    pub enum TokenEvent {
        /// Tokens were issued (a code redeemed, a service or assertion grant).
        Issued = "issued",
        /// A refresh token was rotated.
        Refreshed = "refreshed",
        /// A rotated refresh token was replayed.
        Reused = "reused",
        /// A refresh-token family was revoked.
        Revoked = "revoked",
    }
}

labels! {
    /// The `event` label of the registered resources' token counter.
    pub enum ResourceTokenEvent {
        /// A token for the resource was issued.
        Issued = "issued",
        /// A token for the resource was refreshed.
        Refreshed = "refreshed",
        /// A token for the resource was introspected.
        Introspected = "introspected",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_text_reads_back_as_its_value_and_no_two_share_a_text() {
        fn check<T: Copy + PartialEq + std::fmt::Debug>(
            all: &[T],
            text: fn(T) -> &'static str,
            parse: fn(&str) -> Option<T>,
        ) {
            let mut seen = std::collections::HashSet::new();
            for &v in all {
                assert_eq!(parse(text(v)), Some(v));
                assert!(seen.insert(text(v)), "{} twice", text(v));
                assert!(
                    text(v).bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                    "{} is not snake_case",
                    text(v)
                );
            }
        }
        check(Event::ALL, Event::as_str, Event::parse);
        check(Outcome::ALL, Outcome::as_str, Outcome::parse);
        check(TokenEvent::ALL, TokenEvent::as_str, TokenEvent::parse);
        check(
            ResourceTokenEvent::ALL,
            ResourceTokenEvent::as_str,
            ResourceTokenEvent::parse,
        );
        assert_eq!(Event::parse("no_such_event"), None);
    }

    #[test]
    fn the_columns_keep_the_texts_older_rows_were_written_with() {
        // Rows already in databases use these texts; a rename would orphan them.
        assert_eq!(Event::ToolCall.as_str(), "tool_call");
        assert_eq!(Event::CodeRedeemed.as_str(), "code_redeemed");
        assert_eq!(Event::RefreshReuse.as_str(), "refresh_reuse");
        assert_eq!(Outcome::InsufficientScope.as_str(), "insufficient_scope");
        assert_eq!(Outcome::OverQuota.as_str(), "over_quota");
        assert_eq!(
            Event::TokenRefreshed.token_event(),
            Some(TokenEvent::Refreshed)
        );
        assert_eq!(Event::ToolCall.token_event(), None);
    }
}
