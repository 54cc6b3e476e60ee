"""Pushes from an A2A 0.3 agent (a2a-sdk 0.3's push sender posts the pydantic Task,
dumped: ``kind`` tags, ``role: "agent"``, ``{"kind": "data", ...}`` parts) are kept in
1.0 shapes, as a poll of the same agent keeps them: nothing past the transports sees a
0.3 spelling (:mod:`a2a.transports.shapes`). Through the real ASGI webhook."""

from __future__ import annotations

from typing import Any

import pytest

from a2a import answer_parts, creation
from a2a.agent_updates import apply_agent_reply
from a2a.models import Direction, Task, TaskMessage
from a2a.states import TaskState
from a2a.transports import shapes
from tests.a2a.helpers import fresh, push

T2, T3 = "2026-12-01T10:00:02+00:00", "2026-12-01T10:00:03+00:00"

QUESTION_03 = {
    "kind": "message",
    "role": "agent",
    "messageId": "q",
    "taskId": "agent-task-1",
    "contextId": "c",
    "parts": [{"kind": "text", "text": "Which market?"}, {"kind": "data", "data": {"m": ["EU"]}}],
}
ARTIFACTS_03 = [
    {"artifactId": "a", "parts": [{"kind": "data", "data": {"verdict": "pass"}}]},
    {
        "artifactId": "report",
        "parts": [
            {
                "kind": "file",
                "file": {"uri": "https://agent.example/r.pdf", "mimeType": "application/pdf"},
            }
        ],
    },
]


def task03(state: str, ts: str, **fields: Any) -> dict[str, Any]:
    """The agent's task ``agent-task-1`` as a2a-sdk 0.3 dumps it for a push."""
    status = {"state": state, "timestamp": ts}
    if "message" in fields:
        status["message"] = fields.pop("message")
    return {"kind": "task", "id": "agent-task-1", "contextId": "c", "status": status, **fields}


@pytest.fixture
def polled(pushed_task: Task, make_user: Any) -> Task:
    """A twin of ``pushed_task``, followed by polling instead: what a poll stores."""
    twin = creation.create_task(
        skill_id=pushed_task.skill_id, input={"product": "lamp"}, user=make_user("bob")
    )
    Task.objects.filter(pk=twin.pk).update(attempts=1, remote_task_id="agent-task-1")
    twin.refresh_from_db()
    return twin


def poll(task: Task, body: dict[str, Any]) -> Task:
    """``task`` polled, the agent answering GetTask with the 0.3 Task ``body`` (read as the
    JSON-RPC 0.3 binding reads it, then applied as every poll is)."""
    remote = shapes.read_task_answer(body, v03=True, rest=False, what="GetTask answer")
    apply_agent_reply(task, task_json=remote, message=None, via="a2a")
    return fresh(task)


def kept(task: Task) -> dict[str, Any]:
    task = fresh(task)
    fields = ("state", "question", "status_message", "artifacts", "output")
    return {name: getattr(task, name) for name in fields}


def assert_no_03_spelling(value: Any) -> None:
    """No ``kind`` tag and no lowercase role anywhere in what was kept."""
    if isinstance(value, dict):
        assert "kind" not in value, value
        assert value.get("role") not in ("agent", "user"), value
        for item in value.values():
            assert_no_03_spelling(item)
    elif isinstance(value, list):
        for item in value:
            assert_no_03_spelling(item)


def test_a_pushed_03_question_is_kept_as_a_poll_keeps_it(pushed_task: Task, polled: Task) -> None:
    body = task03("input-required", T2, message=QUESTION_03)
    response = push(pushed_task, body)
    assert response.status_code == 200, response.text
    pushed = kept(pushed_task)
    assert pushed["state"] == TaskState.INPUT_REQUIRED
    assert pushed["question"]["role"] == "ROLE_AGENT"
    assert pushed == kept(poll(polled, body))
    assert_no_03_spelling(pushed)


