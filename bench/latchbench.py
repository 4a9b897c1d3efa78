#!/usr/bin/env python3
"""Helpers for bench/run (runs in bench/.venv).

  seed     creates the project, applications, machine and human users through the management
           API and writes what the scenarios need into a JSON state file
  codes    pre-mints authorization codes (single sign-on from signed-in browsers) as token
           request bodies, one per line
  refresh  pre-mints refresh tokens (code flow with offline_access), one body per line
  access   pre-mints access tokens of the web application (refresh chains) as revocation bodies
  assertions  pre-signs jwt-bearer assertions with unique jti, one body per line
  startup  times starts of a server command until a URL answers 200
  peer     one login at the peer (npm oidc-provider, bench/peer/op.mjs) through its
           devInteractions and the exchange of its code: the access token its introspection and
           userinfo scenarios use
  transfer imports one organization of N users (an export document, POST /admin/v1/import) and
           exports it again (POST /admin/v1/export), timing both
  report   the table and bench/results/latest.json from the results bench/run collected

Every request goes to 127.0.0.1 only.
"""

import argparse
import asyncio
import base64
import datetime
import hashlib
import html
import json
import multiprocessing
import os
import re
import sys
import time
import urllib.parse

CB = "https://app.example.com/cb"
PASSWORD = "Bench-Passw0rd!"
VERIFIER = "bench-verifier-" + "v" * 40
CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).rstrip(b"=").decode()


def log(*a):
    print("bench:", *a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# HTTP plumbing


def session(base, jar=None, connector=None, limit=64):
    import aiohttp

    return aiohttp.ClientSession(
        base_url=base,
        cookie_jar=jar if jar is not None else aiohttp.CookieJar(unsafe=True),
        connector=connector or aiohttp.TCPConnector(limit=limit),
        connector_owner=connector is None,
        timeout=aiohttp.ClientTimeout(total=120),
    )


class Api:
    """The management API with the administrator's personal access token."""

    def __init__(self, s, pat):
        self.s, self.h = s, {"Authorization": f"Bearer {pat}"}

    async def call(self, method, path, body=None):
        async with self.s.request(method, path, json=body if body is not None else {}, headers=self.h) as r:
            text = await r.text()
            if r.status != 200:
                raise SystemExit(f"bench: {method} {path}: {r.status} {text}")
            return json.loads(text)


def field(page, name):
    m = re.search(r'name="%s" value="([^"]*)"' % re.escape(name), page)
    return html.unescape(m.group(1)) if m else None


def authorize_query(client_id, scope, state="s"):
    return "/oauth/v2/authorize?" + urllib.parse.urlencode({
        "client_id": client_id, "redirect_uri": CB, "response_type": "code", "scope": scope,
        "state": state, "nonce": "n", "code_challenge": CHALLENGE, "code_challenge_method": "S256",
    })


def code_of(location):
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)
    return q["code"][0] if "code" in q else None


def basic(client_id, secret):
    enc = lambda s: urllib.parse.quote(s, safe="")
    return "Basic " + base64.b64encode(f"{enc(client_id)}:{enc(secret)}".encode()).decode()


async def sign_in(s, client_id, scope, user):
    """One browser-style login: authorize, login name page, password page. Returns the code."""
    async with s.get(authorize_query(client_id, scope), allow_redirects=False) as r:
        loc = r.headers.get("Location", "")
        if r.status != 303 or not loc.startswith("/ui/login/"):
            return code_of(loc)  # already signed in (single sign-on)
    rid = loc.split("/")[3]
    async with s.get(loc, allow_redirects=False) as r:
        page = await r.text()
        if r.status != 200:
            raise RuntimeError(f"login page: {r.status}")
    async with s.post(f"/ui/login/{rid}/loginname", data={"csrf": field(page, "csrf"), "loginname": user},
                      allow_redirects=False) as r:
        page = await r.text()
        if r.status != 200 or 'name="password"' not in page:
            raise RuntimeError(f"password page: {r.status}")
    async with s.post(f"/ui/login/{rid}/password", data={"csrf": field(page, "csrf"), "password": PASSWORD},
                      allow_redirects=False) as r:
        if r.status != 303:
            raise RuntimeError(f"password: {r.status} {(await r.text())[:300]}")
        code = code_of(r.headers["Location"])
        if not code:
            raise RuntimeError(f"no code in {r.headers['Location']}")
        return code


async def exchange(s, app, code):
    body = {"grant_type": "authorization_code", "code": code, "redirect_uri": CB, "code_verifier": VERIFIER}
    async with s.post("/oauth/v2/token", data=body, headers={"Authorization": basic(app["id"], app["secret"])}) as r:
        t = await r.json(content_type=None)
        if r.status != 200:
            raise RuntimeError(f"exchange: {r.status} {t}")
        return t


# ---------------------------------------------------------------------------------------------
# seed


