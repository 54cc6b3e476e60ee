"""URLs a card or a registration gives that the platform cannot use: a clear 400, never a
500, and one such agent never stops the periodic check of the others."""

from __future__ import annotations

from typing import Any

import pytest

from agent_profiles import cards, health, tasks
from agent_profiles.cards import CardUnreachable
from agent_profiles.models import AgentCard, AgentProfile
from agent_profiles.negotiation import InvalidCard, parse_card
from agent_profiles.urlguard import UnsafeURL, check_url
from platform_site.errors import ValidationFailed
from tests.agent_profiles.test_registration import assert_error, body
from tests.support.cardserver import card_v03, card_v1, json_response, serve

pytestmark = pytest.mark.usefixtures("open_registration")

WELL_KNOWN = "/.well-known/agent-card.json"
# Names urlsplit (and so the guard's first look) takes, but httpx cannot IDNA-encode.
UNENCODABLE = ["http://xn--/", "http://xn--zz-.com/", "http://\ufb01.com/", "http://a\u200b.com/"]
MALFORMED_CARDS = [
    {"name": "x", "url": "http://[::1", "protocolVersion": "0.3.0"},
    card_v03(
        "http://127.0.0.1:9/a2a",
        additionalInterfaces=[{"url": "http://[zz", "transport": "HTTP+JSON"}],
    ),
]


def _periodic(settings: Any) -> None:
    settings.AGENT_HEALTH_INTERVAL = 60


# --- malformed interface URLs (D1) -----------------------------------------------------


@pytest.mark.parametrize("card", MALFORMED_CARDS)
def test_a_malformed_interface_url_is_an_invalid_card(card: dict[str, Any]) -> None:
    with pytest.raises(InvalidCard, match="malformed"):
        parse_card(card, "http://127.0.0.1:9/card.json")


@pytest.mark.parametrize("card", MALFORMED_CARDS)
def test_registering_a_card_with_a_malformed_url_is_a_400(
    register: Any, skill: Any, card: dict[str, Any]
) -> None:
    with serve() as server:
        server.routes["/card.json"] = json_response(card)
        response = register(body(a2aEndpoint=None, agentCardUrl=server.url + "/card.json"))
    assert_error(response, 400, "invalid_agent_card")
    assert not AgentProfile.objects.filter(pk="acme-ce").exists()


@pytest.mark.parametrize("card", MALFORMED_CARDS)
def test_a_malformed_card_does_not_stop_the_periodic_check(
    make_agent: Any, settings: Any, card: dict[str, Any]
) -> None:
    _periodic(settings)
    with serve() as server:
        server.routes["/health"] = (200, {}, b"ok")
        server.routes["/card.json"] = json_response(card)
        bad = make_agent(id="bad-agent", a2a_endpoint="", agent_card_url=server.url + "/card.json")
        good = make_agent(id="good-agent", a2a_endpoint=server.url)
        tasks.check_agents()
    good.refresh_from_db()
    bad.refresh_from_db()
    assert good.health_status == "healthy"
    assert good.health_checked_at is not None
    assert "malformed" in bad.card_error
    assert bad.card_retry_after is not None


