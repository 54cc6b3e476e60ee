"""An admin action posted with selected ids that cannot be the model's ids (no UUID for a
task or a gateway delivery, no number for a key or a user) is refused with a message on
the list and changes nothing; Django filtered ``pk__in`` with them and answered a 500."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from a2a import creation
from a2a.models import Task
from a2a.states import TaskState

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(make_skill: Any, make_agent: Any, make_user: Any) -> Task:
    skill = make_skill()
    make_agent(skills=[skill])
    return creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=make_user())


@pytest.mark.parametrize(
    ("changelist", "action"),
    [
        ("admin:a2a_task_changelist", "cancel_selected"),
        ("admin:gateway_delivery_changelist", "delete_selected"),
        ("admin:agent_profiles_apikey_changelist", "revoke"),
        ("admin:auth_user_changelist", "delete_selected"),
    ],
)
def test_an_action_on_ids_that_cannot_be_ids_is_refused_with_a_message(
    admin_client: Any, changelist: str, action: str
) -> None:
    url = reverse(changelist)
    response = admin_client.post(
        url, {"action": action, "index": "0", "_selected_action": ["not-an-id"]}, follow=True
    )
    assert response.status_code == 200
    said = [str(m) for m in response.context["messages"]]
    assert any("'not-an-id' is not the id of a" in m for m in said), said


@pytest.mark.parametrize(
    ("changelist", "action"),
    [
        ("admin:agent_profiles_apikey_changelist", "revoke"),
        ("admin:auth_user_changelist", "delete_selected"),
    ],
)
def test_a_number_beyond_the_id_columns_range_is_refused_too(
    admin_client: Any, changelist: str, action: str
) -> None:
    """A number the field reads but its column cannot hold: SQLite raised OverflowError,
    PostgreSQL a DataError, both a 500."""
    response = admin_client.post(
        reverse(changelist),
        {"action": action, "index": "0", "_selected_action": ["9" * 30]},
        follow=True,
    )
    assert response.status_code == 200
    said = [str(m) for m in response.context["messages"]]
    assert any("is not the id of a" in m for m in said), said


def test_a_good_selection_still_runs_the_action(admin_client: Any, task: Task) -> None:
    admin_client.post(
        reverse("admin:a2a_task_changelist"),
        {"action": "cancel_selected", "index": "0", "_selected_action": [str(task.pk)]},
    )
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED


def test_a_mixed_selection_changes_nothing(admin_client: Any, task: Task) -> None:
    admin_client.post(
        reverse("admin:a2a_task_changelist"),
        {"action": "cancel_selected", "index": "0", "_selected_action": [str(task.pk), "x"]},
    )
    task.refresh_from_db()
    assert task.state != TaskState.CANCELED


def test_the_selection_is_not_checked_for_a_visitor_who_is_not_staff(client: Any) -> None:
    """The login page comes first: nothing about the model is said to a stranger."""
    client.force_login(get_user_model().objects.create_user("eve"))
    response = client.post(
        reverse("admin:a2a_task_changelist"),
        {"action": "cancel_selected", "index": "0", "_selected_action": ["x"]},
    )
    assert response.status_code == 302
    assert "/login/" in response["Location"]
