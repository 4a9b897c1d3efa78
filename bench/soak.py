#!/usr/bin/env python3
"""The soak test's load (runs in bench/.venv; bench/soak starts the server and calls this).

A mix of operations against one latch, first as fast as it goes (calibration), then paced at a
share of that peak for a long time, sampling the server's RSS and the row counts of the tables
that expire. Prints a line per interval and a verdict; writes a JSON report.

  client_credentials (opaque)   37%
  introspection of a recent access token (API application)   25%
  code flow with single sign-on (authorize, then the code exchange, offline_access)   17%
  refresh (rotation; the next token goes back to the pool)   15%
  revocation of a recent access token, then its introspection (must be inactive at once)   3%
  full password login in a new browser (argon2id), then the exchange   3%
"""

import argparse
import asyncio
import json
import os
import random
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import latchbench as lb  # noqa: E402

MIX = [("cc", 37), ("introspect", 25), ("code", 17), ("refresh", 15), ("revoke", 3), ("login", 3)]
TABLES = ["auth_request", "auth_code", "session", "refresh_token", "revocation", "assertion_jti", "user_code"]


class Load:
    def __init__(self, state, browsers):
        self.state = state
        self.browsers = browsers
        self.web = state["apps"]["web"]
        self.rs = state["apps"]["rs"]
        robot = state["machines"]["robot-opaque"]
        self.cc_auth = lb.basic("robot-opaque", robot["secret"])
        self.web_auth = lb.basic(self.web["id"], self.web["secret"])
        self.rs_auth = lb.basic(self.rs["id"], self.rs["secret"])
        self.access = []  # recent access tokens (introspection)
        self.refresh = []  # refresh tokens not used yet
        self.ok = 0
        self.errors = 0
        self.error_samples = []
        self.by_op = {name: 0 for name, _ in MIX}

    def fail(self, what):
        self.errors += 1
        if len(self.error_samples) < 20:
            self.error_samples.append(what[:300])

    def keep_access(self, at):
        self.access.append(at)
        if len(self.access) > 2000:
            del self.access[:1000]

    def keep_refresh(self, rt):
        self.refresh.append(rt)
        if len(self.refresh) > 5000:
            del self.refresh[:2500]

    async def token(self, s, auth, data):
        async with s.post("/oauth/v2/token", data=data, headers={"Authorization": auth}) as r:
            body = await r.json(content_type=None)
            return r.status, body

    async def op(self, s, name):
        if name in ("introspect", "revoke") and not self.access:
            name = "cc"
        if name == "refresh" and not self.refresh:
            name = "code"
        self.by_op[name] += 1
        if name == "cc":
            st, t = await self.token(s, self.cc_auth, {"grant_type": "client_credentials", "scope": "openid"})
            if st != 200:
                return self.fail(f"cc {st} {t}")
        elif name == "introspect":
            at = random.choice(self.access[-500:])
            async with s.post("/oauth/v2/introspect", data={"token": at}, headers={"Authorization": self.rs_auth}) as r:
                body = await r.json(content_type=None)
                if r.status != 200 or "active" not in body:
                    return self.fail(f"introspect {r.status} {body}")
        elif name == "revoke":
            at = self.access.pop(random.randrange(len(self.access)))
            async with s.post("/oauth/v2/revoke", data={"token": at, "token_type_hint": "access_token"},
                              headers={"Authorization": self.web_auth}) as r:
                if r.status != 200:
                    return self.fail(f"revoke {r.status} {await r.text()}")
            async with s.post("/oauth/v2/introspect", data={"token": at}, headers={"Authorization": self.rs_auth}) as r:
                body = await r.json(content_type=None)
                if r.status != 200 or body.get("active") is not False:
                    return self.fail(f"introspect after revoke {r.status} {body}")
        elif name == "code":
            i = random.randrange(len(self.browsers))
            b = self.browsers[i]
            async with b.get(lb.authorize_query(self.web["id"], "openid offline_access"), allow_redirects=False) as r:
                loc = r.headers.get("Location", "")
                code = lb.code_of(loc)
            if r.status == 303 and loc.startswith("/ui/login/"):
                # The browser's session ended (10 minutes): it signs in again, as a person would.
                code = await lb.sign_in(b, self.web["id"], "openid offline_access",
                                        self.state["users"][i % len(self.state["users"])])
            elif r.status != 303 or not code:
                return self.fail(f"authorize {r.status} {loc}")
            st, t = await self.token(s, self.web_auth, {"grant_type": "authorization_code", "code": code,
                                                        "redirect_uri": lb.CB, "code_verifier": lb.VERIFIER})
            if st != 200:
                return self.fail(f"code {st} {t}")
            self.keep_access(t["access_token"])
            self.keep_refresh(t["refresh_token"])
        elif name == "refresh":
            rt = self.refresh.pop(random.randrange(len(self.refresh)))
            st, t = await self.token(s, self.web_auth, {"grant_type": "refresh_token", "refresh_token": rt})
            if st != 200:
                return self.fail(f"refresh {st} {t}")
            self.keep_access(t["access_token"])
            self.keep_refresh(t["refresh_token"])
        elif name == "login":
            user = random.choice(self.state["users"])
            async with lb.session(self.state["base"], limit=2) as fresh:
                code = await lb.sign_in(fresh, self.web["id"], "openid", user)
                await lb.exchange(fresh, self.web, code)
        self.ok += 1


