"""Streams that go wrong while the platform follows an agent's task over them: an error
event mid-stream (a2a-sdk's when its executor raises) is the agent's last word, once; a
``message:stream`` answered with plain JSON is that answer; a stream with no event is an
error, never a subscribe to no task; a stream cut in the middle of an event ended
(followed again), it did not send garbage; an event about another task is refused; and
many appended chunks fold into the right artifact."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from a2a import creation
from a2a.exceptions import A2AProtocolError, A2ATransientError
from a2a.follow_policy import can_subscribe
from a2a.models import Task
from a2a.states import TaskState
from a2a.transports.answers import AgentErrorEvent, iter_events
from a2a.transports.rest import RestTransport
from a2a.transports.stream_view import StreamView, task_copy
from a2a.wire import artifacts_bytes
from agent_profiles.interfaces import CallTarget
from tests.support.peers import run_peer
from tests.support.raw_sse import (
    RawStreamAgent,
    register,
    run_raw_stream_agent,
    sse,
    status_event,
    task_event,
)
from tests.support.scripted_agent import run_out

pytestmark = pytest.mark.django_db(transaction=True)

OUTPUT = {"artifacts": [{"artifactId": "r", "parts": [{"data": {"verdict": "pass"}}]}]}
WORKING, COMPLETED = "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"


def start(user: Any, **data: Any) -> Task:
    return creation.create_task(skill_id="ce-review", input={"product": "lamp", **data}, user=user)


@pytest.fixture
def raw(make_skill: Any, make_agent: Any, settings: Any) -> Iterator[RawStreamAgent]:
    """A registered HTTP+JSON agent that cannot be polled and streams what a test sets."""
    settings.ALLOW_LOOPBACK_URLS = True
    with run_raw_stream_agent() as agent:
        register(make_agent, make_skill(id="ce-review"), agent)
        yield agent


# --- an error event mid-stream: the agent's last word -------------------------------------


@pytest.mark.parametrize(
    ("binding", "code"), [("JSONRPC", "agent_error"), ("HTTP+JSON", "agent_http_error")]
)
def test_an_error_event_after_the_task_fails_it_once_with_the_agents_error(
    binding: str, code: str, make_skill: Any, make_agent: Any, make_user: Any, settings: Any
) -> None:
    """An a2a-sdk agent whose executor raises after its first event ends the stream with
    an error event (JSON-RPC -32603; HTTP+JSON ``event: error`` with its 500 body). Taken
    for a break, the platform subscribed to the ended task (refused), sent the whole
    message again (the agent ran it twice), then parked the task with ``cannot_follow``;
    over HTTP+JSON the agent's error was lost as ``not_a2a``. It is the agent's last
    word: the task fails with it, and the message went once."""
    settings.ALLOW_LOOPBACK_URLS = True
    with run_peer(bindings=(binding,)) as peer:
        make_agent(skills=[make_skill(id="ce-review")], a2a_endpoint=peer.url, polling=False)
        task = run_out(start(make_user(), behaviour="crash"))
        runs = len(peer.messages)
    assert runs == 1, f"the agent ran the task {runs} times"
    assert task.state == TaskState.FAILED, (task.state, task.error)
    assert task.error["code"] == code, task.error
    assert "ended the stream of its task with an error" in task.error["message"]


def test_a_rest_error_event_maps_as_an_error_answer_would(raw: RawStreamAgent) -> None:
    """Before the stream named its task an ``event: error`` is the call's answer, mapped
    as an error answer with its status would be (503: transient, the send is retried);
    after it, the same error is the agent's last word on that task. One naming neither
    code nor status is still the agent's failure (500)."""
    target = CallTarget(agent_id="raw", url=raw.url)
    busy = {"error": {"code": 503, "status": "UNAVAILABLE", "message": "busy"}}
    raw.stream = lambda: [sse(busy, event="error")]
    with pytest.raises(A2ATransientError) as first:
        list(RestTransport(target).stream({"parts": []}, timeout=5))
    assert not isinstance(first.value, AgentErrorEvent)
    assert (first.value.code, first.value.status) == ("agent_http_error", 503)

    gone = {"error": {"status": "NOT_FOUND", "message": "no such task"}}
    raw.stream = lambda: [sse(task_event("t1", WORKING)), sse(gone, event="error")]
    with pytest.raises(AgentErrorEvent) as later:
        list(RestTransport(target).stream({"parts": []}, timeout=5))
    assert later.value.status == 404
    assert "no such task" in later.value.message

    raw.stream = lambda: [sse(task_event("t1", WORKING)), b"event: error\ndata: oops\n\n"]
    with pytest.raises(AgentErrorEvent) as bare:
        list(RestTransport(target).stream({"parts": []}, timeout=5))
    assert (bare.value.code, bare.value.status) == ("agent_http_error", 500)


