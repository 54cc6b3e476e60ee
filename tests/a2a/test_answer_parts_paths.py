"""The parts of an agent's answer are checked against A2A 1.0 ``Part`` on every path that
brings one (:mod:`a2a.answer_parts`): a poll and a stream through the worker, a push, a
gateway frame. The rule itself, and the one mapping every path goes through, are in
``test_answer_parts.py``.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb
from django.utils import timezone
from google.protobuf.json_format import ParseDict

from a2a import agent_calls, creation, transports
from a2a.face.serializers import task_json
from a2a.models import Task
from a2a.states import NextAction, TaskState, Transport
from a2a.transports.base import AgentReply
from a2a.transports.shapes import read_task_answer
from a2a.worker import process_task
from gateway.db import close_pool as close_gateway_pool
from tests.a2a.helpers import fresh, push, status_update
from tests.a2a.test_answer_parts import (
    GOOD,
    NOT_BASE64,
    TWO_MEMBERS,
    agent_messages,
    snapshot,
)
from tests.gateway.conftest import db_async, open_client
from tests.support.agents import TestAgent

# --- through the worker: a poll, a stream ------------------------------------------------------


def in_flight(user: Any) -> Task:
    """A task the test agent works on, its next poll due now."""
    task = creation.create_task(
        skill_id="ce-review", input={"product": "lamp", "behaviour": "working"}, user=user
    )
    process_task(task.pk)
    task.refresh_from_db()
    assert task.remote_task_id
    assert task.next_action == NextAction.POLL
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now())
    task.refresh_from_db()
    return task


def answers_as_03_agent(monkeypatch: pytest.MonkeyPatch, artifact_parts: list[Any]) -> None:
    """From now on the agent answers a read of its task (``GetTask``, a subscribe) as an
    A2A 0.3 agent would, COMPLETED with ``artifact_parts``, read by the platform's 0.3
    reader."""
    real_transport_for = transports.transport_for

    class As03:
        def __init__(self, target: Any, **options: Any) -> None:
            self.real = real_transport_for(target, **options)

        def _answer(self, task_id: str) -> AgentReply:
            answer = {
                "kind": "task",
                "id": task_id,
                "contextId": "ctx",
                "status": {"state": "completed"},
                "artifacts": [{"artifactId": "a", "parts": artifact_parts}],
            }
            return AgentReply(task=read_task_answer(answer, v03=True, rest=False, what="answer"))

        def get_task(self, task_id: str, *, history: int = 0) -> AgentReply:
            return self._answer(task_id)

        def subscribe(self, task_id: str, *, timeout: float) -> Iterator[AgentReply]:
            yield self._answer(task_id)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

    monkeypatch.setattr(agent_calls.transports, "transport_for", As03)


def assert_failed_not_served(task: Task, problem: str) -> None:
    """The task failed as after any answer that is not A2A, naming the part; what the face
    serves of it parses as a 1.0 Task (what a2a-sdk's client does)."""
    task.refresh_from_db()
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "not_a2a")
    assert problem in task.error["message"]
    assert task.artifacts == []
    ParseDict(task_json(task), pb.Task(), ignore_unknown_fields=True)