async def seed(a):
    with open(a.pat) as f:
        pat = f.read().strip()
    async with session(a.base) as s:
        api = Api(s, pat)
        project = (await api.call("POST", "/management/v1/projects", {"name": "bench"}))["id"]
        apps = {}
        for name, extra in [("web", {}), ("webjwt", {"accessTokenType": "OIDC_TOKEN_TYPE_JWT"})]:
            body = {
                "name": name, "redirectUris": [CB], "responseTypes": ["OIDC_RESPONSE_TYPE_CODE"],
                "grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"],
                "appType": "OIDC_APP_TYPE_WEB", "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC", **extra,
            }
            r = await api.call("POST", f"/management/v1/projects/{project}/apps/oidc", body)
            apps[name] = {"id": r["clientId"], "secret": r["clientSecret"]}
        r = await api.call("POST", f"/management/v1/projects/{project}/apps/api", {"name": "resource-server"})
        apps["rs"] = {"id": r["clientId"], "secret": r["clientSecret"]}

        machines = {}
        for name, typ in [("robot-opaque", "ACCESS_TOKEN_TYPE_BEARER"), ("robot-jwt", "ACCESS_TOKEN_TYPE_JWT")]:
            uid = (await api.call("POST", "/management/v1/users/machine",
                                  {"userName": name, "name": name, "accessTokenType": typ}))["userId"]
            sec = (await api.call("PUT", f"/management/v1/users/{uid}/secret"))["clientSecret"]
            machines[name] = {"id": name, "userId": uid, "secret": sec}
        uid = (await api.call("POST", "/management/v1/users/machine",
                              {"userName": "signer", "name": "signer", "accessTokenType": "ACCESS_TOKEN_TYPE_BEARER"}))["userId"]
        key = json.loads(base64.b64decode(
            (await api.call("POST", f"/management/v1/users/{uid}/keys", {"type": "KEY_TYPE_JSON"}))["keyDetails"]))
        machines["signer"] = {"userId": uid, "keyId": key["keyId"], "key": key["key"]}

        # Human users; setting each password is one argon2id hash on the server.
        users = [f"user{i:03d}" for i in range(a.users)]

        async def human(name):
            uid = (await api.call("POST", "/management/v1/users/human", {
                "userName": name, "profile": {"firstName": name, "lastName": "Bench"},
                "email": {"email": f"{name}@example.com", "isEmailVerified": True}}))["userId"]
            await api.call("POST", f"/management/v1/users/{uid}/password",
                           {"password": PASSWORD, "noChangeRequired": True})

        await asyncio.gather(*(human(u) for u in users))

        # Access tokens to introspect and to present at userinfo: one browser, one login.
        tokens = {}
        for app in ("web", "webjwt"):
            code = await sign_in(s, apps[app]["id"], "openid profile email", users[0])
            tokens[app] = (await exchange(s, apps[app], code))["access_token"]

        # A pending login request for the login page scenario: a fresh browser, no session.
        import aiohttp

        jar = aiohttp.CookieJar(unsafe=True)
        async with session(a.base, jar=jar) as b:
            async with b.get(authorize_query(apps["web"]["id"], "openid"), allow_redirects=False) as r:
                loc = r.headers["Location"]
        cookie = "; ".join(f"{c.key}={c.value}" for c in jar)

    state = {
        "base": a.base, "project": project, "apps": apps, "machines": machines, "users": users,
        "password": PASSWORD, "redirect_uri": CB, "verifier": VERIFIER, "tokens": tokens,
        "login_page": {"path": loc, "cookie": cookie},
    }
    with open(a.out, "w") as f:
        json.dump(state, f, indent=1)
    log(f"seeded project {project}, {len(users)} users")


# ---------------------------------------------------------------------------------------------
# pre-minting


async def mint_codes(state, app, scope, n, browsers=8, per_browser=4):
    """n codes for `app`: `browsers` cookie jars sign in once each, then authorize repeatedly."""
    import aiohttp

    conn = aiohttp.TCPConnector(limit=browsers * per_browser)
    codes = []
    try:
        jars = [aiohttp.CookieJar(unsafe=True) for _ in range(browsers)]
        sessions = [session(state["base"], jar=j, connector=conn) for j in jars]
        # Signing in costs one argon2id hash per browser.
        await asyncio.gather(*(sign_in(s, state["apps"][app]["id"], scope, state["users"][i % len(state["users"])])
                               for i, s in enumerate(sessions)))
        q = authorize_query(state["apps"][app]["id"], scope)
        left = [n]

        async def worker(s):
            while left[0] > 0:
                left[0] -= 1
                async with s.get(q, allow_redirects=False) as r:
                    c = code_of(r.headers.get("Location", ""))
                    if r.status != 303 or not c:
                        raise RuntimeError(f"authorize: {r.status} {r.headers.get('Location')}")
                    codes.append(c)

        await asyncio.gather(*(worker(s) for s in sessions for _ in range(per_browser)))
        for s in sessions:
            await s.close()
    finally:
        await conn.close()
    return codes


def code_body(code):
    return urllib.parse.urlencode({"grant_type": "authorization_code", "code": code, "redirect_uri": CB,
                                   "code_verifier": VERIFIER})


async def cmd_codes(a, state):
    t0 = time.perf_counter()
    codes = await mint_codes(state, a.app, a.scope, a.n)
    with open(a.out, "w") as f:
        f.writelines(code_body(c) + "\n" for c in codes)
    log(f"{len(codes)} codes in {time.perf_counter() - t0:.1f}s")


async def parallel(items, fn, concurrency=32):
    it = iter(items)
    out = []

    async def worker():
        for x in it:
            out.append(await fn(x))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


async def cmd_refresh(a, state):
    t0 = time.perf_counter()
    app = state["apps"][a.app]
    codes = await mint_codes(state, a.app, "openid offline_access", a.n)
    async with session(state["base"], limit=32) as s:
        toks = await parallel(codes, lambda c: exchange(s, app, c))
    with open(a.out, "w") as f:
        for t in toks:
            f.write(urllib.parse.urlencode({"grant_type": "refresh_token", "refresh_token": t["refresh_token"]}) + "\n")
    log(f"{len(toks)} refresh tokens in {time.perf_counter() - t0:.1f}s")


