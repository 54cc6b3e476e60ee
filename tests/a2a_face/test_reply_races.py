"""A reply through the face reads its task, then answers it under the row lock
(:func:`a2a.reply_checks.still_asking`). Whatever another answer wrote meanwhile (its
record of the question it answered, a face reply's ids of the caller's tasks) stays: the
reply's transition writes the metadata of the locked row, with the face's additions."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from a2a import services
from a2a.agent_updates import apply_agent_update
from a2a.face.ids import REFERENCES
from a2a.models import Task
from a2a.question_memory import ANSWERED
from a2a.states import TaskState
from tests.a2a_face.conftest import FaceClient

pytestmark = pytest.mark.django_db

Q1 = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "Which market?"}]}
Q2 = {"messageId": "q2", "role": "ROLE_AGENT", "parts": [{"text": "Which voltage?"}]}


def face_reply(client: FaceClient, task: Task) -> None:
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": {"answer": "230V"}}],
        "taskId": str(task.id),
        "contextId": task.context_id,
    }
    body = {"message": message, "configuration": {"returnImmediately": True}}
    response = client.post("/v1/a2a/message:send", body)
    assert response.status_code == 200, response.content


def meanwhile(monkeypatch: pytest.MonkeyPatch, act: Callable[[Task], None]) -> None:
    """``act`` runs on the task between the face's read of it and its reply's lock."""
    real = services.reply_to_task

    def racing(task: Task, **kwargs: Any) -> Task:
        monkeypatch.setattr(services, "reply_to_task", real)
        act(Task.objects.get(pk=task.pk))
        return real(task, **kwargs)

    monkeypatch.setattr(services, "reply_to_task", racing)


def test_another_answers_record_of_its_question_stays(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task], monkeypatch: Any
) -> None:
    task = make_task(alice, remote_task_id="remote-2")
    task.require_input(Q1)

    def a_person_answers_and_the_agent_asks_again(row: Task) -> None:
        services.reply_to_task(row, text="EU", by=alice)
        Task.objects.get(pk=row.pk).require_input(Q2)

    meanwhile(monkeypatch, a_person_answers_and_the_agent_asks_again)
    face_reply(as_alice, task)
    task.refresh_from_db()
    assert task.metadata[ANSWERED] == ["q1", "q2"]
    # What the record is for: q1 reported again (stale news) is not asked anew.
    apply_agent_update(
        task, status={"state": "TASK_STATE_INPUT_REQUIRED", "message": Q1}, via="poll"
    )
    task.refresh_from_db()
    assert task.state == TaskState.WORKING


def test_an_earlier_face_replys_ids_stay(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task], monkeypatch: Any
) -> None:
    earlier = make_task(alice, remote_task_id="agent-own-77")
    task = make_task(alice, remote_task_id="remote-2")
    task.require_input(Q1)
    mapping = {"agent-own-77": str(earlier.id)}

    def an_earlier_reply_names_a_task_and_the_agent_asks_again(row: Task) -> None:
        first = {
            "messageId": "ab12cd34ef56ab78:first",
            "role": "ROLE_USER",
            "parts": [{"data": {"answer": "EU"}}],
            "referenceTaskIds": ["agent-own-77"],
        }
        services.reply_to_task(
            row, message=first, by=alice, metadata_update=lambda m: {**m, REFERENCES: mapping}
        )
        Task.objects.get(pk=row.pk).require_input(Q2)

    meanwhile(monkeypatch, an_earlier_reply_names_a_task_and_the_agent_asks_again)
    face_reply(as_alice, task)
    assert Task.objects.get(pk=task.pk).metadata[REFERENCES] == mapping
    history = as_alice.get(f"/v1/a2a/tasks/{task.id}").json()["history"]
    assert [m["referenceTaskIds"] for m in history if "referenceTaskIds" in m] == [
        [str(earlier.id)]
    ]
