"""``POST /api/tasks/{id}/reply`` with ``questionId``: a reply written for a question the
agent no longer asks (answered elsewhere, and another asked) is refused ``409
question_changed``, showing the question asked now; nothing is sent. Without it, a reply
answers whatever the task asks, as before."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from a2a import services
from a2a.models import Task
from a2a.states import TaskState
from tests.a2a.test_console_defects import ask, sent_answers

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(asked_task: Task) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {asked_task.created_by.raw_token}")
    return client


def test_a_reply_to_the_question_asked_now_goes_through(api: APIClient, asked_task: Task) -> None:
    path = f"/api/tasks/{asked_task.pk}/reply"
    answer = api.post(path, {"text": "EU", "questionId": "q1"}, format="json")
    assert answer.status_code == 200, answer.json()
    assert answer.json()["state"] == TaskState.WORKING


def test_a_reply_to_an_earlier_question_is_refused_and_nothing_is_sent(
    api: APIClient, asked_task: Task
) -> None:
    # Someone answered "EU or UK?" in the console; the agent then asked another question.
    services.reply_to_task(asked_task, text="EU", by="console")
    ask(asked_task, "Which voltage?", "q2")
    sent = len(sent_answers(asked_task))
    stale = api.post(
        f"/api/tasks/{asked_task.pk}/reply", {"text": "UK", "questionId": "q1"}, format="json"
    )
    assert stale.status_code == 409
    error = stale.json()["error"]
    assert error["code"] == "question_changed"
    assert error["details"]["question"]["messageId"] == "q2"
    asked_task.refresh_from_db()
    assert asked_task.state == TaskState.INPUT_REQUIRED
    assert len(sent_answers(asked_task)) == sent


def test_a_reply_to_a_question_answered_meanwhile_is_refused(
    api: APIClient, asked_task: Task
) -> None:
    services.reply_to_task(asked_task, text="EU", by="console")
    stale = api.post(
        f"/api/tasks/{asked_task.pk}/reply", {"text": "UK", "questionId": "q1"}, format="json"
    )
    assert stale.status_code == 409
    assert stale.json()["error"]["code"] == "invalid_state"  # it waits for nobody now


@pytest.mark.parametrize("question_id", ["", 7, None, "x" * 201])
def test_a_question_id_that_is_no_id_is_a_validation_error(
    api: APIClient, asked_task: Task, question_id: Any
) -> None:
    bad = api.post(
        f"/api/tasks/{asked_task.pk}/reply",
        {"text": "EU", "questionId": question_id},
        format="json",
    )
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "validation_error"
    asked_task.refresh_from_db()
    assert asked_task.state == TaskState.INPUT_REQUIRED


def test_without_a_question_id_a_reply_answers_what_is_asked(
    api: APIClient, asked_task: Task
) -> None:
    services.reply_to_task(asked_task, text="EU", by="console")
    ask(asked_task, "Which voltage?", "q2")
    answer = api.post(f"/api/tasks/{asked_task.pk}/reply", {"text": "230 V"}, format="json")
    assert answer.status_code == 200
