"""Settings read from the environment: bad values stop the start with the variable's name.

Each case imports the settings in a fresh interpreter, as a start does: the test
process's own settings are loaded once and cannot be read again.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parents[2]
READ = "import django; django.setup(); from django.conf import settings; print(settings.{name})"


def _read(name: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != name}
    clean["DJANGO_SETTINGS_MODULE"] = "platform_site.settings"
    return subprocess.run(
        [sys.executable, "-c", READ.format(name=name)],
        env={**clean, **env},
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )


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
