//! [`AppState`]: what every handler shares (configuration, database, client resolver, password
//! pool). Its own module so that features depend on it without depending on the wiring in `app`.

use std::sync::Arc;

use crate::config::Config;
use crate::oauth::clients::ClientResolver;
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
}

impl std::ops::Deref for AppState {
    type Target = AppParts;

    fn deref(&self) -> &AppParts {
        &self.0
    }
}

/// What an [`AppState`] holds.
#[derive(Debug)]
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
}
