"""``LOG_FORMAT=json``: every line a process writes is one JSON object (DESIGN.md
"Operations"), also those Python, daphne and Celery would write around logging: warnings,
uncaught exceptions, daphne's access log, a worker's shutdown notice, runplatform's refusal
of a taken port, console trace spans. And a bad ``OTEL_TRACES_EXPORTER`` is one line."""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from platform_site import daphne_fix, logs
from tests.support.processes import BASE_DIR
from tests.support.serving import free_port

# The processes are fresh interpreters (slow) on a SQLite file of their own, whatever the
# run's database: make test runs these once (scripts/test.sh).
pytestmark = [pytest.mark.slow, pytest.mark.no_services]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A child process on a database of its own (nothing here touches it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        SQLITE_PATH=str(tmp_path / "db.sqlite3"),
        DJANGO_SETTINGS_MODULE="platform_site.settings",
        LOG_LEVEL="INFO",
        **extra,
    )
    return env


def _run(tmp_path: Path, argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=BASE_DIR, env=_env(tmp_path, **env), capture_output=True, text=True, timeout=60
    )


def _shell(tmp_path: Path, code: str, *python: str, **env: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, *python, "manage.py", "shell", "-v", "0", "-c", code]
    return _run(tmp_path, argv, **env)


def _json_lines(text: str) -> list[dict[str, Any]]:
    """Every non-empty line of ``text`` as the JSON object it must be."""
    lines = [line for line in text.splitlines() if line.strip()]
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            pytest.fail(f"not a JSON line: {line!r}\n{text}")
        assert isinstance(parsed[-1], dict), line
    return parsed


def test_a_warning_is_a_json_line(tmp_path: Path) -> None:
    code = "import warnings; warnings.warn('a library deprecation', DeprecationWarning)"
    out = _shell(tmp_path, code, "-W", "always", LOG_FORMAT="json")
    [line] = _json_lines(out.stdout + out.stderr)
    assert line["logger"] == "py.warnings"
    assert line["level"] == "WARNING"
    assert "DeprecationWarning: a library deprecation" in line["message"]


def test_an_uncaught_exception_in_a_thread_is_one_json_error_line(tmp_path: Path) -> None:
    code = (
        "import threading\n"
        "t = threading.Thread(target=lambda: 1/0, name='some-thread'); t.start(); t.join()"
    )
    out = _shell(tmp_path, code, LOG_FORMAT="json")
    [line] = _json_lines(out.stdout + out.stderr)
    assert line["level"] == "ERROR"
    assert line["message"] == "uncaught exception in thread some-thread"
    assert "ZeroDivisionError" in line["exc_info"]


def test_an_uncaught_exception_of_the_main_thread_is_one_json_error_line(tmp_path: Path) -> None:
    # Outside `shell -c` (whose own exec would let Django print it): a script's end.
    code = "import django; django.setup()\nraise RuntimeError('something broke')\n"
    out = _run(tmp_path, [sys.executable, "-c", code], LOG_FORMAT="json")
    assert out.returncode == 1
    [line] = _json_lines(out.stdout + out.stderr)
    assert line["level"] == "ERROR"
    assert "RuntimeError: something broke" in line["exc_info"]


def test_in_text_mode_an_uncaught_exception_stays_pythons_own(tmp_path: Path) -> None:
    code = (
        "import threading\nt = threading.Thread(target=lambda: 1/0, name='t1'); t.start(); t.join()"
    )
    out = _shell(tmp_path, code, LOG_FORMAT="text")
    assert "Exception in thread t1:" in out.stderr
    assert "ZeroDivisionError: division by zero" in out.stderr


def test_runplatform_refuses_a_taken_port_in_one_json_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = [sys.executable, "manage.py", "runplatform", "--port", str(port)]
        out = _run(tmp_path, argv, LOG_FORMAT="json")
    assert out.returncode == 1
    [line] = _json_lines(out.stdout + out.stderr)
    assert line["level"] == "ERROR"
    assert line["port"] == port
    assert line["message"] == (
        f"Cannot start the platform: port {port} on 127.0.0.1 is already in use "
        "(set PORT=... to use another)"
    )


def test_console_trace_spans_are_one_json_line_each(tmp_path: Path) -> None:
    code = (
        "from platform_site import tracing\n"
        "with tracing.span('demo'):\n"
        "    with tracing.span('inner'): pass\n"
        "tracing._provider.force_flush()\n"
    )
    out = _shell(tmp_path, code, LOG_FORMAT="json", OTEL_TRACES_EXPORTER="console")
    names = [line.get("name") for line in _json_lines(out.stdout + out.stderr)]
    assert "demo" in names
    assert "inner" in names


def test_an_unknown_traces_exporter_is_one_configuration_line(tmp_path: Path) -> None:
    out = _run(tmp_path, [sys.executable, "manage.py", "check"], OTEL_TRACES_EXPORTER="zipkin")
    assert out.returncode != 0
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("Configuration error: OTEL_TRACES_EXPORTER must be one of")
    assert "'zipkin'" in lines[0]


# --- in this process ------------------------------------------------------------------------


@pytest.fixture
def daphne_json_logs(settings: Any) -> Iterator[None]:
    settings.LOG_FORMAT = "json"
    daphne_fix.install()
    yield
    settings.LOG_FORMAT = "text"
    daphne_fix.install()


