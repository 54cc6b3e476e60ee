"""Agents that hold a send until the task ends or asks, whatever ``returnImmediately`` says
(LangGraph's server does: ``tests/a2a/test_langgraph_agent.py``), and agents that keep a
task's result in its last message rather than in an artifact.

Against a real a2a-sdk agent whose ``message:send`` is held (its streams are not), driven
one step at a time through the worker's own entry point: a send of a long task times out,
the agent is marked (``early_return``) and its next sends start by a stream that names the
agent's task at once; the task is then polled as any other. An agent that does not stream
has its next sends held instead: each waits for the answer, sent once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.utils import timezone
from urllib3.exceptions import ConnectTimeoutError, ReadTimeoutError

from a2a.agent_updates import apply_agent_reply
from a2a.creation import create_task
from a2a.exceptions import A2AProtocolError, A2AUnsupportedOperation
from a2a.models import Task
from a2a.services import reply_to_task
from a2a.states import NextAction, TaskState
from a2a.transports.rest import RestTransport
from a2a.worker import process_task
from agent_profiles.api.serializers import AgentProfileSerializer
from agent_profiles.guarded_pool import AnswerTimedOut, CallTimedOut, _failure
from tests.a2a.helpers import wait_for
from tests.support.agents import TestAgent, build_holding_app, run_agent
from tests.support.sample_agent import run_sample_agent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def peer() -> Iterator[TestAgent]:
    with run_agent(build=build_holding_app) as agent:
        yield agent


@pytest.fixture
def fast(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 0  # polled one by one: the plainest way to follow a task
    settings.A2A_HTTP_TIMEOUT = 0.5


@pytest.fixture
def skill(make_skill: Any) -> Any:
    return make_skill(id="ce-review")


@pytest.fixture
def user(skill: Any, make_user: Any) -> Any:
    return make_user()


def start(user: Any, behaviour: str, **extra: Any) -> Task:
    data = {"product": "lamp", "behaviour": behaviour, **extra}
    return create_task(skill_id="ce-review", input=data, user=user)


def step(task: Task) -> Task:
    """The task's next action, made due now and done."""
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now())
    process_task(task.pk)
    task.refresh_from_db()
    return task


def without_streams(make_agent: Any, skill: Any, url: str, **fields: Any) -> Any:
    """An agent at ``url`` whose card (read already) offers no streaming."""
    interface = {"binding": "HTTP+JSON", "version": "1.0", "url": url, "tenant": ""}
    return make_agent(
        skills=[skill],
        a2a_endpoint=url,
        interface=interface,
        card_read_at=timezone.now(),
        streaming=False,
        **fields,
    )


def counted(peer: TestAgent, suffix: str) -> int:
    return sum(n for path, n in peer.counts.items() if path.endswith(suffix))


def test_a_send_held_past_the_timeout_marks_an_agent_that_streams(
    fast: None, skill: Any, user: Any, make_agent: Any, peer: TestAgent
) -> None:
    agent = make_agent(skills=[skill], a2a_endpoint=peer.url)
    task = step(start(user, "slow", seconds=1.5))
    # Sent, and no answer within A2A_HTTP_TIMEOUT: the agent may have it; sent again later.
    assert (task.state, task.next_action, task.attempts) == (
        TaskState.SUBMITTED,
        NextAction.SEND,
        1,
    )
    assert task.error["code"] == "agent_timeout"
    agent.refresh_from_db()
    assert agent.early_return is False
    assert "returnImmediately" in agent.no_early_return_reason
    assert "0.5 s (A2A_HTTP_TIMEOUT)" in agent.no_early_return_reason
    assert agent.no_early_return_at is not None
    # The second send starts by a stream: the agent's task is known at its first event.
    task = step(task)
    assert task.remote_task_id
    assert (task.next_action, task.attempts, task.error) == (NextAction.POLL, 2, None)
    assert (counted(peer, "/message:send"), counted(peer, "/message:stream")) == (1, 1)
    # The agent works on after the stream's end; polls find the end.
    task = wait_for(task, lambda t: step(t).state == TaskState.COMPLETED)
    assert task.output == {"verdict": "pass"}