async def cmd_access(a, state):
    """Access tokens of the web application, each from one step of a refresh chain."""
    t0 = time.perf_counter()
    app = state["apps"][a.app]
    chains = 32
    codes = await mint_codes(state, a.app, "openid offline_access", chains)
    out = []
    async with session(state["base"], limit=chains) as s:
        rts = [(await exchange(s, app, c))["refresh_token"] for c in codes]
        per = -(-a.n // chains)

        async def chain(rt):
            for _ in range(per):
                async with s.post("/oauth/v2/token", data={"grant_type": "refresh_token", "refresh_token": rt},
                                  headers={"Authorization": basic(app["id"], app["secret"])}) as r:
                    t = await r.json(content_type=None)
                    if r.status != 200:
                        raise RuntimeError(f"refresh: {r.status} {t}")
                out.append(t["access_token"])
                rt = t["refresh_token"]

        await asyncio.gather(*(chain(rt) for rt in rts))
    with open(a.out, "w") as f:
        for at in out[: a.n]:
            f.write(urllib.parse.urlencode({"token": at, "token_type_hint": "access_token"}) + "\n")
    log(f"{min(len(out), a.n)} access tokens in {time.perf_counter() - t0:.1f}s")


_KEY = None


def _load_key(pem):
    # Loading checks the RSA key, which is slow: once per process, not per assertion.
    global _KEY
    from cryptography.hazmat.primitives import serialization

    _KEY = serialization.load_pem_private_key(pem, password=None)


def _sign_chunk(args):
    import jwt

    kid, uid, aud, scope, start, count = args
    key = _KEY
    now = int(time.time())
    lines = []
    for i in range(start, start + count):
        claims = {"iss": uid, "sub": uid, "aud": aud, "iat": now, "exp": now + 1800, "jti": f"bench-{now}-{i}"}
        assertion = jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})
        lines.append(urllib.parse.urlencode({"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                                             "assertion": assertion, "scope": scope}) + "\n")
    return lines


def cmd_assertions(a, state):
    t0 = time.perf_counter()
    m = state["machines"]["signer"]
    procs = os.cpu_count() or 2
    chunk = -(-a.n // (procs * 4))
    jobs = [(m["keyId"], m["userId"], state["base"], a.scope, s, min(chunk, a.n - s))
            for s in range(0, a.n, chunk)]
    with multiprocessing.Pool(procs, _load_key, (m["key"].encode(),)) as pool, open(a.out, "w") as f:
        for lines in pool.imap(_sign_chunk, jobs):
            f.writelines(lines)
    log(f"{a.n} assertions in {time.perf_counter() - t0:.1f}s")


# ---------------------------------------------------------------------------------------------
# the peer (npm oidc-provider, bench/peer/op.mjs)

PEER_CB = "http://localhost:3001/cb"


async def peer_sign_in(s, base, user):
    """One login through oidc-provider's devInteractions (any login and password): authorize,
    login form, consent. Returns the code."""
    q = "/auth?" + urllib.parse.urlencode({
        "client_id": "app", "redirect_uri": PEER_CB, "response_type": "code", "scope": "openid offline_access",
        "prompt": "consent", "state": "s", "code_challenge": CHALLENGE, "code_challenge_method": "S256",
    })
    loc = q
    for step in range(12):
        if loc.startswith(PEER_CB):
            return code_of(loc)
        if loc.startswith(base):
            loc = loc[len(base):]
        if loc.startswith("/interaction/"):
            async with s.get(loc, allow_redirects=False) as r:
                page = await r.text()
            form = {"prompt": "login", "login": user, "password": "x"} if 'name="login"' in page else {"prompt": "consent"}
            async with s.post(loc, data=form, allow_redirects=False) as r:
                loc = r.headers.get("Location", "")
        else:
            async with s.get(loc, allow_redirects=False) as r:
                if r.status not in (302, 303):
                    raise RuntimeError(f"peer: {loc}: {r.status} {(await r.text())[:300]}")
                loc = r.headers.get("Location", "")
    raise RuntimeError("peer: the login did not end at the callback")


def peer_code_body(code):
    return urllib.parse.urlencode({"grant_type": "authorization_code", "code": code, "redirect_uri": PEER_CB,
                                   "code_verifier": VERIFIER})


async def cmd_peer(a):
    """One login through oidc-provider's devInteractions and the code's exchange: writes the
    access token (opaque: no resource) to --token, for its introspection and userinfo scenarios."""
    async with session(a.base) as s:
        code = await peer_sign_in(s, a.base, "user000")
        async with s.post("/token", data=urllib.parse.parse_qs(peer_code_body(code)),
                          headers={"Authorization": basic("app", "secret")}) as r:
            t = await r.json(content_type=None)
            if r.status != 200:
                raise RuntimeError(f"peer exchange: {r.status} {t}")
    with open(a.token, "w") as f:
        f.write(t["access_token"] + "\n")


# ---------------------------------------------------------------------------------------------
# start-up


def cmd_startup(a):
    """Starts the command n times (each stopped with SIGTERM before the next), timing each from
    the spawn to the first 200 from --url (polled every 2 ms); prints {"ms": [...],
    "median_ms", "idle_rss_mib"} with the RSS 1 s after the last start."""
    import signal
    import statistics
    import subprocess
    import urllib.request

    cmd = a.command[1:] if a.command and a.command[0] == "--" else a.command
    times, rss = [], None
    with open(a.log, "a") as log_f:
        for i in range(a.n):
            t0 = time.perf_counter()
            p = subprocess.Popen(cmd, stdout=log_f, stderr=subprocess.STDOUT)
            try:
                while True:
                    if p.poll() is not None:
                        sys.exit(f"bench: startup: the server exited with {p.returncode}")
                    if time.perf_counter() - t0 > 30:
                        sys.exit("bench: startup: not ready after 30 s")
                    try:
                        with urllib.request.urlopen(a.url, timeout=1) as r:
                            if r.status == 200:
                                break
                    except OSError:
                        pass
                    time.sleep(0.002)
                times.append(round((time.perf_counter() - t0) * 1000, 1))
                if i == a.n - 1:
                    time.sleep(1)
                    with open(f"/proc/{p.pid}/status") as f:
                        kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
                    rss = round(kib / 1024, 1)
            finally:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
    print(json.dumps({"ms": times, "median_ms": statistics.median(times), "idle_rss_mib": rss}))


# ---------------------------------------------------------------------------------------------
# the report

# Goals from the issues. rps: requests/s at the peak; rsa: share of the RSA-2048 signing
# ceiling; argon2: share of the argon2id ceiling; p99_80: p99 in ms at 80% of the peak rate;
# rss: peak RSS in MiB.
# Goals with "stores" apply to those stores only.
GOALS = {
    "import": {"rps": 5000, "stores": ["postgres"]},
    "export": {"rps": 20000, "stores": ["postgres"]},
    "discovery": {"rps": 30000},
    "keys": {"rps": 30000},
    "cc-opaque": {"rps": 8000, "p99_80": 20},
    "cc-jwt": {"rps": 2500, "rsa": 0.60, "p99_80": 20},
    "jwt-bearer": {"p99_80": 20},
    "code": {"p99_80": 20},
    "refresh": {"rps": 1500, "p99_80": 20},
    "introspect-jwt": {"rps": 10000, "p99_80": 10},
    "introspect-opaque": {"rps": 10000, "p99_80": 10},
    "userinfo": {"rps": 10000, "p99_80": 10},
    "revoke": {},
    "login-page": {"rps": 5000},
    "login": {"argon2": 0.85, "rss": 200},
}
# Against the peer (npm oidc-provider, store "oidc-provider"): latch's req/s at least this many
# times the peer's in the same run (issue 8: opaque client_credentials 3x, every other scenario
# both support 2x; the JWT one is held to the RSA ceiling instead).
PEER = "oidc-provider"
PEER_GOALS = {"discovery": 2, "keys": 2, "cc-opaque": 3, "refresh": 2, "introspect-opaque": 2, "userinfo": 2}
# The server as a whole (issue 8): idle RSS after start, peak RSS under the heaviest wrk scenario
# (the login storms and the transfer rows have goals of their own), start-up to ready on an
# existing store.
SERVER_GOALS = {"idle_rss_mib": 30, "heaviest_rss_mib": 150, "startup_ms": 1000}
ORDER = ["discovery", "keys", "cc-opaque", "cc-jwt", "jwt-bearer", "code", "refresh", "introspect-jwt",
         "introspect-opaque", "userinfo", "revoke", "login-page", "login", "import", "export"]


def num(v, cast=float):
    try:
        return cast(v)
    except (TypeError, ValueError):
        return None


def goal_of(name, store=None):
    if store == PEER:
        return {}
    g = GOALS.get("login" if name.startswith("login-c") else name, {})
    return {} if store and store not in g.get("stores", [store]) else g


def cmd_report(a):
    rows, ceilings, servers, skipped = [], {}, {}, []
    with open(a.results) as f:
        for line in f:
            r = json.loads(line)
            kind = r.pop("kind")
            if kind == "ceiling":
                r["per_s"] = num(r.get("per_s"))
                ceilings[r["name"]] = r
            elif kind == "server":
                srv = servers.setdefault(r.pop("store"), {})
                for k, v in r.items():
                    if k == "startup_ms_all":
                        srv[k] = [num(x) for x in v.split()]
                    elif k == "version":
                        srv[k] = v
                    else:
                        srv[k] = num(v)
            elif kind == "skipped":
                skipped.append(r)
            else:
                rows.append(r)
    for c in ceilings.values():
        for k in ("p50_ms", "p99_ms", "errors", "cpu_pct", "rss_mib"):
            if k in c:
                c[k] = num(c[k])
    peer_rps = {r["name"]: num(r.get("rps")) for r in rows if r["store"] == PEER}
    hello = num(ceilings.get("http-hello", {}).get("per_s"))
    rsa = num(ceilings.get("rsa2048-sign", {}).get("per_s"))
    argon = num(ceilings.get("argon2id", {}).get("per_s"))

    out_rows = []
    for r in rows:
        name = r["name"]
        g = goal_of(name, r["store"])
        rps, p99_80 = num(r.get("rps")), num(r.get("paced_p99_ms"))
        row = {
            "store": r["store"], "name": name, "rps": num(rps, lambda v: round(float(v))),
            "p50_ms": num(r.get("p50_ms")), "p99_ms": num(r.get("p99_ms")), "errors": num(r.get("errors"), int),
            "cpu_pct": num(r.get("cpu_pct")), "db_cpu_pct": num(r.get("db_cpu_pct")), "peak_rss_mib": num(r.get("rss_mib")),
            "requests": num(r.get("requests"), int), "note": r.get("note") or None,
        }
        if r.get("client_cpu_pct"):
            row["client_cpu_pct"] = num(r["client_cpu_pct"])
        if r.get("hash_cpu_pct"):
            # The hashing threads' share of all cores: the login share's steadier companion (it
            # does not drift with the VM).
            row["hashing_threads_cpu_pct"] = num(r["hash_cpu_pct"])
        # The rest of latch during a login storm, by kind of thread: what stands between the
        # hashing threads and the whole of the cores.
        if r.get("tokio_cpu_pct"):
            row["tokio_threads_cpu_pct"] = num(r["tokio_cpu_pct"])
        if r.get("sqlite_cpu_pct"):
            row["sqlite_threads_cpu_pct"] = num(r["sqlite_cpu_pct"])
        if r.get("paced_target"):
            row["at_80pct"] = {"target_rps": num(r["paced_target"], int), "rps": num(r.get("paced_rps"), int),
                               "p99_ms": p99_80, "errors": num(r.get("paced_errors"), int),
                               "note": r.get("paced_note") or None,
                               # Requests of the paced pass that took longer inside latch (its own
                               # request histogram), in percent: what of wrk's p99 is the server's.
                               "server_over_10ms_pct": num(r.get("paced_server_over_10ms_pct")),
                               "server_over_25ms_pct": num(r.get("paced_server_over_25ms_pct")),
                               # RSA-2048 signatures/s over 1 s right before the peak pass and
                               # right after the paced one: how far the VM's speed drifted.
                               "rsa_probe_before_per_s": num(r.get("rsa_probe_before")),
                               "rsa_probe_after_per_s": num(r.get("rsa_probe_after")),
                               # Requests that waited for a pooled connection, and over 5 ms.
                               "pool_waits": num(r.get("paced_pool_waits"), int),
                               "pool_waits_over_5ms": num(r.get("paced_pool_waits_over_5ms"), int),
                               # Connections handed out, and those held over 5 ms.
                               "pool_holds": num(r.get("paced_pool_holds"), int),
                               "pool_holds_over_5ms": num(r.get("paced_pool_holds_over_5ms"), int),
                               "pool_hold_mean_ms": num(r.get("paced_pool_hold_mean_ms")),
                               # The share of the VM's CPU time the hypervisor took (steal).
                               "steal_pct": num(r.get("paced_steal_pct")),
                               # CPU time other processes on the machine (not latch, PostgreSQL
                               # or wrk) took during the paced pass, and the one that took most.
                               "other_cpu_ms": num(r.get("paced_other_cpu_ms"), int),
                               "other_top": r.get("paced_other_top") or None,
                               "other_top_ms": num(r.get("paced_other_top_ms"), int),
                               # The runtime's schedule-delay probe (every 50 ms): samples, and
                               # those that waited over 5 and 10 ms for a tokio worker.
                               "schedule_probes": num(r.get("paced_probes"), int),
                               "schedule_probes_over_5ms": num(r.get("paced_probes_over_5ms"), int),
                               "schedule_probes_over_10ms": num(r.get("paced_probes_over_10ms"), int)}
            if r["store"] == "sqlite":
                # What SQLite's writers waited for during the paced pass (latch's histograms).
                row["at_80pct"]["sqlite"] = {
                    "lock_waits": num(r.get("paced_sqlite_lock_waits"), int),
                    "lock_waits_over_5ms": num(r.get("paced_sqlite_lock_waits_over_5ms"), int),
                    "restarts": num(r.get("paced_sqlite_restarts"), int),
                    "restart_ms": num(r.get("paced_sqlite_restart_ms")),
                    "restarts_held_up": num(r.get("paced_sqlite_restarts_held_up"), int)}
        goal_txt, checks = [], []
        if "rps" in g:
            goal_txt.append(f"≥ {g['rps']:,}/s")
            checks.append(("req/s", rps is not None and rps >= g["rps"]))
        if "rsa" in g:
            goal_txt.append(f"≥ {g['rsa']:.0%} of RSA")
            if rsa:
                row["share_of_rsa_ceiling"] = round(rps / rsa, 3) if rps else None
                checks.append(("RSA share", rps is not None and rps >= g["rsa"] * rsa))
        if "argon2" in g:
            goal_txt.append(f"≥ {g['argon2']:.0%} of argon2")
            # The ceiling measured around this storm when there is one, else the run's.
            around = [num(r.get(k)) for k in ("argon2_before", "argon2_after")]
            row_argon = sum(around) / 2 if all(around) else argon
            if all(around):
                row["argon2_ceiling_around"] = {"before": around[0], "after": around[1], "mean": round(row_argon, 1)}
            if row_argon:
                row["share_of_argon2_ceiling"] = round(rps / row_argon, 3) if rps else None
                share = row.get("hashing_threads_cpu_pct")
                if rps and share:
                    # The login share = the hashing threads' share of the cores x how fast they
                    # hashed per CPU second against the ceiling tool (1.0 = as fast). A low login
                    # share with a high thread share means slower hashes (or a drifting ceiling),
                    # not more work beside them.
                    row["hash_speed_vs_ceiling"] = round(rps / row_argon / (share / 100), 3)
                checks.append(("argon2 share", rps is not None and rps >= g["argon2"] * row_argon))
        if "rss" in g:
            goal_txt.append(f"RSS < {g['rss']} MiB")
            checks.append(("RSS", row["peak_rss_mib"] is not None and row["peak_rss_mib"] < g["rss"]))
        if "p99_80" in g:
            goal_txt.append(f"p99@80% < {g['p99_80']} ms")
            if p99_80 is not None:
                checks.append(("p99@80%", p99_80 < g["p99_80"]))
        if r["store"] != PEER and peer_rps.get(name):
            row["vs_oidc_provider"] = round(rps / peer_rps[name], 2) if rps else None
            if name in PEER_GOALS:
                goal_txt.append(f"≥ {PEER_GOALS[name]}x oidc-provider")
                checks.append(("vs oidc-provider", rps is not None and rps >= PEER_GOALS[name] * peer_rps[name]))
        if hello and rps and not name.startswith("login-c") and name not in ("import", "export"):
            row["share_of_http_ceiling"] = round(rps / hello, 3)
        if row["errors"]:
            checks.append(("errors", False))
        missed = [c for c, okay in checks if not okay]
        row["goal"] = ", ".join(goal_txt) or None
        row["result"] = ("pass" if not missed else "miss: " + ", ".join(missed)) if checks else "-"
        out_rows.append(row)
    out_rows.sort(key=lambda r: ({"sqlite": 0, "postgres": 1, PEER: 2}.get(r["store"], 3),
                                 ORDER.index("login" if r["name"].startswith("login-c") else r["name"])
                                 if (r["name"] in ORDER or r["name"].startswith("login-c")) else 99, r["name"]))

    def f(v, fmt="{:,.0f}"):
        return "" if v is None else fmt.format(v)

    print()
    print(f"latch {a.commit}, {a.cpu}, {os.cpu_count()} cores, wrk -t{a.threads} -c{a.connections} -d{a.duration}")
    print()
    if rsa or argon or hello:
        print("ceilings (both cores, measured in this run):")
    if rsa:
        print(f"  RSA-2048 signatures/s: {rsa:,.0f}   ({ceilings['rsa2048-sign']['tool']})")
    if argon:
        c = ceilings["argon2id"]
        print(f"  argon2id hashes/s:     {argon:,.1f}   (m={c['memory_kib']} KiB, t={c['iterations']}, "
              f"p={c['parallelism']}; {c['tool']})")
    if hello:
        c = ceilings["http-hello"]
        print(f"  HTTP requests/s:       {hello:,.0f}   (p50 {c.get('p50_ms')} ms, p99 {c.get('p99_ms')} ms, "
              f"server CPU {c.get('cpu_pct'):.0f}%, RSS {c.get('rss_mib')} MiB; {c['tool']})")
    if rsa or argon or hello:
        print()
    head = ["store", "scenario", "req/s", "latch / oidc-provider", "p50 ms", "p99 ms", "errors", "server CPU %", "PG CPU %", "RSS MiB", "p99@80% ms",
            "goal", "result"]
    table = []
    for r in out_rows:
        pace = r.get("at_80pct") or {}
        table.append([r["store"], r["name"], f(r["rps"]), f(r.get("vs_oidc_provider"), "{:.2f}"), f(r["p50_ms"], "{:.2f}"), f(r["p99_ms"], "{:.2f}"),
                      f(r["errors"]), f(r["cpu_pct"]), f(r["db_cpu_pct"]), f(r["peak_rss_mib"], "{:.1f}"),
                      f(pace.get("p99_ms"), "{:.2f}"), r["goal"] or "", r["result"]])
    widths = [max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(head)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) if i in (0, 1, 11, 12) else c.rjust(w)
                                            for i, (c, w) in enumerate(zip(cells, widths))) + " |"
    if table:
        print(line(head))
        print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for t in table:
            print(line(t))
        print()
    for r in out_rows:
        notes = [n for n in (r.get("note"), (r.get("at_80pct") or {}).get("note")) if n]
        pace = r.get("at_80pct")
        if pace:
            notes.append(f"paced pass: {pace['rps']:,}/s of {pace['target_rps']:,}/s asked, "
                         f"{pace['errors']} errors" if pace.get("rps") is not None else "paced pass failed")
            if pace.get("server_over_10ms_pct") is not None:
                notes.append(f"inside latch {pace['server_over_10ms_pct']}% of them took over 10 ms, "
                             f"{pace['server_over_25ms_pct']}% over 25 ms")
            before, after = pace.get("rsa_probe_before_per_s"), pace.get("rsa_probe_after_per_s")
            if before and after:
                notes.append(f"RSA signing {before:,.0f}/s before the peak pass, {after:,.0f}/s after the "
                             f"paced one ({after / before - 1:+.0%})")
            if pace.get("pool_waits") is not None:
                notes.append(f"{pace['pool_waits']:,} requests waited for a pooled connection, "
                             f"{pace['pool_waits_over_5ms']:,} over 5 ms")
            if pace.get("pool_holds"):
                notes.append(f"{pace['pool_holds_over_5ms']:,} of {pace['pool_holds']:,} connections "
                             f"handed out were held over 5 ms"
                             + (f" ({pace['pool_hold_mean_ms']} ms on average)"
                                if pace.get("pool_hold_mean_ms") is not None else ""))
            if pace.get("steal_pct") is not None:
                notes.append(f"the hypervisor took {pace['steal_pct']}% of the CPU time")
            if pace.get("other_cpu_ms") is not None:
                notes.append(f"other processes took {pace['other_cpu_ms']:,} ms of CPU time"
                             + (f" (most: {pace['other_top']}, {pace['other_top_ms']:,} ms)"
                                if pace.get("other_top") and pace.get("other_top_ms") else ""))
            if pace.get("schedule_probes"):
                notes.append(f"the runtime's probe waited over 5 ms for a worker {pace['schedule_probes_over_5ms']} "
                             f"times of {pace['schedule_probes']}, over 10 ms {pace['schedule_probes_over_10ms']} times")
            lite = pace.get("sqlite") or {}
            if lite.get("lock_waits"):
                notes.append(f"{lite['lock_waits']:,} writes waited for SQLite's lock, "
                             f"{lite['lock_waits_over_5ms']:,} over 5 ms; {lite['restarts']} restarting "
                             f"checkpoints, {lite['restart_ms']:,.0f} ms in all"
                             + (f", {lite['restarts_held_up']} held up by a reader"
                                if lite.get("restarts_held_up") is not None else ""))
        if r.get("share_of_rsa_ceiling") is not None:
            notes.append(f"{r['share_of_rsa_ceiling']:.0%} of the RSA ceiling")
        if r.get("share_of_argon2_ceiling") is not None:
            around = r.get("argon2_ceiling_around")
            where = (f" ({around['mean']:,.1f}/s, measured right before and after: {around['before']:,.1f}"
                     f" and {around['after']:,.1f})") if around else ""
            notes.append(f"{r['share_of_argon2_ceiling']:.0%} of the argon2 ceiling{where}")
        if r.get("hashing_threads_cpu_pct") is not None:
            speed = r.get("hash_speed_vs_ceiling")
            notes.append(f"latch's hashing threads had {r['hashing_threads_cpu_pct']:.1f}% of all cores"
                         + (f" and hashed at {speed:.0%} of the ceiling tool's speed per CPU second"
                            if speed is not None else ""))
        others = [(label, r.get(key)) for label, key in (("tokio's threads", "tokio_threads_cpu_pct"),
                                                        ("SQLite's threads", "sqlite_threads_cpu_pct"))]
        if any(v is not None for _, v in others):
            notes.append("besides them " + ", ".join(f"{label} {v:.1f}%" for label, v in others if v is not None))
        if r.get("client_cpu_pct") is not None:
            notes.append(f"the load client (bench/storm) used {r['client_cpu_pct']:.0f}% CPU")
        if notes:
            print(f"  {r['store']} {r['name']}: " + "; ".join(notes))
    # The server as a whole: idle RSS, the heaviest wrk scenario's peak RSS, start-up to ready.
    server_goals = {}
    for store, srv in servers.items():
        parts = [f"{k.replace('_mib', '').replace('_', ' ')} {v:.1f} MiB" for k, v in srv.items()
                 if k.endswith("_mib") and v is not None]
        if srv.get("version"):
            parts.insert(0, f"oidc-provider {srv['version']}")
        print(f"  {store} server RSS: " + ", ".join(parts))
        if store == PEER:
            continue
        wrk_rows = [r for r in out_rows if r["store"] == store and r["peak_rss_mib"] is not None
                    and not r["name"].startswith("login-c") and r["name"] not in ("import", "export")]
        heavy = max(wrk_rows, key=lambda r: r["peak_rss_mib"], default=None)
        g = {}
        if srv.get("idle_rss_mib") is not None:
            # The first start on a fresh store (it migrates and creates the administrator); the RSS
            # after a restart on the existing store is shown beside it.
            g["idle_rss_mib"] = {"value": srv["idle_rss_mib"], "goal": f"≤ {SERVER_GOALS['idle_rss_mib']} MiB",
                                 "pass": srv["idle_rss_mib"] <= SERVER_GOALS["idle_rss_mib"],
                                 "after_restart": srv.get("restart_idle_rss_mib")}
        if heavy:
            g["heaviest_rss_mib"] = {"value": heavy["peak_rss_mib"], "scenario": heavy["name"],
                                     "goal": f"≤ {SERVER_GOALS['heaviest_rss_mib']} MiB",
                                     "pass": heavy["peak_rss_mib"] <= SERVER_GOALS["heaviest_rss_mib"]}
        if srv.get("startup_ms_median") is not None:
            g["startup_ms"] = {"value": srv["startup_ms_median"], "starts_ms": srv.get("startup_ms_all"),
                               "goal": f"< {SERVER_GOALS['startup_ms']} ms",
                               "pass": srv["startup_ms_median"] < SERVER_GOALS["startup_ms"]}
        server_goals[store] = g
    print()
    for store, g in server_goals.items():
        out = []
        if "startup_ms" in g:
            x = g["startup_ms"]
            out.append(f"start-up to ready {x['value']:.0f} ms (median of {len(x['starts_ms'] or [])}: "
                       f"{', '.join(f'{v:.0f}' for v in x['starts_ms'] or [])}; goal {x['goal']}: "
                       f"{'pass' if x['pass'] else 'miss'})")
        if "idle_rss_mib" in g:
            x = g["idle_rss_mib"]
            again = f"; {x['after_restart']:.1f} MiB after a restart" if x.get("after_restart") is not None else ""
            out.append(f"idle RSS {x['value']:.1f} MiB on the first start{again} (goal {x['goal']}: "
                       f"{'pass' if x['pass'] else 'miss'})")
        if "heaviest_rss_mib" in g:
            x = g["heaviest_rss_mib"]
            out.append(f"heaviest RSS {x['value']:.1f} MiB in {x['scenario']} (goal {x['goal']}: "
                       f"{'pass' if x['pass'] else 'miss'})")
        if out:
            print(f"  {store} server: " + "; ".join(out))
    for s in skipped:
        print(f"  {s['store']}: skipped ({s['reason']})")

    doc = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": a.commit,
        "machine": {"cpu": a.cpu, "cores": os.cpu_count()},
        "load": {"tool": "wrk", "threads": int(a.threads), "connections": int(a.connections), "duration": a.duration,
                 "paced": "a second pass at 80% of the peak rate for rows with a p99 goal"},
        "ceilings": ceilings,
        "peer": {"name": PEER, "config": "bench/peer/op.mjs", "version": servers.get(PEER, {}).get("version"),
                 "ratio": "vs_oidc_provider in each latch row: latch req/s / oidc-provider req/s, same wrk settings"},
        "servers": servers,
        "server_goals": server_goals,
        "scenarios": out_rows,
    }
    if skipped:
        doc["skipped"] = skipped
    with open(a.out, "w") as f_:
        json.dump(doc, f_, indent=2, ensure_ascii=False)
        f_.write("\n")


# ---------------------------------------------------------------------------------------------

# An Auth0 bcrypt hash (cost 10) of "password2": a hash in another format, as moved users bring.
MOVED_HASH = "$2b$10$JyDM8jzGYVTdDzZaPAQ2Lu2uZ7xFA3dgQNoHGblMmpkkeIfG2GEYa"


def transfer_document(org_id, n):
    users = []
    for i in range(n):
        name = f"moved-{i:07d}"
        users.append({"userId": f"{org_id}-u{i:07d}", "user": {
            "userName": name,
            "profile": {"firstName": "Moved", "lastName": f"User {i}", "displayName": f"Moved User {i}",
                        "preferredLanguage": "en"},
            "email": {"email": f"{name}@moved.example.test", "isEmailVerified": True},
            "hashedPassword": {"value": MOVED_HASH},
        }})
    return {"orgs": [{"orgId": org_id, "org": {"name": f"Moved {org_id}"}, "humanUsers": users}]}


async def cmd_transfer(a):
    """Prints {"users", "import_s", "export_s", "import_per_s", "export_per_s", "body_mib"}."""
    import aiohttp
    with open(a.pat) as f:
        pat = f.read().strip()
    org_id = f"bench-move-{int(time.time())}"
    body = json.dumps({"data_orgsv1": json.dumps(transfer_document(org_id, a.users)), "timeout": "1h"}).encode()
    headers = {"authorization": f"Bearer {pat}", "content-type": "application/json"}
    timeout = aiohttp.ClientTimeout(total=3600)
    async with aiohttp.ClientSession(timeout=timeout) as s:
        t0 = time.perf_counter()
        async with s.post(f"{a.base}/admin/v1/import", data=body, headers=headers) as r:
            report = await r.json(content_type=None)
            if r.status != 200 or report.get("errors"):
                sys.exit(f"import failed: HTTP {r.status}: {json.dumps(report)[:2000]}")
        t1 = time.perf_counter()
        got = len(report["success"]["orgs"][0].get("humanUserIds", []))
        if got != a.users:
            sys.exit(f"import: {got} users of {a.users}")
        req = {"org_ids": [org_id], "with_passwords": True, "response_output": True, "timeout": "1h"}
        async with s.post(f"{a.base}/admin/v1/export", json=req, headers=headers) as r:
            raw = await r.read()
            if r.status != 200:
                sys.exit(f"export failed: HTTP {r.status}: {raw[:2000]!r}")
        t2 = time.perf_counter()
        doc = json.loads(raw)
        if len(doc["orgs"][0].get("humanUsers", [])) != a.users:
            sys.exit("export: not every user came back")
    print(json.dumps({"users": a.users, "import_s": round(t1 - t0, 3), "export_s": round(t2 - t1, 3),
                      "import_per_s": round(a.users / (t1 - t0)), "export_per_s": round(a.users / (t2 - t1)),
                      "body_mib": round(len(body) / 2**20, 1)}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    x = sub.add_parser("seed")
    x.add_argument("--base", required=True)
    x.add_argument("--pat", required=True)
    x.add_argument("--out", required=True)
    x.add_argument("--users", type=int, default=32)
    for name in ("codes", "refresh", "access", "assertions"):
        x = sub.add_parser(name)
        x.add_argument("--state", required=True)
        x.add_argument("--n", type=int, required=True)
        x.add_argument("--out", required=True)
        x.add_argument("--app", default="web")
        x.add_argument("--scope", default="openid")
    x = sub.add_parser("peer")
    x.add_argument("--base", required=True)
    x.add_argument("--token", required=True)
    x = sub.add_parser("startup")
    x.add_argument("--n", type=int, default=5)
    x.add_argument("--url", required=True)
    x.add_argument("--log", required=True)
    x.add_argument("command", nargs=argparse.REMAINDER)
    x = sub.add_parser("transfer")
    x.add_argument("--base", required=True)
    x.add_argument("--pat", required=True)
    x.add_argument("--users", type=int, default=100000)
    x = sub.add_parser("report")
    for name in ("results", "out", "cpu", "duration", "connections", "threads", "commit"):
        x.add_argument("--" + name, required=True)
    a = p.parse_args()

    if a.cmd == "report":
        return cmd_report(a)
    if a.cmd == "seed":
        return asyncio.run(seed(a))
    if a.cmd == "transfer":
        return asyncio.run(cmd_transfer(a))
    if a.cmd == "startup":
        return cmd_startup(a)
    if a.cmd == "peer":
        return asyncio.run(cmd_peer(a))
    with open(a.state) as f:
        state = json.load(f)
    if a.cmd == "assertions":
        return cmd_assertions(a, state)
    fn = {"codes": cmd_codes, "refresh": cmd_refresh, "access": cmd_access}[a.cmd]
    asyncio.run(fn(a, state))


if __name__ == "__main__":
    main()
