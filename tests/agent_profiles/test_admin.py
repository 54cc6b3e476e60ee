from __future__ import annotations

from typing import Any

import pytest

from agent_profiles.authentication import authenticate_bearer
from agent_profiles.models import AgentProfile, AgentStatus, ApiKey, Skill, UserToken


def action(staff_client: Any, name: str, *ids: str) -> Any:
    return staff_client.post(
        "/admin/agent_profiles/agentprofile/",
        {"action": name, "_selected_action": list(ids)},
        follow=True,
    )


def test_agent_list_shows_status_skills_and_key_prefix(
    staff_client: Any, make_skill: Any, make_agent: Any
) -> None:
    agent = make_agent(skills=[make_skill()])
    page = staff_client.get("/admin/agent_profiles/agentprofile/").content.decode()
    assert "agent-one" in page
    assert "Active" in page
    assert "ce-review" in page
    assert agent.key_prefix in page
    assert agent.raw_key not in page


def test_approve_activates_pending_agents(staff_client: Any, make_agent: Any) -> None:
    make_agent(id="waiting", status=AgentStatus.PENDING)
    response = action(staff_client, "approve", "waiting")
    assert "1 agent(s) approved" in response.content.decode()
    assert AgentProfile.objects.get().status == AgentStatus.ACTIVE


def test_disable_disables_agents(staff_client: Any, make_agent: Any) -> None:
    make_agent(id="bad-actor")
    action(staff_client, "disable", "bad-actor")
    assert AgentProfile.objects.get().status == AgentStatus.DISABLED


def test_rotate_key_shows_the_new_key_once_and_revokes_the_old(
    staff_client: Any, make_agent: Any
) -> None:
    agent = make_agent()
    page = action(staff_client, "rotate_key", agent.pk).content.decode()
    new_key = next(w for w in page.replace("<", " ").split() if w.startswith("a2a_"))
    assert authenticate_bearer(new_key).agent == agent
    assert authenticate_bearer(agent.raw_key) is None
    again = staff_client.get("/admin/agent_profiles/agentprofile/").content.decode()
    assert new_key not in again


def test_skill_editor_shows_schema_errors_on_the_field(staff_client: Any, db: None) -> None:
    response = staff_client.post(
        "/admin/agent_profiles/skill/add/",
        {
            "id": "new-skill",
            "name": "New",
            "version": "1.0.0",
            "is_active": "on",
            "tags": "[]",
            "examples": "[]",
            "input_modes": "[]",
            "output_modes": "[]",
            "input_schema": '{"type": "objekt"}',
            "output_schema": '{"type": "object"}',
        },
    )
    assert response.status_code == 200  # the form again, not a redirect
    page = response.content.decode()
    assert "invalid JSON Schema" in page
    assert not Skill.objects.exists()


def test_skill_editor_saves_a_valid_skill(staff_client: Any, db: None) -> None:
    response = staff_client.post(
        "/admin/agent_profiles/skill/add/",
        {
            "id": "new-skill",
            "name": "New",
            "version": "1.0.0",
            "tags": '["a"]',
            "examples": "[]",
            "input_modes": "[]",
            "output_modes": "[]",
            "input_schema": '{"type": "object"}',
            "output_schema": '{"type": "object"}',
        },
    )
    assert response.status_code == 302
    assert Skill.objects.get().tags == ["a"]


