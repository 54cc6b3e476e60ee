"""A COMPLETED that carries no artifacts is judged on those the agent reported since its
last question, never on the question's own artifacts (:func:`a2a.agent_updates.
reported_artifacts`).

Why: LangGraph's server asks with an empty status message and an ``Interrupt`` artifact
(the value given to ``interrupt()``), stored with the question; after a person's reply
it completes with no artifact, the result in the status message or the task's history.
Judged on the stored artifacts, the output was the question's ``{"id", "value"}`` and the
task failed ``output_invalid`` although the agent's result was valid. The rule the
fallback was made for stays: an a2a-sdk ``TaskUpdater`` reports its artifact with a
WORKING, then completes bare (``tests/gateway/test_bare_completed.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

from a2a.agent_updates import apply_agent_reply
from a2a.models import Task
from a2a.services import reply_to_task
from a2a.states import NextAction, TaskState
from tests.a2a.helpers import fresh, push, status_update

INTERRUPT = {
    "artifactId": "interrupt-1",
    "name": "Interrupt",
    "description": "Agent requires input to continue",
    "parts": [{"data": {"id": "i-1", "value": "Which market: EU or UK?"}}],
}
RESULT = {"role": "ROLE_AGENT", "messageId": "m-2", "parts": [{"data": {"verdict": "pass"}}]}
SAID = {
    "role": "ROLE_AGENT",
    "messageId": "m-d",
    "parts": [{"text": "Task completed successfully"}],
}
REPORTED = {"artifactId": "result", "parts": [{"data": {"verdict": "pass"}}]}
AGENT_TASK = "agent-task-1"


def answer(state: str, **extra: Any) -> dict[str, Any]:
    """The agent task ``agent-task-1`` in ``state`` (a poll's answer)."""
    return {"id": AGENT_TASK, "status": {"state": f"TASK_STATE_{state}"}, **extra}


def apply(task: Task, state: str, **extra: Any) -> Task:
    apply_agent_reply(task, task_json=answer(state, **extra), message=None, via="a2a")
    return fresh(task)


def asked_and_answered(task: Task, **question: Any) -> Task:
    """``task`` followed at the agent, asked a question (LangGraph's by default: an empty
    status and an ``Interrupt`` artifact) and answered by a person: WORKING again."""
    Task.objects.filter(pk=task.pk).update(
        state=TaskState.WORKING, remote_task_id=AGENT_TASK, next_action=NextAction.POLL
    )
    task = apply(fresh(task), "INPUT_REQUIRED", **(question or {"artifacts": [INTERRUPT]}))
    assert task.state == TaskState.INPUT_REQUIRED
    reply_to_task(task, text="EU")
    task = fresh(task)
    assert task.state == TaskState.WORKING
    return task


@pytest.mark.django_db
@pytest.mark.parametrize("where", ["history", "status message"])
def test_a_bare_completed_after_a_question_takes_the_result_from_message_or_history(
    task: Task, where: str
) -> None:
    """LangGraph's order: the question in an Interrupt artifact; after the reply the result
    in the history (GetTask, ListTasks; the status saying "Task completed successfully",
    text, never the output) or in the completing status message. The question's artifact
    is neither the output nor kept as the completed task's."""
    task = asked_and_answered(task)
    done = answer("COMPLETED")
    if where == "history":
        done["status"]["message"] = SAID
        done["history"] = [{"role": "ROLE_USER", "messageId": "m-1", "parts": [{"text": "EU"}]}]
        done["history"].append(RESULT)
    else:
        done["status"]["message"] = RESULT
    apply_agent_reply(task, task_json=done, message=None, via="a2a")
    task = fresh(task)
    assert (task.state, task.error) == (TaskState.COMPLETED, None)
    assert task.output == {"verdict": "pass"}
    assert task.artifacts == []


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["a2a", "stream", "websocket"])
def test_artifacts_reported_after_the_reply_complete_a_bare_completed(task: Task, via: str) -> None:
    """a2a-sdk's TaskUpdater order after a question: the result with a WORKING, then a
    bare COMPLETED. It is judged on (and keeps) that result alone, not merged with the
    question's artifact (whose ``id``/``value`` a strict schema refuses)."""
    task = asked_and_answered(task)
    working = answer("WORKING", artifacts=[INTERRUPT, REPORTED])
    apply_agent_reply(task, task_json=working, message=None, via=via)
    task = fresh(task)
    apply_agent_reply(task, task_json=answer("COMPLETED"), message=None, via=via)
    task = fresh(task)
    assert (task.state, task.output, task.error) == (
        TaskState.COMPLETED,
        {"verdict": "pass"},
        None,
    )
    assert task.artifacts == [REPORTED]


