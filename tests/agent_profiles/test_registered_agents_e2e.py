"""From registration to a finished task: the card read at (or after) registration decides
how dispatch calls the agent (a real a2a-sdk agent, the embedded worker and beat)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings

from a2a import services
from a2a.states import TaskState
from agent_profiles.models import AgentProfile
from tests.a2a.helpers import embedded_workers, wait_for
from tests.support.agents import free_port, run_agent

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
            task = services.create_task(
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
