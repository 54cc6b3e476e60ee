"""Boot real platform processes for end-to-end tests.

Children run against the *test* database of the running pytest session (the SQLite test
file, or the PostgreSQL test database), with the same SECRET_KEY and API_KEY_PEPPER, so
rows and keys created in a test are visible to them. In the distributed pass they also
get the session's REDIS_URL.

Settings changed with pytest-django's ``settings`` fixture do not reach children: pass
them as environment overrides (every setting is read from the variable of its name).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx
from django.conf import settings
from django.db import connection

from tests.support.secrets_scan import find_secrets
from tests.support.serving import free_port

BASE_DIR = Path(settings.BASE_DIR)
# The engine's timings shrunk for live tests: polls, sweeps, retries and leases in tenths of
# a second, so a killed process or a lost message shows within a test's patience.
FAST_ENGINE: dict[str, str | int | float | bool] = {
    "A2A_POLL_INTERVAL": 0.2,
    "A2A_POLL_INTERVAL_MAX": 0.5,
    "A2A_RETRY_BACKOFF": 0.2,
    "A2A_SWEEP_INTERVAL": 0.3,
    "A2A_LEASE_SECONDS": 3,
    # A killed worker's long call lets its task go within this; renewed every 3 s, so
    # a live one under a loaded test run keeps its claim (a2a.lease_keeper).
    "A2A_LONG_CALL_LEASE": 9,
    "A2A_HTTP_TIMEOUT": 5,
    "A2A_CONNECT_TIMEOUT": 0.5,
    "ALLOW_LOOPBACK_URLS": True,
}
LEAKS: list[str] = []  # secrets found in the logs of closed processes
PYTHON = sys.executable


def database_env() -> dict[str, str]:
    """Environment that points a child process at this session's test database."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return {"SQLITE_PATH": str(db["NAME"])}
    user = db.get("USER") or ""
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    host = db.get("HOST") or "127.0.0.1"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return {"DATABASE_URL": f"postgres://{auth}{host}{port}/{db['NAME']}"}


