//! The server key: sealing secrets that Gatehouse must be able to read back (an upstream MCP
//! server's API key, say), as opposed to the credentials it only checks, which are stored as
//! hashes ([`crate::domain::secret`]).
//!
//! A [`ServerKey`] is 32 random bytes. A [`Keyring`] holds the current key, which seals, and
//! any previous keys, which only open. Each sealed value names the key that sealed it, so keys
//! can be rotated: put the new key first, keep the old one for opening, re-seal what is stored,
//! then drop the old key (README "Server key").
//!
//! Sealed format (text, safe in any column): `gh1.<key id>.<payload>` where
//! - `gh1` is the format version;
//! - `<key id>` is 8 lowercase hex digits, the first 4 bytes of
//!   SHA-256(`b"gatehouse server key id\0"` ‖ key) ([`ServerKey::id`]);
//! - `<payload>` is base64url without padding of a 12-byte random nonce ‖ ChaCha20-Poly1305
//!   ciphertext ‖ 16-byte tag (RFC 8439 §2.8), with the caller's `context` as associated data
//!   (so a value sealed for one row or purpose does not open for another).

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use chacha20poly1305::aead::{Aead as _, KeyInit as _, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use rand::{RngCore as _, rngs::OsRng};
use sha2::{Digest as _, Sha256};

/// Length of a server key in bytes.
pub const KEY_LEN: usize = 32;
/// The version tag every sealed value starts with.
const FORMAT: &str = "gh1";
/// Domain separation of the key id.
const ID_CONTEXT: &[u8] = b"gatehouse server key id\0";
/// ChaCha20-Poly1305 nonce length in bytes (RFC 8439 §2.8).
const NONCE_LEN: usize = 12;
/// Poly1305 tag length in bytes (RFC 8439 §2.8).
const TAG_LEN: usize = 16;

/// 32 secret bytes. `Debug` shows only the key id.
#[derive(Clone)]
pub struct ServerKey {
    bytes: [u8; KEY_LEN],
    id: String,
}

impl ServerKey {
    /// A new random key (the operating system's generator).
    pub fn generate() -> ServerKey {
        let mut bytes = [0u8; KEY_LEN];
        OsRng.fill_bytes(&mut bytes);
        ServerKey::from_bytes(bytes)
    }

    /// The key of these bytes.
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> ServerKey {
        let digest = Sha256::new()
            .chain_update(ID_CONTEXT)
            .chain_update(bytes)
            .finalize();
        ServerKey {
            bytes,
            id: hex::encode(&digest[..4]),
        }
    }

    /// Parses a key written as 64 hex digits or as base64 (standard or URL-safe, padded or
    /// not) of exactly 32 bytes; surrounding whitespace is ignored.
    ///
    /// Errors: [`KeyParseError`] when the text is neither, or decodes to another length.
    pub fn parse(text: &str) -> Result<ServerKey, KeyParseError> {
        let text = text.trim();
        let decoded = if text.len() == 2 * KEY_LEN && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            hex::decode(text).ok()
        } else {
            [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD]
                .iter()
                .find_map(|engine| engine.decode(text).ok())
        };
        match decoded {
            Some(bytes) => {
                let len = bytes.len();
                let bytes: [u8; KEY_LEN] =
                    bytes.try_into().map_err(|_| KeyParseError::Length(len))?;
                Ok(ServerKey::from_bytes(bytes))
            }
            None => Err(KeyParseError::Encoding),
        }
    }

    /// The key as standard base64 (44 characters), the form `gatehouse secret-key new` prints
    /// and key files hold.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.bytes)
    }

    /// The key id: 8 hex digits naming the key in sealed values and messages (not secret: it
    /// is a truncated hash).
    pub fn id(&self) -> &str {
        &self.id
    }

    fn cipher(&self) -> ChaCha20Poly1305 {
        ChaCha20Poly1305::new(Key::from_slice(&self.bytes))
    }
}

impl fmt::Debug for ServerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServerKey({}, <redacted>)", self.id)
    }
}

/// Why a key's text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyParseError {
    /// Neither 64 hex digits nor base64.
    #[error("must be 32 bytes written as base64 or as 64 hex digits")]
    Encoding,
    /// Decoded, but not 32 bytes.
    #[error("must be 32 bytes (got {0}) written as base64 or as 64 hex digits")]
    Length(usize),
}

