"""Registration reads the agent's card and chooses how to call it (real HTTP servers)."""

from __future__ import annotations

from typing import Any

import pytest

from agent_profiles.cards import ensure_card
from agent_profiles.interfaces import call_target
from agent_profiles.models import AgentCard, AgentProfile, ApiKey
from tests.agent_profiles.test_registration import assert_error, body
from tests.support.agents import agent_card, run_agent
from tests.support.cardserver import (
    card_v03,
    card_v1,
    html_response,
    json_response,
    redirect_response,
    serve,
)

WELL_KNOWN = "/.well-known/agent-card.json"


@pytest.fixture(autouse=True)
def _defaults(settings: Any) -> None:
    settings.REGISTRATION_MODE = "open"
    settings.ALLOW_LOOPBACK_URLS = True
    settings.ALLOW_PRIVATE_URLS = False


@pytest.fixture
def skill(make_skill: Any) -> Any:
    return make_skill()


def assert_nothing_written() -> None:
    assert not AgentProfile.objects.exists()
    assert not ApiKey.objects.exists()
    assert not AgentCard.objects.exists()


def test_it_reads_a_real_sdk_agents_card_at_registration(register: Any, skill: Any) -> None:
    with run_agent() as peer:
        response = register(body(a2aEndpoint=peer.url))
    assert response.status_code == 201, response.content
    profile = response.json()["profile"]
    assert profile["interface"] == {
        "binding": "HTTP+JSON",
        "version": "1.0",
        "url": peer.url,
        "tenant": "",
        "source": "card",
    }
    assert profile["card"]["streaming"] is True
    assert profile["card"]["readAt"]
    assert profile["card"]["error"] == ""
    stored = AgentCard.objects.get(agent_id="acme-ce")
    assert stored.document["name"] == agent_card(peer.url).name
    assert stored.source_url == peer.url + WELL_KNOWN


def test_a_card_that_is_html_is_refused_and_nothing_saved(register: Any, skill: Any) -> None:
    with run_agent() as peer:
        response = register(body(a2aEndpoint=peer.url_for("html")))
    error = assert_error(response, 400, "invalid_agent_card")
    assert "not an agent card" in error["message"]
    assert "text/html" in error["message"]
    assert_nothing_written()


def test_a_card_offering_only_grpc_is_refused(register: Any, skill: Any) -> None:
    with serve() as server:
        server.routes[WELL_KNOWN] = json_response(card_v1(server.url + "/grpc", ("GRPC", "1.0")))
        response = register(body(a2aEndpoint=server.url))
    error = assert_error(response, 400, "unsupported_agent_card")
    assert "GRPC 1.0" in error["message"]
    assert_nothing_written()


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"status": "ok", "items": [1, 2]}, "not an agent card"),
        ([1, 2, 3], "not an agent card"),
        ({"name": "x", "supportedInterfaces": "HTTP+JSON"}, "must be a list"),
        ({"name": "x", "supportedInterfaces": [{"protocolBinding": "JSONRPC"}]}, "has no url"),
        ({"name": "x", "url": "ftp://agent.example/a2a"}, "not an http(s) URL"),
        ({"name": "bad\u0000name", "url": "http://127.0.0.1:9/"}, "NUL"),
    ],
)
def test_json_without_the_shape_of_a_card_is_refused(
    register: Any, skill: Any, document: Any, expected: str
) -> None:
    with serve() as server:
        server.routes[WELL_KNOWN] = json_response(document)
        response = register(body(a2aEndpoint=server.url))
    error = assert_error(response, 400, "invalid_agent_card")
    assert expected in error["message"]
    assert_nothing_written()


def test_malformed_json_is_refused(register: Any, skill: Any) -> None:
    with run_agent() as peer:
        response = register(body(a2aEndpoint=peer.url_for("garbage")))
    error = assert_error(response, 400, "invalid_agent_card")
    assert "not JSON" in error["message"]
    assert_nothing_written()


def test_an_enormous_card_is_refused(register: Any, skill: Any, settings: Any) -> None:
    settings.AGENT_CARD_MAX_BYTES = 10_000
    with serve() as server:
        card = card_v1(server.url, ("HTTP+JSON", "1.0"), padding="x" * 20_000)
        server.routes[WELL_KNOWN] = json_response(card)
        response = register(body(a2aEndpoint=server.url))
    assert_error(response, 400, "agent_card_too_large")
    assert_nothing_written()


def test_a_redirect_is_refused_naming_its_target(register: Any, skill: Any) -> None:
    with serve() as server:
        server.routes[WELL_KNOWN] = redirect_response("http://127.0.0.1:9/elsewhere.json")
        response = register(body(a2aEndpoint=server.url))
    error = assert_error(response, 400, "agent_card_redirect")
    assert "elsewhere.json" in error["message"]
    assert_nothing_written()


