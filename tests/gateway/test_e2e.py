"""End to end: the real platform (``runplatform``: daphne + in-process worker and beat) and
real WebSocket clients (``websockets``). Tasks are created on the REST API; the platform's
own worker pushes them over the gateway."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from agent_profiles.models import AgentProfile, Skill
from tests.support.processes import LivePlatform, live_platform_for_mode
from tests.support.serving import down_url

pytestmark = [pytest.mark.slow]

ENV = {
    "A2A_SWEEP_INTERVAL": 0.3,
    "A2A_RETRY_BACKOFF": 0.1,
    "A2A_MAX_ATTEMPTS": 2,
    "A2A_CONNECT_TIMEOUT": 0.5,
    "A2A_POLL_INTERVAL": 0.2,
    "GATEWAY_SWEEP_INTERVAL": 1.0,
    "LOG_LEVEL": "WARNING",
    "ALLOW_LOOPBACK_URLS": True,  # the dead endpoint is on loopback (distributed: off)
}


@pytest.fixture(scope="module")
def platform(django_db_blocker: Any) -> Iterator[LivePlatform]:
    """One platform for the module, in the pass's mode (on PostgreSQL and Redis, daphne
    alone has no worker to send tasks to the dead endpoint); each test's rows are its own."""
    with django_db_blocker.unblock(), live_platform_for_mode(**ENV) as platform:
        yield platform


@pytest.fixture
def live(platform: LivePlatform, transactional_db: None) -> LivePlatform:
    return platform


@pytest.fixture
def user(make_user: Callable[..., Any]) -> Any:
    return make_user()


def api(live: LivePlatform, user: Any) -> httpx.Client:
    return httpx.Client(
        base_url=live.url, headers={"Authorization": f"Bearer {user.raw_token}"}, timeout=10
    )


def open_socket(live: LivePlatform, key: str) -> ClientConnection:
    return connect(
        f"{live.ws_url}/ws/agent-gateway/",
        additional_headers={"Authorization": f"Bearer {key}"},
        open_timeout=10,
    )


def recv(ws: ClientConnection, wait: float = 10.0) -> dict[str, Any]:
    return json.loads(ws.recv(timeout=wait))


def send(ws: ClientConnection, frame: dict[str, Any]) -> None:
    ws.send(json.dumps(frame))


def create_task(client: httpx.Client, agent: AgentProfile) -> dict[str, Any]:
    response = client.post(
        "/api/tasks",
        json={"skillId": "ce-review", "input": {"product": "kettle"}, "agentId": agent.id},
    )
    assert response.status_code == 201, response.text
    return response.json()


def task_json(client: httpx.Client, task_id: str) -> dict[str, Any]:
    response = client.get(f"/api/tasks/{task_id}")
    assert response.status_code == 200, response.text
    return response.json()


def wait_task(
    client: httpx.Client, task_id: str, check: Callable[[dict[str, Any]], bool], wait: float = 15
) -> dict[str, Any]:
    deadline = time.monotonic() + wait
    while True:
        body = task_json(client, task_id)
        if check(body):
            return body
        assert time.monotonic() < deadline, f"task never matched: {body}"
        time.sleep(0.1)


def close_code(ws: ClientConnection) -> int | None:
    """Read until the server closes; its close code."""
    try:
        while True:
            ws.recv(timeout=5)
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else None


def complete(ws: ClientConnection, task_id: str, verdict: str = "pass") -> None:
    send(
        ws,
        {
            "type": "task.update",
            "taskId": task_id,
            "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "r", "parts": [{"data": {"verdict": verdict}}]}],
        },
    )


@pytest.fixture
def skill(make_skill: Callable[..., Skill]) -> Skill:
    return make_skill()


@pytest.fixture
def ws_agent(make_agent: Callable[..., AgentProfile], skill: Skill) -> AgentProfile:
    return make_agent(id="ws-agent", skills=[skill], a2a_endpoint="")


def test_an_online_agent_receives_works_and_completes_a_task(
    live: LivePlatform, user: Any, ws_agent: AgentProfile
) -> None:
    with api(live, user) as client, open_socket(live, ws_agent.raw_key) as ws:
        send(ws, {"type": "ping"})
        assert recv(ws) == {"type": "pong"}
        task = create_task(client, ws_agent)
        assign = recv(ws)
        assert (assign["type"], assign["task"]["id"]) == ("task.assign", task["id"])
        assert assign["message"]["parts"] == [{"data": {"product": "kettle"}}]
        send(ws, {"type": "task.ack", "deliveryId": assign["deliveryId"]})
        send(
            ws,
            {
                "type": "task.update",
                "taskId": task["id"],
                "status": {"state": "TASK_STATE_WORKING"},
            },
        )
        complete(ws, task["id"])
        done = wait_task(client, task["id"], lambda t: t["state"] == "TASK_STATE_COMPLETED")
        assert done["output"] == {"verdict": "pass"}
        assert done["transport"] == "websocket"


def test_an_offline_task_is_delivered_when_the_agent_connects(
    live: LivePlatform, user: Any, ws_agent: AgentProfile
) -> None:
    with api(live, user) as client:
        task = create_task(client, ws_agent)
        wait_task(client, task["id"], lambda t: t["transport"] == "offline")
        with open_socket(live, ws_agent.raw_key) as ws:
            assign = recv(ws)
            assert assign["task"]["id"] == task["id"]
            complete(ws, task["id"])
            done = wait_task(client, task["id"], lambda t: t["state"] == "TASK_STATE_COMPLETED")
        assert done["transport"] == "websocket"