def test_a_refused_subscribe_never_sends_a_first_message_again(
    raw: RawStreamAgent, make_user: Any
) -> None:
    """The stream named the agent's task and ended without a final state; the subscribe
    is refused (the task ended meanwhile). The whole first message was sent again: the
    agent would run it twice. The agent's task is known, so the task says it cannot be
    followed instead."""
    raw.stream = lambda: [sse(task_event("t1", WORKING))]
    task = run_out(start(make_user()))
    assert (raw.counts["stream"], raw.counts["subscribe"]) == (1, 1), raw.counts
    assert task.error["code"] == "cannot_follow", task.error
    assert task.remote_task_id == "t1"


# --- a stream that names no task ------------------------------------------------------------


def test_a_rest_stream_answered_with_plain_json_is_that_answer(
    raw: RawStreamAgent, make_user: Any
) -> None:
    """``message:stream`` answered ``200 application/json`` with the finished Task (as
    the JSON-RPC binding already read one). The HTTP+JSON reader found no event in it,
    subscribed to an empty task id, was refused, sent the message again and parked the
    task."""
    raw.stream_type = "application/json"
    raw.stream = lambda: [json.dumps(task_event("t1", COMPLETED, **OUTPUT)).encode()]
    task = run_out(start(make_user()))
    assert (raw.counts["stream"], raw.counts["subscribe"]) == (1, 0), raw.counts
    assert task.state == TaskState.COMPLETED, (task.state, task.error)
    assert task.output == {"verdict": "pass"}


def test_a_sending_stream_without_an_event_is_an_error_not_a_subscribe_to_no_task(
    raw: RawStreamAgent, make_user: Any
) -> None:
    """A 2xx stream that closes before any event leaves no agent task to follow: it was
    followed with ``GET /tasks/:subscribe`` (no id), refused, and the message sent
    again. It is an answer that is not A2A, and no subscribe goes out."""
    raw.stream = lambda: [b": only a comment\n\n"]
    task = run_out(start(make_user()))
    assert (raw.counts["stream"], raw.counts["subscribe"]) == (1, 0), raw.counts
    assert task.state == TaskState.FAILED, (task.state, task.error)
    assert task.error["code"] == "not_a2a"
    assert "without an event naming its task" in task.error["message"]


def test_no_subscribe_without_the_agents_task_id(task: Task, agent: Any) -> None:
    """A subscribe names the agent's task: without its id there is nothing to ask for."""
    target = CallTarget(agent_id=agent.agent_id, url="http://agent.example", streaming=True)
    assert not can_subscribe(task, target)
    task.remote_task_id = "t1"
    assert can_subscribe(task, target)


# --- a stream cut in the middle of an event -------------------------------------------------


def test_a_stream_cut_mid_event_ended_and_is_followed_again(
    raw: RawStreamAgent, make_user: Any
) -> None:
    """The SSE rule: an event the stream ends before its blank line is discarded. The
    reader handed the half event on, and its half JSON failed the task as ``not_a2a``;
    the stream ended without a final state, so the task is followed again."""
    cut = b'data: {"statusUpdate": {"ta'
    raw.stream = lambda: [sse(task_event("t1", WORKING)), cut]
    raw.subscribe = lambda: [sse(task_event("t1", COMPLETED, **OUTPUT))]
    task = run_out(start(make_user()))
    assert task.state == TaskState.COMPLETED, task.error
    assert task.output == {"verdict": "pass"}
    assert raw.subscribed == ["t1"]


