"""The supervision example in deploy/ works: each Procfile line starts a live process on
PostgreSQL + Redis, and the systemd units run the same programs."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
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
    programs = {"web": "daphne", "worker": "celery -A platform_site worker", "beat": "beat"}
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
