//! The doctor's saved clients: one client per well-known client profile per deployment, kept
//! between runs so a doctor run every few minutes does not spend the server's registration
//! budget (Gatehouse: `GATEHOUSE_REGISTRATIONS_PER_HOUR` per source address).
//!
//! The file is JSON, `{"version": 1, "deployments": {"<issuer>": {"<client>": "<client_id>"}}}`,
//! written with mode 0600 (in a directory created 0700) by writing a temporary file and renaming
//! it over the old one. It holds client IDs only: public identifiers, never a secret.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file's name inside the state directory.
pub const FILE_NAME: &str = "doctor-clients.json";

/// Where the clients are kept unless `--state-file` says otherwise:
/// `$XDG_STATE_HOME/gatehouse/doctor-clients.json`, else
/// `$HOME/.local/state/gatehouse/doctor-clients.json` (XDG Base Directory specification);
/// `None` when neither variable is set.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local").join("state"))
        })?;
    Some(base.join("gatehouse").join(FILE_NAME))
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    #[serde(default)]
    deployments: BTreeMap<String, BTreeMap<String, String>>,
}

/// The saved clients, read once at the start of a run.
#[derive(Debug)]
pub struct SavedClients {
    path: PathBuf,
    file: File,
}

impl SavedClients {
    /// Reads `path`; a missing or unreadable file is an empty store (it is rewritten on the
    /// next save).
    pub fn load(path: &Path) -> SavedClients {
        let file = std::fs::read(path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<File>(&bytes).ok())
            .filter(|f| f.version == 1)
            .unwrap_or(File {
                version: 1,
                deployments: BTreeMap::new(),
            });
        SavedClients {
            path: path.to_path_buf(),
            file,
        }
    }

    /// The file this store reads and writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `client_id` saved for `client` (a profile name such as `Claude`) at `issuer`.
    pub fn get(&self, issuer: &str, client: &str) -> Option<&str> {
        self.file
            .deployments
            .get(issuer)
            .and_then(|d| d.get(client))
            .map(String::as_str)
    }

    /// Records `client_id` for `client` at `issuer` and writes the file (0600). `Err` is a
    /// sentence naming the file and the failure.
    pub fn save(&mut self, issuer: &str, client: &str, client_id: &str) -> Result<(), String> {
        self.file.version = 1;
        self.file
            .deployments
            .entry(issuer.to_string())
            .or_default()
            .insert(client.to_string(), client_id.to_string());
        self.write()
            .map_err(|e| format!("cannot write {}: {e}", self.path.display()))
    }

    fn write(&self) -> std::io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        builder.create(dir)?;
        let body = serde_json::to_vec_pretty(&self.file).map_err(std::io::Error::other)?;
        let tmp = self
            .path
            .with_extension(format!("tmp{}", std::process::id()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut f = options.open(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_kept_per_issuer_in_a_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join(FILE_NAME);
        let mut saved = SavedClients::load(&path);
        assert_eq!(saved.get("https://a.example", "Claude"), None);
        saved.save("https://a.example", "Claude", "c1").unwrap();
        saved.save("https://b.example", "Claude", "c2").unwrap();
        let again = SavedClients::load(&path);
        assert_eq!(again.get("https://a.example", "Claude"), Some("c1"));
        assert_eq!(again.get("https://b.example", "Claude"), Some("c2"));
        assert_eq!(again.get("https://a.example", "Cursor"), None);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, b"not json").unwrap();
        assert_eq!(
            SavedClients::load(&path).get("https://a.example", "Claude"),
            None
        );
    }
}
