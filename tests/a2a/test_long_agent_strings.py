"""An agent's strings of any length are named in errors by an excerpt, never whole.

Why: an agent's task state ``"TASK_STATE_" + 5 MB`` went whole into the refusal's message,
so into the task's ``error`` (stored, served by the API and the face) and the log line
that reports it: a 5 MB error and log line. A stream's ``statusUpdate`` about a task id
of 5 MB made a 10 MB error (the id in the message and in its details). Now each value
is an excerpt (``a2a.transports.quoting.excerpt``): the error stays a few kB, and still
says what was wrong, starting with the value.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from a2a.agent_updates import apply_agent_update
from a2a.exceptions import A2AProtocolError
from a2a.models import Task
from a2a.states import TaskState
from a2a.transports.shapes import read_stream_event
from a2a.transports.stream_view import StreamView
from tests.a2a.helpers import fresh, push, status_update
from tests.a2a.test_answer_parts import snapshot
from tests.support.scripted_agent import (
    SUBMITTED,
    WORKING,
    ScriptedAgent,
    events,
    refused,
    register,
    run_out,
    run_scripted_agent,
    start,
    task_answer,
)

BIG = "X" * 5_000_000
BIG_STATE = "TASK_STATE_" + BIG
BOUND = 5_000  # a few kB: the message, an excerpt of each value, the details


def longest_log_line(caplog: pytest.LogCaptureFixture) -> int:
    return max((len(record.getMessage()) for record in caplog.records), default=0)


@pytest.fixture
def scripted_agent(settings: Any, caplog: pytest.LogCaptureFixture) -> Any:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 0  # polled one by one, not by listings
    caplog.set_level(logging.INFO)
    with run_scripted_agent() as agent:
        yield agent


def assert_bounded(task: Task, caplog: pytest.LogCaptureFixture, said: str) -> None:
    """The task failed ``not_a2a`` saying ``said`` and the start of the value; its error
    and every log line are a few kB."""
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "not_a2a"), task.error
    assert said in task.error["message"]
    assert "XXXX…" in task.error["message"]  # the value's start, and that it was cut
    assert len(str(task.error)) < BOUND, len(str(task.error))
    assert longest_log_line(caplog) < BOUND


# --- a send's answer, a poll's, a stream's ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("where", ["send", "get"])
def test_a_megabyte_state_in_an_answer_is_named_by_an_excerpt(
    scripted_agent: ScriptedAgent,
    make_agent: Any,
    make_skill: Any,
    make_user: Any,
    caplog: pytest.LogCaptureFixture,
    where: str,
) -> None:
    register(make_agent, make_skill, scripted_agent)

    def answer(kind: str, body: Any) -> Any:
        if kind not in ("send", "get"):
            return refused()
        return task_answer(BIG_STATE if kind == where else SUBMITTED)

    scripted_agent.answer = answer
    assert_bounded(run_out(start(make_user())), caplog, "unknown task state 'TASK_STATE_XXX")


STREAMS = {
    "about_another_task": (
        {"statusUpdate": {"taskId": BIG, "contextId": "c", "status": {"state": WORKING}}},
        "is about its task 'XXX",
    ),
    "unknown_state": (
        {"statusUpdate": {"taskId": "t1", "contextId": "c", "status": {"state": BIG_STATE}}},
        "has no known state",
    ),
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", list(STREAMS))
def test_megabyte_strings_in_a_stream_are_named_by_an_excerpt(
    scripted_agent: ScriptedAgent,
    make_agent: Any,
    make_skill: Any,
    make_user: Any,
    caplog: pytest.LogCaptureFixture,
    case: str,
) -> None:
    register(make_agent, make_skill, scripted_agent, stream=True)
    event, said = STREAMS[case]
    first = {"task": {"id": "t1", "contextId": "c", "status": {"state": WORKING}}}
    scripted_agent.answer = lambda kind, body: (
        events(first, event) if kind == "stream" else refused()
    )
    task = run_out(start(make_user()))
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "not_a2a"), task.error
    assert said in task.error["message"]
    assert len(str(task.error)) < BOUND, len(str(task.error))
    assert longest_log_line(caplog) < BOUND


def test_an_event_about_another_task_names_both_by_excerpts() -> None:
    """In the message and in its details: both are stored in the task's error."""
    view = StreamView()
    view.apply("task", {"id": "t" * 100_000, "contextId": "c", "status": {"state": WORKING}})
    with pytest.raises(A2AProtocolError) as raised:
        view.apply("status", {"taskId": BIG, "status": {"state": WORKING}})
    assert len(raised.value.message) + len(str(raised.value.details)) < BOUND
    assert raised.value.details["eventTaskId"].startswith("XXX")
    assert raised.value.details["eventTaskId"].endswith("…")


def test_a_0_3_events_unknown_kind_is_named_by_an_excerpt() -> None:
    with pytest.raises(A2AProtocolError) as raised:
        read_stream_event({"kind": BIG, "taskId": "t1"}, v03=True, rest=False)
    assert "Unknown stream event kind 'XXX" in raised.value.message
    assert len(raised.value.message) < BOUND


@pytest.mark.django_db
@pytest.mark.parametrize("state", [BIG_STATE, {"nested": BIG}, ["TASK_STATE_", BIG]])
def test_an_update_with_a_megabyte_state_is_named_by_an_excerpt(task: Task, state: Any) -> None:
    """What every path applies through (a gateway frame's status is read here first): a
    state of any JSON value, cut as JSON."""
    with pytest.raises(A2AProtocolError) as raised:
        apply_agent_update(task, status={"state": state}, via="test")
    assert "unknown task state '" in raised.value.message
    assert len(raised.value.message) < BOUND


# --- pushes --------------------------------------------------------------------------------------

PUSHED = "Q" * 400_000  # a push is at most AGENT_PUSH_MAX_BYTES (1 MB)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            {"task": {"id": "agent-task-1", "contextId": "c", "status": {"state": PUSHED}}},
            "task.status.state 'QQQ",
        ),
        (status_update(PUSHED), "statusUpdate.status.state 'QQQ"),
    ],
    ids=["task", "status_update"],
)
def test_a_pushed_megabyte_state_is_refused_by_an_excerpt(
    pushed_task: Task, body: dict[str, Any], said: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    before = snapshot(pushed_task)
    response = push(pushed_task, body)
    assert response.status_code == 400, response.text[:500]
    assert response.json()["error"]["code"] == "not_a2a"
    assert said in response.json()["error"]["message"]
    assert len(response.content) < BOUND
    assert longest_log_line(caplog) < BOUND
    assert snapshot(fresh(pushed_task)) == before
