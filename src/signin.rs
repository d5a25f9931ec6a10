//! Sign-in attempts: the throttling, the password check and the audit behind `POST /signin`
//! (the page, `web::signin`, renders the outcome) and behind the current-password check of the
//! account page.
//!
//! An attempt is counted as a failure before the password is checked, so concurrent guesses see
//! each other and at most the limit get through; a refused attempt writes nothing and costs no
//! argon2 work. Limits: per source address (its IPv6 /64), per (address, email), and per account
//! named by the email (whether or not it exists, so the limits do not tell which emails have
//! accounts; NIST SP 800-63B §5.2.2).
//!
//! The per-account delay must not let strangers lock the owner out (§5.2.2: "limit … guessing
//! attacks" yet not let an attacker "lock out the claimant"): a successful sign-in gives the
//! browser a device cookie ([`DEVICE_COOKIE`], random, stored as its SHA-256 with the account,
//! [`crate::store::devices`]). An attempt from a browser recognised for the account it names
//! is not held by that account's delay (the per-address limits still apply); a wrong password
//! from it while the delay runs burns the cookie, so a stolen one is good for one guess at most.

use std::net::IpAddr;

use crate::domain::account::{AccountStatus, Email};
use crate::domain::audit::{Event, Outcome};
use crate::domain::secret::TokenHash;
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
/// Name of the cookie that marks a browser which signed in to an account before (scoped to
/// `/signin`, `HttpOnly`, `SameSite=Lax`, `Secure` for https issuers).
pub const DEVICE_COOKIE: &str = "gatehouse_device";
/// How long a browser stays recognised after its last successful sign-in, in seconds.
pub const DEVICE_LIFETIME_SECS: i64 = 90 * 24 * 3600;

/// A device cookie's value as this server makes them: 32 random bytes in unpadded base64url.
fn plausible_device(value: &str) -> bool {
    value.len() == 43
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

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

/// The per-address counter of [`limits`] alone: checked before a sign-in form is read.
pub fn address_limit(source: IpAddr) -> Limit {
    let [address, _, _] = limits(source, "");
    address
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
    refund_address(state, limits, counted).await
}

/// The address's counters give back the place a right password took.
async fn refund_address(
    state: &AppState,
    limits: &[Limit; 3],
    counted: &[CounterState],
) -> Result<(), StoreError> {
    for (limit, state_after) in limits.iter().zip(counted).take(ACCOUNT_LIMIT) {
        state.store.refund_counter(limit, state_after.since).await?;
    }
    Ok(())
}

/// Counts a sign-in attempt by outcome (`success`, `failure`, `throttled`, `busy`).
pub fn count(outcome: Outcome) {
    metrics::counter!(crate::metrics::SIGNINS, "outcome" => outcome.as_str()).increment(1);
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
    /// The device cookie the attempt came with, if any (replaced by a new one).
    device: Option<TokenHash>,
    /// It came past the account's running delay on a recognised browser: the account's
    /// failures (strangers' guesses) are not forgotten, so the delay keeps holding for them.
    past_delay: bool,
}

/// Whether the browser's device cookie is on record for the account `email` names: then the
/// account (looked up here) comes back with `true`.
async fn recognised(
    state: &AppState,
    device: Option<&TokenHash>,
    email: &str,
    now: i64,
) -> Result<(Option<Account>, bool), StoreError> {
    let Some(device) = device else {
        return Ok((None, false));
    };
    let Some(holder) = state.store.device_account(device, now).await? else {
        return Ok((None, false));
    };
    let account = match Email::parse(email) {
        Ok(email) => state.store.account_by_email(&email).await?,
        Err(_) => None,
    };
    let matches = account.as_ref().is_some_and(|a| a.id == holder);
    Ok((account, matches))
}

/// The audit row of a sign-in attempt.
fn audit_row<'a>(
    event: Event,
    outcome: Outcome,
    account_id: Option<&'a str>,
    email_key: &'a str,
    ip: &'a str,
    detail: Option<&'a str>,
) -> AuditEvent<'a> {
    AuditEvent {
        account_id,
        subject: Some(email_key),
        source_ip: Some(ip),
        detail,
        ..AuditEvent::new(event, outcome)
    }
}

