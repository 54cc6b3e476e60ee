"""A key rotated or revoked while the platform reads the agent's card (the caller controls
how long: a slow card) stops working at once: the update it authenticated is refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agent_profiles import access, cards, services
from agent_profiles.models import AgentCard, AgentProfile, ApiKey
from tests.agent_profiles.test_registration import assert_error, body
from tests.support.cardserver import card_v1, json_response, serve

pytestmark = pytest.mark.usefixtures("open_registration")


def _during_card_read(
    monkeypatch: pytest.MonkeyPatch, module: Any, action: Callable[[], Any]
) -> None:
    real = module.fetch_card

    def fetch(card_url: str, endpoint: str, **kw: Any) -> Any:
        action()  # the operator acts while the agent's (slow) card is being read
        return real(card_url, endpoint, **kw)

    monkeypatch.setattr(module, "fetch_card", fetch)


def _rotate() -> None:
    access.rotate_key(AgentProfile.objects.get(pk="acme-ce"))


def _revoke() -> None:
    access.revoke_keys(ApiKey.objects.filter(agent_id="acme-ce"))


@pytest.mark.parametrize("action", [_rotate, _revoke])
def test_an_update_whose_key_is_revoked_during_the_card_read_is_refused(
    register: Any, skill: Any, monkeypatch: pytest.MonkeyPatch, action: Callable[[], None]
) -> None:
    key = register(body(a2aEndpoint=None)).json()["apiKey"]
    _during_card_read(monkeypatch, services, action)
    response = register(body(a2aEndpoint="http://127.0.0.1:9/elsewhere", name="moved"), key=key)
    assert_error(response, 401, "authentication_failed")
    agent = AgentProfile.objects.get(pk="acme-ce")
    assert (agent.name, agent.a2a_endpoint) == ("ACME CE reviewer", "")


def test_an_update_with_a_live_key_still_lands(
    register: Any, skill: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = register(body(a2aEndpoint=None)).json()["apiKey"]
    _during_card_read(monkeypatch, services, lambda: None)
    response = register(body(name="renamed"), key=key)
    assert response.status_code == 200, response.content
    assert AgentProfile.objects.get(pk="acme-ce").name == "renamed"


@pytest.mark.parametrize("action", [_rotate, _revoke])
def test_a_refresh_whose_key_is_revoked_during_the_card_read_stores_nothing(
    register: Any,
    skill: Any,
    client: Any,
    monkeypatch: pytest.MonkeyPatch,
    action: Callable[[], None],
) -> None:
    with serve() as server:
        server.routes["/card.json"] = json_response(card_v1(server.url, ("HTTP+JSON", "1.0")))
        response = register(body(a2aEndpoint=None, agentCardUrl=server.url + "/x.json"))
        key = response.json()["apiKey"]
        agent = AgentProfile.objects.get(pk="acme-ce")
        agent.agent_card_url = server.url + "/card.json"
        agent.save()
        _during_card_read(monkeypatch, cards, action)
        refreshed = client.post(
            "/api/agent-profiles/acme-ce/refresh", HTTP_AUTHORIZATION=f"Bearer {key}"
        )
    assert_error(refreshed, 401, "authentication_failed")
    agent.refresh_from_db()
    assert agent.card_read_at is None
    assert agent.a2a_endpoint == ""
    assert not AgentCard.objects.filter(agent=agent).exists()


def test_a_key_registering_another_new_agent_is_checked_as_its_own(
    register: Any, skill: Any
) -> None:
    # The key checked under the lock is the caller's, not that of the id being registered.
    key = register(body(a2aEndpoint=None)).json()["apiKey"]
    response = register(body(agentId="acme-other", a2aEndpoint=None), key=key)
    assert response.status_code == 201, response.content
