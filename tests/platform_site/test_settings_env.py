"""Settings read from the environment: bad values stop the start with the variable's name.

Each case reads the settings file afresh (tests/support/fresh_settings.py): the test
process's own settings are loaded once and cannot be read again. A start itself (its
one-line error) is a real process: ``_start``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from platform_site.env import FLOAT_MAX
from tests.support import fresh_settings

BASE_DIR = Path(__file__).resolve().parents[2]


def _read(name: str, env: dict[str, str]) -> fresh_settings.Read:
    return fresh_settings.read(name, env, drop=[name])


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "1e999"])
def test_a_number_setting_that_is_not_finite_stops_the_start(raw: str) -> None:
    result = _read("A2A_POLL_INTERVAL", {"A2A_POLL_INTERVAL": raw})
    assert result.returncode != 0
    assert f"A2A_POLL_INTERVAL must be a finite number, got {raw!r}" in result.stderr


def test_a_number_setting_that_is_not_a_number_stops_the_start() -> None:
    result = _read("A2A_POLL_INTERVAL", {"A2A_POLL_INTERVAL": "soon"})
    assert result.returncode != 0
    assert "A2A_POLL_INTERVAL must be a number, got 'soon'" in result.stderr


@pytest.mark.parametrize(("raw", "read"), [("-1", "0.0"), ("0", "0.0"), ("0.5", "0.5")])
def test_a_negative_safety_poll_jitter_reads_as_none(raw: str, read: str) -> None:
    # A negative jitter would poll before the interval: read as 0 (exactly the interval).
    result = _read("A2A_SAFETY_POLL_JITTER", {"A2A_SAFETY_POLL_JITTER": raw})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == read


@pytest.mark.parametrize(("raw", "read"), [("-30", "0.0"), ("0", "0.0"), ("90", "90.0")])
def test_a_negative_retention_reads_as_keep_everything(raw: str, read: str) -> None:
    # A negative age would make every ended task "expired": read as 0 (keep them all).
    result = _read("TASK_RETENTION_DAYS", {"TASK_RETENTION_DAYS": raw})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == read


@pytest.mark.parametrize(
    "raw", ["bogus", "30", "30/", "/min", "x/min", "30/min/1", "30/week", "30/mango"]
)
def test_a_registration_throttle_that_is_not_a_rate_stops_the_start(raw: str) -> None:
    # DRF parses the rate at the first registration: it started, then answered each a 500.
    result = _read("REST_FRAMEWORK", {"REGISTRATION_THROTTLE": raw})
    assert result.returncode != 0
    wanted = "REGISTRATION_THROTTLE must be a rate N/sec, N/min, N/hour or N/day (e.g. 30/min)"
    assert f"{wanted}, got {raw!r}" in result.stderr


@pytest.mark.parametrize(
    ("raw", "read"),
    [("5/sec", "5/sec"), ("30/MIN", "30/min"), ("100/hours", "100/hours"), ("", "30/min")],
)
def test_a_registration_throttle_reads_as_a_rate(raw: str, read: str) -> None:
    result = _read("REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']", {"REGISTRATION_THROTTLE": raw})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == repr({"registration": read})


def test_an_unknown_log_level_stops_the_start_naming_it() -> None:
    # logging.config refused it later with a traceback that did not name the variable.
    result = _read("LOG_LEVEL", {"LOG_LEVEL": "bogus"})
    assert result.returncode != 0
    assert (
        "LOG_LEVEL must be one of ['CRITICAL', 'DEBUG', 'ERROR', 'INFO', 'WARNING'], got 'bogus'"
        in result.stderr
    )


@pytest.mark.parametrize(
    ("raw", "read"), [("warning", "WARNING"), ("Debug", "DEBUG"), ("", "INFO")]
)
def test_the_log_level_reads_case_insensitively(raw: str, read: str) -> None:
    result = _read("LOGGING['root']['level']", {"LOG_LEVEL": raw})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == read


def _start(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``command`` (a start: manage.py, daphne, celery) in the embedded mode plus ``env``."""
    clean = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    clean["SQLITE_PATH"] = "/tmp/a2a-settings-env-unused.sqlite3"  # never opened
    return subprocess.run(
        command, env={**clean, **env}, cwd=BASE_DIR, capture_output=True, text=True, timeout=60
    )


MANAGE = [sys.executable, "manage.py", "check"]
VENV = Path(sys.executable).parent


