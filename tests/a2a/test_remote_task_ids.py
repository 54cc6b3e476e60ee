"""The agent's task id, as the platform keeps it: set by the answer to the task's first
message, and from then on the one task a poll, a stream or a follow-up's answer may speak
about. An answer naming another agent task is a bad answer (``not_a2a``): it changes
nothing of the task, so the platform never polls, cancels or takes the output of someone
else's task. An id longer than the column holds is refused the same way, never cut (a cut
id names no task of the agent's).

Against the real test agent (:mod:`tests.support.agents`), whose answers a thin wrapper of
the transport points at another task (as a confused or hostile agent would), and on
:func:`a2a.agent_updates.apply_agent_reply` for the ways of sending and following that need no
agent to show.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.utils import timezone

from a2a import agent_calls, agent_updates, creation, engine, transports
from a2a.exceptions import A2AProtocolError
from a2a.models import Task
from a2a.states import NextAction, TaskState
from a2a.transports.base import AgentReply
from a2a.worker import process_task
from tests.support.agents import TestAgent

LIMIT = Task._meta.get_field("remote_task_id").max_length
assert LIMIT is not None
VICTIM_OUTPUT = {"verdict": "fail"}  # the other task's result, unlike this task's agent's


# --- against the test agent ----------------------------------------------------------------


def create(user: Any, behaviour: str, **more: Any) -> Task:
    data = {"product": "lamp", "behaviour": behaviour, **more}
    return creation.create_task(skill_id="ce-review", input=data, user=user)


def sent(task: Task) -> Task:
    """Process the task's first send; the task as it is then."""
    process_task(task.pk)
    task.refresh_from_db()
    return task


def victim(user: Any) -> Task:
    """Someone else's task at the same agent, COMPLETED with :data:`VICTIM_OUTPUT`."""
    task = sent(create(user, "complete", output=VICTIM_OUTPUT))
    assert task.state == TaskState.COMPLETED
    assert task.remote_task_id
    return task


def in_flight(user: Any) -> Task:
    """A task the agent works on (it never ends by itself), its next poll due now."""
    task = sent(create(user, "working"))
    assert task.remote_task_id
    assert task.next_action == NextAction.POLL
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now())
    task.refresh_from_db()
    return task


def answers_about(monkeypatch: pytest.MonkeyPatch, other_id: str) -> list[str]:
    """From now on the agent answers every read of a task (``GetTask``, a subscribe)
    with its task ``other_id``; returns the ids the platform asks to cancel."""
    real_transport_for = transports.transport_for
    canceled: list[str] = []

    class AboutAnother:
        def __init__(self, target: Any, **options: Any) -> None:
            self.real = real_transport_for(target, **options)

        def get_task(self, task_id: str, *, history: int = 0) -> AgentReply:
            return self.real.get_task(other_id, history=history)

        def subscribe(self, task_id: str, *, timeout: float) -> Iterator[AgentReply]:
            yield self.real.get_task(other_id)

        def cancel(self, task_id: str, *, timeout: float | None = None) -> AgentReply:
            canceled.append(task_id)
            return self.real.cancel(task_id, timeout=timeout)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

    monkeypatch.setattr(agent_calls.transports, "transport_for", AboutAnother)
    return canceled


def assert_refused(task: Task, own_id: str, other: Task) -> None:
    """The task kept its agent task and took nothing of the other one; it failed as after
    any answer that is not A2A, with a text naming both tasks."""
    task.refresh_from_db()
    assert task.remote_task_id == own_id
    assert task.output is None
    assert task.artifacts in ([], None)
    assert task.state == TaskState.FAILED
    assert task.error["code"] == "not_a2a"
    assert own_id in task.error["message"]
    assert other.remote_task_id in task.error["message"]
    other.refresh_from_db()
    assert (other.state, other.output) == (TaskState.COMPLETED, VICTIM_OUTPUT)


