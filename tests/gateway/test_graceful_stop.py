"""A stopped daphne closes its agents' sockets with 1001 "going away" (RFC 6455 7.4.1).

SIGTERM to the Procfile's ``daphne``, or SIGTERM / Ctrl-C to ``runplatform``, dropped every
agent's TCP connection without a close frame: the agent saw 1006 (abnormal closure). Daphne's
shutdown step (``Server.kill_all_applications``) raised ``KeyError`` on a connection without
an application (an HTTP keep-alive connection between requests, a health check's), which
Twisted logged nowhere, and the loop stopped at once; when it did run, it only cancelled the
handlers. The consumers' clean-up was cut off with the loop, so in the distributed mode the
agent's presence row stayed and it counted as online until ``GATEWAY_HEARTBEAT_TIMEOUT``.
``gateway/daphne_close.py`` now stops listening, sends 1001, waits a bounded time for the
handlers to end and cancels the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from typing import Any

import pytest
from daphne.ws_protocol import WebSocketProtocol
from websockets.sync.client import connect

from gateway import daphne_close
from platform_site.shielded import to_the_end
from tests.support.processes import FAST_ENGINE, Proc, daphne_process, embedded_platform
from tests.support.socket_close import until_closed


class _Socket(WebSocketProtocol):
    """A daphne WebSocket in a given state that records the close frames sent on it."""

    def __init__(self, state: int, on_close: asyncio.Event | None = None) -> None:
        self.state = state
        self.sent: list[int | None] = []
        self._on_close = on_close

    def sendCloseFrame(
        self, code: int | None = None, reasonUtf8: bytes | None = None, isReply: bool = False
    ) -> None:
        self.sent.append(code)
        if self._on_close is not None:
            self._on_close.set()  # the agent answers: the handler's disconnect runs

    __hash__ = object.__hash__


class _Server:
    def __init__(self) -> None:
        self.connections: dict[Any, dict[str, Any]] = {}

    def add(self, protocol: Any, handler: Any = None) -> None:
        details: dict[str, Any] = {"connected": time.time()}
        if handler is not None:
            details["application_instance"] = asyncio.ensure_future(handler)
        self.connections[protocol] = details


async def _stubborn(release: asyncio.Event) -> None:
    """A handler that outlives every cancel until ``release`` (as one stuck in a database
    call would)."""
    while not release.is_set():
        with contextlib.suppress(asyncio.CancelledError):
            await release.wait()


@pytest.mark.anyio
async def test_a_stop_closes_open_sockets_with_going_away_and_waits_for_their_handlers() -> None:
    server = _Server()
    closed = asyncio.Event()
    forgotten: list[str] = []

    async def handler() -> None:
        await closed.wait()
        forgotten.append("presence removed")  # the consumer's disconnect

    agent = _Socket(WebSocketProtocol.STATE_OPEN, closed)
    closing = _Socket(WebSocketProtocol.STATE_CLOSING)
    server.add(agent, handler())
    server.add(closing, asyncio.sleep(0))
    server.add(object())  # an idle keep-alive HTTP connection: daphne's KeyError
    await daphne_close.stop_gracefully(server)
    assert agent.sent == [daphne_close.GOING_AWAY]
    assert closing.sent == []  # closing already: its own close stands
    assert forgotten == ["presence removed"]


@pytest.mark.anyio
async def test_a_stop_is_bounded_whatever_the_handlers_and_clean_ups_do(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Thousands of agents that never answer, handlers stuck past their cancel, a clean-up
    that never ends (a database outage): the stop still ends after its two waits."""
    server, release = _Server(), asyncio.Event()
    for _ in range(2000):
        server.add(_Socket(WebSocketProtocol.STATE_OPEN), _stubborn(release))
    stuck = asyncio.ensure_future(to_the_end(release.wait()))
    await asyncio.sleep(0)
    stuck.cancel()  # its handler was cancelled earlier: the clean-up goes on
    began = time.monotonic()
    with caplog.at_level(logging.INFO, logger="gateway.daphne_close"):
        await daphne_close.stop_gracefully(server, close_wait=0.3, cancel_wait=0.3)
    assert time.monotonic() - began < 3
    assert all(p.sent == [daphne_close.GOING_AWAY] for p in server.connections)
    assert "2001 handler(s) or clean-up(s) cut short" in caplog.text
    release.set()  # the test's loop ends them before it closes


def _closed_by_a_stop(proc: Proc, key: str) -> int | None:
    """Connect an agent with ``key``, SIGTERM ``proc``: the close code the agent got (None:
    no close frame, 1006)."""
    url = proc.url.replace("http://", "ws://") + "/ws/agent-gateway/"  # type: ignore[attr-defined]
    with connect(url, additional_headers={"Authorization": f"Bearer {key}"}) as ws:
        proc.wait_log(r"agent ws-agent connected", timeout=10)
        os.kill(proc.pid, signal.SIGTERM)
        _, code = until_closed(ws, wait=20)
    began = time.monotonic()
    proc.popen.wait(timeout=30)
    assert time.monotonic() - began < 10, "the stop took too long"
    return code


@pytest.mark.slow
def test_a_stopped_embedded_platform_closes_agent_sockets_with_going_away(
    transactional_db: None, make_skill: Any, make_agent: Any
) -> None:
    agent = make_agent(id="ws-agent", skills=[make_skill()], a2a_endpoint="")
    with embedded_platform(**FAST_ENGINE) as proc:
        code = _closed_by_a_stop(proc, agent.raw_key)
        log = proc.log_text()
    assert code == daphne_close.GOING_AWAY, f"closed with {code} (None: 1006)\n{log[-2000:]}"
    assert "agent ws-agent disconnected from the gateway (code 1001)" in log


@pytest.mark.slow
@pytest.mark.distributed
def test_a_stopped_daphne_closes_agent_sockets_with_going_away_and_leaves_no_presence(
    transactional_db: None, make_skill: Any, make_agent: Any
) -> None:
    """The distributed mode's daphne (the Procfile's ``web``): no presence row is left, so
    the agent is not "online" until the heartbeat timeout."""
    from gateway.models import Presence

    agent = make_agent(id="ws-agent", skills=[make_skill()], a2a_endpoint="")
    with daphne_process(**FAST_ENGINE) as proc:
        code = _closed_by_a_stop(proc, agent.raw_key)
        log = proc.log_text()
    assert code == daphne_close.GOING_AWAY, f"closed with {code} (None: 1006)\n{log[-2000:]}"
    assert "agent ws-agent disconnected from the gateway (code 1001)" in log
    assert not Presence.objects.filter(agent_id="ws-agent").exists()