def test_a_card_not_reachable_yet_is_accepted_and_read_before_the_first_call(
    register: Any, skill: Any
) -> None:
    with serve() as server:  # learn a free port, then close it
        url = server.url
    response = register(body(a2aEndpoint=url))
    assert response.status_code == 201, response.content
    profile = response.json()["profile"]
    assert profile["card"]["readAt"] is None
    assert profile["card"]["error"].startswith("unreachable:")
    assert profile["health"]["status"] == "unhealthy"
    assert "agent card not read" in profile["health"]["error"]
    assert profile["interface"]["source"] == "default"
    agent = AgentProfile.objects.get()
    port = int(url.rsplit(":", 1)[1])
    with run_agent(port=port) as peer:
        ensure_card(agent)
        assert peer.counts[WELL_KNOWN] == 1
        ensure_card(agent)  # cheap once read: no second request
        assert peer.counts[WELL_KNOWN] == 1
    agent.refresh_from_db()
    assert agent.card_read_at is not None
    assert agent.health_status == "healthy"
    target = call_target(agent)
    assert (target.binding, target.version, target.url, target.streaming) == (
        "HTTP+JSON",
        "1.0",
        peer.url,
        True,
    )


def test_ensure_card_records_an_unreachable_card_and_waits_before_retrying(
    make_agent: Any, settings: Any
) -> None:
    settings.AGENT_CARD_RETRY_SECONDS = 60
    with serve() as server:
        url = server.url
    agent = make_agent(a2a_endpoint=url)
    ensure_card(agent)  # never raises
    agent.refresh_from_db()
    assert agent.card_error.startswith("unreachable:")
    assert agent.card_retry_after is not None
    assert agent.health_status == "unhealthy"
    with serve() as server:
        server.routes[WELL_KNOWN] = json_response(card_v1(server.url, ("JSONRPC", "1.0")))
        agent.a2a_endpoint = server.url
        ensure_card(agent)
        assert server.hits[WELL_KNOWN] == 0  # within the retry delay
        settings.AGENT_CARD_RETRY_SECONDS = 0
        agent.card_retry_after = None
        ensure_card(agent)
        assert server.hits[WELL_KNOWN] == 1
    assert call_target(agent).binding == "JSONRPC"


def test_ensure_card_records_a_served_non_card_and_calls_on_the_statement(
    make_agent: Any,
) -> None:
    with run_agent() as peer:
        agent = make_agent(a2a_endpoint=peer.url_for("html"), protocol_binding="JSONRPC")
        ensure_card(agent)
    agent.refresh_from_db()
    assert "not an agent card" in agent.card_error
    target = call_target(agent)
    assert (target.binding, target.url) == ("JSONRPC", peer.url_for("html"))


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


def test_a_private_card_url_is_refused_by_the_url_guard(
    register: Any, skill: Any, settings: Any
) -> None:
    settings.ALLOW_LOOPBACK_URLS = False  # as in production
    with serve() as server:
        server.routes[WELL_KNOWN] = json_response(card_v1(server.url, ("HTTP+JSON", "1.0")))
        data = body(agentCardUrl=server.url + WELL_KNOWN)
        del data["a2aEndpoint"]
        response = register(data)
        assert server.hits[WELL_KNOWN] == 0
    assert_error(response, 400, "invalid_url")
    response = register(body(a2aEndpoint="http://10.1.2.3/a2a", agentCardUrl=None))
    assert_error(response, 400, "invalid_url")
    assert_nothing_written()


def test_a_card_pointing_at_a_private_address_is_refused(register: Any, skill: Any) -> None:
    with serve() as server:
        server.routes[WELL_KNOWN] = json_response(card_v1("http://10.1.2.3/", ("HTTP+JSON", "1.0")))
        response = register(body(a2aEndpoint=server.url))
    error = assert_error(response, 400, "invalid_url")
    assert "10.1.2.3" in error["message"]
    assert_nothing_written()


def test_re_registration_reads_the_card_again(register: Any, skill: Any) -> None:
    with serve() as server:
        server.routes[WELL_KNOWN] = json_response(card_v1(server.url, ("HTTP+JSON", "1.0")))
        key = register(body(a2aEndpoint=server.url)).json()["apiKey"]
        server.routes[WELL_KNOWN] = json_response(card_v1(server.url + "/rpc", ("JSONRPC", "1.0")))
        response = register(body(a2aEndpoint=server.url), key=key)
    assert response.status_code == 200, response.content
    assert response.json()["profile"]["interface"]["binding"] == "JSONRPC"
    assert AgentCard.objects.get().document["supportedInterfaces"][0]["url"].endswith("/rpc")