def pick():
    r = random.uniform(0, sum(w for _, w in MIX))
    for name, w in MIX:
        r -= w
        if r <= 0:
            return name
    return MIX[0][0]


async def run_phase(load, s, seconds, rate, concurrency, on_tick, tick_s):
    """Runs the mix for `seconds`: closed loop with `concurrency` workers when `rate` is None,
    else paced to `rate` operations/s. Calls on_tick every `tick_s`."""
    end = time.monotonic() + seconds
    start = time.monotonic()
    issued = [0]

    async def worker():
        while time.monotonic() < end:
            if rate:
                due = start + issued[0] / rate
                issued[0] += 1
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            try:
                await load.op(s, pick())
            except Exception as e:  # noqa: BLE001 - every failure counts as an error
                load.fail(f"{type(e).__name__}: {e}")

    async def ticker():
        while time.monotonic() < end:
            await asyncio.sleep(min(tick_s, max(0.0, end - time.monotonic())))
            await on_tick()

    await asyncio.gather(ticker(), *(worker() for _ in range(concurrency)))


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return None


def counter(db_url):
    if db_url.startswith("postgres"):
        import subprocess

        def count():
            sql = " UNION ALL ".join(f"SELECT '{t}', COUNT(*) FROM {t}" for t in TABLES)
            out = subprocess.run(["psql", "-Atq", db_url, "-c", sql], capture_output=True, text=True, check=True).stdout
            return {k: int(v) for k, v in (line.split("|") for line in out.split())}
    else:
        import sqlite3

        path = db_url.split("://", 1)[1]

        def count():
            c = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
            try:
                return {t: c.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}
            finally:
                c.close()
    return count


def slope_per_10min(samples):
    """Least-squares slope of (seconds, MiB) samples, in MiB per 10 minutes."""
    n = len(samples)
    if n < 2:
        return 0.0
    mx = sum(t for t, _ in samples) / n
    my = sum(v for _, v in samples) / n
    den = sum((t - mx) ** 2 for t, _ in samples)
    return 600 * sum((t - mx) * (v - my) for t, v in samples) / den if den else 0.0


