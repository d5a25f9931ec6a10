//! Where the server key comes from (`GATEHOUSE_SECRET_KEY`, `GATEHOUSE_SECRET_KEY_FILE`,
//! `GATEHOUSE_SECRET_KEY_PREVIOUS`) and loading it: the one place that reads or creates the key
//! file. The sealing itself is [`crate::domain::server_key`].
//!
//! - `GATEHOUSE_SECRET_KEY`: the key itself (base64 or 64 hex digits of 32 bytes).
//! - otherwise a key file: `GATEHOUSE_SECRET_KEY_FILE`, or by default, on `SQLite`, the
//!   database file's name with `.key` appended, in the same folder (`gatehouse.db.key`). A
//!   missing file is created on first start with a new random key, mode 0600; an existing one
//!   readable by group or others is refused. Its lines: the current key first, then previous
//!   keys (blank lines and `#` comments ignored).
//! - `GATEHOUSE_SECRET_KEY_PREVIOUS`: comma-separated previous keys, kept only to open values
//!   sealed before a rotation.
//!
//! On `PostgreSQL` there is no default file: every instance must hold the same key, so it is
//! configured explicitly (the same `GATEHOUSE_SECRET_KEY` from the deployment's secret store,
//! or the same file at `GATEHOUSE_SECRET_KEY_FILE` on each machine). Without one the server
//! runs, and what needs sealing is refused with a message naming these variables.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::ConfigError;
use crate::domain::server_key::{Keyring, ServerKey};

/// Where the current key comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum KeySource {
    /// `GATEHOUSE_SECRET_KEY`.
    Value(ServerKeyText),
    /// A key file, created on first load when missing.
    File(PathBuf),
    /// An in-memory `SQLite` database: nothing outlives the process, so a new random key per
    /// process is right.
    Ephemeral,
    /// `PostgreSQL` without a configured key: nothing can be sealed.
    Unset,
}

/// A key given in the environment, parsed at load (its `Debug` shows only the key id).
#[derive(Debug, Clone)]
pub struct ServerKeyText(pub ServerKey);

impl PartialEq for ServerKeyText {
    fn eq(&self, other: &Self) -> bool {
        self.0.id() == other.0.id()
    }
}

/// The server-key settings, parsed (without I/O) by [`super::Config::from_vars`]; loaded once
/// at start by [`ServerKeySettings::load`].
#[derive(Debug, Clone, PartialEq)]
pub struct ServerKeySettings {
    /// Where the current key comes from.
    pub source: KeySource,
    /// `GATEHOUSE_SECRET_KEY_PREVIOUS`: keys kept only for opening.
    pub previous: Vec<ServerKeyText>,
}

/// The variable named in messages about the key file.
const FILE_VAR: &str = "GATEHOUSE_SECRET_KEY_FILE";