def test_a_0_3_agents_file_bytes_that_are_not_base64_fail_the_poll_and_are_never_served(
    polled_user: Any, module_peer: TestAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 0.3 agent's ``file.bytes: "hello world"`` is read into ``raw`` as it is; checked
    after that conversion, it is refused (the task fails ``not_a2a``), never served."""
    task = in_flight(polled_user)
    answers_as_03_agent(
        monkeypatch,
        [
            {"kind": "data", "data": {"verdict": "pass"}},
            {"kind": "file", "file": {"bytes": "hello world", "name": "h.txt"}},
        ],
    )
    process_task(task.pk)
    assert_failed_not_served(task, "artifact 0 part 1")
    assert "not base64" in task.error["message"]


def test_a_stream_event_with_a_bad_part_fails_the_followed_task(
    polled_user: Any, module_peer: TestAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A subscribe's event holding a bad part breaks the stream off as any event that is
    not A2A does: the task fails ``not_a2a``, nothing of the event kept."""
    task = in_flight(polled_user)
    Task.objects.filter(pk=task.pk).update(next_action=NextAction.FOLLOW)
    answers_as_03_agent(monkeypatch, [{"kind": "text", "text": "a", "data": {"b": 1}}])
    process_task(task.pk)
    assert_failed_not_served(task, "artifact 0 part 0: has both text and data")


# --- pushes --------------------------------------------------------------------------------------


def bad_task_push() -> dict[str, Any]:
    artifacts = [{"artifactId": "a1", "parts": [GOOD, NOT_BASE64]}]
    status = {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-12-01T10:00:03Z"}
    return {
        "task": {"id": "agent-task-1", "contextId": "c", "status": status, "artifacts": artifacts}
    }


def bad_status_push() -> dict[str, Any]:
    question = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [TWO_MEMBERS]}
    return status_update("TASK_STATE_INPUT_REQUIRED", message=question)


def bad_artifact_push() -> dict[str, Any]:
    artifact = {"artifactId": "a9", "parts": [GOOD, GOOD, TWO_MEMBERS]}
    return {"artifactUpdate": {"taskId": "agent-task-1", "contextId": "c", "artifact": artifact}}


def bad_message_push() -> dict[str, Any]:
    message = {"messageId": "m1", "role": "ROLE_AGENT", "taskId": "agent-task-1"}
    return {"message": {**message, "parts": [{"text": "see file"}, NOT_BASE64]}}


def bad_03_push() -> dict[str, Any]:
    part = {"kind": "file", "file": {"bytes": "hello world", "name": "h.txt"}}
    return {
        "kind": "task",
        "id": "agent-task-1",
        "contextId": "c",
        "status": {"state": "completed"},
        "artifacts": [{"artifactId": "a", "parts": [part]}],
    }


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (bad_task_push(), "artifact 0 part 1: raw is not base64"),
        (bad_status_push(), "status message part 0: has both text and data"),
        (bad_artifact_push(), "artifact part 2: has both text and data"),
        (bad_message_push(), "message part 1: raw is not base64"),
        (bad_03_push(), "artifact 0 part 0: file.bytes is not base64"),
    ],
)
def test_a_push_with_a_bad_part_is_a_400_and_changes_nothing(
    pushed_task: Task, body: dict[str, Any], named: str
) -> None:
    """Every kind of push (a Task, a status's message, an ``artifactUpdate``, a message;
    1.0 or 0.3) is refused as a body that is not A2A is: ``400 not_a2a`` naming the part."""
    before = snapshot(pushed_task)
    response = push(pushed_task, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "not_a2a"
    assert named in error["message"]
    assert snapshot(fresh(pushed_task)) == before
    assert agent_messages(pushed_task) == 0


# --- the gateway -------------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def gateway_threads(settings: Any) -> Iterator[None]:
    """As the gateway's tests do: the consumer's database threads keep no connection past
    the test (PostgreSQL will not drop a test database with one open)."""
    from django.db import connections

    db_settings = connections.settings["default"]
    old = db_settings.get("CONN_MAX_AGE", 0)
    db_settings["CONN_MAX_AGE"] = 0
    yield
    close_gateway_pool()
    db_settings["CONN_MAX_AGE"] = old
    gc.collect()


@pytest.mark.anyio
@pytest.mark.django_db(transaction=True)
async def test_a_gateway_update_with_a_bad_part_gets_an_error_frame_and_changes_nothing(
    make_agent: Any, make_skill: Any, gateway_threads: None
) -> None:
    """A ``task.update`` holding a bad part is answered with an ``error`` frame
    (``not_a2a``, naming the part), as one with a state that is not A2A is; the task
    keeps what it had."""
    skill = await db_async(make_skill)()
    agent = await db_async(make_agent)(skills=[skill], a2a_endpoint="")
    task = await db_async(Task.objects.create)(
        skill=skill, agent=agent, input={"product": "kettle"}, transport=Transport.WEBSOCKET
    )
    client = await open_client(agent.raw_key)
    await client.send(
        {
            "type": "task.update",
            "taskId": str(task.id),
            "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a", "parts": [GOOD, NOT_BASE64]}],
        }
    )
    reply = await client.recv()
    assert (reply["type"], reply["code"]) == ("error", "not_a2a")
    assert "artifact 0 part 1: raw is not base64" in reply["message"]
    after = await db_async(Task.objects.get)(pk=task.pk)
    assert (after.state, after.artifacts, after.output) == (TaskState.SUBMITTED, [], None)
    await client.close()
