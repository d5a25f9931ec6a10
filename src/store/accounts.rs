//! Accounts and first-run setup tokens.

use super::{Flag, Store, StoreError, new_id};
use crate::domain::account::{AccountStatus, Email};
use crate::domain::secret::TokenHash;

/// A stored account.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Account {
    /// Random identifier (UUID text).
    pub id: String,
    /// Lowercased email address.
    pub email: String,
    /// argon2id PHC string.
    pub password_hash: String,
    /// Active or disabled.
    #[sqlx(try_from = "String")]
    pub status: AccountStatus,
    /// Unix seconds.
    pub created_at: i64,
    /// Browser sessions are valid only while they carry this number; ending every session
    /// raises it.
    pub session_epoch: i64,
    /// An operator (`gatehouse account admin EMAIL`): may use the console's upstream page.
    #[sqlx(try_from = "Flag")]
    pub admin: bool,
}

const ACCOUNT_COLUMNS: &str = "id, email, password_hash, status, created_at, session_epoch, admin";

/// Inserts an active account through `executor` (the pool or a transaction). Errors:
/// [`StoreError::Conflict`] when the email exists.
pub(super) async fn insert_account<'e>(
    executor: impl sqlx::Executor<'e, Database = sqlx::Any>,
    email: &Email,
    password_hash: &str,
    now: i64,
) -> Result<Account, StoreError> {
    let id = new_id();
    sqlx::query(
        "INSERT INTO accounts (id, email, password_hash, status, created_at) \
         VALUES ($1, $2, $3, 'active', $4)",
    )
    .bind(&id)
    .bind(email.as_str())
    .bind(password_hash)
    .bind(now)
    .execute(executor)
    .await
    .map_err(|e| StoreError::from_insert(e, &format!("account {}", email.as_str())))?;
    Ok(Account {
        id,
        email: email.as_str().to_string(),
        password_hash: password_hash.to_string(),
        status: AccountStatus::Active,
        created_at: now,
        session_epoch: 0,
        admin: false,
    })
}

impl Store {
    /// Creates an active account. Errors: [`StoreError::Conflict`] when the email exists.
    pub async fn create_account(
        &self,
        email: &Email,
        password_hash: &str,
        now: i64,
    ) -> Result<Account, StoreError> {
        insert_account(&self.pool(), email, password_hash, now).await
    }

    /// The account with this (lowercased) email, if any.
    pub async fn account_by_email(&self, email: &Email) -> Result<Option<Account>, StoreError> {
        self.account_where("email", email.as_str()).await
    }

    /// The account with this id, if any.
    pub async fn account_by_id(&self, id: &str) -> Result<Option<Account>, StoreError> {
        self.account_where("id", id).await
    }

    /// The account whose unique `column` (a fixed name, never input) holds `value`.
    async fn account_where(
        &self,
        column: &'static str,
        value: &str,
    ) -> Result<Option<Account>, StoreError> {
        Ok(sqlx::query_as(&format!(
            "SELECT {ACCOUNT_COLUMNS} FROM accounts WHERE {column} = $1"
        ))
        .bind(value)
        .fetch_optional(&self.pool())
        .await?)
    }