impl ServerKeySettings {
    /// Reads the three variables; `database_url` decides the default file.
    ///
    /// Errors: a key that is not 32 bytes of base64 or hex, or both `GATEHOUSE_SECRET_KEY` and
    /// `GATEHOUSE_SECRET_KEY_FILE` set.
    pub(super) fn from_vars(
        value: Option<&str>,
        file: Option<&str>,
        previous: Option<&str>,
        database_url: &str,
    ) -> Result<ServerKeySettings, ConfigError> {
        let source = match (value, file) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::new(
                    "GATEHOUSE_SECRET_KEY",
                    "set either GATEHOUSE_SECRET_KEY or GATEHOUSE_SECRET_KEY_FILE, not both",
                ));
            }
            (Some(text), None) => KeySource::Value(ServerKeyText(
                ServerKey::parse(text)
                    .map_err(|e| ConfigError::new("GATEHOUSE_SECRET_KEY", e.to_string()))?,
            )),
            (None, Some(path)) => KeySource::File(PathBuf::from(path)),
            (None, None) => default_source(database_url),
        };
        let mut keys = Vec::new();
        for item in previous
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let key = ServerKey::parse(item).map_err(|e| {
                ConfigError::new("GATEHOUSE_SECRET_KEY_PREVIOUS", format!("each key {e}"))
            })?;
            keys.push(ServerKeyText(key));
        }
        Ok(ServerKeySettings {
            source,
            previous: keys,
        })
    }

    /// Loads the keyring: the configured key, or the key file (created with a new random key
    /// and mode 0600 when missing). `Ok(None)` on `PostgreSQL` without a configured key.
    ///
    /// Errors (one line naming the variable): the file cannot be read or created, is readable
    /// by group or others, or holds no valid key.
    pub fn load(&self) -> Result<Option<Keyring>, ConfigError> {
        let (current, mut previous) = match &self.source {
            KeySource::Unset => return Ok(None),
            KeySource::Ephemeral => (ServerKey::generate(), Vec::new()),
            KeySource::Value(text) => (text.0.clone(), Vec::new()),
            KeySource::File(path) => read_or_create(path)?,
        };
        previous.extend(self.previous.iter().map(|t| t.0.clone()));
        Ok(Some(Keyring::new(current, previous)))
    }

    /// The key file this configuration uses, if any (for messages and `secret-key rotate`).
    pub fn file(&self) -> Option<&Path> {
        match &self.source {
            KeySource::File(path) => Some(path),
            _ => None,
        }
    }
}

/// The default source: `<database file>.key` beside a `SQLite` file; a per-process key for an
/// in-memory `SQLite` database; nothing on `PostgreSQL`.
fn default_source(database_url: &str) -> KeySource {
    let Some(rest) = database_url.strip_prefix("sqlite:") else {
        return KeySource::Unset;
    };
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    if path.is_empty() || path == ":memory:" || query.split('&').any(|p| p == "mode=memory") {
        return KeySource::Ephemeral;
    }
    KeySource::File(PathBuf::from(format!("{path}.key")))
}

/// Reads the key file, or creates it (mode 0600, a new random key) when it does not exist.
fn read_or_create(path: &Path) -> Result<(ServerKey, Vec<ServerKey>), ConfigError> {
    match create(path) {
        Ok(key) => return Ok((key, Vec::new())),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(ConfigError::new(
                FILE_VAR,
                format!("cannot create the key file {}: {e}", path.display()),
            ));
        }
    }
    check_mode(path)?;
    // Another process may be writing it this very moment (two first starts at once): the
    // write is one small `write_all`, so a short wait sees it whole.
    let mut text = String::new();
    for _ in 0..50 {
        text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::new(
                FILE_VAR,
                format!("cannot read the key file {}: {e}", path.display()),
            )
        })?;
        if keys_in(&text).next().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut keys = Vec::new();
    for (n, line) in keys_in(&text) {
        keys.push(ServerKey::parse(line).map_err(|e| {
            ConfigError::new(
                FILE_VAR,
                format!("{} line {n}: the key {e}", path.display()),
            )
        })?);
    }
    let mut keys = keys.into_iter();
    let current = keys
        .next()
        .ok_or_else(|| ConfigError::new(FILE_VAR, format!("{} holds no key", path.display())))?;
    Ok((current, keys.collect()))
}

/// The lines of a key file that hold keys, with their 1-based line numbers.
fn keys_in(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
}

/// The text of a key file holding `current` then `previous` keys.
pub fn key_file_text(current: &ServerKey, previous: &[ServerKey]) -> String {
    let mut text = String::from(
        "# Gatehouse server key: the first key seals, the others only open (README \"Server key\").\n# Keep this file secret and back it up with the database: without it, sealed values cannot be read.\n",
    );
    for key in std::iter::once(current).chain(previous) {
        text.push_str(&key.to_base64());
        text.push('\n');
    }
    text
}

/// Creates the file with a new key; `AlreadyExists` when it is there.
fn create(path: &Path) -> std::io::Result<ServerKey> {
    let key = ServerKey::generate();
    let mut file = new_private_file(path)?;
    file.write_all(key_file_text(&key, &[]).as_bytes())?;
    file.sync_all()?;
    Ok(key)
}

