"""Outages on a real daphne: the agent is told "try again later" (close code 1013, after an
``unavailable`` error frame), whichever way it sends its key.

Channels' in-process ``WebsocketCommunicator`` (tests/gateway/test_outage.py) passes any
close code through; daphne's WebSocket library (autobahn) refused 1013 from the
application, so the socket closed with 1011 (key in the header) or not at all until the
auth timeout closed it with 4401 "bad key" (key in an ``auth`` frame). Only a real
server shows what the agent receives.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from agent_profiles.models import AgentProfile, Skill
from tests.support.processes import LivePlatform, RedisServer, daphne_process
from tests.support.serving import free_port
from tests.support.socket_close import TRY_AGAIN, until_closed

pytestmark = [pytest.mark.slow]

# Far above the patience below: a close that only comes from the auth timeout (4401,
# "bad key") must not pass for the try-again close.
ENV = {"GATEWAY_AUTH_TIMEOUT": 30, "LOG_LEVEL": "WARNING"}


def refusal(
    live: LivePlatform, key: str, *, auth_frame: bool
) -> tuple[list[dict[str, Any]], int | None]:
    """Open a gateway socket with ``key`` in the handshake header or a first ``auth``
    frame; the frames received until the server closed it, and its close code."""
    headers = {} if auth_frame else {"Authorization": f"Bearer {key}"}
    with connect(
        f"{live.ws_url}/ws/agent-gateway/", additional_headers=headers, open_timeout=10
    ) as ws:
        if auth_frame:
            # The server may have closed already (Redis down): the frames are read below.
            with contextlib.suppress(ConnectionClosed):
                ws.send(json.dumps({"type": "auth", "apiKey": key}))
        return until_closed(ws)


def told_to_come_back(live: LivePlatform, key: str, *, auth_frame: bool) -> None:
    received, code = refusal(live, key, auth_frame=auth_frame)
    assert [(f["type"], f["code"]) for f in received] == [("error", "unavailable")]
    assert code == TRY_AGAIN


@pytest.fixture(scope="module")
def database_down(django_db_blocker: Any) -> Iterator[LivePlatform]:
    """A daphne whose database is a port nobody listens on."""
    dead = f"postgres://postgres@127.0.0.1:{free_port()}/platform"
    with django_db_blocker.unblock(), daphne_process(DATABASE_URL=dead, **ENV) as proc:
        yield LivePlatform(proc.url, {"daphne": proc})  # type: ignore[attr-defined]


@pytest.mark.parametrize("auth_frame", [False, True])
def test_a_database_outage_closes_with_try_again(
    database_down: LivePlatform,
    make_agent: Callable[..., AgentProfile],
    make_skill: Callable[..., Skill],
    auth_frame: bool,
) -> None:
    agent = make_agent(skills=[make_skill()], a2a_endpoint="")
    told_to_come_back(database_down, agent.raw_key, auth_frame=auth_frame)
    assert database_down.procs["daphne"].alive()
    assert "invalid close code" not in database_down.procs["daphne"].log_text()


@pytest.mark.distributed
@pytest.mark.parametrize("auth_frame", [False, True])
def test_a_redis_outage_closes_with_try_again(
    transactional_db: None,
    make_agent: Callable[..., AgentProfile],
    make_skill: Callable[..., Skill],
    auth_frame: bool,
) -> None:
    """The key checks out, but the agent's channel group cannot be joined."""
    agent = make_agent(skills=[make_skill()], a2a_endpoint="")
    redis = RedisServer()
    redis.start()
    try:
        with daphne_process(REDIS_URL=redis.url, **ENV) as proc:
            live = LivePlatform(proc.url, {"daphne": proc})  # type: ignore[attr-defined]
            redis.kill()
            told_to_come_back(live, agent.raw_key, auth_frame=auth_frame)
            assert proc.alive()
    finally:
        redis.close()


@pytest.mark.distributed
def test_an_open_socket_is_told_to_come_back_when_redis_dies(
    transactional_db: None,
    make_agent: Callable[..., AgentProfile],
    make_skill: Callable[..., Skill],
) -> None:
    """No hint could reach the connection any more: closed with 1013, not a 1011 crash."""
    agent = make_agent(skills=[make_skill()], a2a_endpoint="")
    redis = RedisServer()
    redis.start()
    try:
        with daphne_process(REDIS_URL=redis.url, **ENV) as proc:
            url = proc.url.replace("http://", "ws://", 1) + "/ws/agent-gateway/"  # type: ignore[attr-defined]
            headers = {"Authorization": f"Bearer {agent.raw_key}"}
            with connect(url, additional_headers=headers, open_timeout=10) as ws:
                ws.send(json.dumps({"type": "ping"}))
                assert json.loads(ws.recv(timeout=10)) == {"type": "pong"}
                redis.kill()
                received, code = until_closed(ws)
                assert [(f["type"], f["code"]) for f in received] == [("error", "unavailable")]
                assert code == TRY_AGAIN
            assert proc.alive()
    finally:
        redis.close()
