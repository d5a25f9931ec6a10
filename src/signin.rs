//! Sign-in attempts: the throttling, the password check and the audit behind `POST /signin`
//! (the page, `web::signin`, renders the outcome) and behind the current-password check of the
//! account page.
//!
//! An attempt is counted as a failure before the password is checked, so concurrent guesses see
//! each other and at most the limit get through; a refused attempt writes nothing and costs no
//! argon2 work. Limits: per source address (its IPv6 /64), per (address, email), and per account
//! named by the email (whether or not it exists, so the limits do not tell which emails have
//! accounts; NIST SP 800-63B §5.2.2).

use std::net::IpAddr;

use crate::domain::account::{AccountStatus, Email};
use crate::domain::throttle::{CounterState, Policy, source_key};
use crate::password::PasswordSlot;
use crate::state::AppState;
use crate::store::StoreError;
use crate::store::accounts::Account;
use crate::store::audit::AuditEvent;
use crate::store::limits::{Admission, Limit};

/// The window in which failed sign-ins per source address are counted, in seconds.
pub const THROTTLE_WINDOW_SECS: i64 = 15 * 60;
/// Failed sign-ins for one email from one address within the window after which further
/// attempts are refused (429) until the window has passed.
pub const MAX_FAILURES_PER_EMAIL: i64 = 5;
/// Failed sign-ins from one address (any email) within the window before refusal.
pub const MAX_FAILURES_PER_ADDRESS: i64 = 50;
/// Consecutive failed sign-ins for one account, from any address, before sign-in for it is
/// slowed (NIST SP 800-63B §5.2.2).
pub const ACCOUNT_FREE_FAILURES: i64 = 10;
/// The first delay after [`ACCOUNT_FREE_FAILURES`], in seconds; each further failure doubles it.
pub const ACCOUNT_FIRST_DELAY_SECS: i64 = 1;
/// The longest delay between attempts on a slowed account, in seconds.
pub const ACCOUNT_MAX_DELAY_SECS: i64 = 15 * 60;
/// Quiet time after which an account's failures are forgotten, in seconds.
pub const ACCOUNT_RESET_SECS: i64 = 24 * 3600;
/// `Retry-After` of a sign-in turned away because every password worker is busy, in seconds.
pub const BUSY_RETRY_AFTER_SECS: u64 = 1;

/// The index of the per-account limit in [`limits`].
const ACCOUNT_LIMIT: usize = 2;

/// The counters one sign-in attempt is checked against, in this order: the source address
/// (its IPv6 /64, see [`source_key`]), the (address, email) pair, and the account named by the
/// email (`email_key`: trimmed, lowercased, at most 254 characters).
pub fn limits(source: IpAddr, email_key: &str) -> [Limit; 3] {
    let ip = &source_key(source);
    let window = |max_hits| Policy::Window {
        max_hits,
        max_amount: i64::MAX,
        window_secs: THROTTLE_WINDOW_SECS,
    };
    [
        Limit::new("signin-address", ip, window(MAX_FAILURES_PER_ADDRESS), 0),
        Limit::new(
            "signin-address-email",
            &format!("{ip} {email_key}"),
            window(MAX_FAILURES_PER_EMAIL),
            0,
        ),
        Limit::new(
            "signin-account",
            email_key,
            Policy::Backoff {
                free: ACCOUNT_FREE_FAILURES,
                base_secs: ACCOUNT_FIRST_DELAY_SECS,
                cap_secs: ACCOUNT_MAX_DELAY_SECS,
                reset_secs: ACCOUNT_RESET_SECS,
            },
            0,
        ),
    ]
}

/// A wait in words: "N seconds" under two minutes, else "N minutes" (rounded up).
pub fn wait_in_words(secs: i64) -> String {
    match secs {
        1 => "1 second".to_string(),
        s if s < 120 => format!("{s} seconds"),
        s => format!("{} minutes", (s + 59) / 60),
    }
}

/// After a right password: the account's failure count starts again, and the address's
/// counters give back the place the attempt took (`counted` as [`crate::store::Store::admit`]
/// returned it for `limits`).
pub async fn forget_failures(
    state: &AppState,
    limits: &[Limit; 3],
    counted: &[CounterState],
) -> Result<(), StoreError> {
    state.store.clear_counter(&limits[ACCOUNT_LIMIT]).await?;
    for (limit, state_after) in limits.iter().zip(counted).take(ACCOUNT_LIMIT) {
        state.store.refund_counter(limit, state_after.since).await?;
    }
    Ok(())
}

/// Counts a sign-in attempt by outcome (`success`, `failure`, `throttled`, `busy`).
pub fn count(outcome: &'static str) {
    metrics::counter!(crate::metrics::SIGNINS, "outcome" => outcome).increment(1);
}