@pytest.mark.parametrize(
    ("env", "line"),
    [
        ({"A2A_POLL_INTERVAL": "soon"}, "A2A_POLL_INTERVAL must be a number, got 'soon'"),
        (
            {"SECRET_KEY_FILE": "/nonexistent/secret"},
            "SECRET_KEY_FILE: cannot read '/nonexistent/secret': No such file or directory",
        ),
        (
            {"DATABASE_URL": "nonsense://x", "REDIS_URL": "redis://127.0.0.1:1/0"},
            "DATABASE_URL is not a database URL: Scheme 'nonsense://' is unknown.",
        ),
    ],
)
def test_a_bad_setting_stops_manage_py_with_one_line(env: dict[str, str], line: str) -> None:
    # Django's start-up traceback ran to ~35 lines; a missing secret file ended in a bare
    # FileNotFoundError, a bad DATABASE_URL in dj-database-url's: neither named the variable.
    result = _start(MANAGE, env)
    assert result.returncode != 0
    assert result.stderr.startswith(f"Configuration error: {line}"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_bad_database_url_is_named_without_its_password() -> None:
    url = "postgres://platform:s3cret-pw@db.example:notaport/platform"
    result = _start(MANAGE, {"DATABASE_URL": url, "REDIS_URL": "redis://127.0.0.1:1/0"})
    assert result.returncode != 0
    assert result.stderr.startswith("Configuration error: DATABASE_URL is not a database URL")
    assert "s3cret-pw" not in result.stderr


@pytest.mark.parametrize(
    "command",
    [
        [str(VENV / "daphne"), "-b", "127.0.0.1", "-p", "1", "platform_site.asgi:application"],
        [str(VENV / "celery"), "-A", "platform_site", "worker", "-P", "threads", "-c", "1"],
        [str(VENV / "celery"), "-A", "platform_site", "beat", "-S", "celery.beat:Scheduler"],
    ],
    ids=["daphne", "celery-worker", "celery-beat"],
)
def test_a_bad_setting_stops_the_distributed_processes_with_one_line(command: list[str]) -> None:
    result = _start(command, {"A2A_POLL_INTERVAL": "soon"})
    assert result.returncode != 0
    assert result.stderr.strip() == (
        "Configuration error: A2A_POLL_INTERVAL must be a number, got 'soon'"
    ), result.stderr


@pytest.mark.parametrize(
    ("name", "raw", "wanted"),
    [
        ("MAX_BODY_BYTES", "-5", "more than 0"),  # every admin login answered 500
        ("MAX_BODY_BYTES", "0", "more than 0"),
        ("A2A_HTTP_TIMEOUT", "-1", "more than 0"),
        ("A2A_LEASE_SECONDS", "-3", "more than 0"),
        ("A2A_SWEEP_INTERVAL", "0", "more than 0"),
        ("GATEWAY_MAX_FRAME_BYTES", "-1", "more than 0"),
        ("DATABASE_CONNECT_TIMEOUT", "0", "more than 0"),
        ("A2A_LIST_INTERVAL", "-1", "0 or more"),
        ("TASKS_API_THREADS", "-2", "0 or more"),
        ("SECURE_HSTS_SECONDS", "-1", "0 or more"),
        # 0 would refuse every push config and stream while the card offers both.
        ("A2A_MAX_PUSH_CONFIGS_PER_TASK", "0", "more than 0"),
        ("A2A_MAX_STREAMS_PER_CALLER", "0", "more than 0"),
        # A deadline 1e12 s from now is past the year 9999: every creation was a 500.
        ("A2A_TASK_TIMEOUT", "1e12", "at most 1e+09"),
        ("OFFLINE_TASK_TTL", "1e12", "at most 1e+09"),
        ("GC_THRESHOLD", "100000000000000000000", "at most 2147483647"),
        # In hours: 1e8 of them passed the seconds' bound, and every login was a 500.
        ("AXES_COOLOFF_TIME", "1e8", "at most 87600"),
        ("TASK_RETENTION_DAYS", "1e6", "at most 36500"),
    ],
)
def test_a_number_setting_out_of_its_range_stops_the_start(
    name: str, raw: str, wanted: str
) -> None:
    result = _read(name, {name: raw})
    assert result.returncode != 0
    assert f"{name} must be {wanted}, got {raw}" in result.stderr


@pytest.mark.parametrize(
    "name",
    [
        "A2A_LIST_INTERVAL",
        "AGENT_HEALTH_INTERVAL",
        "TASKS_API_THREADS",
        "SEND_STALL_TIMEOUT",
        "A2A_AGENT_SENDS_IN_FLIGHT",  # documented "0: no limit", refused at start before
        "TASK_AGENT_MESSAGES_MAX",
        "A2A_BLOCKING_TIMEOUT",
    ],
)
def test_a_documented_zero_still_reads_as_off(name: str) -> None:
    result = _read(name, {name: "0"})
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) == 0


PG_URL = "postgres://u@127.0.0.1:1/db"
OPTIONS = "DATABASES['default']['OPTIONS']['connect_timeout']"


@pytest.mark.parametrize(
    ("env", "read"),
    [
        ({"DATABASE_URL": PG_URL}, "5"),
        ({"DATABASE_URL": PG_URL, "DATABASE_CONNECT_TIMEOUT": "3"}, "3"),
        ({"DATABASE_URL": PG_URL + "?connect_timeout=7"}, "7"),
    ],
)
def test_postgresql_connections_give_up_after_the_connect_timeout(
    env: dict[str, str], read: str
) -> None:
    # libpq waits for ever by default: a server that accepted the connection and said
    # nothing held every request, /readyz and /metrics.
    result = _read(OPTIONS, {"REDIS_URL": "", "DATABASE_CONNECT_TIMEOUT": "", **env})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == read


def _created(client: Any, skill_id: str, user: Any) -> None:
    """POST /api/tasks creates the task (201), no 500."""
    answer = client.post(
        "/api/tasks",
        {"skillId": skill_id, "input": {"product": "kettle"}},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {user.raw_token}",
    )
    assert answer.status_code == 201, answer.content


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:9/", ""])
def test_a_task_is_created_for_an_agent_whose_timeout_is_huge(
    endpoint: str, make_skill: Any, make_agent: Any, make_user: Any, client: Any
) -> None:
    # The agent's own timeout (timeoutMs, or the admin's editor before it was bounded)
    # counts at most FLOAT_MAX: 1e12 made every creation for the agent a 500.
    skill = make_skill()
    make_agent(skills=[skill], a2a_endpoint=endpoint, timeout=1e12, offline_wait=1e12)
    _created(client, skill.id, make_user())


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["A2A_TASK_TIMEOUT", "OFFLINE_TASK_TTL"])
def test_a_task_is_created_with_the_largest_timeouts_allowed(
    name: str, make_skill: Any, make_agent: Any, make_user: Any, client: Any, settings: Any
) -> None:
    setattr(settings, name, FLOAT_MAX)
    skill = make_skill()
    make_agent(skills=[skill], a2a_endpoint="")  # a socket agent's task waits offline
    _created(client, skill.id, make_user())
