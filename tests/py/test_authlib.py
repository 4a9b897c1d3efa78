"""Authlib as the relying party: the code flow with client_secret_basic, client_secret_post and
private_key_jwt, the login forms followed with a cookie jar, the ID token validated by Authlib
against latch's key set (iss, aud, azp, exp, iat, nonce, at_hash), then `introspect_token` and
`revoke_token` (RFC 7662, RFC 7009) with the same client authentication."""

import time
import warnings

import pytest
import requests
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "authlib.jose module is deprecated": it is what the brief asks for, and works
    from authlib.jose import JsonWebKey, jwt
from authlib.oauth2.rfc7523 import PrivateKeyJWT
from authlib.oidc.core import CodeIDToken

from formwalk import walk
from latch_server import unique

PW = "Wonder-land1"
REDIRECT = "http://127.0.0.1:9/cb"  # nothing listens: the walk stops at the redirect


def validate_id_token(latch, id_token, client_id, nonce, access_token):
    jwks = requests.get(latch.discovery["jwks_uri"], timeout=10).json()
    claims = jwt.decode(
        id_token,
        JsonWebKey.import_key_set(jwks),
        claims_cls=CodeIDToken,
        claims_options={"iss": {"essential": True, "value": latch.base}},
        claims_params={"nonce": nonce, "client_id": client_id, "access_token": access_token},
    )
    claims.validate(now=int(time.time()), leeway=5)
    return claims


def sign_in(latch, session, login, nonce, code_verifier):
    url, state = session.create_authorization_url(
        latch.discovery["authorization_endpoint"], code_verifier=code_verifier, nonce=nonce
    )
    callback = walk(url, REDIRECT, {"loginname": login, "password": PW})
    return callback, state


def test_discovery(latch):
    d = latch.discovery
    assert d["issuer"] == latch.base
    assert d["token_endpoint"] == f"{latch.base}/oauth/v2/token"
    assert "client_secret_post" in d["token_endpoint_auth_methods_supported"]
    assert "private_key_jwt" in d["token_endpoint_auth_methods_supported"]
    assert "S256" in d["code_challenge_methods_supported"]


def test_code_flow_client_secret_post_and_refresh(latch):
    app = latch.oidc_app(redirectUris=[REDIRECT], authMethodType="OIDC_AUTH_METHOD_TYPE_POST")
    login = unique("alice")
    uid = latch.human(login, PW)
    session = OAuth2Session(
        app["client_id"],
        app["client_secret"],
        scope="openid profile email offline_access",
        redirect_uri=REDIRECT,
        code_challenge_method="S256",
        token_endpoint_auth_method="client_secret_post",
    )
    verifier, nonce = generate_token(48), generate_token(20)
    callback, state = sign_in(latch, session, login, nonce, verifier)
    assert f"state={state}" in callback
    assert "iss=" in callback
    token = session.fetch_token(
        latch.discovery["token_endpoint"], authorization_response=callback, code_verifier=verifier, state=state
    )
    assert token["token_type"].lower() == "bearer"
    assert token["refresh_token"]
    claims = validate_id_token(latch, token["id_token"], app["client_id"], nonce, token["access_token"])
    assert claims["sub"] == uid
    assert claims["azp"] == app["client_id"]
    assert claims["aud"] == [app["client_id"], app["project_id"]]
    assert "at_hash" in claims, "so Authlib checked it"

    # Authlib's checks bite: a wrong nonce, another access token, a tampered signature.
    with pytest.raises(Exception, match="Invalid claim: .nonce."):
        validate_id_token(latch, token["id_token"], app["client_id"], "other-nonce", token["access_token"])
    with pytest.raises(Exception, match="Invalid claim: .at_hash."):
        validate_id_token(latch, token["id_token"], app["client_id"], nonce, "another-access-token")
    head, payload, sig = token["id_token"].split(".")
    flipped = ("A" if sig[0] != "A" else "B") + sig[1:]
    with pytest.raises(Exception, match="bad_signature"):
        validate_id_token(latch, f"{head}.{payload}.{flipped}", app["client_id"], nonce, token["access_token"])

    # Refresh (client_secret_post again); the token rotates.
    refreshed = session.refresh_token(latch.discovery["token_endpoint"], refresh_token=token["refresh_token"])
    assert refreshed["refresh_token"] != token["refresh_token"]
    c = jwt.decode(refreshed["id_token"], JsonWebKey.import_key_set(requests.get(latch.discovery["jwks_uri"]).json()))
    assert c["sub"] == uid
    assert "nonce" not in c

    # Introspection takes client_secret_basic or private_key_jwt only (SPEC.md): post is 401.
    r = session.introspect_token(latch.discovery["introspection_endpoint"], token=refreshed["access_token"])
    assert r.status_code == 401 and r.json()["error"] == "invalid_client", r.text
    # Revocation takes client_secret_post; the refresh token's chain and its access token end.
    session.revocation_endpoint_auth_method = "client_secret_post"
    r = session.revoke_token(
        latch.discovery["revocation_endpoint"], token=refreshed["refresh_token"], token_type_hint="refresh_token"
    )
    assert r.status_code == 200, r.text
    with pytest.raises(Exception, match="invalid_grant"):
        session.refresh_token(latch.discovery["token_endpoint"], refresh_token=refreshed["refresh_token"])
    r = requests.get(
        latch.discovery["userinfo_endpoint"], headers={"authorization": f"Bearer {refreshed['access_token']}"}, timeout=10
    )
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]