/// Why a sealed value did not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// Not a sealed value of this format.
    #[error("not a sealed value")]
    Malformed,
    /// Sealed with a key this keyring does not hold.
    #[error(
        "sealed with server key {0}, which this server does not have (every instance needs the same GATEHOUSE_SECRET_KEY or key file; keep a rotated key in GATEHOUSE_SECRET_KEY_PREVIOUS until `gatehouse secret-key reseal` has run)"
    )]
    UnknownKey(String),
    /// The key matched but authentication failed: altered bytes, or another context.
    #[error("sealed value altered or sealed for something else")]
    Tampered,
}

/// The current key (seals and opens) and previous keys (open only).
#[derive(Clone, Debug)]
pub struct Keyring {
    current: ServerKey,
    previous: Vec<ServerKey>,
}

impl Keyring {
    /// A keyring sealing with `current`, also opening what `previous` sealed. A previous key
    /// equal to the current one, or repeated, is dropped.
    pub fn new(current: ServerKey, previous: Vec<ServerKey>) -> Keyring {
        let mut kept: Vec<ServerKey> = Vec::new();
        for key in previous {
            if key.id != current.id && !kept.iter().any(|k| k.id == key.id) {
                kept.push(key);
            }
        }
        Keyring {
            current,
            previous: kept,
        }
    }

    /// The key that seals.
    pub fn current(&self) -> &ServerKey {
        &self.current
    }

    /// The keys kept only for opening.
    pub fn previous(&self) -> &[ServerKey] {
        &self.previous
    }

    /// Seals `plaintext` under the current key with a fresh random nonce, binding it to
    /// `context` (associated data: the same context must be given to [`Keyring::open`]).
    /// Output: the format of the module doc, `4 + 9 + ⌈(28 + len) × 4 / 3⌉` characters.
    pub fn seal(&self, context: &[u8], plaintext: &[u8]) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        OsRng.fill_bytes(&mut nonce);
        #[allow(
            clippy::expect_used,
            reason = "ChaCha20-Poly1305 fails only on plaintexts over 256 GiB"
        )]
        let ciphertext = self
            .current
            .cipher()
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: context,
                },
            )
            .expect("ChaCha20-Poly1305 only fails on plaintexts over 256 GiB");
        let mut payload = Vec::with_capacity(NONCE_LEN + ciphertext.len());
        payload.extend_from_slice(&nonce);
        payload.extend_from_slice(&ciphertext);
        format!(
            "{FORMAT}.{}.{}",
            self.current.id,
            URL_SAFE_NO_PAD.encode(payload)
        )
    }

    /// Opens a value made by [`Keyring::seal`] (with this keyring's current key or one of its
    /// previous keys) for the same `context`.
    ///
    /// Errors: [`OpenError::Malformed`] (not this format), [`OpenError::UnknownKey`] (sealed
    /// by a key not held here), [`OpenError::Tampered`] (altered, or another context).
    pub fn open(&self, context: &[u8], sealed: &str) -> Result<Vec<u8>, OpenError> {
        let (id, payload) = parse(sealed)?;
        let key = std::iter::once(&self.current)
            .chain(&self.previous)
            .find(|k| k.id == id)
            .ok_or_else(|| OpenError::UnknownKey(id.to_string()))?;
        let (nonce, ciphertext) = payload.split_at(NONCE_LEN);
        key.cipher()
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: context,
                },
            )
            .map_err(|_| OpenError::Tampered)
    }

    /// Whether `sealed` should be sealed again: it was made by a key other than the current
    /// one (or is not a sealed value at all).
    pub fn needs_reseal(&self, sealed: &str) -> bool {
        key_id(sealed) != Some(self.current.id())
    }
}

/// The key id a sealed value names, if it has the format.
pub fn key_id(sealed: &str) -> Option<&str> {
    parse(sealed).ok().map(|(id, _)| id)
}

