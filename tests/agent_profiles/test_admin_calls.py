"""The agent admin: write-only credentials, card and security read-outs, refresh, health."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agent_profiles.credentials import read_credentials
from agent_profiles.health import record_call_outcome
from agent_profiles.models import AgentProfile
from tests.support.cardserver import card_v1, json_response, serve

SECRET = "tok-admin-0ddba11-secret"
WELL_KNOWN = "/.well-known/agent-card.json"


@pytest.fixture(autouse=True)
def _loopback(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True


def change_url(agent: AgentProfile) -> str:
    return f"/admin/agent_profiles/agentprofile/{agent.pk}/change/"


def form(agent: AgentProfile, **overrides: Any) -> dict[str, Any]:
    data = {
        "id": agent.pk,
        "name": agent.name,
        "status": "active",
        "a2a_endpoint": agent.a2a_endpoint,
        "metadata": "{}",
        "api_keys-TOTAL_FORMS": "0",
        "api_keys-INITIAL_FORMS": "0",
    }
    data.update(overrides)
    return data


def test_an_operator_sets_rotates_and_clears_a_credential_never_seeing_it(
    staff_client: Any, make_agent: Any, caplog: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    agent = make_agent()
    new_auth = f'{{"type": "bearer", "token": "{SECRET}"}}'
    response = staff_client.post(change_url(agent), form(agent, new_auth=new_auth))
    assert response.status_code == 302
    agent.refresh_from_db()
    assert read_credentials(agent) == {"type": "bearer", "token": SECRET}
    page = staff_client.get(change_url(agent)).content.decode()
    assert SECRET not in page
    assert "configured (bearer)" in page
    rotated = '{"type": "apiKey", "in": "header", "name": "X-Key", "value": "second-value"}'
    staff_client.post(change_url(agent), form(agent, new_auth=rotated))
    agent.refresh_from_db()
    assert read_credentials(agent)["value"] == "second-value"
    staff_client.post(change_url(agent), form(agent, clear_auth="on"))
    agent.refresh_from_db()
    assert read_credentials(agent) is None
    assert SECRET not in caplog.text


def test_a_wrong_credential_is_refused_on_the_form_without_echoing_it(
    staff_client: Any, make_agent: Any
) -> None:
    agent = make_agent()
    bad = f'{{"type": "bearer", "token": "{SECRET}", "extra": 1}}'
    response = staff_client.post(change_url(agent), form(agent, new_auth=bad))
    assert response.status_code == 200
    page = response.content.decode()
    assert "auth.extra" in page
    assert SECRET not in page
    response = staff_client.post(change_url(agent), form(agent, new_auth="not json"))
    assert "must be a JSON object" in response.content.decode()
    assert AgentProfile.objects.get().auth_encrypted == ""


def test_the_detail_shows_the_cards_schemes_next_to_the_credential(
    staff_client: Any, make_agent: Any
) -> None:
    with serve() as server:
        card = card_v1(
            server.url + "/rpc",
            ("JSONRPC", "1.0"),
            securitySchemes={"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
            securityRequirements=[{"schemes": {"bearer": {}}}],
        )
        server.routes[WELL_KNOWN] = json_response(card)
        agent = make_agent(a2a_endpoint=server.url)
        response = staff_client.post(
            "/admin/agent_profiles/agentprofile/",
            {"action": "refresh_cards", "_selected_action": [agent.pk]},
            follow=True,
        )
    assert "card read; calls go to JSONRPC 1.0" in response.content.decode()
    page = staff_client.get(change_url(agent)).content.decode()
    assert "<code>bearer</code> httpAuth Bearer" in page
    assert "required: <code>[{&quot;schemes&quot;: {&quot;bearer&quot;: {}}}]</code>" in page
    assert "none configured" in page
    assert f"JSONRPC 1.0 at {server.url}/rpc" in page
    assert "Card agent" in page  # the stored card document


def test_the_list_and_detail_show_health_and_no_polling(staff_client: Any, make_agent: Any) -> None:
    from agent_profiles.health import mark_no_listing, mark_no_polling

    agent = make_agent()
    record_call_outcome(agent, ok=False, code="agent_auth_failed", message="HTTP 401 (bearer)")
    mark_no_polling(agent, "GetTask answered HTTP 405")
    mark_no_listing(agent, "ListTasks answered HTTP 404")
    listing = staff_client.get("/admin/agent_profiles/agentprofile/").content.decode()
    assert "unhealthy" in listing
    assert "agent_auth_failed: HTTP 401 (bearer)" in listing
    page = staff_client.get(change_url(agent)).content.decode()
    assert "GetTask answered HTTP 405" in page
    assert "ListTasks answered HTTP 404" in page


def test_moving_the_endpoint_in_the_admin_reads_the_new_card(
    staff_client: Any, make_agent: Any
) -> None:
    agent = make_agent(
        interface={"binding": "JSONRPC", "version": "0.3", "url": "http://127.0.0.1:9/"}
    )
    with serve() as server:
        server.routes[WELL_KNOWN] = json_response(card_v1(server.url, ("HTTP+JSON", "1.0")))
        response = staff_client.post(change_url(agent), form(agent, a2a_endpoint=server.url))
    assert response.status_code == 302
    agent.refresh_from_db()
    assert agent.interface["url"] == server.url
    assert agent.card_read_at is not None


def test_the_refresh_action_reports_a_refused_card(staff_client: Any, make_agent: Any) -> None:
    with serve() as server:
        server.routes[WELL_KNOWN] = json_response(card_v1(server.url, ("GRPC", "1.0")))
        agent = make_agent(a2a_endpoint=server.url)
        response = staff_client.post(
            "/admin/agent_profiles/agentprofile/",
            {"action": "refresh_cards", "_selected_action": [agent.pk]},
            follow=True,
        )
    assert "card refused" in response.content.decode()
    assert "GRPC 1.0" in response.content.decode()


def test_an_operator_sets_and_clears_the_offline_wait(staff_client: Any, make_agent: Any) -> None:
    agent = make_agent()
    page = staff_client.get(change_url(agent)).content.decode()
    assert "Offline wait (seconds)" in page
    assert f"| Agent {agent.pk} |" in page
    assert "Change agent profile" not in page
    response = staff_client.post(change_url(agent), form(agent, offline_wait="7200"))
    assert response.status_code == 302
    agent.refresh_from_db()
    assert agent.offline_wait == 7200.0
    response = staff_client.post(change_url(agent), form(agent, offline_wait="-1"))
    assert response.status_code == 200  # refused on the form
    staff_client.post(change_url(agent), form(agent, offline_wait=""))
    agent.refresh_from_db()
    assert agent.offline_wait is None


@pytest.mark.parametrize(
    ("field", "value"),
    [("timeout", "1e12"), ("timeout", "0"), ("poll_interval", "86400"), ("offline_wait", "1e12")],
)
def test_the_editor_refuses_call_settings_out_of_the_apis_bounds(
    staff_client: Any, make_agent: Any, field: str, value: str
) -> None:
    """The REST API's bounds (timeoutMs 1 ms to 7 days, pollIntervalMs up to 1 h): the
    editor took any number, and a timeout of 1e12 made every new task of the agent a 500."""
    agent = make_agent()
    response = staff_client.post(change_url(agent), form(agent, **{field: value}))
    assert response.status_code == 200  # refused on the form
    agent.refresh_from_db()
    assert getattr(agent, field) is None