def test_a_poll_answered_with_another_task_takes_nothing_of_it(
    polled_user: Any, module_peer: TestAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = victim(polled_user)
    task = in_flight(polled_user)
    own_id = task.remote_task_id
    canceled = answers_about(monkeypatch, other.remote_task_id)
    process_task(task.pk)
    assert_refused(task, own_id, other)
    # Nothing is asked of the other task afterwards, above all not its cancel.
    task.refresh_from_db()
    assert task.next_action != NextAction.POLL
    assert other.remote_task_id not in module_peer.canceled + canceled


def test_a_batched_poll_answered_with_another_task_takes_nothing_of_it(
    polled_user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = victim(polled_user)
    task = in_flight(polled_user)
    own_id = task.remote_task_id
    answers_about(monkeypatch, other.remote_task_id)
    assert engine.poll_due(10) == 1
    assert_refused(task, own_id, other)


def test_a_stream_event_about_another_task_takes_nothing_of_it(
    polled_user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = victim(polled_user)
    task = in_flight(polled_user)
    own_id = task.remote_task_id
    Task.objects.filter(pk=task.pk).update(next_action=NextAction.FOLLOW)  # a subscribe
    answers_about(monkeypatch, other.remote_task_id)
    process_task(task.pk)
    assert_refused(task, own_id, other)


def test_an_agent_task_id_longer_than_the_platform_keeps_is_refused_not_cut(
    polled_user: Any, module_peer: TestAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_id = "t" * (LIMIT + 1)
    real_transport_for = transports.transport_for

    class LongIds:
        """The agent's send answer, with its task named by ``long_id``."""

        def __init__(self, target: Any, **options: Any) -> None:
            self.real = real_transport_for(target, **options)

        def send(self, *args: Any, **kwargs: Any) -> AgentReply:
            reply = self.real.send(*args, **kwargs)
            assert reply.task is not None
            reply.task = {**reply.task, "id": long_id}
            return reply

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

    monkeypatch.setattr(agent_calls.transports, "transport_for", LongIds)
    task = sent(create(polled_user, "working"))
    assert task.remote_task_id == ""  # neither the id nor a shortened one
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "not_a2a")
    assert f"{LIMIT + 1} characters" in task.error["message"]
    assert str(LIMIT) in task.error["message"]
    assert task.error["details"]["maxLength"] == LIMIT
    assert module_peer.requests_for(long_id[:LIMIT]) == 0  # never polled under a cut id


# --- the ways of sending and following, on the one mapping ---------------------------------


def reply(remote_id: str, state: str = "TASK_STATE_WORKING", **more: Any) -> dict[str, Any]:
    return {"id": remote_id, "contextId": "ctx-1", "status": {"state": state}, **more}


def apply(task: Task, remote: dict[str, Any], via: str = "a2a") -> Task:
    return agent_updates.apply_agent_reply(task, task_json=remote, message=None, via=via)


def following(task: Task, remote_id: str, action: str = NextAction.POLL) -> Task:
    """The task sent: the agent answered WORKING with its task ``remote_id``; the task's
    next action is ``action``."""
    apply(task, reply(remote_id))
    Task.objects.filter(pk=task.pk).update(next_action=action, attempts=1)
    task.refresh_from_db()
    assert (task.state, task.remote_task_id) == (TaskState.WORKING, remote_id)
    return task


def assert_unchanged(task: Task, before: dict[str, Any]) -> None:
    task.refresh_from_db()
    after = {name: getattr(task, name) for name in before}
    assert after == before


def snapshot(task: Task) -> dict[str, Any]:
    names = ("state", "remote_task_id", "remote_context_id", "output", "artifacts", "updated_at")
    return {name: getattr(task, name) for name in names}


@pytest.mark.django_db
def test_the_first_sends_answer_names_the_agents_task(task: Task) -> None:
    apply(task, reply("agent-task-1"))
    task.refresh_from_db()
    assert (task.remote_task_id, task.state) == ("agent-task-1", TaskState.WORKING)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("action", "via", "followup"),
    [
        (NextAction.POLL, "a2a", False),  # a poll
        (NextAction.FOLLOW, "stream", False),  # a subscribe's event
        (NextAction.SEND, "a2a", True),  # the answer to a person's reply
        (NextAction.NONE, "a2a", False),  # nothing due (a late answer)
    ],
)
def test_an_answer_about_another_agent_task_changes_nothing(
    task: Task, action: str, via: str, followup: bool
) -> None:
    task = following(task, "agent-task-1", action)
    if followup:
        outbound = {**task.outbound_message, "taskId": "agent-task-1"}
        Task.objects.filter(pk=task.pk).update(outbound_message=outbound)
        task.refresh_from_db()
    before = snapshot(task)
    done = reply("VICTIM-TASK", "TASK_STATE_COMPLETED", contextId="ctx-2")
    done["artifacts"] = [{"artifactId": "r", "parts": [{"data": VICTIM_OUTPUT}]}]
    with pytest.raises(A2AProtocolError) as raised:
        apply(task, done, via)
    assert "'VICTIM-TASK'" in raised.value.message
    assert "'agent-task-1'" in raised.value.message
    assert raised.value.details == {
        "remoteTaskId": "agent-task-1",
        "answeredTaskId": "VICTIM-TASK",
    }
    assert_unchanged(task, before)


@pytest.mark.django_db
def test_news_about_a_finished_task_from_another_agent_task_is_refused_too(task: Task) -> None:
    task = following(task, "agent-task-1")
    task.fail("agent_failed", "The agent broke.")
    before = snapshot(task)
    with pytest.raises(A2AProtocolError):
        apply(task, reply("VICTIM-TASK", contextId="ctx-2"))
    assert_unchanged(task, before)


@pytest.mark.django_db
def test_a_first_message_sent_again_may_start_a_new_agent_task(task: Task) -> None:
    """A first message sent again another way (the agent could not be polled) may start a
    new task at the agent: that send's answer names the task followed from then on."""
    task = following(task, "agent-task-1", NextAction.SEND)
    apply(task, reply("agent-task-2"))
    task.refresh_from_db()
    assert task.remote_task_id == "agent-task-2"


@pytest.mark.django_db
def test_a_sending_stream_names_its_task_once(task: Task) -> None:
    """The first event of ``message:stream`` names the agent's task; a later event about
    another one is refused."""
    apply(task, reply("agent-task-1"), via="stream")
    assert task.mark_sent()  # as the stream does once the agent's task is known
    with pytest.raises(A2AProtocolError):
        apply(task, reply("agent-task-2"), via="stream")
    task.refresh_from_db()
    assert task.remote_task_id == "agent-task-1"


@pytest.mark.django_db
def test_a_new_context_id_is_no_other_task(task: Task) -> None:
    task = following(task, "agent-task-1")
    apply(task, reply("agent-task-1", contextId="ctx-2"))
    task.refresh_from_db()
    assert (task.remote_task_id, task.remote_context_id) == ("agent-task-1", "ctx-2")


@pytest.mark.django_db
def test_ids_as_long_as_the_columns_hold_are_kept_whole(task: Task) -> None:
    context_limit = Task._meta.get_field("remote_context_id").max_length
    assert context_limit is not None
    rid, ctx = "t" * LIMIT, "c" * context_limit
    apply(task, reply(rid, contextId=ctx))
    task.refresh_from_db()
    assert (task.remote_task_id, task.remote_context_id) == (rid, ctx)


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["id", "contextId"])
def test_an_id_longer_than_its_column_is_refused_not_cut(task: Task, field: str) -> None:
    column = "remote_task_id" if field == "id" else "remote_context_id"
    limit = Task._meta.get_field(column).max_length
    assert limit is not None
    before = snapshot(task)
    remote = reply("agent-task-1")
    remote[field] = "x" * (limit + 1)
    with pytest.raises(A2AProtocolError) as raised:
        apply(task, remote)
    assert f"{limit + 1} characters" in raised.value.message
    assert raised.value.details["maxLength"] == limit
    assert_unchanged(task, before)
