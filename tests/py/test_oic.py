"""pyoidc (`oic`), the strictest Python relying party: discovery (issuer equality, key set
loaded from jwks_uri), the code flow with PKCE and client_secret_basic, the ID token verified
by the library (signature against the key set, iss, aud, azp, exp, iat, nonce), and userinfo
(GET and POST) with the access token of that flow."""

import base64
import json
from urllib.parse import urlsplit

import pytest
from jwkest import BadSignature
from oic import rndstr
from oic.oic import Client
from oic.oic.message import AuthorizationResponse, OpenIDSchema, RegistrationResponse
from oic.utils.authn.client import CLIENT_AUTHN_METHOD

from formwalk import walk
from latch_server import unique

PW = "Wonder-land1"
REDIRECT = "http://127.0.0.1:9/cb"


def oic_client(latch, app):
    c = Client(client_authn_method=CLIENT_AUTHN_METHOD)
    c.provider_config(latch.base)  # checks that the issuer equals this URL, loads the key set
    c.store_registration_info(
        RegistrationResponse(client_id=app["client_id"], client_secret=app["client_secret"], redirect_uris=[REDIRECT])
    )
    return c


def authorize(latch, c, login, **extra):
    state, nonce = rndstr(24), rndstr(24)
    pkce_args, verifier = c.add_code_challenge()
    args = {
        "client_id": c.client_id,
        "response_type": "code",
        "scope": ["openid", "email"],
        "redirect_uri": REDIRECT,
        "state": state,
        "nonce": nonce,
        **pkce_args,
        **extra,
    }
    url = c.construct_AuthorizationRequest(request_args=args).request(c.authorization_endpoint)
    callback = walk(url, REDIRECT, {"loginname": login, "password": PW})
    resp = c.parse_response(AuthorizationResponse, info=urlsplit(callback).query, sformat="urlencoded")
    assert resp["state"] == state
    assert resp["iss"] == latch.base
    return resp, state, nonce, verifier


def test_code_flow_client_secret_basic_and_userinfo(latch):
    app = latch.oidc_app(redirectUris=[REDIRECT])
    login = unique("olga")
    uid = latch.human(login, PW)
    c = oic_client(latch, app)
    assert c.provider_info["issuer"] == latch.base
    keys = c.keyjar.get_issuer_keys(latch.base)
    assert keys, "the key set was loaded from jwks_uri"
    resp, state, nonce, verifier = authorize(latch, c, login)
    token = c.do_access_token_request(
        state=state,
        request_args={"code": resp["code"], "code_verifier": verifier, "redirect_uri": REDIRECT},
        authn_method="client_secret_basic",
    )
    idt = token["id_token"]  # verified by oic: signature, iss, aud, azp, exp, iat
    assert idt["sub"] == uid
    assert idt["nonce"] == nonce
    assert idt["azp"] == app["client_id"]
    assert app["client_id"] in idt["aud"]
    assert idt.jws_header["kid"] in {k.kid for k in keys}, "signed by a key of the published set"

    # userinfo with the access token of this flow (oic keeps it under the state), GET and POST.
    for method in ("GET", "POST"):
        info = c.do_user_info_request(method=method, state=state)
        assert isinstance(info, OpenIDSchema), info
        assert info["sub"] == idt["sub"], "userinfo is about the ID token's subject"
        assert info["email"] == f"{login}@example.com"
        assert info["email_verified"] is True
    # A forged access token: 401 invalid_token, which oic returns as an error response.
    err = c.do_user_info_request(method="GET", token="forged-token")
    assert err["error"] == "invalid_token", err


def test_a_forged_id_token_is_refused(latch):
    """The same flow, with the ID token's payload changed on the way: oic must refuse it."""
    app = latch.oidc_app(redirectUris=[REDIRECT])
    login = unique("pia")
    latch.human(login, PW)
    c = oic_client(latch, app)
    resp, state, nonce, verifier = authorize(latch, c, login)
    real_send = c.http_request

    def tamper(url, method="GET", **kwargs):
        r = real_send(url, method, **kwargs)
        if url == c.token_endpoint and r.status_code == 200:
            body = r.json()
            h, p, s = body["id_token"].split(".")
            claims = json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))
            claims["sub"] = "someone-else"
            p = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
            body["id_token"] = f"{h}.{p}.{s}"
            r._content = json.dumps(body).encode()
        return r

    c.http_request = tamper
    with pytest.raises(BadSignature):
        c.do_access_token_request(
            state=state,
            request_args={"code": resp["code"], "code_verifier": verifier, "redirect_uri": REDIRECT},
            authn_method="client_secret_basic",
        )