    /// Sets an account's status. Errors: [`StoreError::NotFound`] for an unknown email.
    pub async fn set_account_status(
        &self,
        email: &Email,
        status: AccountStatus,
    ) -> Result<(), StoreError> {
        let done = sqlx::query("UPDATE accounts SET status = $1 WHERE email = $2")
            .bind(status.as_str())
            .bind(email.as_str())
            .execute(&self.writer())
            .await?;
        self.auth_changed().await;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("account {}", email.as_str())));
        }
        Ok(())
    }

    /// Makes the account with this email an operator (`admin` true) or no longer one
    /// (`gatehouse account admin EMAIL [--revoke]`). Returns whether it changed.
    ///
    /// Errors: [`StoreError::NotFound`] for an unknown email.
    pub async fn set_account_admin(&self, email: &Email, admin: bool) -> Result<bool, StoreError> {
        let Some(account) = self.account_by_email(email).await? else {
            return Err(StoreError::NotFound(format!("account {}", email.as_str())));
        };
        if account.admin == admin {
            return Ok(false);
        }
        sqlx::query("UPDATE accounts SET admin = $1 WHERE id = $2")
            .bind(i64::from(admin))
            .bind(&account.id)
            .execute(&self.writer())
            .await?;
        Ok(true)
    }

    /// How many accounts exist.
    pub async fn count_accounts(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar("SELECT COUNT(*) AS n FROM accounts")
            .fetch_one(&self.pool())
            .await?)
    }

    /// Stores a first-run setup token's hash, valid until `expires_at` (Unix seconds) or used.
    pub async fn create_setup_token(
        &self,
        hash: &TokenHash,
        now: i64,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO setup_tokens (token_hash, created_at, expires_at) VALUES ($1, $2, $3)",
        )
        .bind(hash.as_str())
        .bind(now)
        .bind(expires_at)
        .execute(&self.writer())
        .await?;
        Ok(())
    }

    /// Whether a setup token is unused, unexpired and still needed: once any account exists
    /// (made on the command line, by `GATEHOUSE_BOOTSTRAP_EMAIL`, or with the link itself),
    /// every setup link is void.
    pub async fn setup_token_valid(&self, hash: &TokenHash, now: i64) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "SELECT 1 AS ok FROM setup_tokens WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 \
             AND NOT EXISTS (SELECT 1 FROM accounts)",
        )
        .bind(hash.as_str())
        .bind(now)
        .fetch_optional(&self.pool())
        .await?
        .is_some())
    }

    /// Spends a setup token and creates the first account, atomically: returns `Ok(None)` when
    /// the token is unknown, used or expired, or an account already exists (nothing is
    /// written then).
    pub async fn create_account_with_setup_token(
        &self,
        hash: &TokenHash,
        email: &Email,
        password_hash: &str,
        now: i64,
    ) -> Result<Option<Account>, StoreError> {
        let mut tx = self.begin_write().await?;
        let spent = sqlx::query(
            "UPDATE setup_tokens SET used_at = $1 WHERE token_hash = $2 AND used_at IS NULL AND expires_at > $1 \
             AND NOT EXISTS (SELECT 1 FROM accounts)",
        )
        .bind(now)
        .bind(hash.as_str())
        .execute(&mut *tx)
        .await?;
        if spent.rows_affected() != 1 {
            return Ok(None);
        }
        let account = insert_account(&mut *tx, email, password_hash, now).await?;
        tx.commit().await?;
        Ok(Some(account))
    }

    /// Replaces the account's password hash. With `end_sessions` the session epoch is raised
    /// in the same statement, so every browser session signed in before ends. Returns the
    /// account's session epoch afterwards (`None` for an unknown account).
    pub async fn set_password_hash(
        &self,
        account_id: &str,
        password_hash: &str,
        end_sessions: bool,
    ) -> Result<Option<i64>, StoreError> {
        Ok(sqlx::query_scalar(
            "UPDATE accounts SET password_hash = $1, \
             session_epoch = session_epoch + (CASE WHEN $2 THEN 1 ELSE 0 END) \
             WHERE id = $3 RETURNING session_epoch",
        )
        .bind(password_hash)
        .bind(end_sessions)
        .bind(account_id)
        .fetch_optional(&self.writer())
        .await?)
    }

    /// Ends every browser session of the account by raising its session epoch. Returns the new
    /// epoch (`None` for an unknown account).
    pub async fn end_sessions(&self, account_id: &str) -> Result<Option<i64>, StoreError> {
        Ok(sqlx::query_scalar(
            "UPDATE accounts SET session_epoch = session_epoch + 1 WHERE id = $1 RETURNING session_epoch",
        )
        .bind(account_id)
        .fetch_optional(&self.writer())
        .await?)
    }
}