def test_a_held_agents_quick_question_and_answer_come_over_the_streams(
    fast: None, skill: Any, user: Any, make_agent: Any, peer: TestAgent
) -> None:
    """A stream is read as long as a send may take: a task that asks (or ends) by then is
    known whole, its question included, with no poll."""
    make_agent(skills=[skill], a2a_endpoint=peer.url, early_return=False)
    task = step(start(user, "ask"))
    assert (task.state, task.next_action) == (TaskState.INPUT_REQUIRED, NextAction.NONE)
    assert task.question["parts"][0]["text"] == "Which market: EU or UK?"
    reply_to_task(task, text="EU")
    task = step(task)
    assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass", "answer": "EU"})
    assert task.attempts == 1
    # The task and the reply each a stream; no send held, no poll.
    assert (counted(peer, "/message:send"), counted(peer, "/message:stream")) == (0, 2)
    assert peer.requests_for(task.remote_task_id) == 0


def test_an_agent_that_does_not_stream_has_its_sends_held(
    fast: None, skill: Any, user: Any, make_agent: Any, peer: TestAgent
) -> None:
    """No stream to start its sends by: once a send was held past the timeout, the agent's
    sends wait for its answer as long as the task may take (a long call), so the work is
    sent once more, not once per retry."""
    agent = without_streams(make_agent, skill, peer.url)
    task = step(start(user, "slow", seconds=1.5))
    assert (task.next_action, task.error["code"]) == (NextAction.SEND, "agent_timeout")
    agent.refresh_from_db()
    assert agent.early_return is False
    assert "returnImmediately" in agent.no_early_return_reason
    # The retry waits the whole task out: the answer of the send is the result.
    task = step(task)
    assert (task.state, task.output, task.attempts) == (TaskState.COMPLETED, {"verdict": "pass"}, 2)
    assert (counted(peer, "/message:send"), counted(peer, "/message:stream")) == (2, 0)
    # Another task of the agent is sent once, and waited for.
    other = step(start(user, "slow", seconds=1.0))
    assert (other.state, other.attempts, other.error) == (TaskState.COMPLETED, 1, None)
    assert counted(peer, "/message:send") == 3
    assert peer.requests_for(other.remote_task_id) == 0  # no poll: the send's answer said it


def test_a_sample_shaped_agent_that_does_not_stream_runs_each_later_task_once(
    fast: None, skill: Any, user: Any, make_agent: Any
) -> None:
    """A real a2a-sdk agent in the samples' shape (it reports nothing until its answer, so
    a2a-sdk holds the send), whose card offers no streaming, thinking longer than
    A2A_HTTP_TIMEOUT, sent to where a send cannot be waited for past that time (here the
    test's thread, as when no thread that starts tasks is free): the task that finds the hold out
    runs twice at the agent (nothing said it had the first), every later one once. Sent
    from the threads that start tasks, it runs once (tests/a2a/test_send_watch.py)."""
    with run_sample_agent(seconds=1.0, streaming=False) as sample:
        agent = make_agent(skills=[skill], a2a_endpoint=sample.url)
        task = step(start(user, "complete"))
        assert task.error["code"] == "agent_timeout"
        agent.refresh_from_db()
        assert (agent.streaming, agent.early_return) == (False, False)
        task = step(task)
        assert (task.state, task.output["verdict"], task.attempts) == (
            TaskState.COMPLETED,
            "pass",
            2,
        )
        later = step(start(user, "complete", product="desk"))
        assert (later.state, later.output, later.attempts) == (
            TaskState.COMPLETED,
            {"verdict": "pass", "product": "desk"},
            1,
        )
    assert len(sample.inputs) == 3


