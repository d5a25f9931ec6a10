//! Invitations to a project (issue 37, "members invited in the console"): a project's owner
//! invites an email address with a role; the link (a random token, kept only as its SHA-256,
//! migration 0072) works once within [`INVITATION_TTL_SECS`] for that email alone. The
//! invited person accepts it signed in with that email, or creates their account with it.

use super::accounts::{Account, insert_account};
use super::{Store, StoreError};
use crate::domain::account::{Email, Role};
use crate::domain::secret::TokenHash;

/// How long an invitation link works: seven days, in seconds.
pub const INVITATION_TTL_SECS: i64 = 7 * 24 * 3600;

/// A new invitation, as the owner's form makes it.
#[derive(Debug, Clone)]
pub struct NewInvitation<'a> {
    /// SHA-256 of the link's token.
    pub token_hash: &'a TokenHash,
    /// The project the person is invited to.
    pub project_id: &'a str,
    /// The invited email (lowercased).
    pub email: &'a Email,
    /// The role they get on accepting.
    pub role: Role,
    /// The owner who invited them.
    pub invited_by: &'a str,
}

/// An unused, unexpired invitation, with what its page shows.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Invitation {
    /// The project it is to.
    pub project_id: String,
    /// The project's name.
    pub project_name: String,
    /// The invited email (lowercased).
    pub email: String,
    /// `read` or `write`.
    pub role: String,
    /// The email of the owner who invited.
    pub invited_by_email: String,
    /// When the link stops working (Unix seconds).
    pub expires_at: i64,
}

/// An invitation not yet accepted, as the project page lists it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PendingInvitation {
    /// The invited email.
    pub email: String,
    /// `read` or `write`.
    pub role: String,
    /// When its link stops working (Unix seconds).
    pub expires_at: i64,
}

/// What accepting an invitation with a new account came to
/// ([`Store::accept_invitation_as_new`]).
#[derive(Debug)]
pub enum Accepted {
    /// The account was created and is now a member of the project with the invitation's role.
    Joined {
        /// The project joined.
        project_id: String,
        /// The account created.
        account: Account,
    },
    /// The link is unknown, used, expired, or its project gone: nothing was written.
    Invalid,
    /// An account with the invited email exists already: it must sign in to accept.
    AccountExists,
}