def platform_env(**overrides: str | int | float | bool) -> dict[str, str]:
    """The environment for a platform child process, plus ``overrides`` (stringified)."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(database_env())
    if settings.DISTRIBUTED:
        env["REDIS_URL"] = settings.REDIS_URL
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "platform_site.settings",
            "SECRET_KEY": settings.SECRET_KEY,
            "API_KEY_PEPPER": settings.API_KEY_PEPPER,
            "PYTHONUNBUFFERED": "1",
            "LOG_LEVEL": "INFO",
            # A worker stopped with a stream still open (most tests end so) waits this
            # long for it, not 120 s (Proc.stop's SIGKILL came after 10): tests/conftest.py.
            "A2A_STOP_WAIT": "1",
        }
    )
    for key, value in overrides.items():
        env[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return env


@dataclass
class Proc:
    """A child process with its output captured to a temporary log file."""

    args: Sequence[str]
    env: dict[str, str]
    name: str = "proc"
    cwd: Path = BASE_DIR
    # What "up" means for this process (a log line, an answer): see wait_ready().
    ready: Callable[[Proc], object] | None = None
    popen: subprocess.Popen[bytes] = field(init=False)
    _log: IO[bytes] = field(init=False)

    def __post_init__(self) -> None:
        self._log = tempfile.NamedTemporaryFile(prefix=f"{self.name}-", suffix=".log")  # noqa: SIM115
        self.popen = subprocess.Popen(
            list(self.args),
            env=self.env,
            cwd=self.cwd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: kill() reaches its children
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_text(self) -> str:
        return Path(self._log.name).read_text(errors="replace")

    def _check_alive(self) -> None:
        if not self.alive():
            raise RuntimeError(
                f"{self.name} exited with {self.popen.returncode}:\n{self.log_text()[-4000:]}"
            )

    def wait_http(self, url: str, timeout: float = 30.0) -> httpx.Response:
        """Wait until ``url`` answers any HTTP response; raise with the log if it dies."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            try:
                return httpx.get(url, timeout=2.0)
            except httpx.TransportError as exc:
                if time.monotonic() > deadline:
                    log = self.log_text()[-4000:]
                    raise TimeoutError(f"{self.name}: {url} not up:\n{log}") from exc
                time.sleep(0.1)

    def wait_log(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        """Wait until the output matches the regular expression ``pattern``."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while True:
            match = regex.search(self.log_text())
            if match:
                return match
            self._check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: no {pattern!r}:\n{self.log_text()[-4000:]}")
            time.sleep(0.1)

    def wait_ready(self) -> None:
        """Wait until the process is up (its ``ready`` check), or raise with its log."""
        if self.ready is not None:
            self.ready(self)

    def _signal_group(self, sig: int) -> None:
        with suppress(ProcessLookupError):
            os.killpg(self.popen.pid, sig)

    def kill(self) -> None:
        """SIGKILL the process and its children, as a crash would."""
        self._signal_group(signal.SIGKILL)
        self.popen.wait(timeout=10)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; returns the exit code."""
        if self.alive():
            self._signal_group(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.popen.returncode

    def close(self) -> None:
        self.stop()
        # No secret in any process's log either (tests/conftest.py fails the test).
        LEAKS.extend(f"{self.name}: {hit}" for hit in find_secrets(self.log_text()))
        self._log.close()


@contextmanager
def running(proc: Proc) -> Iterator[Proc]:
    """Stop ``proc`` (and its children) however the block ends."""
    try:
        yield proc
    finally:
        proc.close()


@contextmanager
def started(*procs: Proc) -> Iterator[list[Proc]]:
    """``procs`` (e.g. :func:`worker_proc`, :func:`beat_proc`), booted side by side: each
    start takes seconds, most of them the interpreter's and Django's, which need not wait
    for one another. Yields once every one is ready; all are stopped on exit."""
    with ExitStack() as stack:
        for proc in procs:
            stack.enter_context(running(proc))
        for proc in procs:
            proc.wait_ready()
        yield list(procs)


@contextmanager
def embedded_platform(
    port: int | None = None, *, seed: bool = False, **env: str | int | float | bool
) -> Iterator[Proc]:
    """``manage.py runplatform`` (daphne + in-process worker and beat) on a free port.

    ``proc.url`` is its base URL. With the distributed settings active (PostgreSQL and
    Redis), runplatform runs daphne alone: nothing sends tasks to agents unless the test
    starts a worker. Use :func:`live_platform_for_mode` when tasks must reach agents.
    """
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    args = [PYTHON, "manage.py", "runplatform", "--no-migrate", "--host", "127.0.0.1"]
    args += ["--port", str(port)] + ([] if seed else ["--no-seed"])
    child_env = platform_env(PORT=port, PUBLIC_URL=url, **env)
    with running(Proc(args, child_env, name=f"platform-{port}")) as proc:
        proc.url = url  # type: ignore[attr-defined]
        proc.wait_http(f"{url}/healthz")
        yield proc


def daphne_proc(port: int | None = None, **env: str | int | float | bool) -> Proc:
    """A daphne child (see :func:`daphne_process`), not yet waited for; ``proc.url``."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    args = [PYTHON, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    args += ["platform_site.asgi:application"]
    child_env = platform_env(PORT=port, PUBLIC_URL=url, **env)
    proc = Proc(
        args, child_env, name=f"daphne-{port}", ready=lambda p: p.wait_http(f"{url}/healthz")
    )
    proc.url = url  # type: ignore[attr-defined]
    return proc


@contextmanager
def daphne_process(port: int | None = None, **env: str | int | float | bool) -> Iterator[Proc]:
    """A daphne server for the platform's ASGI app (distributed mode: no in-process worker)."""
    with started(daphne_proc(port, **env)) as (proc,):
        yield proc


def worker_proc(name: str | None = None, **env: str | int | float | bool) -> Proc:
    """A ``celery worker`` child (threads pool), not yet waited for; see :func:`celery_worker`."""
    node = name or f"w{uuid.uuid4().hex[:8]}"
    args = [PYTHON, "-m", "celery", "-A", "platform_site", "worker", "-P", "threads", "-c", "4"]
    args += ["--without-heartbeat", "--without-mingle", "--without-gossip"]
    args += ["-n", f"{node}@localhost", "--loglevel", "INFO"]
    # Ready at the worker's INFO "ready." line: the platform's logging (LOG_LEVEL) would
    # drop it under WARNING, which live tests like for quiet daphnes.
    worker_env = platform_env(**{**env, "LOG_LEVEL": "INFO"})
    return Proc(args, worker_env, name=f"celery-{node}", ready=_logged(r"ready\."))


def _logged(pattern: str) -> Callable[[Proc], object]:
    """The readiness check of a process that logs ``pattern`` once it is up."""
    return lambda proc: proc.wait_log(pattern, timeout=60)


@contextmanager
def celery_worker(name: str | None = None, **env: str | int | float | bool) -> Iterator[Proc]:
    """A ready ``celery worker`` child process."""
    with started(worker_proc(name, **env)) as (proc,):
        yield proc


@contextmanager
def celery_workers(*names: str, **env: str | int | float | bool) -> Iterator[list[Proc]]:
    """Several ready ``celery worker`` children, started side by side (each takes seconds
    to boot) and stopped on exit."""
    with started(*(worker_proc(name, **env) for name in names)) as procs:
        yield procs


def beat_proc(**env: str | int | float | bool) -> Proc:
    """A ``celery beat`` child with an in-memory schedule, not yet waited for."""
    args = [PYTHON, "-m", "celery", "-A", "platform_site", "beat", "--loglevel", "INFO"]
    args += ["-S", "celery.beat:Scheduler"]
    # Ready at beat's INFO "Starting" line, like a worker.
    beat_env = platform_env(**{**env, "LOG_LEVEL": "INFO"})
    return Proc(args, beat_env, name="celery-beat", ready=_logged(r"beat: Starting"))


@contextmanager
def celery_beat(**env: str | int | float | bool) -> Iterator[Proc]:
    """A ready ``celery beat`` child."""
    with started(beat_proc(**env)) as (proc,):
        yield proc


@dataclass
class LivePlatform:
    """A running platform: its base URL and the processes behind it."""

    url: str
    procs: dict[str, Proc]

    @property
    def ws_url(self) -> str:
        return self.url.replace("http://", "ws://", 1)


@contextmanager
def distributed_platform(**env: str | int | float | bool) -> Iterator[LivePlatform]:
    """daphne + celery worker + celery beat as separate processes (PostgreSQL + Redis)."""
    with started(worker_proc(**env), beat_proc(**env), daphne_proc(**env)) as procs:
        worker, beat, daphne = procs
        yield LivePlatform(daphne.url, {"daphne": daphne, "worker": worker, "beat": beat})  # type: ignore[attr-defined]


@contextmanager
def live_platform_for_mode(**env: str | int | float | bool) -> Iterator[LivePlatform]:
    """The platform in the current pass's mode: embedded, or distributed processes."""
    if settings.DISTRIBUTED:
        with distributed_platform(**env) as platform:
            yield platform
    else:
        with embedded_platform(**env) as proc:
            yield LivePlatform(proc.url, {"platform": proc})  # type: ignore[attr-defined]


class RedisServer:
    """A private ``redis-server`` (no persistence) that a fault test may kill and restart.

    Children get its URL through ``REDIS_URL`` (pass ``REDIS_URL=server.url`` as an
    override); the session's own Redis is never touched.
    """

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: Proc | None = None

    def start(self) -> None:
        args = ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port)]
        args += ["--save", "", "--appendonly", "no"]
        self.proc = Proc(args, dict(os.environ), name=f"redis-{self.port}")
        self.proc.wait_log(r"Ready to accept connections", timeout=15)

    def kill(self) -> None:
        """SIGKILL: every connection drops at once and the queued messages are gone."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.close()
            self.proc = None

    def close(self) -> None:
        self.kill()


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.close()