/// Opens `path` for writing, created now with mode 0600 (owner read and write only).
pub fn new_private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    options.open(path)
}

/// Refuses a key file that group or others may read or write.
fn check_mode(path: &Path) -> Result<(), ConfigError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(path)
            .map_err(|e| {
                ConfigError::new(FILE_VAR, format!("cannot read {}: {e}", path.display()))
            })?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(ConfigError::new(
                FILE_VAR,
                format!(
                    "{} may be read by others (mode {:o}); run chmod 600 on it",
                    path.display(),
                    mode & 0o777
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(
        value: Option<&str>,
        file: Option<&str>,
        db: &str,
    ) -> Result<ServerKeySettings, ConfigError> {
        ServerKeySettings::from_vars(value, file, None, db)
    }

    #[test]
    fn the_default_file_sits_beside_the_sqlite_file() {
        let s = settings(None, None, "sqlite:///var/lib/gatehouse/g.db?mode=rwc").unwrap();
        assert_eq!(
            s.source,
            KeySource::File(PathBuf::from("/var/lib/gatehouse/g.db.key"))
        );
        let s = settings(None, None, "sqlite://gatehouse.db?mode=rwc").unwrap();
        assert_eq!(s.source, KeySource::File(PathBuf::from("gatehouse.db.key")));
        let s = settings(None, None, "sqlite::memory:").unwrap();
        assert_eq!(s.source, KeySource::Ephemeral);
        let s = settings(None, None, "postgres://db/gatehouse").unwrap();
        assert_eq!(s.source, KeySource::Unset);
        assert_eq!(
            s.load().unwrap().map(|k| k.current().id().to_string()),
            None
        );
    }

    #[test]
    fn bad_keys_name_their_variable() {
        let e = settings(Some("short"), None, "postgres://db/g").unwrap_err();
        assert_eq!(e.variable, "GATEHOUSE_SECRET_KEY");
        let e = settings(Some(&"a".repeat(64)), Some("/k"), "postgres://db/g").unwrap_err();
        assert_eq!(e.variable, "GATEHOUSE_SECRET_KEY");
        let e =
            ServerKeySettings::from_vars(None, None, Some("x,y"), "sqlite::memory:").unwrap_err();
        assert_eq!(e.variable, "GATEHOUSE_SECRET_KEY_PREVIOUS");
    }

    /// First load creates the file with mode 0600 and a key; the next load reads the same
    /// key; a file others may read is refused.
    #[test]
    fn the_key_file_is_created_private_and_reused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db.key");
        let db = format!("sqlite://{}?mode=rwc", dir.path().join("g.db").display());
        let s = settings(None, None, &db).unwrap();
        let first = s.load().unwrap().unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = s.load().unwrap().unwrap();
        assert_eq!(first.current().id(), again.current().id());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = s.load().unwrap_err();
        assert_eq!(e.variable, "GATEHOUSE_SECRET_KEY_FILE");
        assert!(e.message.contains("chmod 600"), "{e}");
    }

    /// A rotated file (new key first, old key after) seals with the new key and keeps the old
    /// one for opening; `GATEHOUSE_SECRET_KEY_PREVIOUS` adds to it.
    #[test]
    fn a_rotated_file_keeps_the_old_key_for_opening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        let (old, new, extra) = (
            ServerKey::generate(),
            ServerKey::generate(),
            ServerKey::generate(),
        );
        let mut f = new_private_file(&path).unwrap();
        f.write_all(key_file_text(&new, std::slice::from_ref(&old)).as_bytes())
            .unwrap();
        let s = ServerKeySettings::from_vars(
            None,
            Some(path.to_str().unwrap()),
            Some(&extra.to_base64()),
            "postgres://db/g",
        )
        .unwrap();
        let ring = s.load().unwrap().unwrap();
        assert_eq!(ring.current().id(), new.id());
        let previous: Vec<&str> = ring.previous().iter().map(ServerKey::id).collect();
        assert_eq!(previous, [old.id(), extra.id()]);
    }
}
