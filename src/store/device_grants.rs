//! Device authorizations (table `device_authorizations`, migration 0021): the state of each
//! device authorization request of RFC 8628 between `POST /oauth/device_authorization`, the
//! person's answer at `/device` and the client's polls at the token endpoint.
//!
//! Both codes are looked up by their SHA-256 only. The person's answer is one conditional
//! update (`pending` → `approved` / `denied`, while unexpired), so a request is answered once
//! even when two instances receive answers at the same moment; an approval writes the
//! authorization code the poll then redeems in the same transaction.

use super::oauth::CodeRecord;
use super::{Store, StoreError};
use crate::domain::device::{DeviceStatus, PollFacts};
use crate::domain::secret::TokenHash;

/// A device authorization as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRecord {
    /// SHA-256 of the device code.
    pub device_code_hash: TokenHash,
    /// The client that asked.
    pub client_id: String,
    /// The validated request (JSON of
    /// [`AuthorizationRequest`](crate::oauth::authorize::AuthorizationRequest)).
    pub request: String,
    /// Where it stands.
    pub status: DeviceStatus,
    /// The authorization code issued on approval (its SHA-256).
    pub code_hash: Option<TokenHash>,
    /// The interval the client must keep between polls, seconds.
    pub poll_interval: i64,
    /// The previous poll, Unix seconds.
    pub last_polled_at: Option<i64>,
    /// Unix seconds.
    pub expires_at: i64,
}

impl DeviceRecord {
    /// What [`crate::domain::device::decide_poll`] needs.
    pub fn facts(&self) -> PollFacts {
        PollFacts {
            status: self.status,
            expires_at: self.expires_at,
            interval: self.poll_interval,
            last_polled_at: self.last_polled_at,
        }
    }
}

/// A new device authorization to store.
#[derive(Debug, Clone)]
pub struct NewDevice<'a> {
    /// SHA-256 of the device code.
    pub device_code_hash: &'a TokenHash,
    /// SHA-256 of the user code in its normal form.
    pub user_code_hash: &'a TokenHash,
    /// The client.
    pub client_id: &'a str,
    /// The validated request (JSON).
    pub request: &'a str,
    /// Seconds between polls.
    pub poll_interval: i64,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds.
    pub expires_at: i64,
}

type Row = (
    String,
    String,
    String,
    String,
    Option<String>,
    i64,
    Option<i64>,
    i64,
);

const SELECT: &str = "SELECT device_code_hash, client_id, request, status, code_hash, poll_interval, \
     last_polled_at, expires_at FROM device_authorizations";

/// A row as a record; a status the schema's CHECK does not allow reads as `denied`, a refusal.
fn record(row: Row) -> Result<DeviceRecord, StoreError> {
    let (hash, client_id, request, status, code_hash, poll_interval, last_polled_at, expires_at) =
        row;
    Ok(DeviceRecord {
        device_code_hash: TokenHash::from_hex(hash),
        client_id,
        request,
        status: DeviceStatus::parse(&status).unwrap_or(DeviceStatus::Denied),
        code_hash: code_hash.map(TokenHash::from_hex),
        poll_interval,
        last_polled_at,
        expires_at,
    })
}

impl Store {
    /// Stores a new device authorization (status `pending`).
    ///
    /// Errors: [`StoreError::Conflict`] when the user code's hash is already stored (the caller
    /// draws another code), [`StoreError::Database`].
    pub async fn insert_device_authorization(&self, d: &NewDevice<'_>) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO device_authorizations (device_code_hash, user_code_hash, client_id, request, \
             poll_interval, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(d.device_code_hash.as_str())
        .bind(d.user_code_hash.as_str())
        .bind(d.client_id)
        .bind(d.request)
        .bind(d.poll_interval)
        .bind(d.created_at)
        .bind(d.expires_at)
        .execute(&self.writer())
        .await
        .map_err(|e| StoreError::from_insert(e, "user code"))?;
        Ok(())
    }

    /// The device authorization of a device code's hash, whatever its state.
    pub async fn device_authorization(
        &self,
        device_code_hash: &TokenHash,
    ) -> Result<Option<DeviceRecord>, StoreError> {
        let row: Option<Row> = sqlx::query_as(&format!("{SELECT} WHERE device_code_hash = $1"))
            .bind(device_code_hash.as_str())
            .fetch_optional(&self.pool())
            .await?;
        row.map(record).transpose()
    }

    /// The pending, unexpired (at `now`) device authorization of a user code's hash, if any.
    pub async fn pending_device_by_user_code(
        &self,
        user_code_hash: &TokenHash,
        now: i64,
    ) -> Result<Option<DeviceRecord>, StoreError> {
        let row: Option<Row> = sqlx::query_as(&format!(
            "{SELECT} WHERE user_code_hash = $1 AND status = 'pending' AND expires_at > $2"
        ))
        .bind(user_code_hash.as_str())
        .bind(now)
        .fetch_optional(&self.pool())
        .await?;
        row.map(record).transpose()
    }

    /// Records a poll of a pending device authorization at `now`, with the interval the client
    /// must keep from now on (seconds).
    pub async fn note_device_poll(
        &self,
        device_code_hash: &TokenHash,
        interval: i64,
        now: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE device_authorizations SET last_polled_at = $2, poll_interval = $3 \
             WHERE device_code_hash = $1 AND status = 'pending'",
        )
        .bind(device_code_hash.as_str())
        .bind(now)
        .bind(interval)
        .execute(&self.writer())
        .await?;
        Ok(())
    }

    /// The person's approval: in one transaction, moves the pending, unexpired (at `now`)
    /// authorization to `approved` for `code.account_id` and stores `code`, the authorization
    /// code the client's next poll redeems. `false` (nothing written) when it was already
    /// answered or has expired.
    pub async fn approve_device(
        &self,
        device_code_hash: &TokenHash,
        code: &CodeRecord,
        now: i64,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let won = sqlx::query(
            "UPDATE device_authorizations SET status = 'approved', account_id = $2, code_hash = $3 \
             WHERE device_code_hash = $1 AND status = 'pending' AND expires_at > $4",
        )
        .bind(device_code_hash.as_str())
        .bind(&code.account_id)
        .bind(code.code_hash.as_str())
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if !won {
            tx.rollback().await?;
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO authorization_codes (code_hash, client_id, account_id, consent_id, redirect_uri, \
             code_challenge, resource, scope, issuer, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(code.code_hash.as_str())
        .bind(&code.client_id)
        .bind(&code.account_id)
        .bind(&code.consent_id)
        .bind(&code.redirect_uri)
        .bind(&code.code_challenge)
        .bind(&code.resource)
        .bind(&code.scope)
        .bind(&code.issuer)
        .bind(code.created_at)
        .bind(code.expires_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The person's denial: moves the pending, unexpired (at `now`) authorization to `denied`.
    /// `false` when it was already answered or has expired.
    pub async fn deny_device(
        &self,
        device_code_hash: &TokenHash,
        account_id: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "UPDATE device_authorizations SET status = 'denied', account_id = $2 \
             WHERE device_code_hash = $1 AND status = 'pending' AND expires_at > $3",
        )
        .bind(device_code_hash.as_str())
        .bind(account_id)
        .bind(now)
        .execute(&self.writer())
        .await?
        .rows_affected()
            == 1)
    }
}