async def main_async(a):
    import aiohttp

    with open(a.state) as f:
        state = json.load(f)
    count = counter(a.db_url)
    conn = aiohttp.TCPConnector(limit=a.concurrency + 32)
    # Browsers with a session (single sign-on for the code-flow operations).
    browsers = [lb.session(state["base"], jar=aiohttp.CookieJar(unsafe=True), connector=conn) for _ in range(16)]
    await asyncio.gather(*(lb.sign_in(b, state["apps"]["web"]["id"], "openid offline_access",
                                      state["users"][i % len(state["users"])]) for i, b in enumerate(browsers)))
    load = Load(state, browsers)
    s = lb.session(state["base"], connector=conn)

    # Calibration: as fast as the mix goes.
    lb.log(f"soak: calibrating for {a.calibrate}s at concurrency {a.concurrency}")
    t0, ok0 = time.monotonic(), load.ok
    await run_phase(load, s, a.calibrate, None, a.concurrency, lambda: asyncio.sleep(0), 5)
    peak = (load.ok - ok0) / (time.monotonic() - t0)
    rate = peak * a.pct / 100
    lb.log(f"soak: peak {peak:.0f} ops/s; running {a.minutes} min at {a.pct}% = {rate:.0f} ops/s")
    errors_before = load.errors
    load.errors, load.ok = 0, 0
    load.error_samples.clear()
    load.by_op = {name: 0 for name, _ in MIX}

    samples = []  # (seconds since start, rss MiB, {table: rows}, ops so far, errors so far)
    started = time.monotonic()
    last = [started, 0]

    async def tick():
        now = time.monotonic()
        rows = await asyncio.to_thread(count)
        rss = rss_mib(a.pid)
        samples.append((now - started, rss, rows, load.ok, load.errors))
        rate_now = (load.ok - last[1]) / max(1e-9, now - last[0])
        last[0], last[1] = now, load.ok
        print(f"soak: {(now - started) / 60:5.1f} min  {rate_now:6.0f} ops/s  errors {load.errors}  "
              f"rss {rss:.1f} MiB  " + " ".join(f"{k}={v}" for k, v in rows.items()), file=sys.stderr, flush=True)

    await run_phase(load, s, a.minutes * 60, rate, a.concurrency, tick, a.sample)
    elapsed = time.monotonic() - started
    await s.close()
    for b in browsers:
        await b.close()
    await conn.close()

    # Verdicts: zero errors; RSS flat over the second half; every table bounded (its largest
    # count in the last third at most 25% + 100 rows above its largest in the middle third).
    half = [(t, r) for t, r, *_ in samples if t >= elapsed / 2]
    rss_slope = slope_per_10min(half)
    thirds = elapsed / 3
    bounded = {}
    for t in TABLES:
        mid = max((rows[t] for ts, _, rows, *_ in samples if thirds <= ts < 2 * thirds), default=0)
        end = max((rows[t] for ts, _, rows, *_ in samples if ts >= 2 * thirds), default=0)
        bounded[t] = {"middle_max": mid, "last_max": end, "bounded": end <= mid * 1.25 + 100}
    rss_values = [r for _, r, *_ in samples]
    report = {
        "minutes": a.minutes, "pct_of_peak": a.pct, "peak_ops_per_s": round(peak), "target_ops_per_s": round(rate),
        "achieved_ops_per_s": round(load.ok / elapsed), "operations": load.ok, "by_op": load.by_op,
        "errors": load.errors, "calibration_errors": errors_before, "error_samples": load.error_samples,
        "rss_mib": {"first": rss_values[0] if rss_values else None, "max": max(rss_values, default=None),
                    "last": rss_values[-1] if rss_values else None,
                    "slope_second_half_mib_per_10min": round(rss_slope, 2)},
        "tables": bounded,
        "rss_flat": abs(rss_slope) <= a.rss_slope,
    }
    report["pass"] = load.errors == 0 and report["rss_flat"] and all(v["bounded"] for v in bounded.values())
    with open(a.out, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(json.dumps(report))
    return 0 if report["pass"] else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--state", required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--db-url", required=True)
    p.add_argument("--minutes", type=float, default=30)
    p.add_argument("--pct", type=float, default=70)
    p.add_argument("--calibrate", type=float, default=60)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--sample", type=float, default=30, help="seconds between samples")
    p.add_argument("--rss-slope", type=float, default=5.0, help="largest RSS trend allowed, MiB per 10 minutes")
    p.add_argument("--out", required=True)
    sys.exit(asyncio.run(main_async(p.parse_args())))


if __name__ == "__main__":
    main()
