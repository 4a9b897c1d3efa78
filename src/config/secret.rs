//! Secret values in the configuration: the master key's forms and the sample key that is
//! refused, and database URLs with their password masked for output.

use url::Url;

/// Replaces the password of a database URL by asterisks: in the user part and in a `password`
/// query parameter (which sqlx's PostgreSQL driver reads too). A URL that does not parse is
/// masked whole when it might hold one.
pub fn mask_url(raw: &str) -> String {
    let Ok(mut u) = Url::parse(raw) else {
        let secret = raw.contains('@') || raw.to_ascii_lowercase().contains("password");
        return if secret { "********".into() } else { raw.to_string() };
    };
    if u.password().is_some() {
        let _ = u.set_password(Some("********"));
    }
    if u.query_pairs().any(|(k, _)| k.eq_ignore_ascii_case("password")) {
        let pairs: Vec<(String, String)> = u
            .query_pairs()
            .map(|(k, v)| {
                let v = if k.eq_ignore_ascii_case("password") { "********".to_string() } else { v.into_owned() };
                (k.into_owned(), v)
            })
            .collect();
        u.query_pairs_mut().clear().extend_pairs(pairs);
    }
    u.to_string()
}

/// The sample master key of ZITADEL's documentation (which latch's README once showed too):
/// public, so it protects nothing.
const SAMPLE_MASTERKEY: &str = "MasterkeyNeedsToHave32Characters";

/// Whether `key` is the documentation's sample value: refused for a new store, and only
/// tolerated (with a warning at every start) where a store's keys are already sealed with it,
/// since latch has no command yet to seal them again under another key.
pub fn is_sample_masterkey(key: &[u8; 32]) -> bool {
    key == SAMPLE_MASTERKEY.as_bytes()
}

/// Why the sample master key is refused for a new store.
pub const SAMPLE_MASTERKEY_REFUSED: &str = "the master key is the published sample value MasterkeyNeedsToHave32Characters, which protects nothing; generate a secret (e.g. `openssl rand -base64 32`)";

/// A master key is 32 bytes: either a 32-character string or the standard base64 of 32 bytes.
pub fn parse_masterkey(raw: &str) -> Result<[u8; 32], String> {
    use base64::Engine;
    let raw = raw.trim_end_matches(['\r', '\n']);
    if raw.len() == 32 {
        let mut k = [0u8; 32];
        k.copy_from_slice(raw.as_bytes());
        return Ok(k);
    }
    if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(raw)
        && bytes.len() == 32
    {
        let mut k = [0u8; 32];
        k.copy_from_slice(&bytes);
        return Ok(k);
    }
    Err(format!("must be exactly 32 characters or the base64 of 32 bytes (got {} characters)", raw.chars().count()))
}
