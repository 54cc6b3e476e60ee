"""From registration to a finished task: the card read at (or after) registration decides
how dispatch calls the agent (a real a2a-sdk agent, the embedded worker and beat)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings

from a2a import creation
from a2a.states import TaskState
from agent_profiles.models import AgentProfile
from tests.a2a.helpers import embedded_workers, wait_for
from tests.support.agents import run_agent
from tests.support.serving import free_port

pytestmark = [pytest.mark.slow]

FAST = {
    "A2A_POLL_INTERVAL": 0.1,
    "A2A_RETRY_BACKOFF": 0.1,
    "A2A_HTTP_TIMEOUT": 1.0,
    "A2A_CONNECT_TIMEOUT": 0.5,
    "A2A_SWEEP_INTERVAL": 0.3,
    "ALLOW_LOOPBACK_URLS": True,
    "REGISTRATION_MODE": "open",
}


def test_an_agent_registered_before_it_serves_gets_its_card_read_before_the_first_call(
    transactional_db: None, client: Any, make_skill: Any, make_user: Any
) -> None:
    make_skill()
    port = free_port()
    with override_settings(**FAST):
        body = {
            "agentId": "early-bird",
            "skillIds": ["ce-review"],
            "a2aEndpoint": f"http://127.0.0.1:{port}",
        }
        response = client.post(
            "/api/agent-profiles/register", json.dumps(body), content_type="application/json"
        )
        assert response.status_code == 201, response.content
        profile = response.json()["profile"]
        assert profile["card"]["readAt"] is None
        assert profile["health"]["status"] == "unhealthy"
        with run_agent(port=port) as peer, embedded_workers(sweep_interval=0.3):
            task = creation.create_task(
                skill_id="ce-review", input={"product": "lamp"}, user=make_user()
            )
            task = wait_for(task)
            assert peer.counts["/.well-known/agent-card.json"] == 1
    assert task.state == TaskState.COMPLETED, task.error
    agent = AgentProfile.objects.get(pk="early-bird")
    assert agent.card_read_at is not None
    assert agent.interface["binding"] == "HTTP+JSON"
    assert agent.health_status == "healthy"
    assert agent.last_call_ok is True


GOOD_TOKEN = "tok-good-7c1d"


def bearer_required(app: Any) -> Any:
    """ASGI middleware: every A2A call needs ``Authorization: Bearer GOOD_TOKEN``."""

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        open_paths = ("/.well-known/agent-card.json", "/health", "/_stats")
        if scope["type"] == "http" and scope["path"] not in open_paths:
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {GOOD_TOKEN}".encode():
                from starlette.responses import JSONResponse

                response = JSONResponse({"error": "unauthorized"}, status_code=401)
                await response(scope, receive, send)
                return
        await app(scope, receive, send)

    return guarded


def register(client: Any, body: dict[str, Any], key: str | None = None) -> Any:
    extra = {"HTTP_AUTHORIZATION": f"Bearer {key}"} if key else {}
    return client.post(
        "/api/agent-profiles/register",
        json.dumps(body),
        content_type="application/json",
        **extra,
    )


def test_a_wrong_credential_shows_in_health_and_rotating_it_lets_tasks_complete(
    transactional_db: None,
    client: Any,
    make_skill: Any,
    make_user: Any,
    monkeypatch: Any,
) -> None:
    from tests.support import agents

    original = agents.build_app
    monkeypatch.setattr(agents, "build_app", lambda agent: bearer_required(original(agent)))
    make_skill()
    user = make_user()
    with override_settings(**FAST), run_agent() as peer, embedded_workers(sweep_interval=0.3):
        body = {
            "agentId": "guarded",
            "skillIds": ["ce-review"],
            "a2aEndpoint": peer.url,
            "auth": {"type": "bearer", "token": "tok-wrong-91ab"},
        }
        response = register(client, body)
        assert response.status_code == 201, response.content
        key = response.json()["apiKey"]
        creation.create_task(skill_id="ce-review", input={"product": "lamp"}, user=user)
        agent = AgentProfile.objects.get(pk="guarded")
        wait_for(agent, lambda a: a.last_call_code == "agent_auth_failed")  # type: ignore[arg-type]
        assert "guarded" in agent.last_call_error
        assert "tok-wrong-91ab" not in agent.last_call_error
        body["auth"] = {"type": "bearer", "token": GOOD_TOKEN}
        health = register(client, body, key=key).json()["profile"]["health"]
        assert health["lastCall"] is None or health["lastCall"]["code"] != "agent_auth_failed"
        task = creation.create_task(skill_id="ce-review", input={"product": "lamp"}, user=user)
        task = wait_for(task)
    assert task.state == TaskState.COMPLETED, task.error
    assert AgentProfile.objects.get(pk="guarded").last_call_ok is True