def test_agent_editor_applies_the_url_guard(
    staff_client: Any, make_agent: Any, settings: Any
) -> None:
    settings.ALLOW_PRIVATE_URLS = False
    agent = make_agent()
    response = staff_client.post(
        f"/admin/agent_profiles/agentprofile/{agent.pk}/change/",
        {
            "id": agent.pk,
            "name": "x",
            "status": "active",
            "a2a_endpoint": "http://10.0.0.8/a2a",
            "metadata": "{}",
            "api_keys-TOTAL_FORMS": "0",
            "api_keys-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 200
    assert "private" in response.content.decode()
    assert AgentProfile.objects.get().a2a_endpoint == "http://127.0.0.1:9/"


@pytest.mark.parametrize("path", ["apikey", "usertoken"])
def test_keys_and_tokens_are_read_only_and_never_show_digests(
    staff_client: Any, make_agent: Any, make_user: Any, path: str
) -> None:
    make_agent()
    make_user()
    model = ApiKey if path == "apikey" else UserToken
    row = model.objects.get()
    listing = staff_client.get(f"/admin/agent_profiles/{path}/").content.decode()
    assert row.prefix in listing
    assert row.digest not in listing
    detail = staff_client.get(f"/admin/agent_profiles/{path}/{row.pk}/change/")
    assert detail.status_code == 200
    assert row.digest not in detail.content.decode()
    assert staff_client.get(f"/admin/agent_profiles/{path}/add/").status_code == 403


def test_revoke_action_revokes_a_user_token(staff_client: Any, make_user: Any) -> None:
    user = make_user()
    token = UserToken.objects.get()
    staff_client.post(
        "/admin/agent_profiles/usertoken/",
        {"action": "revoke", "_selected_action": [token.pk]},
    )
    assert authenticate_bearer(user.raw_token) is None


def test_agent_list_query_count_does_not_grow_with_agents(
    staff_client: Any, make_skill: Any, make_agent: Any, django_assert_max_num_queries: Any
) -> None:
    skill = make_skill()
    for i in range(10):
        make_agent(id=f"agent-{i}", skills=[skill])
    with django_assert_max_num_queries(12):
        assert staff_client.get("/admin/agent_profiles/agentprofile/").status_code == 200


def test_the_throttle_counts_are_found_by_address_and_deleted(staff_client: Any) -> None:
    from agent_profiles import ratelimit
    from agent_profiles.models import RateWindow

    for _ in range(2):
        ratelimit.hit("registration", "203.0.113.7", 2, 60)
    ratelimit.hit("registration", "198.51.100.1", 2, 60)
    assert not ratelimit.hit("registration", "203.0.113.7", 2, 60).allowed
    listing = "/admin/agent_profiles/ratewindow/"
    page = staff_client.get(listing, {"q": "203.0.113.7"}).content.decode()
    mine = RateWindow.objects.get(client=ratelimit.client_key("203.0.113.7"))
    other = RateWindow.objects.get(client=ratelimit.client_key("198.51.100.1"))
    assert mine.client[:12] in page
    assert other.client[:12] not in page
    assert "203.0.113.7" not in str(list(RateWindow.objects.values_list("client", flat=True)))
    staff_client.post(
        listing,
        {"action": "delete_selected", "_selected_action": [mine.pk], "post": "yes"},
    )
    assert list(RateWindow.objects.values_list("pk", flat=True)) == [other.pk]
    assert ratelimit.hit("registration", "203.0.113.7", 2, 60).allowed


def test_skill_list_counts_agents_in_its_one_query_and_sorts_by_them(
    staff_client: Any, make_skill: Any, make_agent: Any
) -> None:
    """A COUNT per row: a page of 100 skills ran 100 queries more."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    skills = [make_skill(id=f"skill-{n}", name=f"Skill {n}") for n in range(3)]
    for n in range(3):  # skill-0 has 3 agents, skill-1 2, skill-2 1
        make_agent(id=f"agent-{n}", skills=skills[: 3 - n])
    with CaptureQueriesContext(connection) as few:
        staff_client.get("/admin/agent_profiles/skill/")
    for n in range(3, 12):
        make_skill(id=f"skill-{n}", name=f"Skill {n}")
    with CaptureQueriesContext(connection) as many:
        page = staff_client.get("/admin/agent_profiles/skill/?o=7")  # by agents, ascending
    assert page.status_code == 200
    assert len(many) == len(few)
    body = page.content.decode()
    order = [body.index(f">skill-{n}<") for n in (2, 1, 0)]
    assert order == sorted(order)
    assert '<td class="field-agent_count">3</td>' in body


def test_skills_counted_in_the_list_are_still_deleted_and_edited_from_it(
    staff_client: Any, make_skill: Any, make_agent: Any
) -> None:
    skill = make_skill()
    make_agent(skills=[skill])
    page = staff_client.get(f"/admin/agent_profiles/skill/{skill.pk}/change/")
    assert page.status_code == 200
    response = staff_client.post(
        "/admin/agent_profiles/skill/",
        {"action": "delete_selected", "_selected_action": [skill.pk], "post": "yes"},
    )
    assert response.status_code == 302
    assert not Skill.objects.exists()
