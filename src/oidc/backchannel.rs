//! Back-channel logout (OpenID Connect Back-Channel Logout 1.0). When sessions end, every
//! application that received tokens in them and has a back-channel logout URI gets a signed
//! logout token (`typ: logout+jwt`, with `sid` and `sub`) POSTed as `logout_token`. Sent in the
//! background, once, with a 5 s timeout: the person's sign-out never waits for an application.
//! Enabled by the instance feature `enableBackChannelLogout` (`/v2/features/instance`).

use std::time::Duration;

use serde_json::json;

use crate::app::AppState;
use crate::domain::settings::Features;
use crate::oauth::client;
use crate::store::session::Session;
use crate::store::{Conn, Result, session_client, setting};

/// The event a logout token carries.
pub const EVENT: &str = "http://schemas.openid.net/event/backchannel-logout";
/// How long a logout token is valid.
const LIFETIME: i64 = 120;

/// Notes the application of a completed authorization in its session, when it wants to hear of
/// the session's end.
pub async fn note(c: &mut Conn, client: &client::OidcClient, s: &Session) -> Result<()> {
    if client.config.back_channel_logout_uri.is_empty() {
        return Ok(());
    }
    session_client::note(c, &s.session_id, &client.app.client_id, s.expires_at).await
}

/// Sends logout tokens for `ended` sessions to the applications noted in them.
pub async fn notify(state: &AppState, c: &mut Conn, ended: &[Session]) -> Result<()> {
    let ids: Vec<String> = ended.iter().map(|s| s.session_id.clone()).collect();
    let pairs = session_client::take(c, &ids).await?;
    if pairs.is_empty() {
        return Ok(());
    }
    let features = setting::load::<Features>(c, setting::INSTANCE).await?.value;
    if features.enable_back_channel_logout != Some(true) {
        return Ok(());
    }
    let now = state.clock.now();
    for (sid, client_id) in pairs {
        let Some(user_id) = ended.iter().find(|s| s.session_id == sid).map(|s| s.user_id.clone()) else { continue };
        let Some(cl) = client::load(&state.cache, c, &client_id).await? else { continue };
        let uri = cl.config.back_channel_logout_uri.clone();
        // https only, http in dev mode (as registration requires; a URI stored before that rule
        // is not posted to).
        if uri.is_empty() || !(uri.starts_with("https://") || (cl.config.dev_mode && uri.starts_with("http://"))) {
            continue;
        }
        let claims = json!({
            "iss": state.settings.issuer,
            "sub": user_id,
            "aud": client_id,
            "iat": now,
            "exp": now + LIFETIME,
            "jti": crate::crypto::secret::random_id(),
            "sid": sid,
            "events": { EVENT: {} },
        });
        let token = match state.tokens.sign(Some("logout+jwt"), &claims) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, client_id, "cannot sign a logout token");
                continue;
            }
        };
        tokio::spawn(deliver(uri, token, client_id));
    }
    Ok(())
}

async fn deliver(uri: String, token: String, client_id: String) {
    let http = match reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!(error = %e, "cannot build the HTTP client for back-channel logout");
            return;
        }
    };
    match http.post(&uri).form(&[("logout_token", token.as_str())]).send().await {
        Ok(r) if r.status().is_success() => tracing::info!(client_id, "back-channel logout delivered"),
        Ok(r) => tracing::warn!(client_id, status = %r.status(), "back-channel logout refused by the application"),
        Err(e) => tracing::warn!(client_id, error = %e, "back-channel logout could not be delivered"),
    }
}
