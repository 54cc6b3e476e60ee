"""Agents that slip on the A2A contract, each against a scripted agent on loopback:

* a Message event after a stream named its task (a closing remark before COMPLETED) ended
  the stream and became the task's whole answer: its text failed the output schema, and
  the artifact and COMPLETED the agent streamed after it were lost. Once the stream named
  its task a Message is skipped, on both bindings;
* a JSON-RPC answer with both a ``result`` and an ``error`` was taken for its error
  (``-32603``: the message sent three times); one with ``"code": true`` for error 1. Both
  are not A2A, sent once;
* a ``CancelTask`` answer about another agent task was recorded as this task's cancel.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.responses import JSONResponse, Response

from a2a import services, worker
from a2a.exceptions import A2AProtocolError
from a2a.models import Task
from a2a.reassign import reassign_task
from a2a.states import TaskState
from a2a.transports.answers import AgentErrorEvent
from a2a.transports.jsonrpc import JsonRpcTransport, rpc_error
from agent_profiles.interfaces import JSONRPC, CallTarget
from tests.support.scripted_agent import (
    COMPLETED,
    WORKING,
    ScriptedAgent,
    events,
    refused,
    run_out,
    scripted_agent,
    start,
)

pytestmark = pytest.mark.django_db(transaction=True)

RESULT = {"artifactId": "r", "parts": [{"data": {"verdict": "pass"}}]}
REMARK = {
    "messageId": "m1",
    "role": "ROLE_AGENT",
    "taskId": "t1",
    "contextId": "ctx",
    "parts": [{"text": "Done, see the artifact."}],
}


@pytest.fixture(autouse=True)
def loopback(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_RETRY_BACKOFF = 0.0


# --- a Message in the stream of a task ------------------------------------------------------


@pytest.mark.parametrize("binding", ["HTTP+JSON", "JSONRPC"])
@pytest.mark.parametrize("where", ["after the artifact", "before the artifact"])
def test_a_message_after_the_stream_named_its_task_is_skipped(
    binding: str, where: str, make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """The agent streams its task, its result artifact and a closing remark as a Message
    (in either order), then COMPLETED: the task completes with the artifact."""
    task_event = {"task": {"id": "t1", "contextId": "ctx", "status": {"state": WORKING}}}
    artifact = {"artifactUpdate": {"taskId": "t1", "contextId": "ctx", "artifact": RESULT}}
    remark = {"message": REMARK}
    done = {"statusUpdate": {"taskId": "t1", "contextId": "ctx", "status": {"state": COMPLETED}}}
    middle = [artifact, remark] if where == "after the artifact" else [remark, artifact]

    def answer(kind: str, body: Any) -> Response:
        if kind in ("stream", "SendStreamingMessage"):
            rpc_id = body["id"] if binding == JSONRPC else None
            return events(task_event, *middle, done, rpc_id=rpc_id)
        return refused()

    # It cannot be polled: its tasks are sent over a stream from the start.
    with scripted_agent(make_agent, make_skill, binding, stream=True) as agent:
        agent.answer = answer
        task = run_out(start(make_user()))
    assert task.state == TaskState.COMPLETED, (task.state, task.error)
    assert task.output == {"verdict": "pass"}
    assert "Done, see the artifact." not in json.dumps(task.artifacts)
    assert sum(agent.calls.values()) == 1, agent.calls


# --- JSON-RPC answers that are not JSON-RPC ------------------------------------------------


TASK_ANSWER = {"task": {"id": "t1", "contextId": "ctx", "status": {"state": COMPLETED}}}


@pytest.mark.parametrize(
    "extra",
    [
        {"result": TASK_ANSWER, "error": {"code": -32603, "message": "internal"}},
        {"error": {"code": True, "message": "true is no code"}},
    ],
    ids=["result and error", "boolean code"],
)
def test_a_jsonrpc_answer_that_is_not_jsonrpc_fails_the_send_once(
    extra: dict[str, Any], make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """Both a result and an error was taken for the error (``-32603``: retried, the
    message sent three times); ``"code": true`` for error 1. Neither is A2A."""

    def answer(kind: str, body: Any) -> Response:
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], **extra})

    with scripted_agent(make_agent, make_skill, "JSONRPC") as agent:
        agent.answer = answer
        task = run_out(start(make_user()))
    assert task.state == TaskState.FAILED, (task.state, task.error)
    assert task.error["code"] == "not_a2a", task.error
    assert agent.calls["SendMessage"] == 1, agent.calls


def test_the_reading_of_a_jsonrpc_answer() -> None:
    transport = JsonRpcTransport(CallTarget(agent_id="a", url="http://agent.example"))
    both = {"jsonrpc": "2.0", "id": "r1", "result": {}, "error": {"code": -32603}}
    with pytest.raises(A2AProtocolError, match="both a result and an error"):
        transport._result(both, "r1", "SendMessage")
    # JSON-RPC 2.0 leaves the other member out; a null one is as absent.
    assert transport._result({**both, "error": None}, "r1", "SendMessage") == {}
    assert rpc_error("a", "m", {"code": False}).code == "not_a2a"
    assert rpc_error("a", "m", {"code": -32001}).code == "remote_task_not_found"


def test_a_stream_event_with_both_is_not_the_agents_last_word(
    make_agent: Any, make_skill: Any
) -> None:
    """After the stream named its task, an event with an error is the agent's last word
    on it (:class:`AgentErrorEvent`); one with a result too is not A2A: no error of the
    agent's to fail the task with."""

    def answer(kind: str, body: Any) -> Response:
        task_event = {"task": {"id": "t1", "contextId": "ctx", "status": {"state": WORKING}}}
        both = {"jsonrpc": "2.0", "id": body["id"], "result": task_event, "error": {"code": 1}}
        first = {"jsonrpc": "2.0", "id": body["id"], "result": task_event}
        return events(first, both)

    with scripted_agent(make_agent, make_skill, "JSONRPC") as agent:
        agent.answer = answer
        transport = JsonRpcTransport(CallTarget(agent_id="a", url=agent.url, binding=JSONRPC))
        replies = transport.stream({"parts": []}, timeout=5)
        assert next(replies).task is not None
        with pytest.raises(A2AProtocolError, match="both a result and an error") as raised:
            next(replies)
    assert not isinstance(raised.value, AgentErrorEvent)


