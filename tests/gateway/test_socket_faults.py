"""Socket faults on a real daphne: a frame over daphne's 1 MiB limit kills the connection,
and the agent stops counting as online at once (no presence refresh for a dead socket).
A handler that dies of an exception is covered in-process (tests/gateway/test_access.py):
the consumer forgets its presence however it ends."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

import pytest
from websockets.exceptions import ConnectionClosed

from agent_profiles.models import AgentProfile, Skill
from gateway import presence
from gateway.models import Presence
from tests.gateway.test_e2e import open_socket, recv, send
from tests.support.processes import LivePlatform, embedded_platform

pytestmark = [pytest.mark.slow]


@pytest.fixture
def live(transactional_db: None) -> Iterator[LivePlatform]:
    # Heartbeat refresh every second, so a leftover refresh would show within the test.
    with embedded_platform(GATEWAY_HEARTBEAT_TIMEOUT=3, LOG_LEVEL="WARNING") as proc:
        yield LivePlatform(proc.url, {"platform": proc})  # type: ignore[attr-defined]


def test_an_oversize_frame_drops_the_socket_and_its_presence(
    live: LivePlatform, make_agent: Callable[..., AgentProfile], make_skill: Callable[..., Skill]
) -> None:
    agent = make_agent(skills=[make_skill()], a2a_endpoint="")
    with open_socket(live, agent.raw_key) as ws:
        send(ws, {"type": "ping"})
        assert recv(ws) == {"type": "pong"}
        assert presence.is_online(agent.id)
        # The server drops the socket at the frame's header: the client may find it closed
        # while still sending the rest (a reset), or at its next read.
        with contextlib.suppress(ConnectionClosed):
            ws.send("x" * 2_000_000)
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=5)
        deadline = time.monotonic() + 3
        while Presence.objects.filter(agent_id=agent.id).exists():
            assert time.monotonic() < deadline, "the dead socket still counts as online"
            time.sleep(0.1)
        time.sleep(1.5)  # one more heartbeat interval: nothing brings it back
        assert not presence.is_online(agent.id)
        assert live.procs["platform"].alive()