/// The account columns, each prefixed with `a.` for queries that join `accounts AS a`.
const ACCOUNT_COLUMNS_A: &str =
    "a.id, a.email, a.password_hash, a.status, a.created_at, a.session_epoch, a.admin";

impl Store {
    /// Every account, oldest first (for `gatehouse account list`).
    pub async fn list_accounts(&self) -> Result<Vec<Account>, StoreError> {
        Ok(sqlx::query_as(&format!(
            "SELECT {ACCOUNT_COLUMNS} FROM accounts ORDER BY created_at, email"
        ))
        .fetch_all(&self.pool())
        .await?)
    }

    /// Stores a password-reset link's token hash for `account_id`, good for one use until
    /// `expires_at` (Unix seconds).
    pub async fn create_reset_token(
        &self,
        hash: &TokenHash,
        account_id: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO password_reset_tokens (token_hash, account_id, created_at, expires_at) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind(hash.as_str())
        .bind(account_id)
        .bind(now)
        .bind(expires_at)
        .execute(&self.writer())
        .await?;
        Ok(())
    }

    /// The account a password-reset token is for, while the token is unused and unexpired
    /// (`None` otherwise). Disabled accounts are returned too: a reset sets their password
    /// but does not enable them.
    pub async fn reset_token_account(
        &self,
        hash: &TokenHash,
        now: i64,
    ) -> Result<Option<Account>, StoreError> {
        Ok(sqlx::query_as(&format!(
            "SELECT {ACCOUNT_COLUMNS_A} FROM password_reset_tokens AS t \
             JOIN accounts AS a ON a.id = t.account_id \
             WHERE t.token_hash = $1 AND t.used_at IS NULL AND t.expires_at > $2"
        ))
        .bind(hash.as_str())
        .bind(now)
        .fetch_optional(&self.pool())
        .await?)
    }

    /// Spends a password-reset token and sets its account's password, atomically: the
    /// account's other unused reset tokens are spent with it and its session epoch raised (every
    /// browser session ends; grants and keys stay). Returns the account as it is afterwards,
    /// or `Ok(None)` when the token is unknown, used or expired (nothing is written then).
    pub async fn reset_password_with_token(
        &self,
        hash: &TokenHash,
        password_hash: &str,
        now: i64,
    ) -> Result<Option<Account>, StoreError> {
        let mut tx = self.begin_write().await?;
        let account_id: Option<String> = sqlx::query_scalar(
            "UPDATE password_reset_tokens SET used_at = $1 \
             WHERE token_hash = $2 AND used_at IS NULL AND expires_at > $1 RETURNING account_id",
        )
        .bind(now)
        .bind(hash.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        let Some(account_id) = account_id else {
            return Ok(None);
        };
        sqlx::query(
            "UPDATE password_reset_tokens SET used_at = $1 WHERE account_id = $2 AND used_at IS NULL",
        )
        .bind(now)
        .bind(&account_id)
        .execute(&mut *tx)
        .await?;
        let account: Option<Account> = sqlx::query_as(&format!(
            "UPDATE accounts SET password_hash = $1, session_epoch = session_epoch + 1 \
             WHERE id = $2 RETURNING {ACCOUNT_COLUMNS}"
        ))
        .bind(password_hash)
        .bind(&account_id)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(account)
    }

    /// Spends every unused password-reset token of the account (after its password was set
    /// another way, the links mailed before must not set it again).
    pub async fn void_reset_tokens(&self, account_id: &str, now: i64) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE password_reset_tokens SET used_at = $1 WHERE account_id = $2 AND used_at IS NULL",
        )
        .bind(now)
        .bind(account_id)
        .execute(&self.writer())
        .await?;
        Ok(())
    }
}
