"""An agent that stops reading its socket is closed, and what it was sent comes again on
its next connection: daphne buffers every frame the platform sends, so without the send
timeout (platform_site/send_stall.py) an agent that read nothing would hold all its
tasks' frames in the server's memory for as long as its socket stayed open. Slow."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from agent_profiles.models import AgentProfile, Skill
from tests.gateway.test_e2e import ENV, api, open_socket, recv, send
from tests.support.processes import LivePlatform, embedded_platform

pytestmark = [pytest.mark.slow]

TASKS = 8
INPUT_CHARS = 900_000  # 8 frames of ~0.9 MB: more than the sockets' kernel buffers hold


@pytest.fixture
def live(transactional_db: None) -> Iterator[LivePlatform]:
    with embedded_platform(**ENV, SEND_STALL_TIMEOUT=2) as proc:
        yield LivePlatform(proc.url, {"platform": proc})  # type: ignore[attr-defined]


def _frames_until_closed(ws: Any, seconds: float) -> tuple[int, bool]:
    """Task frames read until the server closes the socket or ``seconds`` pass; whether
    it was closed."""
    frames, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            ws.recv(timeout=1)
        except TimeoutError:
            continue
        except ConnectionClosed:
            return frames, True
        frames += 1
    return frames, False


def test_an_agent_that_stops_reading_is_closed_and_its_tasks_come_again(
    live: LivePlatform,
    make_agent: Callable[..., AgentProfile],
    make_skill: Callable[..., Skill],
    make_user: Callable[..., Any],
) -> None:
    agent = make_agent(skills=[make_skill()], a2a_endpoint="")
    host, port = live.url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    # max_queue=1: the client's reader thread stops taking frames off the socket once one
    # waits unread, as an agent stuck elsewhere would.
    with connect(
        f"{live.ws_url}/ws/agent-gateway/",
        sock=sock,
        additional_headers={"Authorization": f"Bearer {agent.raw_key}"},
        open_timeout=10,
        max_queue=1,
    ) as ws:
        send(ws, {"type": "ping"})
        assert recv(ws) == {"type": "pong"}
        created = []
        with api(live, make_user()) as client:
            for _ in range(TASKS):
                body = {"skillId": "ce-review", "input": {"product": "k" * INPUT_CHARS}}
                response = client.post("/api/tasks", json={**body, "agentId": agent.id})
                assert response.status_code == 201, response.text[:300]
                created.append(response.json()["id"])
        time.sleep(8)  # past the 2 s stall, checked every 2 s
        read, closed = _frames_until_closed(ws, 15)
    assert closed, read
    assert read < TASKS
    assert "read nothing for 2 s" in live.procs["platform"].log_text()

    # Nothing was lost: the next connection is sent every task again.
    with open_socket(live, agent.raw_key) as again:
        seen = set()
        for _ in range(TASKS):
            frame = recv(again, wait=15)
            assert frame["type"] == "task.assign", frame["type"]
            seen.add(frame["task"]["id"])
            send(again, {"type": "task.ack", "deliveryId": frame["deliveryId"]})
    assert seen == set(created)