def introspect(session, latch, token):
    r = session.introspect_token(latch.discovery["introspection_endpoint"], token=token)
    assert r.status_code == 200, r.text
    return r.json()


def test_introspect_and_revoke_client_secret_basic(latch):
    app = latch.oidc_app(redirectUris=[REDIRECT])
    login = unique("ivy")
    uid = latch.human(login, PW)
    session = OAuth2Session(
        app["client_id"],
        app["client_secret"],
        scope="openid email offline_access",
        redirect_uri=REDIRECT,
        code_challenge_method="S256",
    )
    assert session.token_endpoint_auth_method == "client_secret_basic"
    verifier, nonce = generate_token(48), generate_token(20)
    callback, state = sign_in(latch, session, login, nonce, verifier)
    token = session.fetch_token(
        latch.discovery["token_endpoint"], authorization_response=callback, code_verifier=verifier, state=state
    )
    info = introspect(session, latch, token["access_token"])
    assert info["active"] is True
    assert info["sub"] == uid
    assert info["client_id"] == app["client_id"]
    assert info["iss"] == latch.base
    assert info["scope"] == "openid email offline_access"
    assert info["email"] == f"{login}@example.com"
    assert info["username"].startswith(f"{login}@")
    assert introspect(session, latch, "garbage") == {"active": False}

    # Revoking the access token (RFC 7009): inactive at once, the refresh token still works.
    r = session.revoke_token(latch.discovery["revocation_endpoint"], token=token["access_token"])
    assert r.status_code == 200, r.text
    assert introspect(session, latch, token["access_token"]) == {"active": False}
    refreshed = session.refresh_token(latch.discovery["token_endpoint"], refresh_token=token["refresh_token"])
    assert introspect(session, latch, refreshed["access_token"])["active"] is True
    # An unknown token is fine to revoke; a wrong secret is not.
    assert session.revoke_token(latch.discovery["revocation_endpoint"], token="never-issued").status_code == 200
    wrong = OAuth2Session(app["client_id"], "wrong-secret")
    r = wrong.revoke_token(latch.discovery["revocation_endpoint"], token=refreshed["access_token"])
    assert r.status_code == 401 and r.json()["error"] == "invalid_client"
    assert introspect(session, latch, refreshed["access_token"])["active"] is True, "nothing was revoked"


def test_client_secret_post_app_refuses_basic(latch):
    app = latch.oidc_app(redirectUris=[REDIRECT], authMethodType="OIDC_AUTH_METHOD_TYPE_POST")
    login = unique("bob")
    latch.human(login, PW)
    session = OAuth2Session(
        app["client_id"],
        app["client_secret"],
        scope="openid",
        redirect_uri=REDIRECT,
        code_challenge_method="S256",
        token_endpoint_auth_method="client_secret_basic",
    )
    verifier, nonce = generate_token(48), generate_token(20)
    callback, state = sign_in(latch, session, login, nonce, verifier)
    with pytest.raises(Exception, match="invalid_client"):
        session.fetch_token(
            latch.discovery["token_endpoint"], authorization_response=callback, code_verifier=verifier, state=state
        )


def test_code_flow_private_key_jwt(latch):
    app = latch.oidc_app(redirectUris=[REDIRECT], authMethodType="OIDC_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT")
    assert app["client_secret"] is None
    key = latch.app_key(app["project_id"], app["app_id"])
    assert key["type"] == "application" and key["clientId"] == app["client_id"]
    login = unique("kim")
    uid = latch.human(login, PW)
    token_url = latch.discovery["token_endpoint"]

    def session_with(pem):
        s = OAuth2Session(
            app["client_id"],
            pem,
            scope="openid email",
            redirect_uri=REDIRECT,
            code_challenge_method="S256",
            token_endpoint_auth_method="private_key_jwt",
            revocation_endpoint_auth_method="private_key_jwt",
        )
        # No fixed endpoint: each assertion's aud is the URL it is sent to (token, introspection
        # or revocation endpoint).
        s.register_client_auth_method(PrivateKeyJWT(alg="RS256", headers={"kid": key["keyId"]}))
        return s

    session = session_with(key["key"])
    verifier, nonce = generate_token(48), generate_token(20)
    callback, state = sign_in(latch, session, login, nonce, verifier)
    token = session.fetch_token(token_url, authorization_response=callback, code_verifier=verifier, state=state)
    claims = validate_id_token(latch, token["id_token"], app["client_id"], nonce, token["access_token"])
    assert claims["sub"] == uid

    # Introspection and revocation with private_key_jwt too.
    info = introspect(session, latch, token["access_token"])
    assert info["active"] is True and info["sub"] == uid and info["client_id"] == app["client_id"]
    r = session.revoke_token(latch.discovery["revocation_endpoint"], token=token["access_token"])
    assert r.status_code == 200, r.text
    assert introspect(session, latch, token["access_token"]) == {"active": False}

    # An assertion signed with a key latch does not know is refused.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    other = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    session = session_with(other.decode())
    verifier, nonce = generate_token(48), generate_token(20)
    callback, state = sign_in(latch, session, login, nonce, verifier)
    with pytest.raises(Exception, match="invalid_client"):
        session.fetch_token(token_url, authorization_response=callback, code_verifier=verifier, state=state)
