"""A task's artifacts are capped as a whole (``TASK_ARTIFACTS_MAX_BYTES``), however they
come: appended chunks pushed to the webhook, a whole pushed Task, a poll's answer, or a
real a2a-sdk agent's stream. Past the cap the task fails with ``artifacts_too_large``,
nothing of the refused artifacts is stored (what came before stays), and an agent whose
task id is known is asked to cancel it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from a2a import creation, worker
from a2a.agent_updates import apply_agent_update
from a2a.models import Task
from a2a.states import NextAction, TaskState
from a2a.wire import artifacts_bytes
from tests.a2a.helpers import push
from tests.support.agents import run_agent


@pytest.fixture
def task(pushed_task: Task, settings: Any) -> Task:
    settings.TASK_ARTIFACTS_MAX_BYTES = 2_000
    return pushed_task


def chunk(text: str, *, append: bool) -> dict[str, Any]:
    artifact = {"artifactId": "out", "parts": [{"text": text}]}
    return {"artifactUpdate": {"taskId": "agent-task-1", "artifact": artifact, "append": append}}


def test_the_size_is_the_stored_json_in_utf8_bytes() -> None:
    stored = '[{"parts":[{"text":"é"}]}]'
    assert artifacts_bytes([{"parts": [{"text": "é"}]}]) == len(stored.encode())


def test_appended_chunks_past_the_cap_fail_the_task_and_keep_what_came_before(
    task: Task,
) -> None:
    assert push(task, chunk("a" * 800, append=False)).status_code == 200
    assert push(task, chunk("b" * 800, append=True)).status_code == 200
    kept = Task.objects.get(pk=task.pk).artifacts
    assert [len(p["text"]) for p in kept[0]["parts"]] == [800, 800]

    refused = push(task, chunk("c" * 800, append=True))
    assert refused.status_code == 413, refused.text
    error = refused.json()["error"]
    assert error["code"] == "artifacts_too_large"
    assert error["details"]["maxBytes"] == 2_000
    assert error["details"]["bytes"] > 2_000

    task.refresh_from_db()
    assert task.state == TaskState.FAILED
    assert task.error["code"] == "artifacts_too_large"
    assert task.error["details"] == {"maxBytes": 2_000, "bytes": error["details"]["bytes"]}
    assert task.artifacts == kept  # the refused chunk was not stored; the others stay
    # The agent's task id is known: it is asked to cancel (its work is of no use now).
    assert task.next_action == NextAction.CANCEL

    after = push(task, chunk("d", append=True))
    assert (after.status_code, after.json()["error"]["code"]) == (409, "task_finished")


def test_a_pushed_task_with_artifacts_past_the_cap_is_refused(task: Task) -> None:
    body = {
        "task": {
            "id": "agent-task-1",
            "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "out", "parts": [{"text": "x" * 3_000}]}],
        }
    }
    refused = push(task, body)
    assert (refused.status_code, refused.json()["error"]["code"]) == (413, "artifacts_too_large")
    task.refresh_from_db()
    assert (task.state, task.error["code"], task.artifacts) == (
        TaskState.FAILED,
        "artifacts_too_large",
        [],
    )


def test_an_answer_past_the_cap_fails_the_task_without_storing_it(task: Task) -> None:
    """What a poll, a stream event or a gateway frame brings goes through the same rule."""
    Task.objects.filter(pk=task.pk).update(remote_task_id="")
    task.refresh_from_db()
    big = [{"artifactId": "out", "parts": [{"text": "x" * 3_000}]}]
    apply_agent_update(task, status={"state": "TASK_STATE_COMPLETED"}, artifacts=big, via="poll")
    task.refresh_from_db()
    assert (task.state, task.error["code"], task.artifacts) == (
        TaskState.FAILED,
        "artifacts_too_large",
        [],
    )
    # No agent task id to cancel: nothing more to do.
    assert task.next_action == NextAction.NONE
    assert "asked to cancel" not in task.error["message"]


def test_artifacts_up_to_the_cap_are_kept(task: Task) -> None:
    for append in (False, True):
        assert push(task, chunk("a" * 800, append=append)).status_code == 200
    done = {"statusUpdate": {"taskId": "agent-task-1", "status": {"state": "TASK_STATE_WORKING"}}}
    assert push(task, done).status_code == 200
    task.refresh_from_db()
    assert task.state == TaskState.WORKING
    assert len(task.artifacts[0]["parts"]) == 2


# --- a real a2a-sdk agent's stream ----------------------------------------------------------


def drive(task: Task, timeout: float = 20.0) -> Task:
    """Run the worker on ``task`` in this thread until it ends."""
    deadline = time.monotonic() + timeout
    while True:
        task.refresh_from_db()
        if task.is_terminal and task.next_action == NextAction.NONE:
            return task
        assert time.monotonic() < deadline, f"task still {task.state}: {task.error}"
        if task.next_action:
            Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now(), lease_until=None)
            worker.process_task(task.pk)
        else:
            time.sleep(0.02)


@pytest.fixture
def stream_chunks(
    db: None, make_skill: Any, make_agent: Any, make_user: Any, settings: Any
) -> Iterator[Callable[[int, int], tuple[Task, list[str]]]]:
    """``run(chunks, size)``: a ``chunks`` task at a real a2a-sdk agent that cannot be
    polled (so it is followed by its stream), driven to its end; the task, and the SQL the
    worker ran meanwhile."""
    settings.ALLOW_LOOPBACK_URLS = True
    with run_agent() as peer:
        skill = make_skill(id="ce-review")
        make_agent(skills=[skill], a2a_endpoint=peer.url, polling=False)
        user = make_user()

        def run(chunks: int, size: int) -> tuple[Task, list[str]]:
            data = {"product": "lamp", "behaviour": "chunks", "chunks": chunks, "size": size}
            task = creation.create_task(skill_id="ce-review", input=data, user=user)
            with CaptureQueriesContext(connection) as queries:
                task = drive(task)
            assert task.metadata["followedBy"] == "stream"
            return task, [q["sql"] for q in queries]

        yield run


@pytest.mark.parametrize(("cap", "ends"), [(50_000, "COMPLETED"), (5_000, "FAILED")])
def test_a_streamed_artifact_is_capped_as_it_grows(
    stream_chunks: Any, settings: Any, cap: int, ends: str
) -> None:
    """Ten appended chunks of 1,000 characters fit 50 kB and complete; against 5 kB the
    task fails when the stream's view of them is applied."""
    settings.TASK_ARTIFACTS_MAX_BYTES = cap
    task, _ = stream_chunks(10, 1000)
    assert task.state == f"TASK_STATE_{ends}", task.error
    if ends == "COMPLETED":
        chunked = next(a for a in task.artifacts if a["artifactId"] == "chunked")
        assert [p["text"][0] for p in chunked["parts"]] == [str(i) for i in range(10)]
        return
    assert task.error["code"] == "artifacts_too_large"
    assert task.error["details"]["maxBytes"] == 5_000
    # What was kept before the cap was reached stays, under the cap.
    assert artifacts_bytes(task.artifacts or []) <= 5_000
    assert "remoteCancel" in task.metadata  # the agent was asked to cancel its task


