"""Which interface an agent's card leads to: A2A 1.0 and 0.3 cards, their bindings and
preferences, real a2a-sdk cards, and the card fields the profile keeps (real HTTP
servers)."""

from __future__ import annotations

from typing import Any

import pytest

from agent_profiles.interfaces import call_target
from agent_profiles.models import AgentCard, AgentProfile
from tests.agent_profiles.test_card_reading import WELL_KNOWN, assert_nothing_written
from tests.agent_profiles.test_registration import assert_error, body
from tests.support.cardserver import card_v03, card_v1, json_response, serve

pytestmark = pytest.mark.usefixtures("open_registration")


def test_a_03_card_is_read_as_such(register: Any, skill: Any) -> None:
    with serve() as server:
        card = card_v03(
            server.url + "/rpc",
            additionalInterfaces=[
                {"url": server.url + "/rpc", "transport": "JSONRPC"},
                {"url": server.url + "/rest", "transport": "HTTP+JSON"},
                {"url": server.url + "/grpc", "transport": "GRPC"},
            ],
        )
        server.routes[WELL_KNOWN] = json_response(card)
        response = register(body(a2aEndpoint=server.url))
    assert response.status_code == 201, response.content
    interface = response.json()["profile"]["interface"]
    assert (interface["binding"], interface["version"], interface["url"]) == (
        "HTTP+JSON",
        "0.3",
        server.url + "/rest",
    )


def test_a_03_card_with_only_its_preferred_jsonrpc(register: Any, skill: Any) -> None:
    with serve() as server:
        server.routes[WELL_KNOWN] = json_response(card_v03(server.url + "/rpc"))
        response = register(body(a2aEndpoint=server.url))
    interface = response.json()["profile"]["interface"]
    assert (interface["binding"], interface["version"]) == ("JSONRPC", "0.3")


def test_a_jsonrpc_only_10_card(register: Any, skill: Any) -> None:
    with serve() as server:
        card = card_v1(server.url + "/jsonrpc", ("JSONRPC", "1.0"))
        card["supportedInterfaces"][0]["tenant"] = "acme"
        server.routes[WELL_KNOWN] = json_response(card)
        response = register(body(a2aEndpoint=server.url))
    interface = response.json()["profile"]["interface"]
    assert interface == {
        "binding": "JSONRPC",
        "version": "1.0",
        "url": server.url + "/jsonrpc",
        "tenant": "acme",
        "source": "card",
    }


def test_it_prefers_10_over_03_and_http_json_over_jsonrpc(register: Any, skill: Any) -> None:
    with serve() as server:
        card = card_v1(server.url + "/rpc", ("GRPC", "1.0"), ("JSONRPC", "1.0"))
        card["url"] = server.url + "/legacy"  # and a 0.3 HTTP+JSON interface
        card["preferredTransport"] = "HTTP+JSON"
        card["protocolVersion"] = "0.3.0"
        server.routes[WELL_KNOWN] = json_response(card)
        first = register(body(a2aEndpoint=server.url)).json()["profile"]["interface"]
        card["supportedInterfaces"].append(
            {"url": server.url + "/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
        )
        server.routes[WELL_KNOWN] = json_response(card)
        second = register(body(agentId="second", a2aEndpoint=server.url)).json()["profile"]
    assert (first["binding"], first["version"]) == ("JSONRPC", "1.0")
    assert (second["interface"]["binding"], second["interface"]["url"]) == (
        "HTTP+JSON",
        server.url + "/rest",
    )


def test_the_origin_card_is_used_when_the_endpoint_has_none(register: Any, skill: Any) -> None:
    with serve() as server:
        server.routes[WELL_KNOWN] = json_response(
            card_v1(server.url + "/a2a", ("HTTP+JSON", "1.0"))
        )
        response = register(body(a2aEndpoint=server.url + "/a2a"))
        assert server.hits["/a2a" + WELL_KNOWN] == 1
    assert response.json()["profile"]["interface"]["url"] == server.url + "/a2a"
    assert AgentCard.objects.get().source_url == server.url + WELL_KNOWN


def test_agent_card_url_is_read_and_fills_a_missing_endpoint(register: Any, skill: Any) -> None:
    with serve() as server:
        server.routes["/cards/mine.json"] = json_response(
            card_v1(server.url + "/rpc", ("JSONRPC", "0.3"))
        )
        data = body(agentCardUrl=server.url + "/cards/mine.json")
        del data["a2aEndpoint"]
        response = register(data)
    profile = response.json()["profile"]
    assert profile["agentCardUrl"] == server.url + "/cards/mine.json"
    assert profile["a2aEndpoint"] == server.url + "/rpc"
    assert profile["interface"]["binding"] == "JSONRPC"


def test_without_a_card_the_registrations_statement_is_used(register: Any, skill: Any) -> None:
    with serve() as server:  # answers 404 for the card
        response = register(
            body(a2aEndpoint=server.url, protocolBinding="JSONRPC", protocolVersion="0.3")
        )
    profile = response.json()["profile"]
    assert profile["interface"] == {
        "binding": "JSONRPC",
        "version": "0.3",
        "url": server.url,
        "tenant": "",
        "source": "registration",
    }
    assert profile["card"]["error"].startswith("no card served:")
    assert "HTTP 404" in profile["card"]["error"]
    assert profile["health"]["status"] == "unknown"  # it answered: reachable, no card


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("protocolBinding", "GRPC", "validation_error"),
        ("protocolBinding", 1, "validation_error"),
        ("protocolVersion", 1.0, "validation_error"),
        ("protocolVersion", "2.0", "validation_error"),
        ("timeoutMs", "5000", "validation_error"),
        ("timeoutMs", 0, "validation_error"),
        ("timeoutMs", 1.5, "validation_error"),
        ("pollIntervalMs", True, "validation_error"),
        ("pollIntervalMs", 3_600_001, "validation_error"),
        ("target", 5, "validation_error"),
        ("target", "t" * 201, "validation_error"),
        ("agentCardUrl", 5, "validation_error"),
        ("agentCardUrl", "ftp://agent.example/card.json", "invalid_url"),
        ("target", "ten\u0000ant", "invalid_text"),
        ("agentCardUrl", "http://a\u0000b/", "invalid_text"),
    ],
)
def test_new_fields_of_the_wrong_type_are_refused_naming_them(
    register: Any, skill: Any, field: str, value: Any, code: str
) -> None:
    error = assert_error(register(body(**{field: value})), 400, code)
    assert field in error["message"] or field in str(error["details"]) or code == "invalid_url"
    assert_nothing_written()


