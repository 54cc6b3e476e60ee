"""The settings that choose and secure the running mode, as an operator's env file gives
them: a malformed or half-given value stops the start with one line naming the variable;
the distributed mode on the public development SECRET_KEY starts, and says so.

A refusal is read from the settings file run afresh (tests/support/fresh_settings.py): the
start prints its ImproperlyConfigured as the one line (manage.py, platform_site/asgi.py,
platform_site/celery.py; tests/platform_site/test_settings_env.py starts them). What a
start accepts, and what it warns about, is ``manage.py check`` in a fresh interpreter.
Nothing here connects to the PostgreSQL or Redis the URLs name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from tests.support import fresh_settings

# Each start is a fresh interpreter (slow), and none reads the run's database or Redis
# (GIVEN leaves them out): make test runs these once (scripts/test.sh).
pytestmark = [pytest.mark.slow, pytest.mark.no_services]

BASE_DIR = Path(__file__).resolve().parents[2]
PG = "postgres://u@127.0.0.1:1/db"
REDIS = "redis://127.0.0.1:1/0"
# Variables these tests give: the test run's own values are left out.
GIVEN = {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "SECRET_KEY_FILE", "ALLOWED_HOSTS"}
SECRET = "a-long-and-varied-key-for-these-tests-only-0123456789-XYZ"


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in GIVEN}
    clean["SQLITE_PATH"] = "/tmp/a2a-mode-settings-unused.sqlite3"  # never opened
    clean["DJANGO_SETTINGS_MODULE"] = "platform_site.settings"
    return subprocess.run(
        [sys.executable, "manage.py", *(args or ["check"])],
        env={**clean, **env},
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _refused(env: dict[str, str]) -> str:
    """The one line a start stops with (after "Configuration error: ")."""
    with pytest.raises(ImproperlyConfigured) as refusal:
        fresh_settings.load(env, drop=GIVEN)
    line = str(refusal.value)
    assert len(line.splitlines()) == 1, line
    return line


# --- REDIS_URL and DATABASE_URL ------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "said"),
    [
        # The worker died with KeyError "No such transport: http"; check said no issues.
        ("http://127.0.0.1:6379/0", "got a http:// URL"),
        # Celery took these for its AMQP default and waited for a RabbitMQ.
        ("garbage", "it does not start with one"),
        ("redis//127.0.0.1:6379/0", "it does not start with one"),
        ("redis://", "it names no host"),
        ("redis://127.0.0.1:notaport/0", "its port is not one"),
        ("redis://127.0.0.1:6379/zero", "its path must be a database number, e.g. /0"),
        # Channels took it, the worker died with "No such transport: unix".
        ("unix:///run/redis/redis.sock", ": Celery's broker cannot use a unix:// socket URL"),
    ],
)
def test_a_malformed_redis_url_stops_the_start_naming_it(url: str, said: str) -> None:
    line = _refused({"DATABASE_URL": PG, "REDIS_URL": url})
    wanted = "a Redis URL (redis://host:6379/0 or rediss://...)"
    assert line.startswith(f"REDIS_URL must be {wanted}"), line
    assert line.endswith(said), line


def test_a_refused_redis_url_is_named_without_its_password() -> None:
    line = _refused({"DATABASE_URL": PG, "REDIS_URL": "http://:s3cret-pw@cache.example:6379/0"})
    assert line.startswith("REDIS_URL must be a Redis URL"), line
    assert "s3cret-pw" not in line


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0",
        "redis://cache.example",
        "rediss://:pw@cache.example:6380/2",
    ],
)
def test_redis_urls_of_each_scheme_are_accepted(url: str) -> None:
    result = _manage({"DATABASE_URL": PG, "REDIS_URL": url, "SECRET_KEY": SECRET})
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("scheme", ["mysql", "sqlite"])
def test_a_database_url_that_is_not_postgresql_stops_the_start(scheme: str) -> None:
    # mysql:// passed the start, then failed with "Error loading MySQLdb module".
    url = f"{scheme}://platform:s3cret-pw@db.example/platform"
    line = _refused({"DATABASE_URL": url, "REDIS_URL": REDIS})
    assert line == (
        "DATABASE_URL must be a PostgreSQL URL (postgres://user:password@host:5432/name), "
        f"got a {scheme}:// URL"
    )


@pytest.mark.parametrize("scheme", ["postgres", "postgresql"])
def test_each_postgresql_scheme_is_accepted(scheme: str) -> None:
    env = {"DATABASE_URL": f"{scheme}://u@127.0.0.1:1/db", "REDIS_URL": REDIS, "SECRET_KEY": SECRET}
    result = _manage(env)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("database", ["", None])
def test_redis_url_without_database_url_stops_the_start(database: str | None) -> None:
    # DATABASE_URL left out of the env file: SQLite in the checkout, the memory broker
    # (the workers got nothing), registration open and loopback URLs allowed.
    env = {"REDIS_URL": REDIS} if database is None else {"REDIS_URL": REDIS, "DATABASE_URL": ""}
    assert _refused(env) == (
        "REDIS_URL is set but DATABASE_URL is not: set both for the distributed mode "
        "(REDIS_URL alone would run the embedded mode over SQLite in the checkout)"
    )


def test_database_url_alone_is_the_embedded_mode_on_postgresql() -> None:
    result = _manage({"DATABASE_URL": PG, "REDIS_URL": ""})
    assert result.returncode == 0, result.stderr


# --- SECRET_KEY ----------------------------------------------------------------------

WARNED = "SECRET_KEY is not set (nor SECRET_KEY_FILE): the distributed mode runs on the"


@pytest.mark.parametrize("content", ["", "  \n"])
def test_an_empty_secret_key_file_stops_the_start(tmp_path: Path, content: str) -> None:
    # Created and never filled: it read as unset, and the public default was used.
    path = tmp_path / "secret_key"
    path.write_text(content)
    line = _refused({"SECRET_KEY_FILE": str(path), "DATABASE_URL": PG, "REDIS_URL": REDIS})
    assert line == f"SECRET_KEY_FILE: {str(path)!r} is empty"


def test_the_distributed_mode_on_the_public_secret_key_starts_and_warns() -> None:
    """Programs start the distributed mode with DATABASE_URL and REDIS_URL alone (a fixed
    contract): no refusal, but one WARNING at the start and the system check's."""
    result = _manage({"DATABASE_URL": PG, "REDIS_URL": REDIS})
    assert result.returncode == 0, result.stderr
    logged = [line for line in result.stderr.splitlines() if " WARNING " in line]
    assert len(logged) == 1, result.stderr
    assert "platform_site.deploy_checks: " + WARNED in logged[0], logged[0]
    # What it keys, with the settings that fall back to it named.
    for use in ("push to", "CREDENTIALS_KEY unset", "API_KEY_PEPPER unset"):
        assert use in logged[0], logged[0]
    assert "(platform_site.W001) " + WARNED in result.stderr, result.stderr


