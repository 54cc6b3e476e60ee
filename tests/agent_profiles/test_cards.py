from __future__ import annotations

from typing import Any

import pytest
from a2a.client.card_resolver import parse_agent_card

from a2a.cards import agent_card, platform_card


@pytest.fixture
def public_url(settings: Any) -> str:
    settings.PUBLIC_URL = "https://platform.example"
    return settings.PUBLIC_URL


def test_platform_card_advertises_both_bindings(
    client: Any, make_skill: Any, public_url: str
) -> None:
    make_skill()
    card = client.get("/api/a2a/agent-card").json()
    assert card["supportedInterfaces"] == [
        {
            "url": "https://platform.example/v1/a2a",
            "protocolBinding": "HTTP+JSON",
            "protocolVersion": "1.0",
        },
        {
            "url": "https://platform.example/v1/a2a/jsonrpc",
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        },
        {  # the same URL also speaks A2A 0.3 (see docs/a2a-face.md)
            "url": "https://platform.example/v1/a2a/jsonrpc",
            "protocolBinding": "JSONRPC",
            "protocolVersion": "0.3",
        },
    ]
    assert card["capabilities"] == {
        "streaming": True,
        "pushNotifications": True,
        "extendedAgentCard": False,
    }
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    assert [s["id"] for s in card["skills"]] == ["ce-review"]
    assert {"name", "description", "version", "defaultInputModes"} <= set(card)


def test_platform_card_declares_the_extended_card_when_a_token_is_set(
    make_skill: Any, settings: Any
) -> None:
    settings.A2A_EXTENDED_CARD_BEARER_TOKEN = "tok"
    assert platform_card()["capabilities"]["extendedAgentCard"] is True


def test_the_extended_card_names_the_agents_of_each_skill(make_skill: Any, make_agent: Any) -> None:
    skill = make_skill()
    make_agent(id="agent-x", skills=[skill])
    make_agent(id="agent-off", skills=[skill], status="disabled")
    description = platform_card(extended=True)["skills"][0]["description"]
    assert "agent-x" in description
    assert "agent-off" not in description


def test_platform_card_needs_no_token_when_anonymous_is_allowed(db: None, settings: Any) -> None:
    settings.A2A_ALLOW_ANONYMOUS = True
    card = platform_card()
    assert "securityRequirements" not in card
    assert card["skills"] == []


def test_agent_card_points_at_the_tenant_routes(
    client: Any, make_skill: Any, make_agent: Any, public_url: str
) -> None:
    skill = make_skill(examples=[{"product": "x"}])
    make_skill(id="not-offered")
    make_agent(id="acme", name="ACME", version="3.0", skills=[skill])
    response = client.get("/api/a2a/agent-card/acme")
    assert response.status_code == 200
    card = response.json()
    assert card["name"] == "ACME"
    assert card["version"] == "3.0"
    assert [i["url"] for i in card["supportedInterfaces"]] == [
        "https://platform.example/v1/a2a/acme",
        "https://platform.example/v1/a2a/acme/jsonrpc",
        "https://platform.example/v1/a2a/acme/jsonrpc",  # A2A 0.3
    ]
    assert card["capabilities"]["streaming"] is True
    assert card["capabilities"]["pushNotifications"] is True
    assert [s["id"] for s in card["skills"]] == ["ce-review"]
    assert card["skills"][0]["examples"] == ['{"product": "x"}']


def test_agent_card_is_404_for_unknown_agents(client: Any, db: None) -> None:
    response = client.get("/api/a2a/agent-card/nobody")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert "nobody" in response.json()["error"]["message"]


@pytest.mark.parametrize("status", ["disabled", "pending"])
def test_agent_card_is_404_for_disabled_and_pending_agents(
    client: Any, make_agent: Any, status: str
) -> None:
    make_agent(id="off", status=status)
    assert client.get("/api/a2a/agent-card/off").status_code == 404


def test_cards_parse_with_the_official_sdk(make_skill: Any, make_agent: Any) -> None:
    skill = make_skill()
    agent = make_agent(skills=[skill])
    for data in (platform_card(), platform_card(extended=True), agent_card(agent)):
        card = parse_agent_card(data)
        assert card.supported_interfaces[0].protocol_binding == "HTTP+JSON"
        assert card.capabilities.streaming
        assert card.skills[0].id == "ce-review"
        assert "bearer" in card.security_schemes