def test_daphnes_access_log_to_stdout_goes_through_logging(
    daphne_json_logs: None, caplog: Any, capsys: Any, tmp_path: Path
) -> None:
    from daphne.access import AccessLogGenerator

    details = {"client": "127.0.0.1:5000", "method": "GET", "path": "/healthz", "status": 200}
    with caplog.at_level(logging.INFO, logger="daphne.access"):
        AccessLogGenerator(sys.stdout)("http", "complete", {**details, "size": 12})
    assert capsys.readouterr().out == ""
    [record] = [r for r in caplog.records if r.name == "daphne.access"]
    assert record.levelno == logging.INFO
    assert record.getMessage() == '127.0.0.1:5000 - - "GET /healthz" 200 12'
    # An access log daphne was told to write to a file stays daphne's.
    with (tmp_path / "access.log").open("a") as file:
        AccessLogGenerator(file)("http", "complete", {**details, "size": 12})
    assert '"GET /healthz" 200 12' in (tmp_path / "access.log").read_text()


def test_a_workers_shutdown_notice_is_a_json_line(tmp_path: Path) -> None:
    from celery.apps import worker

    say = worker.safe_say
    try:
        logs._celery_notices_as_json()
        with (tmp_path / "out").open("w+") as out:
            worker.safe_say("worker: Warm shutdown (MainProcess)", out)
            out.seek(0)
            [line] = _json_lines(out.read())
    finally:
        worker.safe_say = say
    assert line["message"] == "worker: Warm shutdown (MainProcess)"
    assert line["logger"] == "celery.apps.worker"


def test_the_uncaught_exception_hook_defers_to_python_when_errors_are_not_logged(
    monkeypatch: Any,
) -> None:
    """LOG_LEVEL=CRITICAL must not hide a crash: Python prints it then."""
    printed = []
    monkeypatch.setattr(sys, "__excepthook__", lambda *exc: printed.append(exc[0]))
    monkeypatch.setattr(logs.log, "isEnabledFor", lambda level: False)
    logs._uncaught(RuntimeError, RuntimeError("x"), None)
    assert printed == [RuntimeError]


# --- runplatform's own lines --------------------------------------------------------------


@pytest.fixture
def started_not_served(monkeypatch: Any) -> None:
    """runplatform up to the moment it would serve."""
    from platform_site.management.commands import runplatform

    monkeypatch.setattr(runplatform.Command, "_serve", lambda self, host, port: None)


@pytest.mark.django_db
@pytest.mark.usefixtures("started_not_served")
def test_a_first_start_with_json_logs_writes_json_lines_only(settings: Any, capsys: Any) -> None:
    """The example skills' load printed "Loaded 3 skills (3 created, 0 updated)." as plain
    text among the JSON lines (loadskills wrote it whatever its verbosity)."""
    from django.core.management import call_command

    settings.LOG_FORMAT = "json"
    call_command("runplatform", "--port", str(free_port()), "--no-migrate", "--no-worker")
    out = capsys.readouterr()
    lines = [line for line in (out.out + out.err).splitlines() if line.strip()]
    said = [json.loads(line)["message"] for line in lines]  # each a JSON object
    assert any(message.startswith("Loaded 3 example skills") for message in said), said


@pytest.mark.django_db
@pytest.mark.usefixtures("started_not_served")
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_start_line_is_said_whatever_the_log_level(
    fmt: str, settings: Any, capsys: Any
) -> None:
    """With JSON logs the "A2A platform ... on http://..." line was logged at INFO, and
    LOG_LEVEL=WARNING hid where the platform listens (text mode always printed it)."""
    from django.core.management import call_command

    settings.LOG_FORMAT = fmt
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.WARNING)  # LOG_LEVEL=WARNING
    try:
        call_command(
            "runplatform", "--port", str(free_port()), "--no-migrate", "--no-worker", "--no-seed"
        )
    finally:
        root.setLevel(level)
    out = capsys.readouterr().out
    mode = "embedded" if settings.EMBEDDED else "distributed"
    assert f"A2A platform ({mode}) on http://" in out, out


@pytest.mark.slow
def test_the_start_line_reaches_a_pipe_while_serving(tmp_path: Path) -> None:
    """Under a pipe (a supervisor, docker, `| jq`) stdout is block-buffered: the start line,
    written past logging, stayed in the buffer while daphne served."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.pop("PYTHONUNBUFFERED", None)
    env.update(LOG_FORMAT="json", SQLITE_PATH=str(tmp_path / "db.sqlite3"))
    proc = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "runplatform",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-worker",
        ],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    out = b""
    err = b""
    try:
        deadline = time.monotonic() + 60
        serving = False
        while time.monotonic() < deadline and not serving:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                serving = True
            except OSError:
                time.sleep(0.2)
        assert serving, "runplatform never listened"
        end = time.monotonic() + 3
        while time.monotonic() < end:
            ready, _, _ = select.select([proc.stdout, proc.stderr], [], [], 0.2)
            for stream in ready:
                chunk = os.read(stream.fileno(), 65536)
                if stream is proc.stdout:
                    out += chunk
                else:
                    err += chunk
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    assert b"A2A platform" in out + err, (
        f"serving on {port}, but the start line has not been written: "
        f"stdout={out[-400:]!r} stderr={err[-400:]!r}"
    )