/// The outcome of one sign-in attempt.
pub enum Attempt {
    /// A limit refused it; nothing was written. Retry after `retry_after` seconds (at least 1).
    Throttled {
        /// Seconds until a new attempt may be admitted.
        retry_after: i64,
        /// Whether the per-account limit refused it (sign-in for the account is slowed).
        account: bool,
    },
    /// Wrong email or password, or a disabled account (one answer for the three); the failure
    /// is audited and counted.
    Failed,
    /// The password is right and the account active; the session is not yet signed in.
    Verified(Box<Verified>),
    /// The password could not be checked in time ([`crate::password::MAX_WAIT`]: every
    /// password worker busy for that long): nothing was decided, nothing audited; the attempt
    /// stays counted against the limits (overloading the server gives no extra tries). Answered
    /// like a full password queue: 503 with `Retry-After`.
    Busy,
}

/// A verified sign-in, to be finished with [`Verified::finish`] once the session is signed in.
pub struct Verified {
    /// The account signed in to.
    pub account: Account,
    limits: [Limit; 3],
    counted: Vec<CounterState>,
    email_key: String,
}

/// The audit row of a sign-in attempt.
fn audit_row<'a>(
    event: &'a str,
    outcome: &'a str,
    account_id: Option<&'a str>,
    email_key: &'a str,
    ip: &'a str,
    detail: Option<&'a str>,
) -> AuditEvent<'a> {
    AuditEvent {
        event,
        outcome,
        account_id,
        subject: Some(email_key),
        source_ip: Some(ip),
        detail,
        ..Default::default()
    }
}

/// One sign-in attempt from `source` with `email` and `password` at `now` (Unix seconds), on a
/// reserved place of the password pool: counted against the [`limits`] first (a refusal writes
/// nothing), then the password checked (a dummy verification for unknown emails); a failure is
/// audited (`signin` / `failure`, and `signin_throttled` for each limit it made refuse the next
/// attempts).
pub async fn attempt(
    state: &AppState,
    slot: PasswordSlot<'_>,
    source: IpAddr,
    email: &str,
    password: String,
    now: i64,
) -> Result<Attempt, StoreError> {
    let email_key: String = email.trim().to_lowercase().chars().take(254).collect();
    let limits = limits(source, &email_key);
    let counted = match state.store.admit(&limits, now).await? {
        Admission::Admitted(counted) => counted,
        Admission::Refused { retry_after, limit } => {
            count("throttled");
            return Ok(Attempt::Throttled {
                retry_after,
                account: limit == Some(ACCOUNT_LIMIT),
            });
        }
    };
    let account = match Email::parse(email) {
        Ok(email) => state.store.account_by_email(&email).await?,
        Err(_) => None,
    };
    let verified = match slot
        .verify(password, account.as_ref().map(|a| a.password_hash.clone()))
        .await
    {
        Ok(verified) => verified,
        Err(e) => {
            tracing::warn!(error = %e, "a sign-in's password was not checked");
            count("busy");
            return Ok(Attempt::Busy);
        }
    };
    let reason = match (account, verified) {
        (Some(account), true) if account.status == AccountStatus::Active => {
            count("success");
            return Ok(Attempt::Verified(Box::new(Verified {
                account,
                limits,
                counted,
                email_key,
            })));
        }
        (Some(a), true) => (Some(a), "account disabled"),
        (a, _) => (a, "bad credentials"),
    };
    let (account, reason) = reason;
    count("failure");
    let ip = source.to_string();
    let account_id = account.as_ref().map(|a| a.id.as_str());
    let row = audit_row(
        "signin",
        "failure",
        account_id,
        &email_key,
        &ip,
        Some(reason),
    );
    state.store.audit(row, now).await;
    // This failure made a limit refuse the next attempts: worth a record of its own.
    for (limit, kind) in counted
        .iter()
        .zip(["per address", "per address and email", "per account"])
    {
        if Policy::blocks(limit) {
            let row = audit_row(
                "signin_throttled",
                "denied",
                account_id,
                &email_key,
                &ip,
                Some(kind),
            );
            state.store.audit(row, now).await;
        }
    }
    Ok(Attempt::Failed)
}

impl Verified {
    /// Finishes a sign-in once the session is signed in: the failures are forgotten
    /// ([`forget_failures`]) and the success audited (`signin` / `success`).
    pub async fn finish(
        self,
        state: &AppState,
        source: IpAddr,
        now: i64,
    ) -> Result<(), StoreError> {
        forget_failures(state, &self.limits, &self.counted).await?;
        let ip = source.to_string();
        let row = audit_row(
            "signin",
            "success",
            Some(&self.account.id),
            &self.email_key,
            &ip,
            None,
        );
        state.store.audit(row, now).await;
        Ok(())
    }
}
