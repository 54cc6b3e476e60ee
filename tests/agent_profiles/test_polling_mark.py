"""A "no polling" mark is not for good: the agent registering again, or its card read
again on request, clears it (as the "no listing" mark). It may come from a deployment
since replaced, or from a guess: an agent that moved before its new card was served was
polled in the shape the card's absence implied, and its 404 marked it."""

from __future__ import annotations

from typing import Any

import pytest

from agent_profiles.health import mark_no_polling
from agent_profiles.models import AgentProfile
from tests.support.cardserver import card_v1, json_response, serve

pytestmark = pytest.mark.usefixtures("open_registration")


def marked(agent: AgentProfile) -> AgentProfile:
    mark_no_polling(agent, "does not offer GET /tasks/{id}: HTTP 404")
    return AgentProfile.objects.get(pk=agent.pk)


def polling(agent: AgentProfile) -> tuple[bool, str, Any]:
    row = AgentProfile.objects.get(pk=agent.pk)
    return row.polling, row.no_polling_reason, row.no_polling_at


def test_registering_again_clears_it(register: Any, make_agent: Any, skill: Any) -> None:
    agent = make_agent(id="moved", skills=[skill])
    assert not marked(agent).polling
    body = {"agentId": "moved", "skillIds": [skill.id], "a2aEndpoint": "http://127.0.0.1:9/a2a"}
    response = register(body, key=agent.raw_key)
    assert response.status_code == 200, response.content
    assert polling(agent) == (True, "", None)


def test_a_card_read_on_request_clears_it(client: Any, make_agent: Any, skill: Any) -> None:
    with serve() as server:
        server.routes["/card.json"] = json_response(card_v1(server.url, ("JSONRPC", "1.0")))
        agent = make_agent(id="moved", skills=[skill], agent_card_url=f"{server.url}/card.json")
        marked(agent)
        response = client.post(
            "/api/agent-profiles/moved/refresh", HTTP_AUTHORIZATION=f"Bearer {agent.raw_key}"
        )
    assert response.status_code == 200, response.content
    assert polling(agent) == (True, "", None)
