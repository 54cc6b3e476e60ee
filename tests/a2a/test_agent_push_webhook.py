"""The webhook agents push to, through the real ASGI application: ties to the platform
task and the agent's task, order safety, and bad bodies that change nothing (its
addresses and tokens: test_agent_push_tokens.py)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
import pytest

from a2a import agent_push, agent_push_body
from a2a.models import Direction, Task, TaskEvent, TaskMessage
from a2a.services import cancel_task
from a2a.states import NextAction, TaskState
from platform_site.asgi import application
from tests.a2a.helpers import T3, done, fresh, push, status_update

T1, T2 = "2026-12-01T10:00:01Z", "2026-12-01T10:00:02Z"


@pytest.fixture
def task(pushed_task: Task) -> Task:
    return pushed_task


def test_a_status_push_moves_the_task(task: Task) -> None:
    response = push(task, status_update("TASK_STATE_WORKING", T1))
    assert response.status_code == 200, response.text
    assert response.json() == {"state": TaskState.WORKING}
    assert fresh(task).state == TaskState.WORKING


def test_a_completed_push_has_its_output_validated(task: Task) -> None:
    assert push(task, done({"verdict": "pass"})).status_code == 200
    task = fresh(task)
    assert task.state == TaskState.COMPLETED
    assert task.output == {"verdict": "pass"}


def test_an_invalid_output_fails_the_task(task: Task) -> None:
    assert push(task, done({"verdict": "maybe"})).status_code == 200
    task = fresh(task)
    assert task.state == TaskState.FAILED
    assert task.error["code"] == "output_invalid"


def test_pushed_artifacts_complete_a_later_bare_status(task: Task) -> None:
    chunk = {"artifactId": "a1", "parts": [{"data": {"verdict": "pass"}}]}
    artifact = {"artifactUpdate": {"taskId": "agent-task-1", "artifact": chunk}}
    assert push(task, artifact).status_code == 200
    assert push(task, status_update("TASK_STATE_COMPLETED", T2)).status_code == 200
    task = fresh(task)
    assert task.state == TaskState.COMPLETED
    assert task.output == {"verdict": "pass"}


def test_a_completed_without_artifacts_is_read_back_once(task: Task) -> None:
    response = push(task, status_update("TASK_STATE_COMPLETED", T2))
    assert response.status_code == 202
    assert response.json() == {"state": TaskState.SUBMITTED, "readBack": True}
    task = fresh(task)
    assert task.state == TaskState.SUBMITTED  # until the GetTask says what it made
    assert task.next_action == NextAction.POLL


def test_a_push_before_the_send_answered_ties_the_agents_task(task: Task) -> None:
    Task.objects.filter(pk=task.pk).update(remote_task_id="")
    assert push(task, status_update("TASK_STATE_WORKING", T1)).status_code == 200
    assert fresh(task).remote_task_id == "agent-task-1"


def test_a_push_for_another_agent_task_is_refused(task: Task) -> None:
    body = status_update("TASK_STATE_WORKING")
    body["statusUpdate"]["taskId"] = "someone-elses"
    response = push(task, body)
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "wrong_task"
    assert fresh(task).state == TaskState.SUBMITTED


def test_duplicated_pushes_change_the_task_once(task: Task) -> None:
    for _ in range(3):
        assert push(task, status_update("TASK_STATE_WORKING", T1)).status_code == 200
    assert TaskEvent.objects.filter(task=task, to_state=TaskState.WORKING).count() == 1


def test_an_older_status_never_overwrites_a_newer_one(task: Task) -> None:
    question = {"messageId": "q", "role": "ROLE_AGENT", "parts": [{"text": "Which market?"}]}
    asked = push(task, status_update("TASK_STATE_INPUT_REQUIRED", T2, message=question))
    assert asked.status_code == 200
    late = push(task, status_update("TASK_STATE_WORKING", T1))
    assert late.status_code == 409
    assert late.json()["error"]["code"] == "stale_update"
    assert fresh(task).state == TaskState.INPUT_REQUIRED


def test_a_working_push_without_a_time_does_not_undo_a_question(task: Task) -> None:
    push(task, status_update("TASK_STATE_INPUT_REQUIRED"))
    assert push(task, status_update("TASK_STATE_WORKING")).status_code == 409
    assert fresh(task).state == TaskState.INPUT_REQUIRED


def test_a_finished_task_takes_no_push(task: Task) -> None:
    push(task, done({"verdict": "pass"}))
    again = push(task, status_update("TASK_STATE_FAILED", T3))
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "task_finished"
    assert fresh(task).state == TaskState.COMPLETED


def test_a_repeated_end_is_a_harmless_repeat_and_changes_nothing(task: Task) -> None:
    """A duplicated COMPLETED, or one whose end a safety-net poll noticed first, is not an
    error for the agent (its SDK would log it as a failed push); nothing is written."""
    assert push(task, done({"verdict": "pass"})).status_code == 200
    ended = fresh(task)
    events = TaskEvent.objects.filter(task=task).count()
    for body in (done({"verdict": "other"}), status_update("TASK_STATE_COMPLETED", T3)):
        again = push(task, body)
        assert (again.status_code, again.json()) == (200, {"state": TaskState.COMPLETED})
    after = fresh(task)
    assert (after.output, after.updated_at) == (ended.output, ended.updated_at)
    assert TaskEvent.objects.filter(task=task).count() == events


def test_work_pushed_late_after_the_end_is_harmless_and_changes_nothing(task: Task) -> None:
    """An SDK's sender pushes a task's events in turn: a WORKING stamped before the task
    ended (canceled or timed out by the platform meanwhile) arrives after the end. It
    changes nothing and is no error; one stamped after the end, or without a time, is."""
    cancel_task(task, reason="no longer needed")
    ended = fresh(task)
    events = TaskEvent.objects.filter(task=task).count()
    before_the_end = (ended.state_changed_at - timedelta(seconds=1)).isoformat()
    for state in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED"):
        late = push(task, status_update(state, before_the_end))
        assert (late.status_code, late.json()) == (200, {"state": TaskState.CANCELED})
    after_the_end = (ended.state_changed_at + timedelta(seconds=1)).isoformat()
    for body in (
        status_update("TASK_STATE_WORKING", after_the_end),
        status_update("TASK_STATE_WORKING"),
        status_update("TASK_STATE_COMPLETED", before_the_end),  # another end: a conflict
    ):
        refused = push(task, body)
        assert (refused.status_code, refused.json()["error"]["code"]) == (409, "task_finished")
    after = fresh(task)
    assert (after.state, after.updated_at) == (TaskState.CANCELED, ended.updated_at)
    assert TaskEvent.objects.filter(task=task).count() == events


def test_a_repeated_end_for_another_agent_task_is_still_refused(task: Task) -> None:
    push(task, done({"verdict": "pass"}))
    body = status_update("TASK_STATE_COMPLETED", T3)
    body["statusUpdate"]["taskId"] = "someone-elses"
    refused = push(task, body)
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "wrong_task")


def artifact(data: Any, agent_task: str = "agent-task-1") -> dict[str, Any]:
    part = {"artifactId": "a9", "parts": [{"data": data}]}
    return {"artifactUpdate": {"taskId": agent_task, "contextId": "c", "artifact": part}}


def test_an_artifact_push_is_refused_as_a_status_is_and_changes_nothing(task: Task) -> None:
    # artifacts and messages skip the plain pre-read on SQLite: the locked read refuses them
    wrong = push(task, artifact({"n": 1}, agent_task="someone-else"))
    assert (wrong.status_code, wrong.json()["error"]["code"]) == (409, "wrong_task")
    Task.objects.filter(pk=task.pk).update(attempts=2)
    stale = push(task, artifact({"n": 1}), attempt=1)
    assert (stale.status_code, stale.json()["error"]["code"]) == (409, "stale_update")
    Task.objects.filter(pk=task.pk).update(attempts=1)
    push(task, done({"verdict": "pass"}))
    finished = push(task, artifact({"n": 2}))
    assert (finished.status_code, finished.json()["error"]["code"]) == (409, "task_finished")
    assert [a["artifactId"] for a in fresh(task).artifacts] == ["a1"]


def said(message_id: str) -> dict[str, Any]:
    """A message the agent pushes into the conversation (a StreamResponse ``message``)."""
    parts = [{"text": f"Still on it ({message_id})"}]
    return {
        "message": {
            "messageId": message_id,
            "role": "ROLE_AGENT",
            "taskId": "agent-task-1",
            "parts": parts,
        }
    }


def agent_messages(task: Task) -> list[str]:
    rows = TaskMessage.objects.filter(task=task, direction=Direction.FROM_AGENT)
    return list(rows.order_by("created_at", "pk").values_list("message_id", flat=True))


def test_a_pushed_message_joins_the_conversation_once(task: Task) -> None:
    assert push(task, said("m1")).status_code == 200
    assert push(task, said("m1")).status_code == 200
    assert agent_messages(task) == ["m1"]
    assert fresh(task).state == TaskState.SUBMITTED


def test_pushed_messages_past_the_cap_are_refused_and_the_task_goes_on(
    task: Task, settings: Any
) -> None:
    settings.TASK_AGENT_MESSAGES_MAX = 2
    assert [push(task, said(key)).status_code for key in ("m1", "m2")] == [200, 200]
    refused = push(task, said("m3"))
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["details"]["maxMessages"]) == ("too_many_messages", 2)
    assert "TASK_AGENT_MESSAGES_MAX" in error["message"]
    assert agent_messages(task) == ["m1", "m2"]
    assert push(task, said("m1")).status_code == 200  # a repeat of one kept, at the cap
    assert push(task, status_update("TASK_STATE_WORKING", T1)).status_code == 200
    assert fresh(task).state == TaskState.WORKING
    assert agent_messages(task) == ["m1", "m2"]


@pytest.mark.parametrize(
    ("body", "status_code", "code"),
    [
        ({"hello": "world"}, 400, "not_a2a"),
        ([1, 2], 400, "not_a2a"),
        (
            {"statusUpdate": {"taskId": "agent-task-1", "status": {"state": "napping"}}},
            400,
            "not_a2a",
        ),
        ({"statusUpdate": {"status": {"state": "TASK_STATE_WORKING"}}}, 400, "not_a2a"),
        # Refused, not cut to the 200 characters kept (a cut id names no task of the agent).
        (
            {"statusUpdate": {"taskId": "t" * 201, "status": {"state": "TASK_STATE_WORKING"}}},
            400,
            "not_a2a",
        ),
        ({"artifactUpdate": {"taskId": "agent-task-1", "artifact": {"parts": 3}}}, 400, "not_a2a"),
        (b"{not json", 400, "malformed_json"),
        ("[" * 500 + "]" * 500, 400, "malformed_json"),
        ({"statusUpdate": {"taskId": "a\u0000b", "status": {"state": "working"}}}, 400, "bad_text"),
        # Not JSON numbers (1e400 is Python's infinity): PostgreSQL refused them, a 500.
        (
            '{"artifactUpdate": {"taskId": "agent-task-1", "artifact": {"artifactId": "a",'
            ' "parts": [{"data": {"n": 1e400}}]}}}',
            400,
            "malformed_json",
        ),
        ('{"task": {"id": "agent-task-1", "metadata": {"n": NaN}}}', 400, "malformed_json"),
        # More digits than Python converts (a ValueError the webhook did not catch: a 500).
        (
            '{"task": {"id": "agent-task-1", "metadata": {"n": %s}}}' % ("9" * 5000),
            400,
            "malformed_json",
        ),
    ],
)
def test_bad_bodies_are_refused_and_change_nothing(
    task: Task, body: Any, status_code: int, code: str
) -> None:
    response = push(task, body)
    assert response.status_code == status_code, response.text
    assert response.json()["error"]["code"] == code
    assert fresh(task).state == TaskState.SUBMITTED


def test_a_huge_body_is_a_413(task: Task, settings: Any) -> None:
    settings.AGENT_PUSH_MAX_BYTES = 1000
    response = push(task, {"statusUpdate": {"taskId": "x" * 2000}})
    assert response.status_code == 413


def test_only_post_is_served(task: Task) -> None:
    async def run() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            return await c.get(f"/api/a2a/push/{task.pk}/{task.agent_id}/1")

    assert asyncio.run(run()).status_code == 405


def test_a_03_style_task_push_is_understood(task: Task) -> None:
    body = {
        "kind": "task",
        "id": "agent-task-1",
        "contextId": "c",
        "status": {"state": "completed", "timestamp": T3},
        "artifacts": [
            {"artifactId": "a", "parts": [{"kind": "data", "data": {"verdict": "pass"}}]}
        ],
    }
    assert push(task, body).status_code == 200
    assert fresh(task).state == TaskState.COMPLETED


def test_a_push_that_changes_nothing_writes_nothing(task: Task) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    push(task, status_update("TASK_STATE_WORKING", T1))
    # The same status again (a later time is kept: see the next test).
    again = agent_push_body.parse(status_update("TASK_STATE_WORKING", T1))
    with CaptureQueriesContext(connection) as queries:
        assert agent_push.apply(task.pk, 1, again).state == TaskState.WORKING
    verbs = [q["sql"].split()[0].upper() for q in queries.captured_queries]
    # One read of the task (under its lock on PostgreSQL, so inside a transaction or a
    # savepoint); nothing written.
    assert verbs.count("SELECT") == 1
    assert not {"UPDATE", "INSERT", "DELETE"} & set(verbs)


def test_a_state_pushed_late_is_older_than_a_repeat_stamped_after_it(task: Task) -> None:
    """The agent went WORKING (T1), AUTH_REQUIRED (T2), WORKING by itself (T3); its pushes
    arrive T1, T3, T2. T3 repeats the task's state, but its time is kept: the late T2 is
    older than what the task applied, and does not send it back to wait for a sign-in."""
    assert push(task, status_update("TASK_STATE_WORKING", T1)).status_code == 200
    events = TaskEvent.objects.filter(task=task).count()
    repeat = push(task, status_update("TASK_STATE_WORKING", T3))
    assert TaskEvent.objects.filter(task=task).count() == events  # no transition
    assert (repeat.status_code, fresh(task).metadata[agent_push.STATUS_AT]) == (
        200,
        "2026-12-01T10:00:03+00:00",
    )
    late = push(task, status_update("TASK_STATE_AUTH_REQUIRED", T2))
    assert (late.status_code, late.json()["error"]["code"]) == (409, "stale_update")
    assert fresh(task).state == TaskState.WORKING
    # a repeat of the same time writes nothing
    written = fresh(task).updated_at
    assert push(task, status_update("TASK_STATE_WORKING", T3)).status_code == 200
    assert fresh(task).updated_at == written