@pytest.mark.django_db
def test_a_result_reported_before_the_question_is_still_the_last_resort(task: Task) -> None:
    """An agent that made its result, asked a person to confirm, then completed with
    nothing (no artifact, message or history: a gateway frame): with no output anywhere
    else, the artifacts held at the reply are judged, not an empty output."""
    Task.objects.filter(pk=task.pk).update(
        state=TaskState.WORKING, remote_task_id=AGENT_TASK, next_action=NextAction.POLL
    )
    task = apply(fresh(task), "WORKING", artifacts=[REPORTED])
    confirm = {"role": "ROLE_AGENT", "messageId": "q-1", "parts": [{"text": "Send it?"}]}
    task = asked_and_answered(
        task, status={"state": "TASK_STATE_INPUT_REQUIRED", "message": confirm}
    )
    assert task.artifacts == [REPORTED]
    task = apply(task, "COMPLETED")
    assert (task.state, task.output, task.artifacts) == (
        TaskState.COMPLETED,
        {"verdict": "pass"},
        [REPORTED],
    )


@pytest.mark.django_db
def test_an_auth_question_the_agent_leaves_by_itself_is_not_its_result(task: Task) -> None:
    """A2A 1.0, 7.6: an agent goes on from AUTH_REQUIRED by itself once the person signed
    in elsewhere. The artifact it asked with (the sign-in) is a question's too: the bare
    COMPLETED after it takes the result in its status message."""
    Task.objects.filter(pk=task.pk).update(
        state=TaskState.WORKING, remote_task_id=AGENT_TASK, next_action=NextAction.POLL
    )
    sign_in = {"artifactId": "auth", "parts": [{"data": {"signIn": "https://idp/x"}}]}
    task = apply(fresh(task), "AUTH_REQUIRED", artifacts=[sign_in])
    assert task.state == TaskState.AUTH_REQUIRED
    task = apply(task, "WORKING")
    assert task.state == TaskState.WORKING
    done = answer("COMPLETED")
    done["status"]["message"] = RESULT
    apply_agent_reply(task, task_json=done, message=None, via="a2a")
    task = fresh(task)
    assert (task.state, task.output, task.error) == (
        TaskState.COMPLETED,
        {"verdict": "pass"},
        None,
    )


# --- pushes ------------------------------------------------------------------------------------


def pushed_question(task: Task) -> Task:
    """``task`` (the ``pushed_task`` fixture) asked LangGraph's way by a push, answered."""
    question = {"id": AGENT_TASK, "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}
    response = push(task, {"task": {**question, "artifacts": [INTERRUPT]}})
    assert response.status_code == 200, response.text
    reply_to_task(fresh(task), text="EU")
    task = fresh(task)
    assert task.state == TaskState.WORKING
    return task


def test_a_pushed_bare_completed_after_a_question_reads_the_task_back(pushed_task: Task) -> None:
    """A push carries no history: with only the question's artifact stored, the pushed
    bare COMPLETED is read back with GetTask (where the result is), not judged on the
    question and failed."""
    task = pushed_question(pushed_task)
    response = push(task, status_update("TASK_STATE_COMPLETED", "2026-12-01T10:00:05Z"))
    assert response.status_code == 202, response.text
    assert response.json() == {"state": TaskState.WORKING, "readBack": True}
    task = fresh(task)
    assert (task.state, task.error) == (TaskState.WORKING, None)
    assert task.next_action == NextAction.POLL


def test_an_artifact_pushed_after_the_reply_completes_a_pushed_bare_completed(
    pushed_task: Task,
) -> None:
    """An ``artifactUpdate`` after the reply joins the question's artifact in the task's
    artifacts; the bare COMPLETED is judged on the new one alone."""
    task = pushed_question(pushed_task)
    update = {"artifactUpdate": {"taskId": AGENT_TASK, "artifact": REPORTED}}
    assert push(task, update).status_code == 200
    assert fresh(task).artifacts == [INTERRUPT, REPORTED]
    response = push(task, status_update("TASK_STATE_COMPLETED", "2026-12-01T10:00:05Z"))
    assert response.status_code == 200, response.text
    task = fresh(task)
    assert (task.state, task.output, task.artifacts) == (
        TaskState.COMPLETED,
        {"verdict": "pass"},
        [REPORTED],
    )
