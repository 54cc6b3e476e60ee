"""Behind the documented TLS deploy (``PUBLIC_URL=https://...`` with a TLS-terminating proxy
in front of daphne, as deploy/systemd/platform.env.example sets it) the platform knows its
requests are https: the admin's cookies are Secure and links built from a request (the
API's pagination ``next``) stay on https, so a client following them never sends its
token over plain http. The embedded default (http://127.0.0.1:8000) stays plain, or a
login over http would not stick.

Each case loads the settings in a fresh interpreter, as a start does: the test process's
own settings are loaded once and cannot be read again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.support import fresh_settings
from tests.support.processes import BASE_DIR

# Each case is a fresh interpreter (slow), left without the run's database and Redis
# (_run): make test runs these once (scripts/test.sh).
pytestmark = [pytest.mark.slow, pytest.mark.no_services]

VARIABLES = {
    "PUBLIC_URL",
    "ALLOWED_HOSTS",
    "NUM_PROXIES",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "USE_X_FORWARDED_PROTO",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_SSL_REDIRECT",
    "HOST",
    "PORT",
}
# The embedded mode whatever the pass: TLS settings are the same in both modes.
PASS_SERVICES = {"DATABASE_URL", "REDIS_URL"}
HTTPS = {"PUBLIC_URL": "https://agents.example.com", "ALLOWED_HOSTS": "agents.example.com"}
# What a request through the proxy looks like to daphne: plain http, the proxy's headers.
READ = """
import django, json
django.setup()
from django.conf import settings
from django.test import RequestFactory
from rest_framework.request import Request
from platform_site.pagination import StrictLimitOffsetPagination