/// One sign-in attempt from `source` with `email` and `password` at `now` (Unix seconds), on a
/// reserved place of the password pool, from a browser that sent the device cookie `device`
/// (its value, if any): counted against the [`limits`] first (a refusal writes nothing) — less
/// the account's while it would refuse, for a browser recognised for that account — then the
/// password checked (a dummy verification for unknown emails); a failure is audited (`signin`
/// / `failure`, and `signin_throttled` for each limit it made refuse the next attempts), and a
/// failure that got past the account's delay on a recognised browser forgets that browser.
pub async fn attempt(
    state: &AppState,
    slot: PasswordSlot<'_>,
    source: IpAddr,
    email: &str,
    password: String,
    device: Option<&str>,
    now: i64,
) -> Result<Attempt, StoreError> {
    let mut admitted = match admit(state, source, email, device, now).await? {
        Ok(admitted) => admitted,
        Err(throttled) => return Ok(throttled),
    };
    let account = match admitted.known.take() {
        Some(account) => Some(account),
        None => match Email::parse(email) {
            Ok(email) => state.store.account_by_email(&email).await?,
            Err(_) => None,
        },
    };
    let verified = match slot
        .verify(password, account.as_ref().map(|a| a.password_hash.clone()))
        .await
    {
        Ok(verified) => verified,
        Err(e) => {
            tracing::warn!(error = %e, "a sign-in's password was not checked");
            count(Outcome::Busy);
            return Ok(Attempt::Busy);
        }
    };
    let reason = match (account, verified) {
        (Some(account), true) if account.status == AccountStatus::Active => {
            count(Outcome::Success);
            return Ok(Attempt::Verified(Box::new(admitted.verified(account))));
        }
        (Some(a), true) => (Some(a), "account disabled"),
        (a, _) => (a, "bad credentials"),
    };
    let (account, reason) = reason;
    count(Outcome::Failure);
    admitted
        .record_failure(state, source, account.as_ref(), reason, now)
        .await?;
    Ok(Attempt::Failed)
}

/// An attempt the [`limits`] admitted, counted against them: what checking its password and
/// recording its outcome need.
struct Admitted {
    /// The email as typed, trimmed and lowercased (at most 254 characters): the limits' key.
    email_key: String,
    limits: [Limit; 3],
    /// The counters' states after the attempt was counted.
    counted: Vec<CounterState>,
    /// The device cookie the attempt came with, if plausible.
    device: Option<TokenHash>,
    /// The account the email names, when it was looked up to recognise the browser.
    known: Option<Account>,
    /// It came past the account's running delay on a recognised browser.
    past_delay: bool,
}

/// Counts an attempt from `source` for `email` against the [`limits`] — less the account's
/// while it would refuse, for a browser whose device cookie (`device`) is recognised for the
/// account. Output: the attempt admitted, or [`Attempt::Throttled`] (nothing written, counted
/// as `throttled`). Errors: the store's.
async fn admit(
    state: &AppState,
    source: IpAddr,
    email: &str,
    device: Option<&str>,
    now: i64,
) -> Result<Result<Admitted, Attempt>, StoreError> {
    let email_key: String = email.trim().to_lowercase().chars().take(254).collect();
    let limits = limits(source, &email_key);
    let device = device.filter(|v| plausible_device(v)).map(TokenHash::of);
    let (known, trusted) = recognised(state, device.as_ref(), email, now).await?;
    // A recognised browser passes the account's delay (only while it runs: otherwise its
    // failures count against the account like anyone's).
    let past_delay = trusted
        && state
            .store
            .refusal(&limits[ACCOUNT_LIMIT..], now)
            .await?
            .is_some();
    let checked = if past_delay {
        &limits[..ACCOUNT_LIMIT]
    } else {
        &limits[..]
    };
    let counted = match state.store.admit(checked, now).await? {
        Admission::Admitted(counted) => counted,
        Admission::Refused { retry_after, limit } => {
            count(Outcome::Throttled);
            return Ok(Err(Attempt::Throttled {
                retry_after,
                account: limit == Some(ACCOUNT_LIMIT),
            }));
        }
    };
    Ok(Ok(Admitted {
        email_key,
        limits,
        counted,
        device,
        known,
        past_delay,
    }))
}