def test_new_fields_are_stored_and_shown(register: Any, skill: Any) -> None:
    response = register(
        body(
            protocolBinding="JSONRPC",
            protocolVersion="1.0",
            target="acme-eu",
            timeoutMs=90_000,
            pollIntervalMs=250,
        )
    )
    profile = response.json()["profile"]
    assert (profile["timeoutMs"], profile["pollIntervalMs"], profile["target"]) == (
        90_000,
        250,
        "acme-eu",
    )
    agent = AgentProfile.objects.get()
    assert (agent.timeout, agent.poll_interval) == (90.0, 0.25)
    target = call_target(agent)
    assert (target.binding, target.tenant, target.timeout_seconds) == ("JSONRPC", "acme-eu", 90.0)
    key = response.json()["apiKey"]
    cleared = register(body(timeoutMs=None, target=None), key=key).json()["profile"]
    assert (cleared["timeoutMs"], cleared["target"], cleared["pollIntervalMs"]) == (None, "", 250)


@pytest.mark.slow
def test_a_real_a2a_sdk_03_agents_card(register: Any, skill: Any) -> None:
    from tests.support.peers import run_legacy_peer

    with run_legacy_peer() as peer:
        response = register(body(a2aEndpoint=peer.url))
    assert response.status_code == 201, response.content
    profile = response.json()["profile"]
    assert profile["interface"] == {
        "binding": "JSONRPC",
        "version": "0.3",
        "url": peer.url,
        "tenant": "",
        "source": "card",
    }
    assert profile["card"]["streaming"] is True


@pytest.mark.parametrize(
    ("bindings", "expected"),
    [(("JSONRPC",), ("JSONRPC", "/rpc")), (("JSONRPC", "HTTP+JSON"), ("HTTP+JSON", ""))],
)
def test_real_a2a_sdk_10_agents_cards(
    register: Any, skill: Any, bindings: tuple[str, ...], expected: tuple[str, str]
) -> None:
    from tests.support.peers import run_peer

    with run_peer(bindings=bindings, streaming=False) as peer:
        response = register(body(a2aEndpoint=peer.url))
    interface = response.json()["profile"]["interface"]
    assert (interface["binding"], interface["version"], interface["url"]) == (
        expected[0],
        "1.0",
        peer.url + expected[1],
    )
    assert response.json()["profile"]["card"]["streaming"] is False


def test_a_03_cards_security_is_kept(register: Any, skill: Any) -> None:
    with serve() as server:
        card = card_v03(
            server.url,
            securitySchemes={"bearer": {"type": "http", "scheme": "bearer"}},
            security=[{"bearer": []}],
        )
        server.routes[WELL_KNOWN] = json_response(card)
        profile = register(body(a2aEndpoint=server.url)).json()["profile"]
    assert profile["card"]["securitySchemes"] == {"bearer": {"type": "http", "scheme": "bearer"}}
    assert profile["card"]["securityRequirements"] == [{"bearer": []}]
