"""A browser without a browser: a cookie jar, redirects followed by hand, and the HTML forms of
the login pages filled and submitted (test-peers.md 1)."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urljoin

import requests


class _Forms(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.forms: list[dict] = []
        self._current: dict | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self._current = {"action": a.get("action") or "", "method": (a.get("method") or "get").upper(), "fields": []}
            self.forms.append(self._current)
        elif tag == "input" and self._current is not None and a.get("name") is not None:
            self._current["fields"].append((a["name"], a.get("value") or ""))

    def handle_endtag(self, tag):
        if tag == "form":
            self._current = None


def parse_forms(html: str) -> list[dict]:
    p = _Forms()
    p.feed(html)
    return p.forms


def walk(url: str, stop_prefix: str, answers: dict[str, str], session: requests.Session | None = None, max_steps: int = 20) -> str:
    """Follows `url` until a redirect to `stop_prefix`, filling the inputs named in `answers`;
    returns that redirect (the callback URL)."""
    s = session or requests.Session()
    answers = dict(answers)
    r = s.get(url, allow_redirects=False, timeout=30)
    seen_login = False
    for _ in range(max_steps):
        if "/ui/login/" in r.url:
            seen_login = True
        loc = r.headers.get("location")
        if loc:
            loc = urljoin(r.url, loc)
            if loc.startswith(stop_prefix):
                assert seen_login, "the walk went through the login pages"
                return loc
            r = s.get(loc, allow_redirects=False, timeout=30)
            continue
        assert r.status_code == 200, f"{r.status_code} at {r.url}: {r.text[:2000]}"
        forms = parse_forms(r.text)
        wanted = next((f for f in forms if any(n in answers for n, _ in f["fields"])), forms[0] if len(forms) == 1 else None)
        assert wanted, f"no form to submit at {r.url}: {r.text[:2000]}"
        fields = [(n, answers.pop(n) if n in answers else v) for n, v in wanted["fields"]]
        action = urljoin(r.url, wanted["action"] or r.url)
        r = s.request(wanted["method"], action, data=fields, allow_redirects=False, timeout=30)
    raise AssertionError(f"no redirect to {stop_prefix} after {max_steps} steps: {r.text[:2000]}")