def test_a_moved_endpoint_without_a_card_forgets_the_old_card(register: Any, skill: Any) -> None:
    with serve() as server:
        server.routes[WELL_KNOWN] = json_response(card_v1(server.url + "/rpc", ("JSONRPC", "1.0")))
        key = register(body(a2aEndpoint=server.url)).json()["apiKey"]
    with serve() as other:
        response = register(body(a2aEndpoint=other.url), key=key)
    interface = response.json()["profile"]["interface"]
    assert (interface["source"], interface["url"]) == ("default", other.url)


def test_a_card_refused_at_re_registration_changes_nothing(register: Any, skill: Any) -> None:
    with serve() as server:
        server.routes[WELL_KNOWN] = json_response(card_v1(server.url, ("HTTP+JSON", "1.0")))
        key = register(body(a2aEndpoint=server.url)).json()["apiKey"]
        server.routes[WELL_KNOWN] = html_response()
        response = register(body(a2aEndpoint=server.url, name="New name"), key=key)
    assert_error(response, 400, "invalid_agent_card")
    agent = AgentProfile.objects.get()
    assert agent.name == "ACME CE reviewer"
    assert agent.interface["binding"] == "HTTP+JSON"


def refresh(client: Any, agent_id: str, token: str | None) -> Any:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.post(f"/api/agent-profiles/{agent_id}/refresh", **headers)


def test_the_agent_refreshes_its_card_with_its_key(
    register: Any, skill: Any, client: Any, make_user: Any
) -> None:
    with serve() as server:
        server.routes[WELL_KNOWN] = json_response(card_v1(server.url, ("HTTP+JSON", "1.0")))
        key = register(body(a2aEndpoint=server.url)).json()["apiKey"]
        server.routes[WELL_KNOWN] = json_response(
            card_v1(server.url + "/rpc", ("JSONRPC", "1.0"), streaming=True)
        )
        response = refresh(client, "acme-ce", key)
        assert response.status_code == 200, response.content
        profile = response.json()["profile"]
        assert profile["interface"]["binding"] == "JSONRPC"
        assert profile["card"]["streaming"] is True
        server.routes[WELL_KNOWN] = html_response()
        error = assert_error(refresh(client, "acme-ce", key), 400, "invalid_agent_card")
        assert "not an agent card" in error["message"]
        assert AgentProfile.objects.get().interface["binding"] == "JSONRPC"  # kept
        staff = make_user("ops", is_staff=True)
        server.routes[WELL_KNOWN] = json_response(card_v1(server.url, ("HTTP+JSON", "1.0")))
        response = refresh(client, "acme-ce", staff.raw_token)
        assert response.json()["profile"]["interface"]["binding"] == "HTTP+JSON"
    response = refresh(client, "acme-ce", key)  # the server is gone now
    assert response.status_code == 200
    assert response.json()["profile"]["card"]["error"].startswith("unreachable:")
    assert response.json()["profile"]["interface"]["binding"] == "HTTP+JSON"


def test_only_the_agent_or_an_operator_may_refresh(
    register: Any, skill: Any, client: Any, make_agent: Any, make_user: Any
) -> None:
    other = make_agent(id="other")
    make_agent(id="target-agent")
    assert_error(refresh(client, "target-agent", None), 401)
    assert_error(refresh(client, "target-agent", other.raw_key), 403, "forbidden")
    assert_error(refresh(client, "no-such-agent", other.raw_key), 403, "forbidden")
    assert_error(refresh(client, "target-agent", make_user().raw_token), 403, "forbidden")
    socket_only = make_agent(id="socket-only", a2a_endpoint="")
    assert_error(refresh(client, "socket-only", socket_only.raw_key), 400, "no_agent_card")


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


def test_a_card_host_resolving_to_a_private_address_is_refused(register: Any, skill: Any) -> None:
    from agent_profiles.urlguard import use_resolver

    with use_resolver(lambda host, port: ["10.9.8.7"]):
        response = register(body(a2aEndpoint="http://agent.example/a2a"))
    error = assert_error(response, 400, "invalid_url")
    assert "10.9.8.7" in error["message"]
    assert_nothing_written()


def test_a_card_host_without_dns_yet_is_accepted_as_unreachable(register: Any, skill: Any) -> None:
    from agent_profiles.urlguard import use_resolver

    def no_dns(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    with use_resolver(no_dns):
        response = register(body(a2aEndpoint="http://agent.example/a2a"))
    assert response.status_code == 201, response.content
    assert "cannot be resolved" in response.json()["profile"]["card"]["error"]


def test_ensure_card_waits_no_longer_than_a_call_would(make_agent: Any, settings: Any) -> None:
    settings.AGENT_CARD_TIMEOUT = 30.0
    settings.A2A_HTTP_TIMEOUT = 0.3  # the bound before a call
    with run_agent() as peer:
        agent = make_agent(a2a_endpoint=peer.url_for("hang"))
        ensure_card(agent)
    agent.refresh_from_db()
    assert agent.card_error.startswith("unreachable:")
    assert "Timeout" in agent.card_error
