"""Idle connections to agents (agent_profiles/guarded_pool.py, pool_reaper.py): a burst
leaves only a few pooled per agent, and one idle past the agents' keep-alive is closed
(by the reaper thread, or when a call takes it), so no socket waits in CLOSE_WAIT for an
agent that went away."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agent_profiles import pool_reaper
from agent_profiles.guarded_pool import PER_HOST, GuardedPool
from tests.support.recorder import Recording, recording_server

TIMEOUTS = {"connect_timeout": 2.0, "read_timeout": 5.0}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(pool_reaper, "_clock", fake)
    # Only this test's pools: earlier ones' connections were stamped by the real clock.
    monkeypatch.setattr(pool_reaper, "_pools", weakref.WeakSet())
    return fake


@pytest.fixture
def server(settings: Any) -> Iterator[Recording]:
    settings.ALLOW_LOOPBACK_URLS = True
    with recording_server() as recording:
        yield recording


def open_idle(pool: GuardedPool) -> int:
    """The pooled connections with an open socket, over all of this pool's agents."""
    pools = pool._manager.pools
    return sum(
        1
        for key in pools.keys()  # noqa: SIM118 (a RecentlyUsedContainer: no iteration)
        for conn in list(pools[key].pool.queue)
        if conn is not None and conn.sock is not None
    )


def test_a_burst_leaves_only_a_few_connections_pooled(settings: Any) -> None:
    """16 calls at once to one agent (its sends in flight): 16 connections, of which
    PER_HOST stay pooled and the others are closed when they come back (32 were kept)."""
    settings.ALLOW_LOOPBACK_URLS = True
    burst = 16
    together = threading.Barrier(burst, timeout=10)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            together.wait()  # every call holds its connection until all are open
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    pool = GuardedPool()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/"
    try:
        with ThreadPoolExecutor(burst) as calls:
            answers = list(
                calls.map(
                    lambda _: pool.request("POST", url, headers={}, body=b"{}", **TIMEOUTS),
                    range(burst),
                )
            )
        assert [a.status_code for a in answers] == [200] * burst
        assert open_idle(pool) == PER_HOST == 8
    finally:
        pool.clear()
        httpd.shutdown()
        httpd.server_close()


def test_the_reaper_closes_connections_idle_past_the_keep_alive(
    clock: FakeClock, server: Recording
) -> None:
    """Connections to agents that are called no more (gone, or quiet) are closed once idle
    for IDLE_SECONDS; the younger ones stay, and the reaper is told when to look again."""
    pool = GuardedPool()
    url = f"http://127.0.0.1:{server.port}/ok"
    pool.request("POST", url, headers={}, body=b"", **TIMEOUTS)
    clock.now += 1.0
    other = GuardedPool()
    other.request("POST", url, headers={}, body=b"", **TIMEOUTS)
    assert open_idle(pool) == open_idle(other) == 1
    clock.now += pool_reaper.IDLE_SECONDS - 1.0
    later = pool_reaper.prune_idle()
    assert (open_idle(pool), open_idle(other)) == (0, 1)
    assert later == pytest.approx(1.0)
    clock.now += 1.0
    assert pool_reaper.prune_idle() is None
    assert open_idle(other) == 0
    # The pool opens a new connection when it needs one.
    assert pool.request("POST", url, headers={}, body=b"", **TIMEOUTS).status_code == 200
    assert len(set(server.ports)) == 3


def test_a_connection_idle_too_long_is_not_reused(clock: FakeClock, server: Recording) -> None:
    """Taken again after IDLE_SECONDS (before the reaper looked), a connection is closed
    and a new one made: the agent has closed its end, or is about to."""
    pool = GuardedPool()
    url = f"http://127.0.0.1:{server.port}/ok"
    pool.request("POST", url, headers={}, body=b"", **TIMEOUTS)
    clock.now += pool_reaper.IDLE_SECONDS - 0.5
    pool.request("POST", url, headers={}, body=b"", **TIMEOUTS)  # kept: still fresh
    clock.now += pool_reaper.IDLE_SECONDS
    pool.request("POST", url, headers={}, body=b"", **TIMEOUTS)
    ports = server.ports
    assert ports[0] == ports[1] != ports[2]
    assert open_idle(pool) == 1


def test_the_reaper_thread_closes_idle_connections_without_further_calls(
    monkeypatch: pytest.MonkeyPatch, server: Recording
) -> None:
    """Nobody calls again: the reaper thread itself closes the idle connection (a short
    idle time here; the test waits for the count, it times nothing)."""
    monkeypatch.setattr(pool_reaper, "IDLE_SECONDS", 0.05)
    pool = GuardedPool()
    pool.request("POST", f"http://127.0.0.1:{server.port}/ok", headers={}, body=b"", **TIMEOUTS)
    closed = threading.Event()
    for _ in range(200):  # up to 10 s: an earlier test's look may be planned first
        if open_idle(pool) == 0:
            closed.set()
            break
        closed.wait(0.05)
    assert closed.is_set()
