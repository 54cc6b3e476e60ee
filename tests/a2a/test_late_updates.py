"""News about a task that already ended keeps the conversation and the agent's ids, never
its artifacts or status message: what GET serves of a finished task is what its end was
judged on (a COMPLETED's output was checked against the skill's ``output_schema``)."""

from __future__ import annotations

from typing import Any

import pytest

from a2a import agent_updates
from a2a.models import Direction, Task, TaskMessage
from a2a.states import Transport
from gateway import sessions
from tests.a2a.helpers import done, fresh, push, status_update
from tests.a2a_face.conftest import FaceClient

pytestmark = pytest.mark.django_db

GOOD = [{"artifactId": "a", "parts": [{"data": {"verdict": "pass"}}]}]
# Does not fit the skill's output_schema: never validated, must never be served.
BAD = [{"artifactId": "b", "parts": [{"data": {"verdict": "maybe", "extra": 1}}]}]
LATE_NOTE = {"messageId": "late-1", "role": "ROLE_AGENT", "parts": [{"text": "it broke"}]}


def completed(task: Task) -> Task:
    """The agent completed ``task`` with a valid output."""
    agent_updates.apply_agent_update(
        task, status={"state": "TASK_STATE_COMPLETED"}, artifacts=GOOD, via="a2a"
    )
    assert (task.state, task.output) == ("TASK_STATE_COMPLETED", {"verdict": "pass"})
    return task


def test_a_late_failure_does_not_replace_a_completed_tasks_artifacts(task: Task) -> None:
    """A late FAILED with artifacts and a status message, after a valid COMPLETED: the
    task keeps its validated artifacts and final status; the message joins the
    conversation and the agent's task id is still taken in."""
    completed(task)
    agent_updates.apply_agent_update(
        task,
        status={"state": "TASK_STATE_FAILED", "message": LATE_NOTE},
        artifacts=BAD,
        remote={"id": "agent-task-7", "contextId": "agent-ctx-7"},
        via="a2a",
    )
    task = fresh(task)
    assert (task.state, task.output, task.artifacts) == (
        "TASK_STATE_COMPLETED",
        {"verdict": "pass"},
        GOOD,
    )
    assert task.status_message is None
    assert (task.remote_task_id, task.remote_context_id) == ("agent-task-7", "agent-ctx-7")
    kept = TaskMessage.objects.filter(task=task, direction=Direction.FROM_AGENT)
    assert [m.message_id for m in kept] == ["late-1"]


def test_a_late_gateway_update_does_not_change_what_get_serves(
    task: Task, user: Any, settings: Any
) -> None:
    """Through the gateway's ``task.update`` and the A2A face's GET: a duplicated
    COMPLETED frame with other (never validated) artifacts after the first leaves the
    served artifacts and status the valid ones. (A late end of another state is refused
    by the gateway itself, ``invalid_state``.)"""
    settings.A2A_FACE_DB_THREADS = 0  # the face reads in this test's transaction
    settings.A2A_FACE_AUTH_CACHE_SECONDS = 0
    Task.objects.filter(pk=task.pk).update(transport=Transport.WEBSOCKET)
    sessions.apply_update(task.agent_id, str(task.pk), {"state": "TASK_STATE_COMPLETED"}, GOOD)
    late = {"state": "TASK_STATE_COMPLETED", "message": LATE_NOTE}
    sessions.apply_update(task.agent_id, str(task.pk), late, BAD)
    task = fresh(task)
    assert (task.state, task.output, task.artifacts) == (
        "TASK_STATE_COMPLETED",
        {"verdict": "pass"},
        GOOD,
    )
    body = FaceClient(user.raw_token, check=False).get(f"/v1/a2a/tasks/{task.pk}").json()
    assert body["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "message" not in body["status"]
    assert [a["artifactId"] for a in body["artifacts"]] == ["a"]


def test_an_update_racing_a_persons_cancel_leaves_the_canceled_task_bare(task: Task) -> None:
    """The agent's COMPLETED was read with the task still in flight, but a person
    canceled it first: the cancel stands and the agent's artifacts are not written onto
    the canceled task (its id still is)."""
    agent_updates.apply_agent_update(task, status={"state": "TASK_STATE_WORKING"}, via="a2a")
    Task.objects.get(pk=task.pk).cancel("a person canceled it")
    agent_updates.apply_agent_update(  # ``task`` still says WORKING
        task,
        status={"state": "TASK_STATE_COMPLETED", "message": LATE_NOTE},
        artifacts=GOOD,
        remote={"id": "agent-task-8"},
        via="a2a",
    )
    task = fresh(task)
    assert (task.state, task.artifacts, task.status_message) == ("TASK_STATE_CANCELED", [], None)
    assert task.remote_task_id == "agent-task-8"


def test_a_late_poll_answer_does_not_replace_the_artifacts(task: Task) -> None:
    """A poll's answer (a whole Task) that comes after the end: ignored but for its ids."""
    completed(task)
    agent_updates.apply_agent_reply(
        task,
        task_json={
            "id": "agent-task-9",
            "status": {"state": "TASK_STATE_COMPLETED", "message": LATE_NOTE},
            "artifacts": BAD,
        },
        message=None,
        via="a2a",
    )
    task = fresh(task)
    assert (task.artifacts, task.status_message, task.remote_task_id) == (
        GOOD,
        None,
        "agent-task-9",
    )


@pytest.mark.django_db(transaction=True)
def test_late_pushes_leave_a_completed_tasks_artifacts(pushed_task: Task) -> None:
    """The push webhook already refuses a late end other than the task's (409) and takes
    a repeated COMPLETED as a repeat: neither rewrites the artifacts."""
    assert push(pushed_task, done({"verdict": "pass"})).status_code == 200
    again = done({"verdict": "maybe", "extra": 1})
    assert push(pushed_task, again).status_code == 200
    failed = push(pushed_task, status_update("TASK_STATE_FAILED", message=LATE_NOTE))
    assert (failed.status_code, failed.json()["error"]["code"]) == (409, "task_finished")
    task = fresh(pushed_task)
    assert (task.state, task.output) == ("TASK_STATE_COMPLETED", {"verdict": "pass"})
    assert task.artifacts == [{"artifactId": "a1", "parts": [{"data": {"verdict": "pass"}}]}]
