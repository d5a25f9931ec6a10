//! `gatehouse secret-key status|new|rotate`: the server key that seals stored secrets
//! ([`crate::domain::server_key`], [`crate::config::server_key`]). README "Server key" walks
//! through a rotation.

use std::io::Write as _;

use clap::Subcommand;

use super::CliError;
use crate::config::Config;
use crate::config::server_key::{KeySource, key_file_text, new_private_file};
use crate::domain::server_key::{Keyring, ServerKey};

/// `gatehouse secret-key …`
#[derive(Debug, Clone, Copy, Subcommand)]
pub enum SecretKeyCommand {
    /// Show where the server key comes from and the ids of the current and previous keys
    /// (never a key).
    Status,
    /// Print a new random key (base64 of 32 bytes) for `GATEHOUSE_SECRET_KEY`; changes nothing.
    New,
    /// Rotate the key file: a new key goes first (it seals from the next start), the old ones
    /// stay after it (they keep opening what they sealed). Only for a key file; with
    /// `GATEHOUSE_SECRET_KEY`, use `secret-key new` and move the old key to
    /// `GATEHOUSE_SECRET_KEY_PREVIOUS`.
    Rotate,
}

/// Runs one `gatehouse secret-key` command; returns what to print.
pub(super) fn run(config: &Config, command: SecretKeyCommand) -> Result<String, CliError> {
    match command {
        SecretKeyCommand::New => Ok(ServerKey::generate().to_base64()),
        SecretKeyCommand::Status => status(config),
        SecretKeyCommand::Rotate => rotate(config),
    }
}

fn status(config: &Config) -> Result<String, CliError> {
    let source = match &config.server_key.source {
        KeySource::Value(_) => "GATEHOUSE_SECRET_KEY".to_string(),
        KeySource::File(path) => format!("key file {}", path.display()),
        KeySource::Ephemeral => "a new key per process (in-memory database)".to_string(),
        KeySource::Unset => {
            return Ok(format!(
                "no server key configured: {}",
                crate::state::NO_SERVER_KEY.trim_start_matches("no server key: ")
            ));
        }
    };
    let keys = config
        .server_key
        .load()
        .map_err(|e| CliError(e.to_string()))?
        .ok_or_else(|| CliError(crate::state::NO_SERVER_KEY.to_string()))?;
    let previous: Vec<&str> = keys.previous().iter().map(ServerKey::id).collect();
    Ok(format!(
        "source: {source}\ncurrent key id: {}\nprevious key ids: {}",
        keys.current().id(),
        if previous.is_empty() {
            "none".to_string()
        } else {
            previous.join(", ")
        }
    ))
}

/// Writes the rotated key file beside the old one and renames it over it (so a crash leaves
/// either file whole), mode 0600.
fn rotate(config: &Config) -> Result<String, CliError> {
    let Some(path) = config.server_key.file() else {
        return Err(CliError(
            "secret-key rotate changes a key file; with GATEHOUSE_SECRET_KEY, put the output of `gatehouse secret-key new` there and the old key in GATEHOUSE_SECRET_KEY_PREVIOUS".to_string(),
        ));
    };
    let keys = config
        .server_key
        .load()
        .map_err(|e| CliError(e.to_string()))?
        .ok_or_else(|| CliError(crate::state::NO_SERVER_KEY.to_string()))?;
    let new = ServerKey::generate();
    let mut kept = vec![keys.current().clone()];
    kept.extend(keys.previous().iter().cloned());
    let temporary = path.with_extension("key.new");
    let _ = std::fs::remove_file(&temporary);
    let written = new_private_file(&temporary).and_then(|mut file| {
        file.write_all(key_file_text(&new, &kept).as_bytes())?;
        file.sync_all()
    });
    written
        .and_then(|()| std::fs::rename(&temporary, path))
        .map_err(|e| CliError(format!("cannot write {}: {e}", path.display())))?;
    Ok(format!(
        "new key {} seals from the next start of each server (restart them); {} key(s) kept for opening: {}",
        new.id(),
        kept.len(),
        kept.iter()
            .map(ServerKey::id)
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The server key's ring (current and previous keys) for commands that seal or open stored
/// secrets (an upstream's `--header` and `--env` values). Errors: the key cannot be read, or
/// none is configured.
pub(super) fn keyring(config: &Config) -> Result<Keyring, CliError> {
    config
        .server_key
        .load()
        .map_err(|e| CliError(e.to_string()))?
        .ok_or_else(|| CliError(crate::state::NO_SERVER_KEY.to_string()))
}
