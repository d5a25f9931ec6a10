//! The refresh-token rule (OAuth 2.1 §4.3.1, RFC 9700 §4.14.2): given what is stored about a
//! presented refresh token, the time and the grace window, what the token endpoint does with
//! it. Pure: the token endpoint (`oauth::token`) reads the state, calls [`decide`] and carries
//! out the decision.
//!
//! Refresh tokens rotate on every use and belong to a family (one redeemed authorization). A
//! rotated token presented again within the grace window, while its successor is unused and its
//! family live, receives the same successor pair; any other use of a rotated token is reuse
//! (theft is assumed) and revokes the whole family.

/// Why a code redemption or a refresh-token rotation was refused although the credential itself
/// was valid: the grant behind it no longer allows it (RFC 6749 §5.2 `invalid_grant`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantRefusal {
    /// The consent (or the family) was revoked.
    Revoked,
    /// The account is disabled.
    AccountDisabled,
    /// What would be issued exceeds the live consent's scopes.
    ScopeExceedsApproval,
    /// The person allowed the app for a limited time (issue 37, per-app choice) and it has
    /// passed: like a revoked grant, only a new consent starts it again.
    Ended,
}

impl GrantRefusal {
    /// A short non-secret reason, for the audit log and `error_description`.
    pub fn as_str(self) -> &'static str {
        match self {
            GrantRefusal::Revoked => "the authorization was revoked",
            GrantRefusal::AccountDisabled => "the account is disabled",
            GrantRefusal::ScopeExceedsApproval => {
                "the scope exceeds what the account currently approves"
            }
            GrantRefusal::Ended => "the authorization has ended: it was allowed for a limited time",
        }
    }
}

/// What is stored about a presented refresh token, its family, consent, account and successor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RefreshFacts {
    /// Whether the family is revoked.
    pub family_revoked: bool,
    /// Whether the consent (grant generation) behind the family is revoked.
    pub consent_revoked: bool,
    /// Whether the account is active.
    pub account_active: bool,
    /// Whether the family's scope stays within its consent's (RFC 6749 §3.3).
    pub within_approval: bool,
    /// When the token was rotated, Unix seconds (`None`: it is the family's current token).
    pub rotated_at: Option<i64>,
    /// Whether a sealed successor pair is stored with the token.
    pub successor_sealed: bool,
    /// Whether the successor refresh token has itself been rotated (used).
    pub successor_used: bool,
}

/// What to do with a presented refresh token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefreshDecision {
    /// The grant no longer allows it: `invalid_grant`, the token left as it is.
    Refuse(GrantRefusal),
    /// The current token: rotate it (issue a successor pair, mark it rotated).
    Rotate,
    /// A retry within the grace window: answer with the sealed successor pair again.
    ReplayInGrace,
    /// Reuse of a rotated token: revoke the family and its access tokens, `invalid_grant`.
    ReuseRevoke,
}

/// Whether the grant behind a refresh token still allows using it: family and consent
/// unrevoked, account active, family scope within the consent's.
pub fn grant_refusal(facts: &RefreshFacts) -> Option<GrantRefusal> {
    if facts.family_revoked || facts.consent_revoked {
        Some(GrantRefusal::Revoked)
    } else if !facts.account_active {
        Some(GrantRefusal::AccountDisabled)
    } else if !facts.within_approval {
        Some(GrantRefusal::ScopeExceedsApproval)
    } else {
        None
    }
}

/// The decision for a presented refresh token at `now` (Unix seconds) with a grace window of
/// `grace_secs` seconds (0: no grace). In order: a grant that no longer allows it is refused;
/// a current token rotates; a token rotated at most `grace_secs` ago whose sealed successor is
/// stored and unused is answered with that successor again; anything else is reuse.
pub fn decide(facts: &RefreshFacts, now: i64, grace_secs: i64) -> RefreshDecision {
    if let Some(why) = grant_refusal(facts) {
        return RefreshDecision::Refuse(why);
    }
    let Some(rotated_at) = facts.rotated_at else {
        return RefreshDecision::Rotate;
    };
    let in_grace = grace_secs > 0 && now - rotated_at <= grace_secs;
    if in_grace && facts.successor_sealed && !facts.successor_used {
        RefreshDecision::ReplayInGrace
    } else {
        RefreshDecision::ReuseRevoke
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: i64 = 60;

    fn live() -> RefreshFacts {
        RefreshFacts {
            account_active: true,
            within_approval: true,
            ..RefreshFacts::default()
        }
    }

    fn rotated(at: i64) -> RefreshFacts {
        RefreshFacts {
            rotated_at: Some(at),
            successor_sealed: true,
            ..live()
        }
    }

    #[test]
    fn a_current_token_rotates() {
        assert_eq!(decide(&live(), 1000, GRACE), RefreshDecision::Rotate);
        assert_eq!(decide(&live(), 1000, 0), RefreshDecision::Rotate);
    }

    #[test]
    fn a_grant_that_no_longer_allows_it_is_refused_first() {
        use GrantRefusal::*;
        for (facts, why) in [
            (
                RefreshFacts {
                    family_revoked: true,
                    ..live()
                },
                Revoked,
            ),
            (
                RefreshFacts {
                    consent_revoked: true,
                    ..live()
                },
                Revoked,
            ),
            (
                RefreshFacts {
                    account_active: false,
                    ..live()
                },
                AccountDisabled,
            ),
            (
                RefreshFacts {
                    within_approval: false,
                    ..live()
                },
                ScopeExceedsApproval,
            ),
            // A revoked family outranks everything else, rotated or not.
            (
                RefreshFacts {
                    family_revoked: true,
                    account_active: false,
                    ..rotated(990)
                },
                Revoked,
            ),
            (
                RefreshFacts {
                    account_active: false,
                    within_approval: false,
                    ..live()
                },
                AccountDisabled,
            ),
        ] {
            assert_eq!(
                decide(&facts, 1000, GRACE),
                RefreshDecision::Refuse(why),
                "{facts:?}"
            );
        }
    }

    #[test]
    fn a_retry_within_the_grace_window_gets_the_same_successor() {
        assert_eq!(
            decide(&rotated(1000), 1000, GRACE),
            RefreshDecision::ReplayInGrace
        );
        assert_eq!(
            decide(&rotated(940), 1000, GRACE),
            RefreshDecision::ReplayInGrace,
            "edge"
        );
    }

    #[test]
    fn reuse_after_the_window_or_after_the_successor_was_used_revokes() {
        assert_eq!(
            decide(&rotated(939), 1000, GRACE),
            RefreshDecision::ReuseRevoke,
            "window over"
        );
        let used = RefreshFacts {
            successor_used: true,
            ..rotated(1000)
        };
        assert_eq!(
            decide(&used, 1000, GRACE),
            RefreshDecision::ReuseRevoke,
            "successor used"
        );
        let unsealed = RefreshFacts {
            successor_sealed: false,
            ..rotated(1000)
        };
        assert_eq!(
            decide(&unsealed, 1000, GRACE),
            RefreshDecision::ReuseRevoke,
            "nothing sealed"
        );
        assert_eq!(
            decide(&rotated(1000), 1000, 0),
            RefreshDecision::ReuseRevoke,
            "no grace"
        );
    }
}