@pytest.mark.parametrize("interval", [0.0, 30.0])
def test_a_streams_chunks_are_written_at_most_every_interval(
    stream_chunks: Any, settings: Any, interval: float
) -> None:
    """Each write of a chunk rewrites all the artifacts before it: a stream's events that
    only add artifacts are applied at most every A2A_STREAM_APPLY_INTERVAL, and the last
    one held back when the stream ends, so nothing is lost (0: every event is applied)."""
    settings.A2A_STREAM_APPLY_INTERVAL = interval
    task, sql = stream_chunks(40, 100)
    assert task.state == TaskState.COMPLETED
    chunked = next(a for a in task.artifacts if a["artifactId"] == "chunked")
    assert [p["text"][0] for p in chunked["parts"]] == [str(i % 10) for i in range(40)]
    writes = [q for q in sql if q.startswith("UPDATE") and "artifacts" in q]
    if interval:
        assert len(writes) <= 3, len(writes)  # the end, and at most a status or two
    else:
        assert len(writes) >= 40  # every chunk


def test_what_a_broken_stream_held_back_is_kept(pushed_task: Task, settings: Any) -> None:
    """Chunks held back by the interval go in when the stream breaks, before the break
    fails the task: the stream below is the agent's events, then a broken connection."""
    from a2a import agent_streams
    from a2a.exceptions import A2AProtocolError
    from a2a.transports.base import AgentReply
    from agent_profiles.interfaces import call_target

    settings.A2A_STREAM_APPLY_INTERVAL = 30.0
    status = {"state": "TASK_STATE_WORKING"}

    def view(parts: int) -> AgentReply:
        artifact = {"artifactId": "out", "parts": [{"text": str(i)} for i in range(parts)]}
        task = {"id": "agent-task-1", "contextId": "c", "status": status}
        return AgentReply(task={**task, "artifacts": [artifact]} if parts else task)

    def events() -> Iterator[AgentReply]:
        yield from (view(n) for n in range(4))  # WORKING, then three chunks held back
        raise A2AProtocolError("the connection broke")

    task = Task.objects.select_related("agent").get(pk=pushed_task.pk)
    agent_streams.follow_events(task, call_target(task.agent), events(), sending=False)
    task.refresh_from_db()
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "not_a2a")
    assert "broke off" in task.error["message"]
    assert [p["text"] for p in task.artifacts[0]["parts"]] == ["0", "1", "2"]