def test_a_set_secret_key_or_the_embedded_mode_gives_no_warning(tmp_path: Path) -> None:
    path = tmp_path / "secret_key"
    path.write_text(SECRET + "\n")
    for env in (
        {"DATABASE_URL": PG, "REDIS_URL": REDIS, "SECRET_KEY_FILE": str(path)},
        {"DATABASE_URL": PG, "REDIS_URL": REDIS, "SECRET_KEY": SECRET},
        {},  # the embedded mode: a laptop's
    ):
        result = _manage(env)
        assert result.returncode == 0, result.stderr
        assert "SECRET_KEY" not in result.stdout + result.stderr, (env, result.stderr)


# --- ALLOWED_HOSTS -------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["", " , "])
def test_an_empty_allowed_hosts_stops_the_start(raw: str) -> None:
    # It started cleanly, then answered every request 400.
    assert _refused({"ALLOWED_HOSTS": raw}) == (
        "ALLOWED_HOSTS is set but names no host, so every request would be refused (400): "
        "list the Host names clients use, comma-separated, or leave it unset (any host)"
    )


@pytest.mark.parametrize(
    ("env", "read"),
    [({}, ["*"]), ({"ALLOWED_HOSTS": "a.example, b.example,"}, ["a.example", "b.example"])],
)
def test_allowed_hosts_unset_keeps_its_default(env: dict[str, str], read: list[str]) -> None:
    assert read == fresh_settings.load(env, drop=GIVEN).ALLOWED_HOSTS
