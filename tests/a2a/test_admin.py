"""The tasks admin: list, detail with conversation and history, reply form, actions."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from a2a import services
from a2a.models import Task
from a2a.states import NextAction, TaskState

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(make_skill: Any, make_agent: Any, make_user: Any) -> Task:
    skill = make_skill()
    make_agent(skills=[skill])
    task = services.create_task(skill_id=skill.id, input={"product": "lamp"}, user=make_user())
    question = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "EU or UK?"}]}
    services.apply_agent_update(
        task,
        status={"state": "TASK_STATE_INPUT_REQUIRED", "message": question},
        remote={"id": "r-1", "contextId": "c-1"},
        via="a2a",
    )
    return task


def test_the_list_shows_tasks(admin_client: Any, task: Task) -> None:
    response = admin_client.get(reverse("admin:a2a_task_changelist"))
    assert response.status_code == 200
    assert str(task.pk)[:8] in response.content.decode()


def test_the_detail_shows_question_conversation_and_history(admin_client: Any, task: Task) -> None:
    page = admin_client.get(reverse("admin:a2a_task_change", args=[task.pk])).content.decode()
    assert "EU or UK?" in page
    assert "Transition history" in page
    assert "TASK_STATE_INPUT_REQUIRED" in page
    assert "Answer the agent" in page


def test_the_detail_shows_output_validation_errors(admin_client: Any, task: Task) -> None:
    services.reply_to_task(task, text="EU")
    artifacts = [{"parts": [{"data": {"verdict": "maybe"}}]}]
    services.apply_agent_update(task, status={"state": "completed"}, artifacts=artifacts, via="x")
    page = admin_client.get(reverse("admin:a2a_task_change", args=[task.pk])).content.decode()
    assert "is not one of" in page


def test_the_reply_form_answers_the_agent(admin_client: Any, task: Task) -> None:
    url = reverse("admin:a2a_task_reply", args=[task.pk])
    assert "EU or UK?" in admin_client.get(url).content.decode()
    response = admin_client.post(url, {"text": "EU", "data": '{"market": "EU"}'})
    assert response.status_code == 302
    task.refresh_from_db()
    assert task.state == TaskState.WORKING
    assert task.outbound_message["taskId"] == "r-1"
    assert task.outbound_message["parts"] == [{"text": "EU"}, {"data": {"market": "EU"}}]


def test_the_reply_form_refuses_empty_answers(admin_client: Any, task: Task) -> None:
    url = reverse("admin:a2a_task_reply", args=[task.pk])
    response = admin_client.post(url, {"text": "", "data": ""})
    assert response.status_code == 200
    task.refresh_from_db()
    assert task.state == TaskState.INPUT_REQUIRED


def test_a_reply_to_a_task_not_waiting_changes_nothing(admin_client: Any, task: Task) -> None:
    services.cancel_task(task)
    url = reverse("admin:a2a_task_reply", args=[task.pk])
    admin_client.post(url, {"text": "EU"})
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED


def test_cancel_and_retry_actions(admin_client: Any, task: Task) -> None:
    changelist = reverse("admin:a2a_task_changelist")
    admin_client.post(changelist, {"action": "cancel_selected", "_selected_action": [task.pk]})
    task.refresh_from_db()
    assert (task.state, task.next_action) == (TaskState.CANCELED, NextAction.CANCEL)
    # a canceled task cannot be retried: a warning, nothing changes
    admin_client.post(changelist, {"action": "retry_selected", "_selected_action": [task.pk]})
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED
    Task.objects.filter(pk=task.pk).update(state=TaskState.FAILED)
    admin_client.post(changelist, {"action": "retry_selected", "_selected_action": [task.pk]})
    task.refresh_from_db()
    assert task.state == TaskState.SUBMITTED