def test_a_held_send_is_a_long_call_that_takes_no_send_slot(
    fast: None, skill: Any, user: Any, make_agent: Any, settings: Any
) -> None:
    """A held send is bounded by the long calls' room (a2a.long_calls), not by the agent's
    sends in flight: a full send gate does not defer it."""
    from a2a import send_gate

    settings.A2A_AGENT_SENDS_IN_FLIGHT = 1
    with run_agent(build=build_holding_app) as holder:
        without_streams(make_agent, skill, holder.url, early_return=False)
        with send_gate.slot("agent-one", wait=0) as got:
            assert got
            task = step(start(user, "complete"))
        send_gate._gates.clear()
    assert (task.state, task.attempts) == (TaskState.COMPLETED, 1)


def test_an_agent_seen_to_return_early_is_not_marked_when_a_send_times_out(
    fast: None, skill: Any, user: Any, make_agent: Any
) -> None:
    """An agent that answered a send with its task still in flight honours
    ``returnImmediately``: a later send that times out is load, not a hold."""
    with run_agent() as plain:
        agent = make_agent(skills=[skill], a2a_endpoint=plain.url)
        step(start(user, "working"))  # answered SUBMITTED at once
        agent.refresh_from_db()
        assert agent.early_return_seen is True
        assert AgentProfileSerializer(agent).data["earlyReturn"]["seen"] is True
        task = step(start(user, "slowsend", seconds=1.5))  # the agent is slow to answer
        assert (task.next_action, task.error["code"]) == (NextAction.SEND, "agent_timeout")
        agent.refresh_from_db()
        assert (agent.early_return, agent.no_early_return_reason) == (True, "")


def test_only_an_answer_that_did_not_come_is_a_held_send() -> None:
    """A read timeout (the request was taken) is told apart from a connect timeout (the
    agent never got it): only the first may mean an agent that holds its sends."""
    read = _failure(ReadTimeoutError(None, "/message:send", "Read timed out."))
    connect = _failure(ConnectTimeoutError("connect timed out"))
    assert isinstance(read, AnswerTimedOut)
    assert isinstance(connect, CallTimedOut)
    assert not isinstance(connect, AnswerTimedOut)


# --- the result in the task's last message ------------------------------------------------


def test_a_result_kept_in_the_last_message_is_read_with_one_more_get(
    fast: None, skill: Any, user: Any, make_agent: Any
) -> None:
    """A real a2a-sdk agent that says its result in a WORKING status message and then
    completes with no artifact: a poll (no conversation) finds no output, so the task is
    read once more with its last message, which has it."""
    with run_agent() as plain:
        make_agent(skills=[skill], a2a_endpoint=plain.url)
        task = step(start(user, "said"))
        task = wait_for(task, lambda t: step(t).state == TaskState.COMPLETED)
        assert (task.output, task.artifacts) == ({"verdict": "pass"}, [])


@pytest.mark.parametrize(
    ("status_message", "history", "output"),
    [
        # The completing status's message first.
        ({"role": "ROLE_AGENT", "parts": [{"data": {"verdict": "pass"}}]}, None, "pass"),
        # Else the last agent message (JSON in a text part, 0.3 role names too).
        (
            None,
            [
                {"role": "ROLE_AGENT", "parts": [{"text": '{"verdict": "maybe"}'}]},
                {"role": "agent", "parts": [{"kind": "text", "text": '{"verdict": "pass"}'}]},
                {"role": "ROLE_USER", "parts": [{"data": {"verdict": "user's"}}]},
            ],
            "pass",
        ),
        # A text answer is not an output: the schema says so.
        (None, [{"role": "ROLE_AGENT", "parts": [{"text": "Done."}]}], None),
    ],
)
def test_a_completed_task_without_artifacts_takes_its_output_from_its_messages(
    skill: Any, user: Any, make_agent: Any, status_message: Any, history: Any, output: str | None
) -> None:
    make_agent(skills=[skill])
    task = start(user, "complete")
    status: dict[str, Any] = {"state": "TASK_STATE_COMPLETED"}
    if status_message:
        status["message"] = {"messageId": "m-1", **status_message}
    remote = {"id": "agent-task-1", "status": status, "artifacts": []}
    if history is not None:
        remote["history"] = history
    apply_agent_reply(task, task_json=remote, message=None, via="a2a")
    task.refresh_from_db()
    if output is None:
        assert (task.state, task.error["code"]) == (TaskState.FAILED, "output_invalid")
    else:
        assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": output})


