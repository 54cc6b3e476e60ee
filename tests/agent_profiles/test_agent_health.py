"""Agents' health (checks and call outcomes), no-polling marks and the call target."""

from __future__ import annotations

from typing import Any

import pytest

from agent_profiles.health import (
    check_agents,
    check_one,
    health_of,
    mark_no_early_return,
    mark_no_listing,
    mark_no_polling,
    record_call_outcome,
)
from agent_profiles.interfaces import call_target
from agent_profiles.models import AgentProfile
from tests.support.agents import run_agent
from tests.support.cardserver import card_v1, json_response, serve
from tests.support.trickle import trickling_server


@pytest.fixture(autouse=True)
def _loopback(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True  # the test agents run on 127.0.0.1 (both passes)


def profile_json(client: Any, agent: AgentProfile) -> dict[str, Any]:
    from agent_profiles.api.serializers import AgentProfileSerializer

    agent.refresh_from_db()
    return AgentProfileSerializer(agent).data


def test_an_agent_that_goes_down_and_comes_back(make_agent: Any, client: Any) -> None:
    with run_agent() as peer:
        agent = make_agent(a2a_endpoint=peer.url)
        assert check_agents() == {agent.pk: "healthy"}
        assert peer.counts["/health"] == 1
    health = profile_json(client, agent)["health"]
    assert health["status"] == "healthy"
    assert health["latencyMs"] is not None
    assert check_agents() == {agent.pk: "unhealthy"}
    health = profile_json(client, agent)["health"]
    assert health["status"] == "unhealthy"
    assert "ConnectError" in health["error"]
    assert health["checkedAt"]
    with run_agent(port=peer.port):
        assert check_agents() == {agent.pk: "healthy"}
    assert profile_json(client, agent)["health"]["error"] == ""


def test_without_a_health_endpoint_the_card_is_checked(make_agent: Any) -> None:
    with serve() as server:
        server.routes["/.well-known/agent-card.json"] = json_response(
            card_v1(server.url, ("HTTP+JSON", "1.0"))
        )
        agent = make_agent(a2a_endpoint=server.url)
        assert check_agents() == {agent.pk: "healthy"}
        assert server.hits["/health"] == 1
        assert server.hits["/.well-known/agent-card.json"] == 1
        server.routes["/health"] = (503, {}, b"down for maintenance")
        assert check_agents() == {agent.pk: "unhealthy"}
    agent.refresh_from_db()
    assert agent.health_error.endswith("HTTP 503")


def test_disabled_agents_and_socket_only_agents_are_not_checked(make_agent: Any) -> None:
    make_agent(id="socket-only", a2a_endpoint="")
    make_agent(id="off", status="disabled")
    assert check_agents() == {}


def test_an_auth_failure_shows_in_health_until_a_call_succeeds(
    make_agent: Any, client: Any
) -> None:
    with run_agent() as peer:
        agent = make_agent(a2a_endpoint=peer.url)
        message = "agent agent-one answered HTTP 401 to scheme bearer"
        record_call_outcome(agent, ok=False, code="agent_auth_failed", message=message)
        health = profile_json(client, agent)["health"]
        assert health["status"] == "unhealthy"
        assert health["error"] == f"agent_auth_failed: {message}"
        assert health["lastCall"]["code"] == "agent_auth_failed"
        check_agents()  # a passing health check cannot show that credentials work
        assert health_of(AgentProfile.objects.get()).status == "unhealthy"
        record_call_outcome(agent, ok=True)
    assert profile_json(client, agent)["health"]["status"] == "healthy"


def test_a_passing_check_clears_another_failed_call(make_agent: Any) -> None:
    with run_agent() as peer:
        agent = make_agent(a2a_endpoint=peer.url)
        record_call_outcome(agent, ok=False, code="agent_unreachable", message="refused")
        assert health_of(AgentProfile.objects.get()).status == "unhealthy"
        check_agents()
    assert health_of(AgentProfile.objects.get()).status == "healthy"


def test_a_new_credential_forgets_the_auth_failure(make_agent: Any) -> None:
    from agent_profiles.credentials import set_credentials

    agent = make_agent()
    record_call_outcome(agent, ok=False, code="agent_auth_failed", message="401")
    set_credentials(agent, {"type": "bearer", "token": "new"})
    agent.save()
    assert health_of(AgentProfile.objects.get()).status == "unknown"


def test_a_successful_call_writes_nothing_when_already_healthy(
    make_agent: Any, django_assert_num_queries: Any
) -> None:
    agent = make_agent()
    record_call_outcome(agent, ok=True)
    assert agent.health_status == "healthy"
    with django_assert_num_queries(0):
        record_call_outcome(agent, ok=True)


@pytest.mark.parametrize(
    ("mark", "field", "shown", "reason"),
    [
        (mark_no_polling, "polling", "polling", "GET /tasks/{id} answered HTTP 404"),
        (mark_no_listing, "listing", "listing", "GET /tasks answered HTTP 404"),
        (mark_no_early_return, "early_return", "earlyReturn", "A send got no answer in 10 s"),
    ],
)
def test_what_dispatch_learns_is_stored_and_shown(
    make_agent: Any, client: Any, mark: Any, field: str, shown: str, reason: str
) -> None:
    agent = make_agent()
    assert getattr(call_target(agent), field) is True
    assert profile_json(client, agent)[shown]["supported"] is True
    mark(agent, reason)
    learned = profile_json(client, agent)[shown]
    assert learned["supported"] is False
    assert learned["reason"] == reason
    assert learned["since"]
    assert getattr(call_target(AgentProfile.objects.get()), field) is False


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, ("HTTP+JSON", "1.0", "http://127.0.0.1:9/", "")),
        (
            {"protocol_binding": "JSONRPC", "protocol_version": "0.3", "target": "t1"},
            ("JSONRPC", "0.3", "http://127.0.0.1:9/", "t1"),
        ),
        (
            {
                "interface": {
                    "binding": "JSONRPC",
                    "version": "1.0",
                    "url": "http://127.0.0.1:9/rpc",
                    "tenant": "from-card",
                },
                "protocol_binding": "HTTP+JSON",
            },
            ("JSONRPC", "1.0", "http://127.0.0.1:9/rpc", "from-card"),
        ),
        (
            {
                "interface": {
                    "binding": "JSONRPC",
                    "version": "1.0",
                    "url": "http://127.0.0.1:9/rpc",
                    "tenant": "from-card",
                },
                "target": "mine",
            },
            ("JSONRPC", "1.0", "http://127.0.0.1:9/rpc", "mine"),
        ),
    ],
)
def test_call_target_uses_the_card_then_the_statement_then_the_default(
    make_agent: Any, fields: dict[str, Any], expected: tuple[str, ...]
) -> None:
    target = call_target(make_agent(**fields))
    assert (target.binding, target.version, target.url, target.tenant) == expected


