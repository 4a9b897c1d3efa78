"""schemathesis against a live latch: every operation of /openapi.json (/management/v1, /admin/v1,
/v2) is called with generated requests as the machine administrator (IAM_OWNER), and every check
of CHECKS holds: no server error; no undocumented status, content type or body; no input the
schema forbids accepted; no operation that works without a token; 405 with Allow for other
methods.

Path parameters are drawn, most of the time, from objects seeded beforehand (a human and a
machine user, a project with a role, OIDC and API applications, keys, a personal access token,
a domain), so the calls reach the handlers' logic rather than stopping at "not found".

Bounded: the coverage phase's systematic cases plus LATCH_SCHEMATHESIS_EXAMPLES random cases per
operation in the fuzzing phase (default 15); LATCH_SCHEMATHESIS_SEED picks the seed. The run's
figures are printed and written to artifacts/schemathesis-<database>.json, its output to
artifacts/schemathesis-<database>.log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from latch_server import REPO, Latch, databases, unique

CHECKS = os.environ.get(
    "LATCH_SCHEMATHESIS_CHECKS",
    "not_a_server_error,status_code_conformance,response_schema_conformance,content_type_conformance,"
    "negative_data_rejection,ignored_auth,unsupported_method,allow_header_conformance,missing_required_header,"
    "use_after_free,ensure_resource_availability",
)
EXAMPLES = int(os.environ.get("LATCH_SCHEMATHESIS_EXAMPLES", "15"))


def seed(latch: Latch) -> dict[str, list[str]]:
    """Objects for the path parameters, by parameter name."""
    human = latch.human(unique("st-human"), "Passw0rd!-schemathesis")
    machine = latch.api("POST", "/management/v1/users/machine", {"userName": unique("st-sa"), "name": "sa"})["userId"]
    user_key = latch.api("POST", f"/management/v1/users/{machine}/keys", {"type": "KEY_TYPE_JSON"})["keyId"]
    pat = latch.api("POST", f"/management/v1/users/{machine}/pats", {})["tokenId"]
    oidc = latch.oidc_app(authMethodType="OIDC_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT")
    project = oidc["project_id"]
    latch.api("POST", f"/management/v1/projects/{project}/roles", {"roleKey": "reader", "displayName": "Reader"})
    api_app = latch.api("POST", f"/management/v1/projects/{project}/apps/api", {"name": unique("st-api")})["appId"]
    app_key = latch.api(
        "POST", f"/management/v1/projects/{project}/apps/{oidc['app_id']}/keys", {"type": "KEY_TYPE_JSON"}
    )["id"]
    domain = f"{unique('st')}.example.com"
    latch.api("POST", "/management/v1/orgs/me/domains", {"domain": domain})
    latch.api("POST", "/management/v1/orgs/me/members", {"userId": human, "roles": ["ORG_OWNER"]})
    org = latch.api("GET", "/management/v1/orgs/me")["org"]["id"]
    web_keys = [k["id"] for k in latch.api("GET", "/v2/web_keys")["webKeys"]]
    return {
        "user_id": [human, machine],
        "key_id": [user_key, app_key],
        "token_id": [pat],
        "project_id": [project],
        "app_id": [oidc["app_id"], api_app],
        "domain": [domain],
        "id": [org, *web_keys],
    }


def config(path: Path, seeded: dict[str, list[str]]) -> None:
    lines = ["[checks]\nenabled = false"]
    lines += [f"{check}.enabled = true" for check in CHECKS.split(",")]
    # The import reports a bad organization in its answer (200, `errors`), by design: every
    # problem of every organization at once, the others imported.
    lines.append('\n[[operations]]\ninclude-path = "/admin/v1/import"\nchecks.negative_data_rejection.enabled = false\n')
    # Values seen in answers are not reused: the calls would find the caller's own user id in
    # search results and deactivate, lock, demote or delete it, and every later call would be
    # refused (401/403) and test nothing. The seeded objects stand in for them.
    for phase in ("examples", "coverage", "fuzzing"):
        lines.append(f"[phases.{phase}.extra-data-sources]\nresponses = false\n")
    for name, values in seeded.items():
        lines.append(f"[dictionaries.{name}]\nvalues = {json.dumps(values)}\n")
    lines.append("[parameters]")
    for name in seeded:
        lines.append(f'"path.{name}" = {{ dictionary = "{name}", probability = 0.8 }}')
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module", params=databases())
def server(request):
    # The bucket endpoint points at a closed port: export and import to a bucket fail fast.
    latch = Latch(request.param, env={"LATCH_GCS_ENDPOINT": "http://127.0.0.1:9"})
    yield latch
    latch.stop()


def schemathesis(server: Latch, tmp_path: Path, name: str, select: list[str]) -> tuple[dict, str]:
    """One run over the operations `select` picks; returns its JSON report and its output."""
    report = tmp_path / f"{name}.json"
    st = Path(sys.executable).parent / "schemathesis"
    cmd = [
        str(st),
        "--config-file",
        str(tmp_path / "schemathesis.toml"),
        "run",
        f"{server.base}/openapi.json",
        *select,
        "-H",
        f"Authorization: Bearer {server.pat}",
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        str(EXAMPLES),
        "--workers",
        "2",
        "--seed",
        os.environ.get("LATCH_SCHEMATHESIS_SEED", "20261122"),
        "--generation-database",
        "none",
        "--request-timeout",
        "30",
        "--no-color",
        "--report",
        "json",
        "--report-json-path",
        str(report),
    ]
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    output = run.stdout + run.stderr
    assert report.exists(), f"schemathesis wrote no report ({run.returncode}):\n{output[-6000:]}"
    data = json.loads(report.read_text())
    assert not data["failures"] and not data["errors"] and run.returncode == 0, (
        f"schemathesis found problems:\n{output[-12000:]}"
    )
    # A run whose token stopped working tested nothing past that point.
    assert not data["warnings"].get("missing_auth"), f"calls were refused as unauthenticated:\n{output[-6000:]}"
    server.api("GET", "/management/v1/orgs/me")
    return data, output


def test_schemathesis(server: Latch, tmp_path: Path):
    config(tmp_path / "schemathesis.toml", seed(server))
    # Deletions last: run first, they would remove the seeded objects the other calls need.
    runs = [
        schemathesis(server, tmp_path, "keep", ["--exclude-method", "DELETE"]),
        schemathesis(server, tmp_path, "delete", ["--include-method", "DELETE"]),
    ]
    reports = [data for data, _ in runs]
    figures = {
        "database": server.database,
        "operations": sum(d["operations"]["tested"] for d in reports),
        "cases": sum(d["test_cases"]["generated"] for d in reports),
        "failures": sum(len(d["failures"]) for d in reports),
        "errors": sum(len(d["errors"]) for d in reports),
        "seconds": round(sum(d["running_time"] for d in reports), 1),
        "examples_per_operation": EXAMPLES,
        "checks": CHECKS.split(","),
        "schemathesis": reports[0]["schemathesis_version"],
    }
    print(f"schemathesis on {server.database}: {json.dumps(figures)}")
    artifacts = REPO / "artifacts"
    artifacts.mkdir(exist_ok=True)
    (artifacts / f"schemathesis-{server.database}.json").write_text(json.dumps(figures, indent=2) + "\n")
    (artifacts / f"schemathesis-{server.database}.log").write_text("\n".join(out for _, out in runs))
    total = reports[0]["operations"]["total"]
    assert figures["operations"] == total >= 80, f"{figures['operations']} of {total} operations tested"
