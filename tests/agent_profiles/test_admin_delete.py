"""The admin's Delete on agents: one with tasks cannot go (they are PROTECT), and the page
says so by counts, each linking to the agent's tasks. Django's collector read every task
whole to list it (input, output, artifacts: 300 tasks of 100 kB, 66 MB) for one line each."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from a2a.models import Task
from a2a.states import TaskState
from agent_profiles.models import AgentProfile
from tests.support.queries import selected_columns

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:agent_profiles_agentprofile_changelist"


@pytest.mark.parametrize("how", ["list_action", "agent_page"])
def test_an_agent_with_tasks_is_refused_by_counts(
    admin_client: Any, make_skill: Any, make_agent: Any, how: str
) -> None:
    skill = make_skill()
    agent = make_agent(id="busy", skills=[skill])
    blob = [{"artifactId": "a", "parts": [{"text": "x" * 10_000}]}]
    Task.objects.bulk_create(
        Task(skill=skill, agent=agent, state=TaskState.COMPLETED, artifacts=blob) for _ in range(30)
    )
    with CaptureQueriesContext(connection) as queries:
        if how == "list_action":
            response = admin_client.post(
                reverse(CHANGELIST), {"action": "delete_selected", "_selected_action": ["busy"]}
            )
        else:
            response = admin_client.get(
                reverse("admin:agent_profiles_agentprofile_delete", args=["busy"])
            )
    body = response.content.decode()
    assert response.status_code == 200
    assert "protected" in body.lower()
    assert "agent busy: 30 tasks" in body
    assert body.count("/admin/a2a/task/") == 1  # one link to its tasks, not one per task
    assert "/admin/a2a/task/?agent__id__exact=busy" in body
    assert selected_columns(queries) & {"artifacts", "output", "input"} == set()
    assert AgentProfile.objects.filter(pk="busy").exists()


def test_an_agent_without_tasks_is_deleted(
    admin_client: Any, make_skill: Any, make_agent: Any
) -> None:
    make_agent(id="idle", skills=[make_skill()])
    response = admin_client.post(
        reverse(CHANGELIST),
        {"action": "delete_selected", "_selected_action": ["idle"], "post": "yes"},
    )
    assert response.status_code == 302
    assert not AgentProfile.objects.filter(pk="idle").exists()
