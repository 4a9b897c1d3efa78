//! Making and reading tokens. JWTs (ID tokens, JWT access tokens) are signed with the active
//! signing key; opaque access tokens are AES-256-GCM sealed claims under a token key from the
//! store, so issuing either writes nothing and only latch can read them.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::crypto::aead::{Aead, Purpose};
use crate::crypto::keys::KeyAlg;
use crate::crypto::secret::random_bytes;
use crate::keys::{KeyError, KeyManager, LoadedKey};
use crate::store::{Db, StoreError, token_key};

/// The longest opaque access token latch opens (and so issues).
pub const MAX_OPAQUE_LEN: usize = 8192;

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("no signing key is active")]
    NoActiveKey,
    #[error("signing failed: {0}")]
    Sign(String),
}

/// Associated data of sealed tokens: a token sealed for another purpose does not open here.
const ACCESS_AAD: &[u8] = b"latch opaque access token v1";
const ACCESS_AAD_V2: &[u8] = b"latch opaque access token v2";
/// The format of an opaque token, its first byte: 1 sealed with AES-256-GCM under the token key
/// (read, no longer made), 2 with AES-256-GCM-SIV under a key derived from it. The token key is
/// never rotated and every token takes a random 96-bit nonce: past about 2^32 tokens a nonce
/// would repeat under plain GCM, which gives away the key's authentication key (tokens could
/// then be forged); under GCM-SIV a repeat reveals nothing useful.
const VERSION_GCM: u8 = 1;
const VERSION_SIV: u8 = 2;
const SIV_LABEL: &[u8] = b"latch opaque access token AES-256-GCM-SIV v2";

/// One generation of the token key, in both formats.
struct Sealer {
    generation: u32,
    gcm: Aead,
    siv: Aead,
}

impl Sealer {
    fn new(generation: u32, raw: &[u8; 32]) -> Result<Self, crate::crypto::CryptoError> {
        Ok(Self { generation, gcm: Aead::from_raw(raw)?, siv: Aead::siv_from_raw(raw, SIV_LABEL)? })
    }
}

pub struct TokenService {
    keys: Arc<KeyManager>,
    sealers: Vec<Sealer>,
}

impl std::fmt::Debug for TokenService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenService")
    }
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// How old an unreadable opaque-token key of an unfinished first start must be to be made anew.
const FAILED_START_AGE: i64 = 300;

impl TokenService {
    /// Loads the opaque-token keys, creating the first one when the store has none.
    pub async fn load(db: &Db, master: &[u8; 32], keys: Arc<KeyManager>, now: i64) -> Result<Self, KeyError> {
        let wrap = Aead::derive(master, Purpose::TokenKey)?;
        let mut c = db.conn().await?;
        let mut rows = token_key::all(&mut c).await?;
        // A first start that made this key and then failed (its bootstrap refused the
        // configuration), tried again with another master key (the first one was generated in a
        // data folder that did not last, say): before the instance exists nothing was sealed
        // with the key, so it is made anew rather than keeping every later start from serving.
        // Only a key at least five minutes old: a younger one may be another replica's that is
        // bootstrapping right now with another master key (a misconfiguration, which fails
        // loudly as before instead of taking that replica's key away).
        let unreadable =
            |rows: &[(i64, Vec<u8>)]| rows.iter().any(|(g, enc)| wrap.open(g.to_string().as_bytes(), enc).is_err());
        if unreadable(&rows)
            && token_key::newest(&mut c).await?.is_some_and(|t| t <= now - FAILED_START_AGE)
            && crate::store::instance::default_org(&mut c).await?.is_none()
        {
            tracing::warn!(
                "the opaque-token key of an unfinished first start is sealed with another master key: made anew"
            );
            token_key::delete_all(&mut c).await?;
            rows.clear();
        }
        if rows.is_empty() {
            let raw = random_bytes::<32>();
            token_key::insert(&mut c, 1, &wrap.seal(b"1", &raw)?, now).await?;
            rows = token_key::all(&mut c).await?;
        }
        let mut sealers = Vec::with_capacity(rows.len());
        for (generation, enc) in rows {
            let raw = wrap
                .open(generation.to_string().as_bytes(), &enc)
                .map_err(|_| KeyError::WrongMasterKey(format!("token key {generation}")))?;
            let raw: [u8; 32] = raw
                .try_into()
                .map_err(|_| StoreError::Corrupt(format!("token key {generation} has the wrong length")))?;
            sealers.push(Sealer::new(generation as u32, &raw)?);
        }
        sealers.sort_by_key(|s| std::cmp::Reverse(s.generation));
        Ok(Self { keys, sealers })
    }

    /// A compact JWS of `claims` signed with the active key (`typ` in the header when given).
    pub fn sign<T: Serialize>(&self, typ: Option<&str>, claims: &T) -> Result<String, TokenError> {
        let key = self.keys.active().ok_or(TokenError::NoActiveKey)?;
        sign_with(&key, typ, claims)
    }

