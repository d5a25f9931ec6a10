//! [`AppState`]: what every handler shares (configuration, database, client resolver, password
//! pool). Its own module so that features depend on it without depending on the wiring in `app`.

use std::sync::Arc;

use crate::clients::ClientResolver;
use crate::config::Config;
use crate::domain::server_key::Keyring;
use crate::password::PasswordPool;
use crate::store::Store;

/// Shared state of every handler. Cheap to clone: one shared reference to its [`AppParts`].
#[derive(Clone, Debug)]
pub struct AppState(Arc<AppParts>);

impl AppState {
    /// The state of `parts`.
    pub fn new(parts: AppParts) -> AppState {
        AppState(Arc::new(parts))
    }

    /// This state with `store` (a serving lane's, [`Store::for_lane`]) in place of its own;
    /// everything else shared.
    #[must_use]
    pub fn with_store(&self, store: Store) -> AppState {
        AppState(Arc::new(AppParts {
            store,
            ..AppParts::clone(&self.0)
        }))
    }
}

impl std::ops::Deref for AppState {
    type Target = AppParts;

    fn deref(&self) -> &AppParts {
        &self.0
    }
}

/// What an [`AppState`] holds.
#[derive(Debug, Clone)]
pub struct AppParts {
    /// The configuration read at start.
    pub config: Arc<Config>,
    /// The database.
    pub store: Store,
    /// Finds clients: registered ones and URL-shaped ones (client ID metadata documents).
    pub clients: Arc<ClientResolver>,
    /// The fixed pool that hashes and verifies passwords (`GATEHOUSE_PASSWORD_WORKERS`,
    /// `GATEHOUSE_PASSWORD_QUEUE`).
    pub passwords: PasswordPool,
    /// The server key that seals stored secrets (`GATEHOUSE_SECRET_KEY` or the key file),
    /// loaded once at start; `None` on `PostgreSQL` without a configured key, where sealing is
    /// refused with [`AppParts::keyring`]'s message.
    pub server_keys: Option<Arc<Keyring>>,
    /// The mail sender of password resets (`GATEHOUSE_SMTP_URL`); `None` when unset.
    pub mailer: Option<Arc<crate::mail::Mailer>>,
}

/// What sealing or opening is refused with when no server key is configured.
pub const NO_SERVER_KEY: &str = "no server key: set GATEHOUSE_SECRET_KEY (the same value on every instance) or GATEHOUSE_SECRET_KEY_FILE";

impl AppParts {
    /// The server key, or [`NO_SERVER_KEY`] as the error.
    pub fn keyring(&self) -> Result<&Keyring, &'static str> {
        self.server_keys.as_deref().ok_or(NO_SERVER_KEY)
    }
}
