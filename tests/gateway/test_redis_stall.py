"""A socket opened while the channel layer's Redis is stalled is told to come back.

A Redis that refuses fails the agent's group join at once: ``unavailable``, then 1013
(test_live_outage.py). A stalled one (a frozen host, a partition; here a private
``redis-server`` under ``SIGSTOP``: connections open, nothing answered) held the join for
as long as the stall lasted, up to the layer's 30 s socket timeout: the socket was
accepted and then left silent (no pong, no error, no close), and the stalled start held a
place of the process's start gate, holding up other agents' starts. The join is now
time-limited (``platform_site.layer_calls``) and a timeout is refused as a refusal is.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from agent_profiles.models import AgentProfile, Skill
from tests.support.processes import RedisServer, daphne_process
from tests.support.redis_stall import stalled
from tests.support.socket_close import TRY_AGAIN, until_closed

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

ENV = {"GATEWAY_AUTH_TIMEOUT": 30, "LOG_LEVEL": "WARNING"}
# What an agent may wait for its socket's answer: the 2 s limit on the join with room for
# a loaded machine, far inside the stall (it lasts as long as the test's block).
PROMPT = 6.0


@pytest.mark.parametrize("auth_frame", [False, True])
def test_a_socket_opened_during_a_stall_is_told_to_come_back(
    transactional_db: None,
    make_agent: Callable[..., AgentProfile],
    make_skill: Callable[..., Skill],
    auth_frame: bool,
) -> None:
    agent = make_agent(skills=[make_skill()], a2a_endpoint="")
    headers = {} if auth_frame else {"Authorization": f"Bearer {agent.raw_key}"}
    redis = RedisServer()
    redis.start()
    try:
        with daphne_process(REDIS_URL=redis.url, **ENV) as proc:
            url = proc.url.replace("http://", "ws://", 1) + "/ws/agent-gateway/"  # type: ignore[attr-defined]
            with (
                stalled(redis) as stall,
                connect(url, additional_headers=headers, open_timeout=10) as ws,
            ):
                if auth_frame:
                    with contextlib.suppress(ConnectionClosed):
                        ws.send(json.dumps({"type": "auth", "apiKey": agent.raw_key}))
                received, code = until_closed(ws, wait=PROMPT)
                answered = time.monotonic() - stall
            assert [(f["type"], f["code"]) for f in received] == [("error", "unavailable")]
            assert code == TRY_AGAIN, f"closed {code} after {answered:.1f} s"
            # Redis back: the agent's next connection is served.
            with connect(url, additional_headers=headers, open_timeout=10) as ws:
                if auth_frame:
                    ws.send(json.dumps({"type": "auth", "apiKey": agent.raw_key}))
                ws.send(json.dumps({"type": "ping"}))
                assert _first_frame(ws) == {"type": "pong"}
            assert proc.alive()
    finally:
        redis.close()


def _first_frame(ws: Any) -> dict[str, Any]:
    return json.loads(ws.recv(timeout=15))
