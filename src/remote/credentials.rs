//! The tokens `gatehouse login` obtained, kept in one JSON file readable by its owner only
//! (mode 0600, in a 0700 directory), one entry per MCP URL:
//!
//! ```json
//! {"servers": {"https://mcp.example.com/mcp": {"issuer": "…", "token_endpoint": "…",
//!   "client_id": "…", "access_token": "…", "refresh_token": "…", "expires_at": 1767225600,
//!   "scope": "mcp:read offline_access"}}}
//! ```
//!
//! Every write replaces the file at once (a temporary file in the same directory, created
//! 0600, then renamed over it), so a reader never sees half a file and the tokens are never
//! readable by others, even for a moment.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::RemoteError;

/// The variable naming the credentials file.
pub const FILE_VARIABLE: &str = "GATEHOUSE_CREDENTIALS_FILE";

/// What was saved for one MCP URL.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedTokens {
    /// The authorization server's issuer (RFC 8414 `issuer`).
    pub issuer: String,
    /// Where refresh requests go (RFC 8414 `token_endpoint`).
    pub token_endpoint: String,
    /// The public client `gatehouse login` registered (RFC 7591).
    pub client_id: String,
    /// The current access token.
    pub access_token: String,
    /// The current refresh token, if one was issued.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub refresh_token: Option<String>,
    /// When the access token expires (Unix seconds), if the server said.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub expires_at: Option<i64>,
    /// The scopes granted.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub scope: Option<String>,
}

impl std::fmt::Debug for SavedTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SavedTokens")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl SavedTokens {
    /// Whether the access token expires within `margin` seconds of `now` (a token without a
    /// known expiry is used until the server refuses it).
    pub fn expires_within(&self, now: i64, margin: i64) -> bool {
        self.expires_at.is_some_and(|at| at - margin <= now)
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct FileContents {
    #[serde(default)]
    servers: BTreeMap<String, SavedTokens>,
}

/// The credentials file.
#[derive(Debug, Clone)]
pub struct CredentialsFile {
    path: PathBuf,
}

impl CredentialsFile {
    /// The file at `path`.
    pub fn at(path: PathBuf) -> CredentialsFile {
        CredentialsFile { path }
    }

    /// `explicit`, else `GATEHOUSE_CREDENTIALS_FILE`, else
    /// `$XDG_CONFIG_HOME/gatehouse/credentials.json`, else
    /// `$HOME/.config/gatehouse/credentials.json`.
    ///
    /// Errors: none of these can be told.
    pub fn locate(explicit: Option<PathBuf>) -> Result<CredentialsFile, RemoteError> {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let path = explicit
            .or_else(|| var(FILE_VARIABLE).map(PathBuf::from))
            .or_else(|| {
                var("XDG_CONFIG_HOME")
                    .map(|d| PathBuf::from(d).join("gatehouse").join("credentials.json"))
            })
            .or_else(|| {
                var("HOME").map(|h| {
                    PathBuf::from(h)
                        .join(".config")
                        .join("gatehouse")
                        .join("credentials.json")
                })
            })
            .ok_or_else(|| {
                RemoteError::new(format!(
                    "cannot tell where to keep the tokens: set {FILE_VARIABLE} or HOME"
                ))
            })?;
        Ok(CredentialsFile { path })
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<FileContents, RemoteError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| {
                RemoteError::new(format!(
                    "{} is not a credentials file ({e}); remove it and run gatehouse login again",
                    self.path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileContents::default()),
            Err(e) => Err(RemoteError::new(format!(
                "cannot read {}: {e}",
                self.path.display()
            ))),
        }
    }

    /// The tokens saved for `mcp_url`, if any.
    ///
    /// Errors: the file cannot be read or is not a credentials file.
    pub fn load(&self, mcp_url: &str) -> Result<Option<SavedTokens>, RemoteError> {
        Ok(self.read()?.servers.remove(mcp_url))
    }

    /// Saves `tokens` for `mcp_url`, keeping the other entries.
    ///
    /// Errors: the directory or file cannot be written.
    pub fn save(&self, mcp_url: &str, tokens: &SavedTokens) -> Result<(), RemoteError> {
        let mut contents = self.read()?;
        contents.servers.insert(mcp_url.to_string(), tokens.clone());
        let text = serde_json::to_vec_pretty(&contents)
            .map_err(|e| RemoteError::new(format!("cannot encode the tokens: {e}")))?;
        write_private(&self.path, &text)
    }
}

/// Writes `bytes` to `path` so that only the owner can read it at any moment: the directory
/// is made 0700 if missing, a temporary file beside `path` is created 0600, written, synced,
/// and renamed over `path`.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), RemoteError> {
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let fail = |what: &str, e: std::io::Error| {
        RemoteError::new(format!("cannot {what} {}: {e}", path.display()))
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| fail("create the directory of", e))?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "credentials.json".to_string());
    let temp = dir.join(format!(
        ".{name}.{}.{}",
        std::process::id(),
        crate::domain::secret::random_urlsafe(6)
    ));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(fail("write", e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn tokens(access: &str) -> SavedTokens {
        SavedTokens {
            issuer: "https://id.example.com".into(),
            token_endpoint: "https://id.example.com/oauth/token".into(),
            client_id: "gc_1".into(),
            access_token: access.into(),
            refresh_token: Some("gate_rt_x".into()),
            expires_at: Some(1000),
            scope: Some("mcp:read".into()),
        }
    }

    #[test]
    fn tokens_are_kept_per_url_in_a_file_only_its_owner_reads() {
        let dir = tempfile::tempdir().unwrap();
        let file = CredentialsFile::at(dir.path().join("sub").join("credentials.json"));
        assert_eq!(file.load("https://a/mcp").unwrap(), None);
        file.save("https://a/mcp", &tokens("gate_at_a")).unwrap();
        file.save("https://b/mcp", &tokens("gate_at_b")).unwrap();
        file.save("https://a/mcp", &tokens("gate_at_a2")).unwrap();
        assert_eq!(
            file.load("https://a/mcp").unwrap().unwrap().access_token,
            "gate_at_a2"
        );
        assert_eq!(
            file.load("https://b/mcp").unwrap().unwrap().access_token,
            "gate_at_b"
        );
        let mode = std::fs::metadata(file.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(file.path().parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        // No temporary file is left behind; the secrets never show in Debug.
        assert_eq!(
            std::fs::read_dir(file.path().parent().unwrap())
                .unwrap()
                .count(),
            1
        );
        assert!(!format!("{:?}", tokens("gate_at_a")).contains("gate_at_a"));
        assert!(tokens("x").expires_within(950, 60));
        assert!(!tokens("x").expires_within(900, 60));
    }

    #[test]
    fn a_file_that_is_not_ours_is_refused_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("credentials.json");
        std::fs::write(&path, "not json").unwrap();
        let file = CredentialsFile::at(path.clone());
        assert!(file.load("https://a/mcp").is_err());
        assert!(file.save("https://a/mcp", &tokens("t")).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "not json");
    }
}