def test_a_question_said_in_an_artifact_is_the_question(
    skill: Any, user: Any, make_agent: Any
) -> None:
    """LangGraph's server asks with an empty status message and an ``Interrupt`` artifact
    holding the value given to ``interrupt()``: that is what a person is shown."""
    make_agent(skills=[skill])
    task = start(user, "ask")
    interrupt = {"id": "i-1", "value": "Which market: EU or UK?"}
    remote = {
        "id": "agent-task-1",
        "status": {
            "state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"messageId": "m-1", "role": "ROLE_AGENT", "parts": [{"text": ""}]},
        },
        "artifacts": [{"artifactId": "a-1", "name": "Interrupt", "parts": [{"data": interrupt}]}],
    }
    apply_agent_reply(task, task_json=remote, message=None, via="a2a")
    task.refresh_from_db()
    assert task.state == TaskState.INPUT_REQUIRED
    assert task.question == {
        "messageId": "m-1",
        "role": "ROLE_AGENT",
        "parts": [{"data": interrupt}],
    }


@pytest.mark.parametrize("artifacts", [[{"artifactId": "a-1", "parts": 3}, 4], None])
def test_a_question_from_parts_of_the_wrong_shape_is_refused_not_a_crash(
    skill: Any, user: Any, make_agent: Any, artifacts: Any
) -> None:
    """Parts that are not a list (in the message or an artifact) are not A2A: the answer
    is refused as one (``not_a2a``, handled by each path as any answer that is not A2A;
    served again, it would break the caller's client), nothing of it kept, and no worker
    crashes on it."""
    make_agent(skills=[skill])
    task = start(user, "ask")
    message = {"messageId": "m-1", "role": "ROLE_AGENT", "parts": 5}
    remote = {
        "id": "agent-task-1",
        "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": message},
        "artifacts": artifacts,
    }
    with pytest.raises(A2AProtocolError, match="parts is not a list"):
        apply_agent_reply(task, task_json=remote, message=None, via="a2a")
    task.refresh_from_db()
    assert (task.state, task.question) == (TaskState.SUBMITTED, None)


def test_a_held_agent_that_refuses_the_stream_gets_a_plain_send(
    fast: None,
    skill: Any,
    user: Any,
    make_agent: Any,
    peer: TestAgent,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its card said streaming, but ``message:stream`` is not served: noted on the task
    (``noStreaming``) and sent as a plain send at once, not failed."""

    def refused(self: Any, message: Any, **kwargs: Any) -> Iterator[Any]:
        raise A2AUnsupportedOperation("message:stream answered HTTP 405")
        yield  # a generator, as the transports' streams are

    monkeypatch.setattr(RestTransport, "stream", refused)
    make_agent(skills=[skill], a2a_endpoint=peer.url, early_return=False)
    task = step(start(user, "complete"))
    assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})
    assert "HTTP 405" in task.metadata["noStreaming"]
    assert counted(peer, "/message:send") == 1


def test_a_held_agents_stream_without_an_event_is_not_a2a(
    fast: None,
    skill: Any,
    user: Any,
    make_agent: Any,
    peer: TestAgent,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def empty(self: Any, message: Any, **kwargs: Any) -> Iterator[Any]:
        yield from ()

    monkeypatch.setattr(RestTransport, "stream", empty)
    make_agent(skills=[skill], a2a_endpoint=peer.url, early_return=False)
    task = step(start(user, "complete"))
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "not_a2a")
    assert "without an event naming its task" in task.error["message"]