def test_call_target_carries_timeouts_and_capabilities(make_agent: Any) -> None:
    agent = make_agent(
        timeout=90.0,
        poll_interval=0.25,
        streaming=True,
        push_notifications=True,
        security_schemes={"oauth": {}, "bearer": {}},
    )
    target = call_target(agent)
    assert target.security_schemes == ("bearer", "oauth")
    assert (target.timeout_seconds, target.poll_interval_seconds) == (90.0, 0.25)
    assert target.streaming
    assert target.push_notifications

    from agent_profiles.credentials import set_credentials

    set_credentials(agent, {"type": "bearer", "token": "tok-never-printed"})
    agent.save()
    target = call_target(agent)
    assert target.auth == {"type": "bearer", "token": "tok-never-printed"}
    assert "tok-never-printed" not in repr(target)


def test_the_periodic_check_reads_due_cards_and_checks_health(
    make_agent: Any, settings: Any
) -> None:
    from agent_profiles import tasks

    assert settings.CELERY_BEAT_SCHEDULE["agent-profiles-check"]["task"] == (
        "agent_profiles.check_agents"
    )
    with run_agent() as peer:
        agent = make_agent(a2a_endpoint=peer.url)
        make_agent(id="socket-only", a2a_endpoint="")
        assert tasks.check_agents() == {"cards_refreshed": 1, "checked": 1, "unhealthy": 0}
        agent.refresh_from_db()
        assert agent.card_read_at is not None
        assert agent.health_status == "healthy"
        # Read recently: not due again until AGENT_CARD_REFRESH_INTERVAL has passed.
        assert tasks.check_agents()["cards_refreshed"] == 0
        settings.AGENT_CARD_REFRESH_INTERVAL = 0.001
        assert tasks.check_agents()["cards_refreshed"] == 1


def test_a_check_never_clears_an_auth_failure_recorded_while_it_ran(make_agent: Any) -> None:
    from agent_profiles.health import CheckResult, store_check

    agent = make_agent()
    record_call_outcome(agent, ok=False, code="agent_unreachable", message="refused")
    loaded_by_the_check = AgentProfile.objects.get()
    record_call_outcome(agent, ok=False, code="agent_auth_failed", message="HTTP 401")
    store_check(loaded_by_the_check, CheckResult(ok=True, latency_ms=3, error=""))
    fresh = AgentProfile.objects.get()
    assert fresh.last_call_code == "agent_auth_failed"
    assert health_of(fresh).status == "unhealthy"


def test_a_check_reads_the_status_and_never_the_body(settings: Any) -> None:
    """An agent's health body is not read: an endless one (or a compressed one that
    unpacks to gigabytes) held the check's thread, and the platform's memory, while it
    came."""
    settings.ALLOW_LOOPBACK_URLS = True
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n"
    with trickling_server(head, b"x") as peer:
        result = check_one(f"http://127.0.0.1:{peer.port}/health", [])
        assert result.ok
        assert peer.hung_up.wait(5)  # the check closed the connection mid-body