def test_an_unacked_task_is_sent_again_after_a_dropped_connection(
    live: LivePlatform, user: Any, ws_agent: AgentProfile
) -> None:
    with api(live, user) as client:
        with open_socket(live, ws_agent.raw_key) as ws:
            send(ws, {"type": "ping"})
            recv(ws)
            task = create_task(client, ws_agent)
            first = recv(ws)
        # Dropped without an ack: the next connection gets the same delivery.
        with open_socket(live, ws_agent.raw_key) as ws:
            again = recv(ws)
            assert again["deliveryId"] == first["deliveryId"]
            assert again["message"]["messageId"] == first["message"]["messageId"]
            send(ws, {"type": "task.ack", "deliveryId": again["deliveryId"]})
            send(ws, {"type": "ping"})
            assert recv(ws) == {"type": "pong"}
        with open_socket(live, ws_agent.raw_key) as ws:
            send(ws, {"type": "ping"})
            assert recv(ws) == {"type": "pong"}  # acked: not sent a third time
        assert task_json(client, task["id"])["state"] == "TASK_STATE_SUBMITTED"


def test_a_question_is_answered_over_the_socket_and_a_cancel_arrives(
    live: LivePlatform, user: Any, ws_agent: AgentProfile
) -> None:
    with api(live, user) as client, open_socket(live, ws_agent.raw_key) as ws:
        send(ws, {"type": "ping"})
        recv(ws)
        task = create_task(client, ws_agent)
        assign = recv(ws)
        send(ws, {"type": "task.ack", "deliveryId": assign["deliveryId"]})
        question = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "Which market?"}]}
        send(
            ws,
            {
                "type": "task.update",
                "taskId": task["id"],
                "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": question},
            },
        )
        waiting = wait_task(client, task["id"], lambda t: t["state"] == "TASK_STATE_INPUT_REQUIRED")
        assert waiting["question"] == question
        reply = client.post(f"/api/tasks/{task['id']}/reply", json={"text": "France"})
        assert reply.status_code == 200, reply.text
        frame = recv(ws)
        assert (frame["type"], frame["taskId"]) == ("task.message", task["id"])
        assert frame["message"]["parts"] == [{"text": "France"}]
        send(ws, {"type": "task.ack", "deliveryId": frame["deliveryId"]})
        assert client.post(f"/api/tasks/{task['id']}/cancel").status_code == 200
        frame = recv(ws)
        assert (frame["type"], frame["taskId"]) == ("task.cancel", task["id"])


def test_a_dead_endpoint_falls_back_to_the_online_socket(
    live: LivePlatform, user: Any, make_agent: Callable[..., AgentProfile], skill: Skill
) -> None:
    agent = make_agent(id="http-agent", skills=[skill], a2a_endpoint=down_url())
    with api(live, user) as client, open_socket(live, agent.raw_key) as ws:
        send(ws, {"type": "ping"})
        recv(ws)
        task = create_task(client, agent)
        assign = recv(ws)
        assert assign["task"]["id"] == task["id"]
        body = task_json(client, task["id"])
        assert body["transport"] == "websocket"
        (fallback,) = body["metadata"]["fallbacks"]
        assert (fallback["from"], fallback["to"]) == ("a2a", "websocket")
        assert "agent_unreachable" in fallback["reason"]


def test_a_dead_endpoint_falls_back_to_offline_storage_after_the_retries(
    live: LivePlatform, user: Any, make_agent: Callable[..., AgentProfile], skill: Skill
) -> None:
    agent = make_agent(id="http-agent", skills=[skill], a2a_endpoint=down_url())
    with api(live, user) as client:
        task = create_task(client, agent)
        body = wait_task(client, task["id"], lambda t: t["transport"] == "offline")
        assert body["attempts"] == ENV["A2A_MAX_ATTEMPTS"]
        assert body["metadata"]["fallbacks"][0]["to"] == "offline"
        with open_socket(live, agent.raw_key) as ws:
            assert recv(ws)["task"]["id"] == task["id"]


def test_bad_keys_and_bad_frames_on_the_real_server(
    live: LivePlatform, ws_agent: AgentProfile
) -> None:
    with open_socket(live, ws_agent.raw_key + "x") as ws:
        assert close_code(ws) == 4401
    with open_socket(live, ws_agent.raw_key) as ws:
        ws.send("{nope")
        assert recv(ws)["code"] == "invalid_json"
        send(ws, {"type": "ping"})
        assert recv(ws) == {"type": "pong"}


def test_a_task_of_non_ascii_text_near_the_body_limit_reaches_the_socket(
    live: LivePlatform, user: Any, ws_agent: AgentProfile
) -> None:
    """600 kB of CJK text in UTF-8 (under MAX_BODY_BYTES): written as ``\\u`` escapes its
    frame was 1.2 MB, which daphne refuses to send (over 1 MiB), and the task waited
    SUBMITTED with nothing saying why."""
    product = "文" * 200_000
    with (
        api(live, user) as client,
        connect(
            f"{live.ws_url}/ws/agent-gateway/",
            additional_headers={"Authorization": f"Bearer {ws_agent.raw_key}"},
            open_timeout=10,
            max_size=None,  # the agent takes any size: the platform's side is tested
        ) as ws,
    ):
        send(ws, {"type": "ping"})
        assert recv(ws) == {"type": "pong"}
        body = {"skillId": "ce-review", "input": {"product": product}, "agentId": ws_agent.id}
        created = client.post("/api/tasks", json=body)
        assert created.status_code == 201, created.text[:300]
        assign = recv(ws)
        assert assign["task"]["id"] == created.json()["id"]
        assert assign["message"]["parts"] == [{"data": {"product": product}}]