# --- a cancel answered about another task ---------------------------------------------------


def _working_at_t1(agent: ScriptedAgent, make_user: Any) -> Task:
    """A task sent to ``agent``, which works on it as its task t1 and answers a cancel
    about its task ``someone-elses``."""
    working = {"task": {"id": "t1", "contextId": "ctx", "status": {"state": WORKING}}}
    other = {"task": {"id": "someone-elses", "status": {"state": "TASK_STATE_CANCELED"}}}
    agent.answer = lambda kind, body: JSONResponse(other if kind == "cancel" else working)
    task = start(make_user())
    worker.process_task(task.pk)
    task.refresh_from_db()
    assert task.remote_task_id == "t1"
    return task


def test_a_cancel_answered_about_another_task_is_an_error_not_its_state(
    make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """The agent answers ``CancelTask`` of t1 with its task ``someone-elses`` CANCELED:
    ``remoteCancel`` said t1's state was CANCELED. It records the error instead, as for
    any failed cancel; the platform's task is CANCELED all the same."""
    with scripted_agent(make_agent, make_skill, "HTTP+JSON") as agent:
        task = _working_at_t1(agent, make_user)
        services.cancel_task(task)
        task = run_out(task)
    assert agent.calls["cancel"] == 1, agent.calls
    assert task.state == TaskState.CANCELED
    told = task.metadata["remoteCancel"]
    assert told["taskId"] == "t1"
    assert "state" not in told, told
    assert told["error"]["code"] == "not_a2a"
    assert "'someone-elses'" in told["error"]["message"]


def test_a_reassigns_cancel_answered_about_another_task_is_an_error_not_its_state(
    make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """The same answer to the cancel a reassignment sends the old agent."""
    with scripted_agent(make_agent, make_skill, "HTTP+JSON") as agent:
        task = _working_at_t1(agent, make_user)
        make_agent(id="agent-two", skills=[task.skill], a2a_endpoint="http://127.0.0.1:9/")
        task = reassign_task(task, agent_id="agent-two")
    assert agent.calls["cancel"] == 1, agent.calls
    assert task.agent_id == "agent-two"
    told = task.metadata["reassignments"][-1]["remoteCancel"]
    assert "state" not in told, told
    assert told["error"]["code"] == "not_a2a"
