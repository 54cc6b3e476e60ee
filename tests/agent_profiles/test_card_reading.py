"""Registration reads the agent's card: what is refused, a card not reachable yet, re-reading
it (re-registration, refresh), and the URL guard (real HTTP servers). Which interface a
card leads to is in test_card_formats.py."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.db import connection

from agent_profiles.cards import CardUnreachable, ensure_card, fetch_card
from agent_profiles.interfaces import call_target
from agent_profiles.models import AgentCard, AgentProfile, ApiKey
from tests.agent_profiles.test_registration import assert_error, body
from tests.support.agents import agent_card, run_agent
from tests.support.cardserver import (
    card_v1,
    html_response,
    json_response,
    redirect_response,
    serve,
)
from tests.support.trickle import trickling_server

WELL_KNOWN = "/.well-known/agent-card.json"


pytestmark = pytest.mark.usefixtures("open_registration")


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


@pytest.mark.django_db(transaction=True)
def test_the_first_calls_at_once_read_the_card_once(make_agent: Any) -> None:
    """The first tasks for a new agent start together on their own threads: one reads the
    card, the others wait and take what it found, each call on the card's interface."""
    with serve() as server:
        server.routes[WELL_KNOWN] = json_response(card_v1(server.url, ("JSONRPC", "1.0")))
        server.delay = 0.3
        agent = make_agent(a2a_endpoint=server.url)
        targets: list[str] = []

        def first_call() -> None:
            try:
                mine = AgentProfile.objects.get(pk=agent.pk)  # each thread its own row
                ensure_card(mine)
                targets.append(call_target(mine).binding)
            finally:
                connection.close()

        threads = [threading.Thread(target=first_call) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert server.hits[WELL_KNOWN] == 1
    assert targets == ["JSONRPC"] * 6


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
        staff.user_permissions.add(Permission.objects.get(codename="change_agentprofile"))
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
    # Staff take the permission to change agent profiles, as the admin's refresh action:
    # a helpdesk account (no permission) or a view-only one is refused.
    helpdesk = make_user("helpdesk", is_staff=True)
    assert_error(refresh(client, "target-agent", helpdesk.raw_token), 403, "forbidden")
    viewer = make_user("viewer", is_staff=True)
    viewer.user_permissions.add(*Permission.objects.filter(codename__startswith="view_"))
    assert_error(refresh(client, "target-agent", viewer.raw_token), 403, "forbidden")
    socket_only = make_agent(id="socket-only", a2a_endpoint="")
    assert_error(refresh(client, "socket-only", socket_only.raw_key), 400, "no_agent_card")


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


def test_a_card_trickled_a_byte_at_a_time_ends_at_its_deadline(settings: Any) -> None:
    """Each byte within the card timeout, the whole card never: the read ends at the
    call's whole deadline instead of holding the registration (and the card's lock that
    new tasks wait on) as long as the agent goes on."""
    settings.ALLOW_LOOPBACK_URLS = True
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    with trickling_server(head, b" ") as peer:
        url = f"http://127.0.0.1:{peer.port}/.well-known/agent-card.json"
        with pytest.raises(CardUnreachable) as refused:
            fetch_card(url, "", timeout=0.3)
    assert "no whole answer by the call's deadline" in str(refused.value)