def test_an_unexpected_error_for_one_agent_does_not_stop_the_others(
    make_agent: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _periodic(settings)
    real = cards.refresh_card

    def refresh(agent: AgentProfile, **kw: Any) -> Any:
        if agent.pk == "bad-agent":
            raise RuntimeError("something no one expected")
        return real(agent, **kw)

    monkeypatch.setattr(tasks, "refresh_card", refresh)
    with serve() as server:
        server.routes["/health"] = (200, {}, b"ok")
        server.routes[WELL_KNOWN] = json_response(card_v1(server.url, ("HTTP+JSON", "1.0")))
        bad = make_agent(id="bad-agent", a2a_endpoint=server.url)
        good = make_agent(id="good-agent", a2a_endpoint=server.url)
        outcome = tasks.check_agents()
    assert outcome == {"cards_refreshed": 1, "checked": 2, "unhealthy": 0}
    bad.refresh_from_db()
    good.refresh_from_db()
    assert good.card_read_at is not None
    assert "RuntimeError: something no one expected" in bad.card_error
    assert bad.card_retry_after is not None  # tried again later, not on every run


# --- host names httpx cannot encode (D2) -----------------------------------------------


@pytest.mark.parametrize("url", UNENCODABLE)
def test_the_guard_refuses_a_host_httpx_cannot_encode(url: str) -> None:
    with pytest.raises(UnsafeURL, match="host is not a valid name"):
        check_url(url)


@pytest.mark.parametrize("url", ["http://b\u00fccher.de/", "http://xn--bcher-kva.de/a2a"])
def test_the_guard_accepts_international_names(url: str) -> None:
    check_url(url)


@pytest.mark.parametrize("url", UNENCODABLE)
def test_registering_an_unencodable_host_is_a_400(register: Any, skill: Any, url: str) -> None:
    assert_error(register(body(a2aEndpoint=url)), 400, "invalid_url")
    assert_error(register(body(a2aEndpoint=None, agentCardUrl=url)), 400, "invalid_url")


def test_a_card_interface_with_an_unencodable_host_is_refused(register: Any, skill: Any) -> None:
    with serve() as server:
        server.routes["/card.json"] = json_response(
            card_v1("http://\ufb01.com/a2a", ("HTTP+JSON", "1.0"))
        )
        response = register(body(a2aEndpoint=None, agentCardUrl=server.url + "/card.json"))
    error = assert_error(response, 400, "invalid_url")
    assert "host is not a valid name" in error["message"]


@pytest.mark.parametrize("url", UNENCODABLE)
def test_reading_a_card_at_an_unencodable_host_never_raises_anything_else(url: str) -> None:
    with pytest.raises((CardUnreachable, ValidationFailed)):
        cards.fetch_card(url + "card.json", "")


@pytest.mark.parametrize("url", UNENCODABLE)
def test_a_check_of_an_unencodable_host_fails_and_never_raises(url: str) -> None:
    result = health.check_one(url + "health", [url + WELL_KNOWN.lstrip("/")])
    assert result.ok is False
    assert result.error


def test_a_stored_unencodable_endpoint_does_not_stop_the_other_checks(make_agent: Any) -> None:
    # Stored before the guard knew better (or by a card): its check fails, alone.
    with serve() as server:
        server.routes["/health"] = (200, {}, b"ok")
        bad = make_agent(id="bad-agent", a2a_endpoint="http://\ufb01.com/a2a")
        broken = make_agent(id="broken-agent", a2a_endpoint="http://[::1")
        good = make_agent(id="good-agent", a2a_endpoint=server.url)
        statuses = health.check_agents()
    assert statuses == {
        "bad-agent": "unhealthy",
        "broken-agent": "unhealthy",
        "good-agent": "healthy",
    }
    for agent in (bad, broken, good):
        agent.refresh_from_db()
    assert bad.health_error
    assert broken.health_error
    assert good.health_checked_at is not None


# --- lengths the columns must hold (D3, D4; the database refuses them on PostgreSQL) ----


def test_a_long_endpoint_whose_card_location_passes_500_characters(
    register: Any, skill: Any
) -> None:
    with serve() as server:
        path = "/" + "p" * (490 - len(server.url))
        endpoint = server.url + path
        assert len(endpoint) <= 500 < len(endpoint + WELL_KNOWN)
        server.routes[path + WELL_KNOWN] = json_response(card_v1(endpoint, ("HTTP+JSON", "1.0")))
        response = register(body(a2aEndpoint=endpoint))
    assert response.status_code == 201, response.content
    assert AgentCard.objects.get(agent_id="acme-ce").source_url == endpoint + WELL_KNOWN


def _long_card(server_url: str) -> Any:
    return json_response(card_v1(server_url + "/" + "q" * 600, ("HTTP+JSON", "1.0")))


def test_a_card_only_registration_with_a_too_long_interface_url_is_a_400(
    register: Any, skill: Any
) -> None:
    with serve() as server:
        server.routes["/card.json"] = _long_card(server.url)
        response = register(body(a2aEndpoint=None, agentCardUrl=server.url + "/card.json"))
    error = assert_error(response, 400, "invalid_url")
    assert "longer than 500 characters" in error["message"]
    assert not AgentProfile.objects.filter(pk="acme-ce").exists()


def test_a_too_long_interface_url_is_skipped_for_one_that_fits(register: Any, skill: Any) -> None:
    with serve() as server:
        card = card_v1(server.url + "/" + "q" * 600, ("HTTP+JSON", "1.0"))
        card["supportedInterfaces"].append(
            {"url": server.url + "/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        )
        server.routes["/card.json"] = json_response(card)
        response = register(body(a2aEndpoint=None, agentCardUrl=server.url + "/card.json"))
    assert response.status_code == 201, response.content
    assert AgentProfile.objects.get(pk="acme-ce").a2a_endpoint == server.url + "/a2a"


def test_refreshing_a_card_with_a_too_long_interface_url_is_a_400(
    register: Any, skill: Any, client: Any
) -> None:
    with serve() as server:
        response = register(body(a2aEndpoint=None, agentCardUrl=server.url + "/card.json"))
        assert response.status_code == 201, response.content  # no card yet: unreachable
        key = response.json()["apiKey"]
        server.routes["/card.json"] = _long_card(server.url)
        refreshed = client.post(
            "/api/agent-profiles/acme-ce/refresh", HTTP_AUTHORIZATION=f"Bearer {key}"
        )
    assert_error(refreshed, 400, "invalid_url")
    assert AgentProfile.objects.get(pk="acme-ce").a2a_endpoint == ""


def test_a_too_long_interface_url_does_not_stop_the_periodic_check(
    make_agent: Any, settings: Any
) -> None:
    _periodic(settings)
    with serve() as server:
        server.routes["/health"] = (200, {}, b"ok")
        server.routes["/card.json"] = _long_card(server.url)
        bad = make_agent(id="bad-agent", a2a_endpoint="", agent_card_url=server.url + "/card.json")
        good = make_agent(id="good-agent", a2a_endpoint=server.url)
        tasks.check_agents()
    bad.refresh_from_db()
    good.refresh_from_db()
    assert bad.a2a_endpoint == ""
    assert "longer than 500 characters" in bad.card_error
    assert good.health_checked_at is not None