impl Store {
    /// Stores an invitation good until `now + INVITATION_TTL_SECS`. An unused invitation of
    /// the same email to the same project is replaced (its link stops working), so the newest
    /// link and role are the only ones.
    pub async fn create_invitation(
        &self,
        new: &NewInvitation<'_>,
        now: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "DELETE FROM project_invitations WHERE project_id = $1 AND email = $2 AND used_at IS NULL",
        )
        .bind(new.project_id)
        .bind(new.email.as_str())
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO project_invitations \
             (token_hash, project_id, email, role, invited_by, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(new.token_hash.as_str())
        .bind(new.project_id)
        .bind(new.email.as_str())
        .bind(new.role.as_str())
        .bind(new.invited_by)
        .bind(now)
        .bind(now + INVITATION_TTL_SECS)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The invitation whose link token hashes to `hash`, while it is unused and unexpired at
    /// `now` and its project active; `None` otherwise.
    pub async fn invitation(
        &self,
        hash: &TokenHash,
        now: i64,
    ) -> Result<Option<Invitation>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT i.project_id, p.name AS project_name, i.email, i.role, \
             a.email AS invited_by_email, i.expires_at \
             FROM project_invitations i JOIN projects p ON p.id = i.project_id \
             JOIN accounts a ON a.id = i.invited_by \
             WHERE i.token_hash = $1 AND i.used_at IS NULL AND i.expires_at > $2 \
             AND p.status = 'active'",
        )
        .bind(hash.as_str())
        .bind(now)
        .fetch_optional(&self.pool())
        .await?)
    }

    /// Withdraws the unused invitation of `email` to `project_id` (its link stops working).
    /// Returns whether there was one.
    pub async fn withdraw_invitation(
        &self,
        project_id: &str,
        email: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "DELETE FROM project_invitations WHERE project_id = $1 AND email = $2 AND used_at IS NULL",
        )
        .bind(project_id)
        .bind(email)
        .execute(&self.writer())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The project of the used invitation whose link token hashes to `hash`, and the account
    /// that used it; `None` for a link never used (or unknown).
    pub async fn used_invitation(
        &self,
        hash: &TokenHash,
    ) -> Result<Option<(String, Option<String>)>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT project_id, used_by FROM project_invitations \
             WHERE token_hash = $1 AND used_at IS NOT NULL",
        )
        .bind(hash.as_str())
        .fetch_optional(&self.pool())
        .await?)
    }

    /// The project's invitations not yet accepted and still working at `now`, by email.
    pub async fn pending_invitations(
        &self,
        project_id: &str,
        now: i64,
    ) -> Result<Vec<PendingInvitation>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT email, role, expires_at FROM project_invitations \
             WHERE project_id = $1 AND used_at IS NULL AND expires_at > $2 ORDER BY email",
        )
        .bind(project_id)
        .bind(now)
        .fetch_all(&self.pool())
        .await?)
    }

    /// Accepts the invitation for the signed-in `account` (whose email the caller checked is
    /// the invited one): in one transaction, spends the link (only if unused, unexpired, its
    /// project active and its email the account's) and makes the account a member with the
    /// invitation's role. The project joined, or `None` when the link no longer works (another
    /// request spent it first, it expired): nothing written then.
    pub async fn accept_invitation(
        &self,
        hash: &TokenHash,
        account: &Account,
        now: i64,
    ) -> Result<Option<String>, StoreError> {
        let mut tx = self.begin_write().await?;
        let Some((project_id, role)) =
            spend(&mut tx, hash, &account.email, &account.id, now).await?
        else {
            return Ok(None);
        };
        join(&mut tx, &project_id, &account.id, &role, now).await?;
        tx.commit().await?;
        self.auth_changed().await;
        Ok(Some(project_id))
    }

    /// Accepts the invitation of `email` by creating its account with `password_hash`
    /// (argon2id), in one transaction with spending the link and the membership. Nothing is
    /// written when an account with the email exists ([`Accepted::AccountExists`]) or the link
    /// no longer works ([`Accepted::Invalid`]).
    pub async fn accept_invitation_as_new(
        &self,
        hash: &TokenHash,
        email: &Email,
        password_hash: &str,
        now: i64,
    ) -> Result<Accepted, StoreError> {
        let mut tx = self.begin_write().await?;
        let account = match insert_account(&mut *tx, email, password_hash, now).await {
            Ok(account) => account,
            Err(StoreError::Conflict(_)) => return Ok(Accepted::AccountExists),
            Err(e) => return Err(e),
        };
        let Some((project_id, role)) =
            spend(&mut tx, hash, email.as_str(), &account.id, now).await?
        else {
            return Ok(Accepted::Invalid);
        };
        join(&mut tx, &project_id, &account.id, &role, now).await?;
        tx.commit().await?;
        self.auth_changed().await;
        Ok(Accepted::Joined {
            project_id,
            account,
        })
    }
}

/// Deletes the unused invitations to `project_id` of `account_id`'s email: a member added,
/// given another role or removed since was decided on by the owner or the operator later, so
/// an older link must not undo it.
pub(super) async fn void_pending(
    tx: &mut super::WriteTx,
    project_id: &str,
    account_id: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "DELETE FROM project_invitations WHERE project_id = $1 AND used_at IS NULL \
         AND email = (SELECT email FROM accounts WHERE id = $2)",
    )
    .bind(project_id)
    .bind(account_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Marks the link used by `account_id` when it is unused, unexpired and for `email`; its
/// project and role, or `None` when another request spent it first (or it no longer works).
async fn spend(
    tx: &mut super::WriteTx,
    hash: &TokenHash,
    email: &str,
    account_id: &str,
    now: i64,
) -> Result<Option<(String, String)>, StoreError> {
    Ok(sqlx::query_as(
        "UPDATE project_invitations SET used_at = $1, used_by = $2 \
         WHERE token_hash = $3 AND used_at IS NULL AND expires_at > $1 AND email = $4 \
         AND project_id IN (SELECT id FROM projects WHERE status = 'active') \
         RETURNING project_id, role",
    )
    .bind(now)
    .bind(account_id)
    .bind(hash.as_str())
    .bind(email)
    .fetch_optional(&mut **tx)
    .await?)
}

/// Makes `account_id` a member of `project_id` with `role` (a member already gets the role of
/// the invitation: every later change by the owner voided it, see [`void_pending`]).
async fn join(
    tx: &mut super::WriteTx,
    project_id: &str,
    account_id: &str,
    role: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO memberships (project_id, account_id, role, created_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (project_id, account_id) DO UPDATE SET role = excluded.role",
    )
    .bind(project_id)
    .bind(account_id)
    .bind(role)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