impl Admitted {
    /// The verified sign-in to `account`, to be finished once the session is signed in.
    fn verified(self, account: Account) -> Verified {
        Verified {
            account,
            limits: self.limits,
            counted: self.counted,
            email_key: self.email_key,
            device: self.device,
            past_delay: self.past_delay,
        }
    }

    /// Records a failed attempt from `source` (on `account`, when the email names one):
    /// audited (`signin` / `failure` with `reason`); a browser that got past the account's
    /// delay is forgotten (one guess, not more); each limit the failure made refuse the next
    /// attempts is audited (`signin_throttled` / `denied`). Errors: the store's.
    async fn record_failure(
        &self,
        state: &AppState,
        source: IpAddr,
        account: Option<&Account>,
        reason: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        let ip = source.to_string();
        let account_id = account.map(|a| a.id.as_str());
        let email_key = &self.email_key;
        let row = audit_row(
            Event::Signin,
            Outcome::Failure,
            account_id,
            email_key,
            &ip,
            Some(reason),
        );
        state.store.audit(row, now).await;
        if self.past_delay
            && let Some(device) = &self.device
        {
            // A recognised browser gets one guess past the delay, not more.
            state.store.forget_device(device).await?;
        }
        // This failure made a limit refuse the next attempts: worth a record of its own.
        for (limit, kind) in
            self.counted
                .iter()
                .zip(["per address", "per address and email", "per account"])
        {
            if Policy::blocks(limit) {
                let row = audit_row(
                    Event::SigninThrottled,
                    Outcome::Denied,
                    account_id,
                    email_key,
                    &ip,
                    Some(kind),
                );
                state.store.audit(row, now).await;
            }
        }
        Ok(())
    }
}

impl Verified {
    /// Finishes a sign-in once the session is signed in: the failures are forgotten
    /// ([`forget_failures`]), the browser recognised from now on (a new device cookie, which
    /// replaces the one it sent; returned for the response to set, see [`DEVICE_COOKIE`]) and
    /// the success audited: `signin` / `success` / `password` when the sign-in is complete,
    /// `signin_password` / `success` when a second factor is asked next
    /// (`second_factor_next`).
    pub async fn finish(
        self,
        state: &AppState,
        source: IpAddr,
        now: i64,
        second_factor_next: bool,
    ) -> Result<String, StoreError> {
        if self.past_delay {
            refund_address(state, &self.limits, &self.counted).await?;
        } else {
            forget_failures(state, &self.limits, &self.counted).await?;
        }
        if let Some(old) = &self.device {
            state.store.forget_device(old).await?;
        }
        let cookie = crate::domain::secret::random_urlsafe(32);
        state
            .store
            .remember_device(
                &TokenHash::of(&cookie),
                &self.account.id,
                now,
                now + DEVICE_LIFETIME_SECS,
            )
            .await?;
        let ip = source.to_string();
        let row = audit_row(
            if second_factor_next {
                Event::SigninPassword
            } else {
                Event::Signin
            },
            Outcome::Success,
            Some(&self.account.id),
            &self.email_key,
            &ip,
            Some("password"),
        );
        state.store.audit(row, now).await;
        Ok(cookie)
    }
}