def test_only_events_ended_by_their_blank_line_are_read_with_their_names() -> None:
    events = b"event: error\ndata: a\n\ndata: b\n\nevent: x\ndata: never ended"
    read = list(iter_events(httpx.Response(200, content=iter([events])), limit=1000))
    assert read == [("error", "a"), ("", "b")]


# --- an event about another task ------------------------------------------------------------


FAILED_ELSEWHERE = {
    "message": {"role": "ROLE_AGENT", "messageId": "m", "parts": [{"text": "other failed"}]}
}
OTHER_ARTIFACT = {
    "artifactUpdate": {"taskId": "other", "artifact": {"artifactId": "r", "parts": [{"text": "x"}]}}
}


@pytest.mark.parametrize(
    "event",
    [status_event("other", "TASK_STATE_FAILED", **FAILED_ELSEWHERE), OTHER_ARTIFACT],
    ids=["status", "artifact"],
)
def test_an_event_about_another_task_is_refused_not_applied(
    event: dict[str, Any], raw: RawStreamAgent, make_user: Any
) -> None:
    """The stream named task t1; a status event for task ``other`` failed t1 with the
    other task's message (the view folded it in under t1's id). As a whole Task for
    another id is, it is refused and nothing of it applied."""
    raw.stream = lambda: [sse(task_event("t1", WORKING)), sse(event)]
    task = run_out(start(make_user()))
    assert task.state == TaskState.FAILED
    assert task.error["code"] == "not_a2a", task.error
    assert "'other'" in task.error["message"]
    assert "other failed" not in str(task.error)
    assert not task.artifacts


def test_a_whole_task_for_another_id_is_refused_by_the_view() -> None:
    view = StreamView()
    view.apply("task", {"id": "t1", "status": {"state": WORKING}})
    with pytest.raises(A2AProtocolError, match="'t2'"):
        view.apply("task", {"id": "t2", "status": {"state": COMPLETED}})
    assert view.task is not None
    assert view.task["id"] == "t1"


# --- many appended chunks -------------------------------------------------------------------


def test_many_appended_chunks_fold_into_one_artifact_and_a_copy_keeps_still() -> None:
    """Appends go in place (rebuilding the parts at every chunk cost their square); a
    snapshot copied for applying is not changed by the events after it."""
    view = StreamView()
    view.apply("task", {"id": "t1", "status": {"state": WORKING}, **OUTPUT})
    kept = None
    for i in range(20_000):
        chunk = {"artifactId": "out", "parts": [{"text": str(i % 10)}]}
        task = view.apply("artifact", {"taskId": "t1", "artifact": chunk, "append": i > 0})
        if i == 9:
            kept = task_copy(task)
    assert task is not None
    assert kept is not None
    out = task["artifacts"][1]
    assert len(out["parts"]) == 20_000
    assert "".join(p["text"] for p in out["parts"][:12]) == "012345678901"
    assert len(kept["artifacts"][1]["parts"]) == 10
    assert task["artifacts"][0] == OUTPUT["artifacts"][0]


def test_artifacts_held_before_a_status_are_sized_as_stored(settings: Any) -> None:
    """Sized as they come, not re-measured at every chunk: the cap still counts exactly
    what ``artifacts_bytes`` would."""
    view = StreamView()
    events = [
        ("a", [{"text": "xy"}], False),
        ("a", [{"text": "z"}, {"text": "w"}], True),
        ("b", [], False),
        ("b", [{"data": {"k": 1}}], True),
        ("a", [{"text": "new"}], False),
    ]
    for key, parts, append in events:
        artifact = {"artifactId": key, "parts": parts}
        view.apply("artifact", {"taskId": "t", "artifact": artifact, "append": append})
    assert view.task is not None
    exact = artifacts_bytes(view.task["artifacts"])
    settings.TASK_ARTIFACTS_MAX_BYTES = exact
    view.apply("artifact", {"taskId": "t", "artifact": {"artifactId": "b"}, "append": True})
    more = {"artifactId": "b", "parts": [{"text": "!"}]}
    with pytest.raises(A2AProtocolError) as refused:
        view.apply("artifact", {"taskId": "t", "artifact": more, "append": True})
    assert refused.value.details == {"maxBytes": exact, "bytes": exact + len(',{"text":"!"}')}
