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
