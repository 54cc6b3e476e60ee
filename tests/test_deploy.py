"""The supervision example in deploy/ works: each Procfile line starts a live process on
PostgreSQL + Redis, and the systemd units run the same programs."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet
from django.conf import settings

from tests.support.processes import PYTHON, Proc, platform_env, running
from tests.support.serving import free_port

DEPLOY = Path(settings.BASE_DIR) / "deploy"


def procfile() -> dict[str, str]:
    lines = (DEPLOY / "Procfile").read_text().splitlines()
    entries = (line.split(":", 1) for line in lines if line and not line.startswith("#"))
    return {name.strip(): command.strip() for name, command in entries}


def test_the_procfile_names_every_process_type_once() -> None:
    assert set(procfile()) == {"release", "web", "worker", "beat"}


def test_the_systemd_units_restart_and_run_the_procfile_programs() -> None:
    units = {p.name: p.read_text() for p in (DEPLOY / "systemd").glob("*.service")}
    assert set(units) == {
        "a2a-platform-web@.service",
        "a2a-platform-worker@.service",
        "a2a-platform-beat.service",
        "a2a-platform-migrate.service",
    }
    for name, text in units.items():
        assert "EnvironmentFile=/etc/a2a-platform/platform.env" in text, name
        if "migrate" not in name:
            assert "Restart=always" in text, name
    programs = {"web": "daphne", "worker": "-A platform_site worker", "beat": "beat"}
    for kind, program in programs.items():
        assert program in procfile()[kind]
        assert program in units[next(u for u in units if kind in u)]


def _shell(command: str) -> list[str]:
    # Run the line as a Procfile supervisor would (sh -c), with this venv's programs.
    command = re.sub(r"\.venv/bin/python\b", PYTHON, command)
    command = re.sub(r"\.venv/bin/(daphne|celery)\b", rf"{PYTHON} -m \1", command)
    return ["/bin/sh", "-c", f"exec {command}"]


@pytest.mark.distributed
@pytest.mark.slow
def test_each_procfile_line_starts_a_working_process(transactional_db: None) -> None:
    port = free_port()
    env = platform_env(PORT=port, PUBLIC_URL=f"http://127.0.0.1:{port}", WORKER_CONCURRENCY=2)
    lines = procfile()
    release = Proc(_shell(lines["release"]), env, name="release")
    release.popen.wait(timeout=120)
    assert release.popen.returncode == 0, release.log_text()
    with (
        running(Proc(_shell(lines["web"]), env, name="web")) as web,
        running(Proc(_shell(lines["worker"]), env, name="worker")) as worker,
        running(Proc(_shell(lines["beat"]), env, name="beat")) as beat,
    ):
        web.wait_http(f"http://127.0.0.1:{port}/healthz", timeout=60)
        worker.wait_log(r"ready\.", timeout=60)
        beat.wait_log(r"beat: Starting", timeout=60)
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
        assert ready.status_code == 200, ready.text
        assert ready.json()["checks"]["broker"]["detail"] == "redis"


# --- deploy/systemd/platform.env.example, as the units read it -----------------------------


def example_env(tmp_path: Path) -> dict[str, str]:
    """The example env file's values (as systemd's EnvironmentFile= reads them), its secret
    files written, its PostgreSQL and Redis on ports nobody listens on (nothing here needs
    them to answer)."""
    files = {
        "SECRET_KEY_FILE": os.urandom(32).hex(),
        "API_KEY_PEPPER_FILE": os.urandom(32).hex(),
        "CREDENTIALS_KEY_FILE": Fernet.generate_key().decode(),
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "REDIS_"))}
    for line in (DEPLOY / "systemd" / "platform.env.example").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, value = line.split("=", 1)
            env[key] = value
    for key, secret in files.items():
        assert key in env, f"platform.env.example no longer sets {key}"
        (tmp_path / key).write_text(secret + "\n")
        env[key] = str(tmp_path / key)
    env["DATABASE_URL"] = env["DATABASE_URL"].replace(":5432/", f":{free_port()}/")
    env["REDIS_URL"] = env["REDIS_URL"].replace(":6379/", f":{free_port()}/")
    env["DJANGO_SETTINGS_MODULE"] = "platform_site.settings"
    return env


def test_the_example_env_is_accepted_as_it_is(tmp_path: Path) -> None:
    """Its values pass the start, with no warning: its secrets are all set."""
    result = subprocess.run(
        [PYTHON, "manage.py", "check"],
        env=example_env(tmp_path),
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout, result.stdout
    assert "WARNING" not in result.stderr, result.stderr


# The platform's ASGI app, as daphne serves it, called over plain http as a probe on the
# host calls it (by the address) and as the proxy's own health check does (by the name).
PROBES = """
import asyncio, json, logging, django
django.setup()
import httpx
from platform_site.asgi import application

errors = []
logging.getLogger().addHandler(type("H", (logging.Handler,), {
    "emit": lambda self, record: errors.append(record.name) if record.levelno >= 40 else None
})())

async def main():
    out = {}
    transport = httpx.ASGITransport(app=application)  # the caller: 127.0.0.1
    async with httpx.AsyncClient(transport=transport) as client:
        for host in ("127.0.0.1:8001", "agents.example.com"):
            for path in ("/healthz", "/readyz", "/metrics", "/admin/login/"):
                r = await client.get(f"http://{host}{path}")
                out[host + path] = [r.status_code, r.headers["content-type"].split(";")[0],
                                    r.text[:200] if r.status_code < 300 else ""]
    return out

out = asyncio.run(main())
print(json.dumps({"answers": out, "errors": errors}))
"""


def test_probes_on_the_host_answer_under_the_example_env(tmp_path: Path) -> None:
    """With ALLOWED_HOSTS=agents.example.com a probe by the address was a 400 HTML page
    (an ERROR and its traceback logged per probe), and with SECURE_SSL_REDIRECT=true the
    proxy's plain-http check of /readyz was a 301, which it counts as healthy: it never
    saw an outage. The example's database is down here: /readyz must say so."""
    result = subprocess.run(
        [PYTHON, "-c", PROBES],
        env=example_env(tmp_path),
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    read = json.loads(result.stdout.strip().splitlines()[-1])
    answers = read["answers"]
    for host in ("127.0.0.1:8001", "agents.example.com"):
        status, kind, body = answers[f"{host}/healthz"]
        assert (status, kind, json.loads(body)) == (200, "application/json", {"status": "ok"})
        status, kind, _ = answers[f"{host}/readyz"]
        assert (status, kind) == (503, "application/json"), answers
        status, kind, body = answers[f"{host}/metrics"]
        assert (status, kind) == (200, "text/plain"), answers  # its database gauges left out
    # The rest of the site: refused by the address, redirected to https by the name.
    assert answers["127.0.0.1:8001/admin/login/"][0] == 400
    assert answers["agents.example.com/admin/login/"][0] == 301
    # Only the refused admin request is an ERROR; /readyz's 503 is logged by Django too.
    assert read["errors"].count("django.security.DisallowedHost") == 1, read["errors"]
