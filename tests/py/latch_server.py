"""Starts the latch binary in a temporary directory on a free port (SQLite or PostgreSQL) and
seeds it through the management API. It builds nothing: the binary comes from LATCH_BIN
(default target/debug/latch of the repository, or $CARGO_TARGET_DIR/debug/latch)."""

from __future__ import annotations

import atexit
import base64
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import requests

REPO = Path(__file__).resolve().parents[2]
ADMIN_PASSWORD = "Admin-Passw0rd!"


def _host() -> str:
    """`localhost`, unless it resolves to something else than 127.0.0.1 first (latch listens on
    127.0.0.1 only); LATCH_E2E_HOST overrides."""
    if os.environ.get("LATCH_E2E_HOST"):
        return os.environ["LATCH_E2E_HOST"]
    try:
        first = socket.getaddrinfo("localhost", None, type=socket.SOCK_STREAM)[0][4][0]
    except OSError:
        return "127.0.0.1"
    return "localhost" if first == "127.0.0.1" else "127.0.0.1"


HOST = _host()


def latch_bin() -> Path:
    if os.environ.get("LATCH_BIN"):
        return (REPO / os.environ["LATCH_BIN"]).resolve()
    target = REPO / os.environ.get("CARGO_TARGET_DIR", "target")
    return target / "debug" / "latch"


def databases() -> list[str]:
    only = os.environ.get("LATCH_E2E_DATABASE")
    if only:
        if only not in ("sqlite", "postgres"):
            raise ValueError(f"LATCH_E2E_DATABASE must be sqlite or postgres, not {only}")
        return [only]
    return ["sqlite", "postgres"] if os.environ.get("LATCH_TEST_DATABASE_URL") else ["sqlite"]


def pg_admin_url() -> str:
    return os.environ.get("LATCH_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")


def psql(sql: str) -> None:
    subprocess.run(["psql", pg_admin_url(), "-v", "ON_ERROR_STOP=1", "-qAtc", sql], check=True, capture_output=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_counter = 0
_running: set["Latch"] = set()


@atexit.register
def _stop_all() -> None:
    for server in list(_running):
        server.stop()



def unique(prefix: str) -> str:
    global _counter
    _counter += 1
    return f"{prefix}{_counter}{secrets.token_hex(3)}"


class Latch:
    def __init__(self, database: str = "sqlite", env: dict[str, str] | None = None):
        binary = latch_bin()
        if not binary.exists():
            raise RuntimeError(f"no latch binary at {binary}: build it with 'cargo build --bin latch' or set LATCH_BIN")
        self.database = database
        self.dir = Path(tempfile.mkdtemp(prefix=f"latch-py-{database}-"))
        self.data_dir = self.dir / "data"
        self.port = free_port()
        self.base = f"http://{HOST}:{self.port}"
        self.pg_database = None
        variables = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", str(self.dir)),
            "LATCH_LISTEN": f"127.0.0.1:{self.port}",
            "LATCH_EXTERNAL_URL": self.base,
            "LATCH_PASSWORD_ARGON2_MEMORY_KIB": "1024",
            "LATCH_PASSWORD_ARGON2_ITERATIONS": "1",
            "LATCH_FIRSTINSTANCE_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "LATCH_LOG_LEVEL": os.environ.get("LATCH_E2E_LOG_LEVEL", "warn"),
            "LATCH_SHUTDOWN_TIMEOUT": "5s",
            # The suites sign the same test users in many times a minute.
            "LATCH_LIMITS_LOGIN_PER_NAME": "300/1m",
            "NO_COLOR": "1",
            **(env or {}),
        }
        if database == "postgres":
            self.pg_database = f"latch_t_e2e_{secrets.token_hex(6)}"
            psql(f'CREATE DATABASE "{self.pg_database}"')
            u = urlsplit(pg_admin_url())
            variables["LATCH_DATABASE_URL"] = urlunsplit((u.scheme, u.netloc, "/" + self.pg_database, u.query, u.fragment))
        elif database != "sqlite":
            raise ValueError(database)
        self.log_path = self.dir / "latch.log"
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([str(binary), "serve"], cwd=self.dir, env=variables, stdout=self._log, stderr=self._log)
        _running.add(self)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"latch exited during start ({self.proc.returncode}):\n{self.log()}")
            try:
                if requests.get(f"{self.base}/readyz", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"latch not ready within 60 s:\n{self.log()}")
            time.sleep(0.1)
        self.pat = (self.data_dir / "admin.pat").read_text().strip()
        self.discovery = requests.get(f"{self.base}/.well-known/openid-configuration", timeout=10).json()

    def log(self) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-60:])
        except OSError:
            return ""

    def stop(self) -> None:
        _running.discard(self)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        if self.pg_database:
            try:
                psql(f'DROP DATABASE IF EXISTS "{self.pg_database}" WITH (FORCE)')
            except subprocess.CalledProcessError as e:
                print(f"could not drop {self.pg_database}: {e.stderr}")
        if os.environ.get("LATCH_E2E_KEEP"):
            print(f"kept {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def api(self, method: str, path: str, body: dict | None = None) -> dict:
        r = requests.request(
            method, self.base + path, headers={"Authorization": f"Bearer {self.pat}"}, json=body, timeout=30
        )
        if not r.ok:
            raise AssertionError(f"{method} {path} -> {r.status_code}: {r.text}")
        return r.json() if r.content else {}

    # ----- seeding -----

    def oidc_app(self, **extra) -> dict:
        project = self.api("POST", "/management/v1/projects", {"name": unique("proj")})["id"]
        body = {
            "name": unique("app"),
            "redirectUris": ["http://127.0.0.1:9/cb"],
            "responseTypes": ["OIDC_RESPONSE_TYPE_CODE"],
            "grantTypes": ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"],
            "appType": "OIDC_APP_TYPE_WEB",
            "authMethodType": "OIDC_AUTH_METHOD_TYPE_BASIC",
            "devMode": True,
            **extra,
        }
        r = self.api("POST", f"/management/v1/projects/{project}/apps/oidc", body)
        return {"client_id": r["clientId"], "client_secret": r.get("clientSecret"), "app_id": r["appId"], "project_id": project}

    def app_key(self, project_id: str, app_id: str) -> dict:
        r = self.api("POST", f"/management/v1/projects/{project_id}/apps/{app_id}/keys", {"type": "KEY_TYPE_JSON"})
        return json.loads(base64.b64decode(r["keyDetails"]))

    def human(self, user_name: str, password: str) -> str:
        r = self.api(
            "POST",
            "/management/v1/users/human",
            {
                "userName": user_name,
                "profile": {"firstName": user_name, "lastName": "Test"},
                "email": {"email": f"{user_name}@example.com", "isEmailVerified": True},
            },
        )
        self.api("POST", f"/management/v1/users/{r['userId']}/password", {"password": password, "noChangeRequired": True})
        return r["userId"]
