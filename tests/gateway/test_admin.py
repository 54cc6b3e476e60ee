"""The gateway admin: offline tasks with their age, requeue and cancel actions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from a2a.models import Task
from a2a.states import TaskState
from gateway import services
from gateway.models import Delivery, OfflineTask

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(admin_client: Client) -> Client:
    return admin_client


def test_it_lists_offline_tasks_with_their_age(
    staff: Client, make_task: Callable[..., Task]
) -> None:
    task = make_task()
    services.push_task(task, reason="connect error")
    page = staff.get("/admin/gateway/offlinetask/")
    assert page.status_code == 200
    body = page.content.decode()
    assert str(task.id) in body
    assert "0m 0" in body  # age column


def test_the_delivery_and_presence_lists_render(
    staff: Client, make_task: Callable[..., Task]
) -> None:
    services.push_task(make_task())
    assert staff.get("/admin/gateway/delivery/").status_code == 200
    assert staff.get("/admin/gateway/presence/").status_code == 200


@pytest.mark.parametrize(
    ("action", "state"), [("requeue", TaskState.SUBMITTED), ("cancel", TaskState.CANCELED)]
)
def test_its_actions_requeue_or_cancel(
    staff: Client, make_task: Callable[..., Task], action: str, state: str
) -> None:
    task = make_task()
    services.push_task(task)
    offline = OfflineTask.objects.get()
    data: dict[str, Any] = {"action": action, "_selected_action": [str(offline.pk)]}
    response = staff.post("/admin/gateway/offlinetask/", data)
    assert response.status_code == 302
    task.refresh_from_db()
    assert task.state == state
    assert Delivery.objects.get().status == ("pending" if action == "requeue" else "canceled")


def test_gateway_rows_are_shown_without_save_buttons(
    staff: Client, make_task: Callable[..., Task]
) -> None:
    task = make_task()
    services.push_task(task, reason="connect error")
    delivery = Delivery.objects.get(task=task)
    for url in (
        f"/admin/gateway/delivery/{delivery.pk}/change/",
        f"/admin/gateway/offlinetask/{delivery.pk}/change/",
    ):
        page = staff.get(url)
        assert page.status_code == 200
        assert 'name="_save"' not in page.content.decode()


def big_task(make_task: Callable[..., Task]) -> Task:
    """A task holding a megabyte of artifacts, as a finished one can."""
    blob = [{"artifactId": "a", "parts": [{"text": "x" * 1_000_000}]}]
    return make_task(artifacts=blob, output={"r": "y" * 100_000})


@pytest.mark.parametrize("url", ["/admin/gateway/delivery/", "/admin/gateway/offlinetask/"])
def test_the_lists_read_no_task_whole(
    staff: Client, make_task: Callable[..., Task], url: str
) -> None:
    """The lists joined each row's whole task (artifacts and all) to show its id: a page
    of 40 such rows held hundreds of MB."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    task = big_task(make_task)
    services.push_task(task, reason="connect error")
    with CaptureQueriesContext(connection) as queries:
        page = staff.get(url)
    assert page.status_code == 200
    body = page.content.decode()
    assert str(task.id) in body
    assert task.agent_id in body
    if "offline" in url:
        assert f'<td class="field-skill">{task.skill_id}</td>' in body
    read = [q["sql"] for q in queries.captured_queries if '"a2a_task"."artifacts"' in q["sql"]]
    assert read == []


def test_cancel_goes_on_past_a_task_that_ended_meanwhile(
    staff: Client, make_task: Callable[..., Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task its agent finished between the action's read and its cancel answered a 500,
    and the rest of the selection was left undone."""
    from django.contrib.messages import get_messages

    from a2a import services as task_services

    tasks = [make_task() for _ in range(3)]
    for task in tasks:
        services.push_task(task)
    real = task_services.cancel_task

    def agent_answers_first(task: Task, **kwargs: Any) -> Task:
        if task.pk == tasks[1].pk:  # the agent's answer lands between the read and the cancel
            Task.objects.filter(pk=task.pk).update(state=TaskState.COMPLETED)
        return real(task, **kwargs)

    monkeypatch.setattr(task_services, "cancel_task", agent_answers_first)
    selected = [str(row.pk) for row in OfflineTask.objects.all()]
    response = staff.post(
        "/admin/gateway/offlinetask/", {"action": "cancel", "_selected_action": selected}
    )
    assert response.status_code == 302
    states = [Task.objects.get(pk=task.pk).state for task in tasks]
    assert states == [TaskState.CANCELED, TaskState.COMPLETED, TaskState.CANCELED]
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert said == [
        "Canceled 2 task(s).",
        f"1 task(s) not canceled: Task {tasks[1].pk} is TASK_STATE_COMPLETED, a final state; "
        "it cannot be canceled.",
    ]
