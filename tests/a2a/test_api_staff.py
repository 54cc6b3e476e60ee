"""Staff on the REST API hold to Django's permissions, as in the admin: other users' tasks
take *view task* to read and *change task* to act on; a user's own tasks always work."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from a2a.models import Task
from a2a.states import TaskState

pytestmark = pytest.mark.django_db

ACTIONS = [
    ("reply", {"text": "EU"}),
    ("cancel", {"reason": "not mine"}),
    ("retry", {}),
    ("reassign", {"agentId": "agent-b"}),
]


def client_for(user: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {user.raw_token}")
    return client


@pytest.fixture
def world(make_skill: Any, make_agent: Any, make_user: Any) -> dict[str, Any]:
    skill = make_skill()
    make_agent(skills=[skill], id="agent-a")
    make_agent(skills=[skill], id="agent-b")
    alice = client_for(make_user("alice"))
    made = alice.post(
        "/api/tasks",
        {"skillId": "ce-review", "input": {"product": "lamp"}, "agentId": "agent-a"},
        format="json",
    )
    assert made.status_code == 201, made.content
    return {"task": made.json()["id"], "make_user": make_user}


def staff(world: dict[str, Any], name: str, *codenames: str, **flags: Any) -> APIClient:
    flags.setdefault("is_staff", True)
    user = world["make_user"](name, **flags)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return client_for(user)


def own_task_works(client: APIClient) -> None:
    """Whatever their permissions, a user reads and cancels the tasks they created."""
    made = client.post(
        "/api/tasks", {"skillId": "ce-review", "input": {"product": "x"}}, format="json"
    )
    assert made.status_code == 201, made.content
    mine = made.json()["id"]
    assert client.get(f"/api/tasks/{mine}").status_code == 200
    cancel = client.post(f"/api/tasks/{mine}/cancel", {}, format="json")
    assert cancel.status_code == 200, cancel.content
    assert cancel.json()["state"] == TaskState.CANCELED


def test_staff_without_task_permissions_see_only_their_own(world: dict[str, Any]) -> None:
    """A helpdesk account (staff to manage users) neither reads nor steers others' tasks:
    404, as for any user, and the list and its filters show none of them."""
    helpdesk = staff(world, "helpdesk")
    task = world["task"]
    assert helpdesk.get(f"/api/tasks/{task}").status_code == 404
    for action, body in ACTIONS:
        response = helpdesk.post(f"/api/tasks/{task}/{action}", body, format="json")
        assert response.status_code == 404, (action, response.content)
        assert response.json()["error"]["code"] == "not_found"
    for query in ({}, {"agentId": "agent-a"}, {"skillId": "ce-review"}, {"state": "submitted"}):
        assert helpdesk.get("/api/tasks", query).json()["count"] == 0, query
    assert Task.objects.get(pk=task).state == TaskState.SUBMITTED
    own_task_works(helpdesk)


def test_view_only_staff_read_others_tasks_but_may_not_act(world: dict[str, Any]) -> None:
    viewer = staff(world, "viewer", "view_task")
    task = world["task"]
    assert viewer.get(f"/api/tasks/{task}").json()["input"] == {"product": "lamp"}
    assert viewer.get("/api/tasks", {"agentId": "agent-a"}).json()["count"] == 1
    for action, body in ACTIONS:
        response = viewer.post(f"/api/tasks/{task}/{action}", body, format="json")
        assert response.status_code == 403, (action, response.content)
        error = response.json()["error"]
        assert set(error) == {"code", "message", "details"}
        assert error["code"] == "forbidden"
        assert "a2a.change_task" in error["message"]
        assert error["details"] == {"taskId": task}
    stored = Task.objects.get(pk=task)
    assert (stored.state, stored.agent_id) == (TaskState.SUBMITTED, "agent-a")  # nothing done
    own_task_works(viewer)


@pytest.mark.parametrize(
    ("codenames", "flags"),
    [
        (("view_task", "change_task"), {}),
        (("change_task",), {}),  # change includes view, as in the admin
        ((), {"is_superuser": True}),  # superusers hold every permission
    ],
    ids=["view+change", "change", "superuser"],
)
def test_staff_who_may_change_tasks_act_on_others(
    world: dict[str, Any], codenames: tuple[str, ...], flags: dict[str, Any]
) -> None:
    operator = staff(world, "operator", *codenames, **flags)
    task = world["task"]
    assert operator.get(f"/api/tasks/{task}").status_code == 200
    assert operator.get("/api/tasks").json()["count"] == 1
    reassigned = operator.post(f"/api/tasks/{task}/reassign", {"agentId": "agent-b"}, format="json")
    assert reassigned.status_code == 200, reassigned.content
    assert reassigned.json()["agentId"] == "agent-b"
    cancel = operator.post(f"/api/tasks/{task}/cancel", {"reason": "ops"}, format="json")
    assert cancel.status_code == 200, cancel.content
    assert Task.objects.get(pk=task).state == TaskState.CANCELED
    own_task_works(operator)


def test_permissions_without_staff_show_no_one_elses_task(world: dict[str, Any]) -> None:
    """As in the admin, permissions count for staff only."""
    user = staff(world, "bob", "view_task", "change_task", is_staff=False)
    task = world["task"]
    assert user.get(f"/api/tasks/{task}").status_code == 404
    assert user.post(f"/api/tasks/{task}/cancel", {}, format="json").status_code == 404
    assert user.get("/api/tasks").json()["count"] == 0