def test_pushed_03_artifacts_are_kept_as_a_poll_keeps_them(pushed_task: Task, polled: Task) -> None:
    body = task03("completed", T3, artifacts=ARTIFACTS_03)
    assert push(pushed_task, body).status_code == 200
    pushed = kept(pushed_task)
    assert (pushed["state"], pushed["output"]) == (TaskState.COMPLETED, {"verdict": "pass"})
    assert pushed["artifacts"][1]["parts"] == [
        {"url": "https://agent.example/r.pdf", "mediaType": "application/pdf"}
    ]
    assert pushed == kept(poll(polled, body))
    assert_no_03_spelling(pushed)


def test_a_bare_03_task_without_its_kind_is_read_as_03(pushed_task: Task, polled: Task) -> None:
    body = task03("input-required", T2, message=QUESTION_03)
    del body["kind"]  # told by its lowercase role and kind-tagged parts
    assert push(pushed_task, body).status_code == 200
    pushed = kept(pushed_task)
    assert pushed["question"]["role"] == "ROLE_AGENT"
    assert pushed == kept(poll(polled, body))


def test_a_pushed_03_status_update_asks_as_a_poll_does(pushed_task: Task, polled: Task) -> None:
    event = {
        "kind": "status-update",
        "taskId": "agent-task-1",
        "contextId": "c",
        "final": False,
        "status": {"state": "input-required", "timestamp": T2, "message": QUESTION_03},
    }
    assert push(pushed_task, event).status_code == 200
    pushed = kept(pushed_task)
    assert pushed["state"] == TaskState.INPUT_REQUIRED
    assert pushed == kept(poll(polled, task03("input-required", T2, message=QUESTION_03)))
    assert_no_03_spelling(pushed)


def test_a_pushed_03_artifact_update_is_kept_as_a_poll_keeps_it(
    pushed_task: Task, polled: Task
) -> None:
    for artifact in ARTIFACTS_03:
        event = {
            "kind": "artifact-update",
            "taskId": "agent-task-1",
            "contextId": "c",
            "artifact": artifact,
        }
        assert push(pushed_task, event).status_code == 200
    completed = {
        "kind": "status-update",
        "taskId": "agent-task-1",
        "contextId": "c",
        "final": True,
        "status": {"state": "completed", "timestamp": T3},
    }
    assert push(pushed_task, completed).status_code == 200
    pushed = kept(pushed_task)
    assert (pushed["state"], pushed["output"]) == (TaskState.COMPLETED, {"verdict": "pass"})
    assert pushed == kept(poll(polled, task03("completed", T3, artifacts=ARTIFACTS_03)))
    assert_no_03_spelling(pushed)


def test_a_pushed_03_message_joins_the_conversation_in_10_shape(pushed_task: Task) -> None:
    message = {**QUESTION_03, "messageId": "m1"}
    assert push(pushed_task, message).status_code == 200
    row = TaskMessage.objects.get(task=pushed_task, direction=Direction.FROM_AGENT)
    expected = answer_parts.canonical_message(shapes.message_from_03(message, rest=False))
    assert row.message == expected
    assert row.message["role"] == "ROLE_AGENT"
    assert_no_03_spelling(row.message)


def test_a_03_push_with_a_bad_state_is_still_refused(pushed_task: Task) -> None:
    response = push(pushed_task, task03("napping", T2, message=QUESTION_03))
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "not_a2a"
    assert fresh(pushed_task).state == TaskState.SUBMITTED


@pytest.mark.parametrize(
    "body",
    [
        {"status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": {"role": ["agent"]}}},
        {"status": {"state": "TASK_STATE_WORKING"}, "history": [{"role": {"a": 1}}]},
        {
            "status": {"state": "TASK_STATE_WORKING"},
            "artifacts": [{"artifactId": "a", "role": [1]}],
        },
    ],
    ids=["status-message", "history", "artifact"],
)
def test_a_bare_task_whose_role_is_not_a_string_is_no_500(
    pushed_task: Task, body: dict[str, Any]
) -> None:
    """Read before anything is checked (is it 0.3?): a list or object as a role raised
    TypeError (unhashable) there, a 500 for any caller of the webhook."""
    response = push(pushed_task, {"id": "agent-task-1", **body})
    assert response.status_code in (200, 400), response.text