fn parse(sealed: &str) -> Result<(&str, Vec<u8>), OpenError> {
    let mut parts = sealed.splitn(3, '.');
    let (Some(FORMAT), Some(id), Some(payload)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(OpenError::Malformed);
    };
    if id.len() != 8 || !id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(OpenError::Malformed);
    }
    let payload = URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| OpenError::Malformed)?;
    if payload.len() < NONCE_LEN + TAG_LEN {
        return Err(OpenError::Malformed);
    }
    Ok((id, payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> ServerKey {
        ServerKey::from_bytes([byte; KEY_LEN])
    }

    #[test]
    fn round_trip_with_context() {
        let ring = Keyring::new(key(1), vec![]);
        let sealed = ring.seal(b"upstream:docs:header", b"Bearer s3cret");
        assert!(
            sealed.starts_with(&format!("gh1.{}.", key(1).id())),
            "{sealed}"
        );
        assert!(!sealed.contains("s3cret"));
        assert_eq!(
            ring.open(b"upstream:docs:header", &sealed).unwrap(),
            b"Bearer s3cret"
        );
        // Another context (another row) does not open it.
        assert_eq!(
            ring.open(b"upstream:other:header", &sealed),
            Err(OpenError::Tampered)
        );
        // Random nonce: the same plaintext seals differently each time.
        assert_ne!(sealed, ring.seal(b"upstream:docs:header", b"Bearer s3cret"));
    }

    #[test]
    fn altered_values_do_not_open() {
        let ring = Keyring::new(key(1), vec![]);
        let sealed = ring.seal(b"c", b"value");
        let mut bytes = sealed.clone().into_bytes();
        let last = bytes.len() - 2;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(bytes).unwrap();
        assert_eq!(ring.open(b"c", &altered), Err(OpenError::Tampered));
        assert_eq!(ring.open(b"c", "plain"), Err(OpenError::Malformed));
        assert_eq!(ring.open(b"c", "gh1.zz.AAAA"), Err(OpenError::Malformed));
        assert_eq!(
            ring.open(b"c", &format!("gh1.{}.AAAA", key(1).id())),
            Err(OpenError::Malformed)
        );
    }

    /// Rotation: the new key seals, the previous one still opens what it sealed, and a keyring
    /// without it names the missing key.
    #[test]
    fn rotation_keeps_old_values_readable() {
        let old = Keyring::new(key(1), vec![]);
        let sealed_old = old.seal(b"c", b"old value");
        let rotated = Keyring::new(key(2), vec![key(1)]);
        assert_eq!(rotated.open(b"c", &sealed_old).unwrap(), b"old value");
        assert!(rotated.needs_reseal(&sealed_old));
        let sealed_new = rotated.seal(b"c", b"old value");
        assert!(!rotated.needs_reseal(&sealed_new));
        assert_eq!(key_id(&sealed_new), Some(key(2).id()));
        let without = Keyring::new(key(2), vec![]);
        assert_eq!(
            without.open(b"c", &sealed_old),
            Err(OpenError::UnknownKey(key(1).id().to_string()))
        );
        assert!(old.open(b"c", &sealed_new).is_err());
    }

    #[test]
    fn keys_parse_from_hex_and_base64() {
        let k = ServerKey::generate();
        let b64 = k.to_base64();
        assert_eq!(b64.len(), 44);
        assert_eq!(ServerKey::parse(&b64).unwrap().id(), k.id());
        assert_eq!(
            ServerKey::parse(&format!(" {} \n", b64.trim_end_matches('=')))
                .unwrap()
                .id(),
            k.id()
        );
        let hex_text = hex::encode([7u8; KEY_LEN]);
        assert_eq!(ServerKey::parse(&hex_text).unwrap().id(), key(7).id());
        assert_eq!(
            ServerKey::parse(&STANDARD.encode([0u8; 16])).unwrap_err(),
            KeyParseError::Length(16)
        );
        assert_eq!(
            ServerKey::parse("not a key!").unwrap_err(),
            KeyParseError::Encoding
        );
        // Debug never shows the bytes.
        let shown = format!("{k:?}");
        assert!(shown.contains(k.id()) && !shown.contains(&b64), "{shown}");
    }

    #[test]
    fn a_previous_key_equal_to_the_current_one_is_dropped() {
        let ring = Keyring::new(key(1), vec![key(1), key(2), key(2)]);
        assert_eq!(ring.previous().len(), 1);
        assert_eq!(ring.previous()[0].id(), key(2).id());
    }
}
