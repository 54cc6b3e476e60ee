"""The console's panels (dashboard, agent page) show only what the user may view: staff
who got 403 on the task list read its waiting count, the oldest waiting task's skill,
agent and link, failure codes and the agents' ids on the dashboard (hunt 16)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db.models import Q
from django.test import RequestFactory

from a2a.models import Task
from a2a.states import TaskState
from platform_site import console
from tests.platform_site.test_admin_permissions import logged_in, make_staff

pytestmark = pytest.mark.django_db

AGENT_ID = "secret-partner-agent"
TASK_CARDS = ('id="waiting-card"', 'id="tasks-card"', 'id="failures-card"')
GATEWAY_CARDS = ('id="agents-card"', 'id="offline-card"')


@pytest.fixture
def waiting(make_skill: Callable[..., Any], make_agent: Callable[..., Any]) -> Task:
    """A task of ``secret-partner-agent`` waiting for a person."""
    skill = make_skill()
    agent = make_agent(id=AGENT_ID, skills=[skill])
    return Task.objects.create(
        skill=skill,
        agent=agent,
        state=TaskState.INPUT_REQUIRED,
        question={"role": "ROLE_AGENT", "parts": [{"text": "EU or UK?"}]},
    )


def dashboard(codenames: list[str]) -> str:
    """The admin index as a staff user holding ``codenames`` sees it."""
    user = make_staff("staff-" + "-".join(codenames)[:100], Q(codename__in=codenames))
    return logged_in(user).get("/admin/").content.decode()


def test_staff_who_may_view_no_task_nor_agent_see_none_on_the_dashboard(waiting: Task) -> None:
    """A helpdesk account managing users: 403 on tasks and agents, and now nothing of
    them on the dashboard either."""
    body = dashboard(["view_user", "change_user"])
    assert AGENT_ID not in body
    assert waiting.skill_id not in body
    assert "Waiting for a person" not in body
    for card in (*TASK_CARDS, *GATEWAY_CARDS):
        assert card not in body


def test_staff_who_may_view_tasks_see_the_task_panels_only(waiting: Task) -> None:
    body = dashboard(["view_task"])
    for card in TASK_CARDS:
        assert card in body
    assert str(waiting.pk) in body  # the oldest waiting task's link
    for card in GATEWAY_CARDS:
        assert card not in body


def test_the_gateway_panel_takes_both_agent_and_offline_queue_views(waiting: Task) -> None:
    """It names agents (linking their pages) and the offline queue: either alone is not
    enough."""
    assert 'id="agents-card"' not in dashboard(["view_agentprofile"])
    assert 'id="agents-card"' not in dashboard(["view_offlinetask"])
    both = dashboard(["view_agentprofile", "view_offlinetask"])
    for card in GATEWAY_CARDS:
        assert card in both
    for card in TASK_CARDS:
        assert card not in both


def test_an_agent_page_shows_its_tasks_only_to_who_may_view_tasks(waiting: Task) -> None:
    """The agent page's panels hold to the same rule: its recent tasks take a2a.view_task,
    its gateway connections and offline queue the gateway's view permissions."""
    url = f"/admin/agent_profiles/agentprofile/{AGENT_ID}/change/"
    agents_only = logged_in(make_staff("agents", Q(codename="view_agentprofile")))
    page = agents_only.get(url)
    assert page.status_code == 200
    body = page.content.decode()
    assert "/admin/a2a/task/?agent__id__exact=" not in body
    assert "/admin/gateway/offlinetask/?agent__id__exact=" not in body
    everything = logged_in(make_staff("all", Q(codename__startswith="view_")))
    body = everything.get(url).content.decode()
    assert "/admin/a2a/task/?agent__id__exact=" in body
    assert "/admin/gateway/offlinetask/?agent__id__exact=" in body


def test_a_panel_is_not_even_rendered_for_who_may_not_see_it(rf: RequestFactory) -> None:
    """Its queries cost: a panel the user may not see is skipped, not rendered and
    dropped."""
    calls: list[str] = []
    console.add_dashboard_panel(
        "probe", lambda request: calls.append("rendered") or "<p>probe</p>", 99, ["a2a.view_task"]
    )
    try:
        request = rf.get("/admin/")
        request.user = make_staff("nobody")
        assert "probe" not in console.dashboard_html(request)
        assert calls == []
        request.user = make_staff("boss", superuser=True)
        assert "<p>probe</p>" in console.dashboard_html(request)
    finally:
        console._dashboard.pop("probe")
