"""An agent's admin page: status and health, card and credentials (never their values),
its tasks over 24 h, gateway presence, and key rotation."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from a2a import creation
from agent_profiles.authentication import authenticate_bearer
from agent_profiles.credentials import encrypt
from agent_profiles.models import HealthStatus


def test_the_agent_page_shows_health_card_credentials_tasks_and_presence(
    staff_client: Any, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    skill = make_skill()
    agent = make_agent(
        skills=[skill],
        health_status=HealthStatus.UNHEALTHY,
        health_error="connection refused",
        interface={"binding": "HTTP+JSON", "version": "1.0", "url": "http://127.0.0.1:9/"},
        security_schemes={"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
        auth_encrypted=encrypt({"type": "bearer", "token": "sekrit-token-123"}),
        auth_type="bearer",
    )
    task = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=make_user())
    url = reverse("admin:agent_profiles_agentprofile_change", args=[agent.pk])
    page = staff_client.get(url).content.decode()
    console, form = page.index('id="agent-console"'), page.index("Profile</h2>")
    assert console < form  # the panels come first, the editable profile after
    assert '<span class="badge unhealthy" id="health-badge">unhealthy</span>' in page
    assert "connection refused" in page
    assert 'HTTP+JSON 1.0 at http://127.0.0.1:9/ <span class="muted">from the card' in page
    assert "<code>bearer</code> httpAuth Bearer" in page
    assert "configured (bearer)" in page
    assert "sekrit-token-123" not in page
    assert reverse("admin:a2a_task_change", args=[task.pk]) in page  # recent tasks
    assert f"?agent__id__exact={agent.pk}" in page  # all its tasks
    assert "Tasks, last 24 h (1)" in page
    assert "no WebSocket connection" in page
    assert 'id="rotate-key"' in page


def test_the_agent_page_rotates_the_key_and_shows_it_once(
    staff_client: Any, make_agent: Any
) -> None:
    agent = make_agent()
    rotate = reverse("admin:agent_profiles_agentprofile_rotate", args=[agent.pk])
    assert staff_client.get(rotate).status_code == 405
    page = staff_client.post(rotate, follow=True).content.decode()
    new_key = next(w for w in page.replace("<", " ").split() if w.startswith("a2a_"))
    assert authenticate_bearer(new_key).agent == agent
    assert authenticate_bearer(agent.raw_key) is None
    url = reverse("admin:agent_profiles_agentprofile_change", args=[agent.pk])
    assert new_key not in staff_client.get(url).content.decode()


def test_the_agent_list_shows_health_beside_status(staff_client: Any, make_agent: Any) -> None:
    make_agent(health_status=HealthStatus.HEALTHY)
    page = staff_client.get(reverse("admin:agent_profiles_agentprofile_changelist")).content
    assert b"healthy" in page


def test_the_agent_page_says_how_a_held_agents_sends_go(staff_client: Any, make_agent: Any) -> None:
    reason = "A send asking it to return at once got no answer within 10 s"
    streams = make_agent(
        id="streams", early_return=False, streaming=True, no_early_return_reason=reason
    )
    plain = make_agent(
        id="plain", early_return=False, streaming=False, no_early_return_reason=reason
    )
    for agent, how in ((streams, "started by a stream"), (plain, "each send waits for its answer")):
        url = reverse("admin:agent_profiles_agentprofile_change", args=[agent.pk])
        page = staff_client.get(url).content.decode()
        assert f"held ({how}): {reason}" in page
