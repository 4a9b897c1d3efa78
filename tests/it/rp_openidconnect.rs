//! The Rust `openidconnect` crate as the relying party: discovery (issuer equality, the key set
//! fetched from `jwks_uri`), the code flow with PKCE, and the ID token verified by the crate
//! (signature against the key set, RS256, iss, aud, azp, exp, iat, nonce) plus at_hash, then
//! userinfo. The crate's HTTP goes through reqwest (no HTTP feature of the crate).

use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreIdTokenVerifier, CoreProviderMetadata, CoreUserInfoClaims,
};
use openidconnect::{
    AccessTokenHash, AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret, CsrfToken, HttpRequest,
    HttpResponse, IssuerUrl, Nonce, OAuth2TokenResponse, PkceCodeChallenge, RedirectUrl, Scope, SubjectIdentifier,
    TokenResponse,
};
use serde_json::json;

use crate::browser::{Browser, human, oidc_app, param};
use crate::on_both;

const CB: &str = "https://app.example.com/cb";

/// The crate's HTTP client: a plain reqwest client that follows no redirect.
async fn send(request: HttpRequest) -> Result<HttpResponse, reqwest::Error> {
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build()?;
    let r = client.execute(reqwest::Request::try_from(request)?).await?;
    let mut out = openidconnect::http::Response::builder().status(r.status());
    for (k, v) in r.headers() {
        out = out.header(k, v);
    }
    Ok(out.body(r.bytes().await?.to_vec()).expect("a response"))
}

on_both!(openidconnect_crate_verifies_id_tokens, |srv| {
    let (client_id, secret, project) = oidc_app(srv, json!({})).await;
    let uid = human(srv, "olaf", "Wonder-land1").await;
    let http = |r: HttpRequest| send(r);

    // Discovery: the crate checks that the issuer equals the URL and loads the key set.
    let meta = CoreProviderMetadata::discover_async(IssuerUrl::new(srv.base.clone()).unwrap(), &http)
        .await
        .expect("discovery and key set");
    assert_eq!(meta.issuer().as_str(), srv.base);
    assert!(!meta.jwks().keys().is_empty());
    let jwks = meta.jwks().clone();
    let client =
        CoreClient::from_provider_metadata(meta, ClientId::new(client_id.clone()), secret.map(ClientSecret::new))
            .set_redirect_uri(RedirectUrl::new(CB.into()).unwrap());

    // The code flow with PKCE, signed in over HTTP through the login pages.
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, csrf, nonce) = client
        .authorize_url(CoreAuthenticationFlow::AuthorizationCode, CsrfToken::new_random, Nonce::new_random)
        .add_scope(Scope::new("email".into()))
        .add_scope(Scope::new("profile".into()))
        .set_pkce_challenge(challenge)
        .url();
    let b = Browser::new(srv);
    let first = b.get(url.as_str()).await;
    let login = first.location().to_string();
    let page = b.get(&login).await;
    let done = b.sign_in(&Browser::request_id(&login), &page, "olaf", "Wonder-land1").await;
    assert!(done.location().starts_with(CB), "{}", done.location());
    let p = done.redirect_params();
    assert_eq!(param(&p, "state"), Some(csrf.secret().as_str()));
    let code = AuthorizationCode::new(param(&p, "code").expect("a code").to_string());

    let tokens = client
        .exchange_code(code)
        .expect("a token endpoint")
        .set_pkce_verifier(verifier)
        .request_async(&http)
        .await
        .expect("code exchange");
    let id_token = tokens.id_token().expect("an ID token");

    // By default the crate refuses any audience besides the client; latch adds the project.
    let strict = client.id_token_verifier();
    assert!(
        matches!(id_token.claims(&strict, &nonce), Err(ClaimsVerificationError::InvalidAudience(_))),
        "the project audience is refused unless allowed"
    );
    let project_aud = project.clone();
    let verifier: CoreIdTokenVerifier =
        client.id_token_verifier().set_other_audience_verifier_fn(move |aud| **aud == project_aud);
    let claims = id_token.claims(&verifier, &nonce).expect("the ID token verifies");
    assert_eq!(claims.subject().as_str(), uid);
    assert_eq!(claims.issuer().as_str(), srv.base);
    assert_eq!(claims.authorized_party().map(|a| a.as_str()), Some(client_id.as_str()));
    let auds: Vec<&str> = claims.audiences().iter().map(|a| a.as_str()).collect();
    assert_eq!(auds, [client_id.as_str(), project.as_str()]);
    assert_eq!(claims.email().map(|e| e.as_str()), None, "profile claims come from userinfo with an access token");

    // at_hash: not automatic in the crate, so compared here with its own helper.
    let alg = id_token.signing_alg().expect("a signing alg");
    let key = id_token.signing_key(&verifier).expect("the signing key is in the published set");
    let expected = AccessTokenHash::from_token(tokens.access_token(), alg, key).expect("at_hash");
    assert_eq!(claims.access_token_hash(), Some(&expected));

    // The crate's checks bite: another nonce, a tampered signature, an ID token of another issuer.
    assert!(matches!(
        id_token.claims(&verifier, &Nonce::new("other".into())),
        Err(ClaimsVerificationError::InvalidNonce(_))
    ));
    let jwt = id_token.to_string();
    let (rest, sig) = jwt.rsplit_once('.').unwrap();
    let flipped = format!("{rest}.{}{}", if sig.starts_with('A') { 'B' } else { 'A' }, &sig[1..]);
    let forged: openidconnect::core::CoreIdToken = flipped.parse().unwrap();
    assert!(matches!(forged.claims(&verifier, &nonce), Err(ClaimsVerificationError::SignatureVerification(_))));
    let foreign = CoreIdTokenVerifier::new_confidential_client(
        ClientId::new(client_id.clone()),
        ClientSecret::new("unused".into()),
        IssuerUrl::new("https://elsewhere.example.com".into()).unwrap(),
        jwks,
    )
    .set_other_audience_verifier_fn(|_| true);
    assert!(matches!(id_token.claims(&foreign, &nonce), Err(ClaimsVerificationError::InvalidIssuer(_))));

    // userinfo, with the subject the crate compares against.
    let info: CoreUserInfoClaims = client
        .user_info(tokens.access_token().clone(), Some(SubjectIdentifier::new(uid.clone())))
        .expect("a userinfo endpoint")
        .request_async(&http)
        .await
        .expect("userinfo");
    assert_eq!(info.subject().as_str(), uid);
    assert_eq!(info.email().map(|e| e.as_str()), Some("olaf@example.com"));
    let wrong: Result<CoreUserInfoClaims, _> = client
        .user_info(tokens.access_token().clone(), Some(SubjectIdentifier::new("someone-else".into())))
        .expect("a userinfo endpoint")
        .request_async(&http)
        .await;
    assert!(wrong.is_err(), "the crate compares the userinfo subject");
});