    /// Signs ID token `claims` with the active key, adding `at_hash` and `c_hash` of the access
    /// token and code that come along, hashed for that key's algorithm. The key is taken once,
    /// so a rotation between hashing and signing cannot make the hashes disagree with the
    /// signature's algorithm.
    pub fn sign_id_token(
        &self,
        mut claims: serde_json::Map<String, serde_json::Value>,
        access_token: Option<&str>,
        code: Option<&str>,
    ) -> Result<String, TokenError> {
        let key = self.keys.active().ok_or(TokenError::NoActiveKey)?;
        if let Some(at) = access_token {
            claims.insert("at_hash".into(), half_hash(key.alg(), at).into());
        }
        if let Some(code) = code {
            claims.insert("c_hash".into(), half_hash(key.alg(), code).into());
        }
        sign_with(&key, None, &serde_json::Value::Object(claims))
    }

    /// Verifies an ID token made by latch (any published key) and returns its claims: its
    /// header carries no `typ` (latch's JWT access tokens carry `at+jwt` and its logout tokens
    /// `logout+jwt`, so neither passes for one). Expiry is the caller's business (an expired ID
    /// token is still a valid hint).
    pub fn verify_id_token<T: DeserializeOwned>(&self, token: &str) -> Option<T> {
        self.verify_header(token, None)
    }

    /// Verifies a JWS made by latch whose header's `typ` is `typ`, and returns its claims.
    pub fn verify_typed<T: DeserializeOwned>(&self, token: &str, typ: &str) -> Option<T> {
        self.verify_header(token, Some(typ))
    }

    /// The claims of a compact JWS whose header's `typ` is `typ` (None: no `typ`). It is checked
    /// against the key its `kid` names, with that key's own algorithm only (a header naming
    /// another algorithm is refused), using the public key parsed once at load.
    fn verify_header<T: DeserializeOwned>(&self, token: &str, typ: Option<&str>) -> Option<T> {
        #[derive(serde::Deserialize)]
        struct Header {
            alg: String,
            kid: Option<String>,
            typ: Option<String>,
        }
        let (input, signature) = token.rsplit_once('.')?;
        let (header, payload) = input.split_once('.')?;
        let header: Header = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).ok()?).ok()?;
        if header.typ.as_deref() != typ {
            return None;
        }
        let set = self.keys.current();
        let key = LoadedKey::find(&set, header.kid.as_deref()?)?;
        if header.alg != key.alg().as_str() {
            return None;
        }
        let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
        key.verifier.verify_sig(input.as_bytes(), &signature).ok()?;
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()
    }

    /// Whether the signing key a compact JWS names (`kid`) is one latch still has; `None` when it
    /// is no JWS with a `kid`. A token whose key was retired and has since been removed cannot be
    /// checked any more, which is not the same as a forged one.
    pub fn signer_known(&self, token: &str) -> Option<bool> {
        #[derive(serde::Deserialize)]
        struct Header {
            kid: Option<String>,
        }
        let (header, _) = token.split_once('.')?;
        let header: Header = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).ok()?).ok()?;
        let set = self.keys.current();
        Some(LoadedKey::find(&set, &header.kid?).is_some())
    }

    /// For a compact JWS that names a key this replica does not have: reloads the keys (see
    /// [`KeyManager::reload_on_demand`]); true when the key is known afterwards, so that the
    /// token is worth checking again.
    pub async fn learn_signer(&self, token: &str) -> bool {
        if self.signer_known(token) != Some(false) {
            return false;
        }
        self.keys.reload_on_demand().await;
        self.signer_known(token) == Some(true)
    }

    /// Seals `claims` into an opaque token with the newest token key.
    pub fn seal<T: Serialize>(&self, claims: &T) -> Result<String, TokenError> {
        seal_with(&self.sealers, claims)
    }

    /// Opens an opaque token; `None` for anything latch did not seal.
    pub fn open<T: DeserializeOwned>(&self, token: &str) -> Option<T> {
        open_with(&self.sealers, token)
    }
}

fn seal_with<T: Serialize>(sealers: &[Sealer], claims: &T) -> Result<String, TokenError> {
    let s = sealers.first().ok_or(TokenError::NoActiveKey)?;
    let plain = serde_json::to_vec(claims).map_err(|e| TokenError::Sign(e.to_string()))?;
    let sealed = s.siv.seal(ACCESS_AAD_V2, &plain).map_err(|e| TokenError::Sign(e.to_string()))?;
    let mut out = Vec::with_capacity(5 + sealed.len());
    out.push(VERSION_SIV);
    out.extend_from_slice(&s.generation.to_be_bytes());
    out.extend_from_slice(&sealed);
    Ok(b64(&out))
}

