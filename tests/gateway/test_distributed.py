"""The gateway in the distributed mode: two daphne processes, a Celery worker and beat on
PostgreSQL + Redis. A task accepted by one daphne and pushed by the worker reaches an agent
connected to the OTHER daphne; when that daphne is killed, the unacknowledged task is sent
again on the agent's new connection to the first one."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from agent_profiles.models import AgentProfile, Skill
from gateway.models import Presence
from tests.support.processes import daphne_process, distributed_platform

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

ENV = {
    "A2A_SWEEP_INTERVAL": 0.3,
    "GATEWAY_HEARTBEAT_TIMEOUT": 2.0,
    "GATEWAY_SWEEP_INTERVAL": 0.5,
    "LOG_LEVEL": "WARNING",
}


def open_socket(base_url: str, key: str) -> ClientConnection:
    url = base_url.replace("http://", "ws://", 1) + "/ws/agent-gateway/"
    headers = {"Authorization": f"Bearer {key}"}
    return connect(url, additional_headers=headers, open_timeout=10, close_timeout=1)


def next_frame(ws: ClientConnection, wait: float = 15.0) -> dict[str, Any]:
    """The next frame that is not a pong, pinging meanwhile (the heartbeat timeout is short)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        ws.send('{"type":"ping"}')
        try:
            frame = json.loads(ws.recv(timeout=0.4))
        except TimeoutError:
            continue
        if frame["type"] != "pong":
            return frame
        time.sleep(0.05)  # a ping every 50 ms: pinging as fast as pongs came was a flood (4429)
    raise AssertionError("no frame arrived")


def test_a_task_reaches_an_agent_on_another_daphne_and_survives_its_crash(
    transactional_db: None,
    make_user: Callable[..., Any],
    make_skill: Callable[..., Skill],
    make_agent: Callable[..., AgentProfile],
) -> None:
    user = make_user()
    agent = make_agent(id="ws-agent", skills=[make_skill()], a2a_endpoint="")
    auth = {"Authorization": f"Bearer {user.raw_token}"}
    with distributed_platform(**ENV) as platform, daphne_process(**ENV) as other:
        with open_socket(other.url, agent.raw_key) as ws:  # type: ignore[attr-defined]
            ws.send('{"type":"ping"}')
            assert json.loads(ws.recv(timeout=10)) == {"type": "pong"}
            # The presence row names the process holding the socket.
            assert f":{other.pid}:" in Presence.objects.get(agent=agent).server_id

            # Accepted by the platform's daphne, pushed by the worker, received via the other.
            response = httpx.post(
                f"{platform.url}/api/tasks",
                json={"skillId": "ce-review", "input": {"product": "kettle"}},
                headers=auth,
                timeout=10,
            )
            assert response.status_code == 201, response.text
            task_id = response.json()["id"]
            first = next_frame(ws)
            assert (first["type"], first["task"]["id"]) == ("task.assign", task_id)

            # The daphne holding the socket dies before the ack.
            other.kill()
        with open_socket(platform.url, agent.raw_key) as again:
            resent = next_frame(again)
            assert resent["deliveryId"] == first["deliveryId"]
            again.send(json.dumps({"type": "task.ack", "deliveryId": resent["deliveryId"]}))
            again.send(
                json.dumps(
                    {
                        "type": "task.update",
                        "taskId": task_id,
                        "status": {"state": "TASK_STATE_COMPLETED"},
                        "artifacts": [
                            {"artifactId": "r", "parts": [{"data": {"verdict": "pass"}}]}
                        ],
                    }
                )
            )
            deadline = time.monotonic() + 10
            while True:
                body = httpx.get(f"{platform.url}/api/tasks/{task_id}", headers=auth).json()
                if body["state"] == "TASK_STATE_COMPLETED" or time.monotonic() > deadline:
                    break
                again.send('{"type":"ping"}')
                time.sleep(0.2)
        assert body["state"] == "TASK_STATE_COMPLETED"
        assert body["transport"] == "websocket"
