"""What the benchmarks share: their child processes, the bench database, CPU readings.

Used by ``dispatch.py``, ``long_tasks.py``, ``gateway.py`` and ``a2a_server.py``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx

BASE_DIR = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
BENCH_DATABASE_URL = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:54329/platform_bench"
)
BENCH_REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:63799/2")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Proc:
    """A child process logging to a file, stopped on exit."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path, name: str) -> None:
        self.name = name
        self.log = log
        self.popen = subprocess.Popen(
            args, cwd=BASE_DIR, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT
        )

    def wait_http(self, url: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.name} exited; see {self.log}")
            try:
                httpx.get(url, timeout=2.0)
                return
            except httpx.TransportError:
                time.sleep(0.1)
        raise TimeoutError(f"{self.name}: {url}")

    def wait_log(self, text: str, timeout: float = 60.0, count: int = 1) -> None:
        """Wait until ``text`` is in the log ``count`` times (processes can share a log)."""
        deadline = time.monotonic() + timeout
        while self.log.read_text(errors="replace").count(text) < count:
            if self.popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} not ready; see {self.log}")
            time.sleep(0.1)

    def stop(self) -> None:
        self.popen.terminate()
        try:
            self.popen.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.popen.kill()


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds used so far by these processes (Linux /proc)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _stat(pid: int | str) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def server_cpu_seconds(url: str, program: str) -> float | None:
    """CPU seconds used so far by the local ``program`` (``postgres``, ``redis-server``)
    serving ``url``'s port, with its child processes (PostgreSQL's backends, live and
    ended); None when no such process can be read here (a server on another host)."""
    port = urlsplit(url).port
    if port is None:
        return None
    server: str | None = None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        # Redis rewrites its title into one argument: "redis-server 127.0.0.1:6379"
        text = " ".join(arg.decode(errors="replace") for arg in argv if arg)
        if not text or Path(text.split()[0]).name != program:
            continue
        if f"-p {port}" in text or f":{port}" in text or f"--port {port}" in text:
            server = entry.name
            break
    fields = _stat(server) if server else None
    if fields is None:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    # its own time, and that of its children that have ended (cutime, cstime)
    total = sum(int(value) for value in fields[11:15]) / tick
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != server:
            child = _stat(entry.name)
            if child is not None and child[1] == server:  # its parent
                total += (int(child[11]) + int(child[12])) / tick
    return total


def stage_cpu(url: str) -> dict[str, float]:
    """``a2a_cpu_seconds_total`` by stage, from the platform's ``/metrics`` (every
    process's, in the distributed mode's multi-process metrics)."""
    from prometheus_client.parser import text_string_to_metric_families

    page = httpx.get(f"{url}/metrics", timeout=30).text
    return {
        sample.labels["stage"]: sample.value
        for family in text_string_to_metric_families(page)
        for sample in family.samples
        if sample.name == "a2a_cpu_seconds_total"
    }


def failed_calls(url: str) -> dict[str, float]:
    """Calls to agents that did not answer ``ok`` (``a2a_agent_calls_total``), by
    ``operation/outcome``: a failed poll is retried an interval later, which the agents'
    own counts do not show when the call never reached them."""
    from prometheus_client.parser import text_string_to_metric_families

    page = httpx.get(f"{url}/metrics", timeout=30).text
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            if sample.name == "a2a_agent_calls_total" and sample.labels["outcome"] != "ok":
                key = f"{sample.labels['operation']}/{sample.labels['outcome']}"
                found[key] = found.get(key, 0.0) + sample.value
    return found


def django_script(script: str, env: dict[str, str]) -> str:
    out = subprocess.run(
        [PYTHON, "-c", script], env=env, cwd=BASE_DIR, capture_output=True, text=True
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    return out.stdout.strip().splitlines()[-1]


def recreate_postgres(url: str) -> None:
    import psycopg

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


def services_cpu(mode: str) -> dict[str, float]:
    """CPU seconds so far of the distributed mode's PostgreSQL and Redis, when they run
    on this machine: the platform's CPU per task does not include them."""
    if mode != "distributed":
        return {}
    found = {
        "PostgreSQL": server_cpu_seconds(BENCH_DATABASE_URL, "postgres"),
        "Redis": server_cpu_seconds(BENCH_REDIS_URL, "redis-server"),
    }
    return {name: seconds for name, seconds in found.items() if seconds is not None}