request = Request(RequestFactory().get(
    "/api/tasks?limit=10", HTTP_HOST="agents.example.com", HTTP_X_FORWARDED_PROTO="https"
))
paging = StrictLimitOffsetPagination()
paging.paginate_queryset(list(range(30)), request)
print(json.dumps({
    "session": settings.SESSION_COOKIE_SECURE,
    "csrf": settings.CSRF_COOKIE_SECURE,
    "header": settings.SECURE_PROXY_SSL_HEADER,
    "next": paging.get_next_link(),
}))
"""

CHECK_DEPLOY = (
    "from django.core.management import execute_from_command_line; "
    "execute_from_command_line(['manage.py', 'check', '--deploy'])"
)


def _run(env: dict[str, str], code: str = READ) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in {*VARIABLES, *PASS_SERVICES}}
    clean.update(env, DJANGO_SETTINGS_MODULE="platform_site.settings")
    return subprocess.run(
        [sys.executable, "-c", code],
        env=clean,
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _read(**env: str) -> dict[str, Any]:
    result = _run({"ALLOWED_HOSTS": "agents.example.com", **env})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_an_https_public_url_makes_cookies_secure_and_links_https() -> None:
    """The documented deploy: Secure cookies, and a ``next`` link a client can follow with
    its token without leaving https."""
    read = _read(**HTTPS)
    assert read["session"] is True
    assert read["csrf"] is True
    assert read["header"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert read["next"] == "https://agents.example.com/api/tasks?limit=10&offset=10"


def test_the_embedded_default_stays_plain_http_and_trusts_no_header() -> None:
    """`make run`: an admin login over http://127.0.0.1:8000 must keep its cookies, and with
    no proxy in front a client's own X-Forwarded-Proto means nothing; an operator may still
    ask for Secure cookies."""
    read = _read()
    assert (read["session"], read["csrf"], read["header"]) == (False, False, None)
    assert read["next"] == "http://agents.example.com/api/tasks?limit=10&offset=10"
    forced = _read(SESSION_COOKIE_SECURE="true", CSRF_COOKIE_SECURE="yes")
    assert (forced["session"], forced["csrf"]) == (True, True)


@pytest.mark.parametrize(
    ("off", "kept"),
    [
        ("SESSION_COOKIE_SECURE", ("csrf", "header")),
        ("CSRF_COOKIE_SECURE", ("session", "header")),
        ("USE_X_FORWARDED_PROTO", ("session", "csrf")),
    ],
)
def test_each_https_default_turns_off_on_its_own(off: str, kept: tuple[str, str]) -> None:
    """E.g. trying an https install's settings on a laptop over http, or a proxy that does
    not set X-Forwarded-Proto (then a client's own header must not be believed)."""
    read = _read(**HTTPS, **{off: "false"})
    assert all(read[name] for name in kept), read
    turned_off = {"SESSION_COOKIE_SECURE": "session", "CSRF_COOKIE_SECURE": "csrf"}
    assert not read[turned_off.get(off, "header")]
    if off == "USE_X_FORWARDED_PROTO":
        assert read["next"].startswith("http://")


def test_num_proxies_alone_trusts_the_proxy_scheme_header() -> None:
    """A proxy in front said so (NUM_PROXIES), even on an http PUBLIC_URL: the proxy may
    serve https under another name. Cookies follow PUBLIC_URL only; no proxy (0): no trust."""
    behind = _read(NUM_PROXIES="1")
    assert behind["header"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert (behind["session"], behind["csrf"]) == (False, False)
    assert _read(NUM_PROXIES="0")["header"] is None


@pytest.mark.parametrize(
    "name", ["SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "USE_X_FORWARDED_PROTO"]
)
def test_a_switch_that_is_not_a_boolean_stops_the_start(name: str) -> None:
    """A typo stops the start naming the variable, like every other setting."""
    result = fresh_settings.read(name, {name: "maybe"}, drop=VARIABLES)
    assert result.returncode != 0
    assert f"{name} must be a boolean (true/false), got 'maybe'" in result.stderr


def test_check_deploy_has_no_cookie_warnings_with_the_deploy_example() -> None:
    """`manage.py check --deploy` with deploy/systemd/platform.env.example's settings no
    longer warns that the session and CSRF cookies are not Secure."""
    env = {**HTTPS, "SECRET_KEY": "a-long-and-varied-key-for-this-check-only-0123456789-XYZ"}
    result = _run(env, CHECK_DEPLOY)
    output = result.stdout + result.stderr
    assert "System check identified" in output, output  # the check ran
    assert "security.W012" not in output, output
    assert "security.W016" not in output, output


# Through the whole middleware stack: plain http (what daphne sees without the proxy's
# header), the same through the proxy, and a health probe over plain http.
REDIRECTS = """
import django, json
django.setup()
from django.test import Client

client = Client(HTTP_HOST="agents.example.com")
plain = client.get("/api/tasks")
proxied = client.get("/healthz", HTTP_X_FORWARDED_PROTO="https")
health = client.get("/healthz")
print(json.dumps({
    "plain": [plain.status_code, plain.get("Location")],
    "hsts": proxied.get("Strict-Transport-Security"),
    "health": health.status_code,
}))
"""


def test_an_https_only_site_redirects_plain_http_and_sends_hsts() -> None:
    """SECURE_SSL_REDIRECT and SECURE_HSTS_SECONDS, as platform.env.example sets them: a
    plain http request is sent to https, a request through the proxy gets the HSTS header,
    and a health probe over plain http still answers (load balancers use it)."""
    env = {**HTTPS, "SECURE_SSL_REDIRECT": "true", "SECURE_HSTS_SECONDS": "3600"}
    result = _run({**env}, REDIRECTS)
    assert result.returncode == 0, result.stderr
    read = json.loads(result.stdout)
    assert read["plain"] == [301, "https://agents.example.com/api/tasks"]
    assert read["hsts"] == "max-age=3600"
    assert read["health"] == 200


def test_the_https_only_switches_are_off_by_default() -> None:
    result = _run(HTTPS, REDIRECTS)
    assert result.returncode == 0, result.stderr
    read = json.loads(result.stdout)
    assert read["plain"][0] != 301
    assert read["hsts"] is None


@pytest.mark.parametrize(
    ("env", "said"),
    [
        (
            {"SECURE_SSL_REDIRECT": "true", "USE_X_FORWARDED_PROTO": "false"},
            "SECURE_SSL_REDIRECT needs USE_X_FORWARDED_PROTO",
        ),
        ({"SECURE_HSTS_SECONDS": "-1"}, "SECURE_HSTS_SECONDS must be 0 or more, got -1"),
    ],
)
def test_an_https_only_setting_that_cannot_work_stops_the_start(
    env: dict[str, str], said: str
) -> None:
    """A redirect without the proxy's scheme header would redirect every request again."""
    result = fresh_settings.read("SECURE_SSL_REDIRECT", {**HTTPS, **env}, drop=VARIABLES)
    assert result.returncode != 0
    assert said in result.stderr


def test_check_deploy_is_clean_of_https_warnings_with_the_deploy_example() -> None:
    """With platform.env.example's https-only settings, check --deploy no longer warns about
    HSTS (W004) or the redirect (W008)."""
    env = {
        **HTTPS,
        "SECRET_KEY": "a-long-and-varied-key-for-this-check-only-0123456789-XYZ",
        "SECURE_SSL_REDIRECT": "true",
        "SECURE_HSTS_SECONDS": "3600",
    }
    result = _run(env, CHECK_DEPLOY)
    output = result.stdout + result.stderr
    assert "System check identified" in output, output
    assert "security.W004" not in output, output
    assert "security.W008" not in output, output


# The paths served by lean handlers, without Django's middleware: the A2A face, its card,
# the tasks API; and one through the whole stack, for comparison.
LEAN_PATHS = """
import asyncio, json, django
django.setup()
import httpx
from platform_site.asgi import application

async def main():
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://agents.example.com") as c:
        out = {}
        for path in ("/api/a2a/skills", "/v1/a2a/tasks", "/.well-known/agent-card.json",
                     "/api/tasks"):
            plain = await c.get(path, headers={"Authorization": "Bearer x"})
            proxied = await c.get(path, headers={"X-Forwarded-Proto": "https"})
            out[path] = [plain.status_code, plain.headers.get("location"),
                         proxied.headers.get("strict-transport-security")]
        return out

print(json.dumps(asyncio.run(main())))
"""


def test_the_lean_paths_are_redirected_and_get_hsts_too() -> None:
    """The A2A face, its card and the tasks API skip Django's middleware for speed; an
    https-only site means them too (their callers' bearer tokens above all): plain http
    is redirected, and an https answer carries HSTS."""
    env = {**HTTPS, "SECURE_SSL_REDIRECT": "true", "SECURE_HSTS_SECONDS": "3600"}
    result = _run(env, LEAN_PATHS)
    assert result.returncode == 0, result.stderr[-3000:]
    read = json.loads(result.stdout.strip().splitlines()[-1])
    for path, (status, location, hsts) in read.items():
        assert status == 301, (path, read)
        assert location == f"https://agents.example.com{path}", (path, read)
        assert hsts == "max-age=3600", (path, read)
