"""A client's answer (``message:send`` naming its task) to a question of an agent since
disabled or awaiting approval: refused on both bindings (UNSUPPORTED_OPERATION, the
ErrorInfo's ``code`` ``agent_inactive``), nothing sent, the task still waiting for input
(docs/registry.md, Disable: it gets no new work)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from a2a.models import Task
from a2a.states import TaskState
from agent_profiles import access
from agent_profiles.models import AgentProfile, AgentStatus
from tests.a2a_face.conftest import FaceClient

pytestmark = pytest.mark.django_db

QUESTION = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "which market?"}]}


def answer(task: Task) -> dict[str, Any]:
    return {
        "message": {
            "messageId": "a1",
            "role": "ROLE_USER",
            "taskId": str(task.id),
            "parts": [{"text": "EU"}],
        },
        # What the client accepts now: kept on the task only with an answer that is sent.
        "configuration": {"acceptedOutputModes": ["text/plain"]},
    }


@pytest.mark.parametrize("status", [AgentStatus.DISABLED, AgentStatus.PENDING])
def test_an_answer_to_an_inactive_agents_question_is_refused(
    status: str, as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    task = make_task(
        user=alice, state=TaskState.INPUT_REQUIRED, remote_task_id="r-1", question=QUESTION
    )
    access.set_status(AgentProfile.objects.filter(pk=task.agent_id), status)
    events, messages = task.events.count(), task.messages.count()
    metadata = task.metadata
    rest = as_alice.post("/v1/a2a/message:send", answer(task))
    assert rest.status_code == 400, rest.content
    error = rest.json()["error"]
    info = error["details"][0]
    assert info["reason"] == "UNSUPPORTED_OPERATION"
    assert info["metadata"]["code"] == "agent_inactive"
    assert info["metadata"]["reason"] == status
    assert f"Agent '{task.agent_id}' is" in error["message"]
    rpc = as_alice.rpc("SendMessage", answer(task)).json()["error"]
    assert rpc["code"] == -32004
    assert rpc["data"][0]["metadata"]["code"] == "agent_inactive"
    task.refresh_from_db()
    assert (task.state, task.question) == (TaskState.INPUT_REQUIRED, QUESTION)
    assert task.events.count() == events  # no transition: nothing was sent
    assert task.messages.count() == messages  # the answer was not recorded as sent
    assert task.metadata == metadata  # nor what came with it (its output modes)