fn open_with<T: DeserializeOwned>(sealers: &[Sealer], token: &str) -> Option<T> {
    if token.len() > MAX_OPAQUE_LEN || token.contains('.') {
        return None;
    }
    let raw = URL_SAFE_NO_PAD.decode(token).ok()?;
    if raw.len() < 5 {
        return None;
    }
    let generation = u32::from_be_bytes([raw[1], raw[2], raw[3], raw[4]]);
    let s = sealers.iter().find(|s| s.generation == generation)?;
    let plain = match raw[0] {
        VERSION_SIV => s.siv.open(ACCESS_AAD_V2, &raw[5..]).ok()?,
        VERSION_GCM => s.gcm.open(ACCESS_AAD, &raw[5..]).ok()?,
        _ => return None,
    };
    serde_json::from_slice(&plain).ok()
}

/// Signs with a given key.
pub fn sign_with<T: Serialize>(key: &LoadedKey, typ: Option<&str>, claims: &T) -> Result<String, TokenError> {
    let mut header = serde_json::json!({"alg": key.alg().as_str(), "kid": key.key_id});
    if let Some(t) = typ {
        header["typ"] = serde_json::Value::from(t);
    }
    let header = serde_json::to_vec(&header).map_err(|e| TokenError::Sign(e.to_string()))?;
    let payload = serde_json::to_vec(claims).map_err(|e| TokenError::Sign(e.to_string()))?;
    let input = format!("{}.{}", b64(&header), b64(&payload));
    let sig = key.signer.sign(input.as_bytes()).map_err(|e| TokenError::Sign(e.to_string()))?;
    Ok(format!("{input}.{}", b64(&sig)))
}

/// `at_hash` / `c_hash` (OIDC Core 3.1.3.6, 3.3.2.11): the left half of the hash of the value,
/// base64url, with the hash of the ID token's signature algorithm: SHA-256 for RS256 and ES256,
/// SHA-512 for EdDSA with Ed25519 (the only curve latch signs with), as OpenID Connect relying
/// parties compute it for EdDSA (openid-client's `oidc-token-hash`).
pub fn half_hash(alg: KeyAlg, value: &str) -> String {
    use sha2::{Digest, Sha256, Sha512};
    match alg {
        KeyAlg::RS256 | KeyAlg::ES256 => b64(&Sha256::digest(value.as_bytes())[..16]),
        KeyAlg::EdDSA => b64(&Sha512::digest(value.as_bytes())[..32]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // New tokens are sealed with GCM-SIV (format 2); tokens of format 1 (GCM) still open; a
    // token whose format byte is changed, or sealed under another generation, does not.
    #[test]
    fn opaque_tokens_are_sealed_with_gcm_siv_and_old_ones_still_open() {
        let raw = random_bytes::<32>();
        let sealers = [Sealer::new(7, &raw).unwrap()];
        let claims = serde_json::json!({"sub": "alice", "scope": "openid"});
        let token = seal_with(&sealers, &claims).unwrap();
        let bytes = URL_SAFE_NO_PAD.decode(&token).unwrap();
        assert_eq!(bytes[0], VERSION_SIV);
        assert_eq!(open_with::<serde_json::Value>(&sealers, &token), Some(claims.clone()));
        // The same bytes read as format 1 do not open.
        let mut relabelled = bytes.clone();
        relabelled[0] = VERSION_GCM;
        assert_eq!(open_with::<serde_json::Value>(&sealers, &b64(&relabelled)), None);
        // A format-1 token made as before.
        let sealed = Aead::from_raw(&raw).unwrap().seal(ACCESS_AAD, &serde_json::to_vec(&claims).unwrap()).unwrap();
        let mut old = vec![VERSION_GCM];
        old.extend_from_slice(&7u32.to_be_bytes());
        old.extend_from_slice(&sealed);
        assert_eq!(open_with::<serde_json::Value>(&sealers, &b64(&old)), Some(claims.clone()));
        let other = [Sealer::new(7, &random_bytes::<32>()).unwrap()];
        assert_eq!(open_with::<serde_json::Value>(&other, &token), None);
        // GCM-SIV under the derived key, not GCM under the raw one.
        let mut as_gcm = vec![VERSION_SIV];
        as_gcm.extend_from_slice(&7u32.to_be_bytes());
        as_gcm.extend_from_slice(&Aead::from_raw(&raw).unwrap().seal(ACCESS_AAD_V2, b"{}").unwrap());
        assert_eq!(open_with::<serde_json::Value>(&sealers, &b64(&as_gcm)), None);
    }

    #[test]
    fn half_hash_follows_the_signature_algorithm() {
        // An access token and its at_hash as RS256 and ES256 compute it (the left 16 bytes of
        // SHA-256), and as EdDSA does (the left 32 bytes of SHA-512); computed with hashlib.
        let at = "jHkWEdUXMU1BwAsC4vtUsZwnNvTIxEl0z9K3vx5KF0Y";
        assert_eq!(half_hash(KeyAlg::RS256, at), "77QmUPtjPfzWtF2AnpK9RQ");
        assert_eq!(half_hash(KeyAlg::ES256, at), "77QmUPtjPfzWtF2AnpK9RQ");
        assert_eq!(half_hash(KeyAlg::EdDSA, at), "q7nS86GgvvFaZkzALLWqJYaJIKw2wCDAVfCAsm5CrBM");
    }
}
