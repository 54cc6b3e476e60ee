"""What a worker writes when an agent answers a send with its task still in flight.

Against a real a2a-sdk agent (``working``: the send's answer is the agent's task,
SUBMITTED, and it stays at work): the agent's task id is written with the schedule of
what follows, in one UPDATE; a push that beat the answer (it wrote the id and moved the
task) is not written over again, and the task goes on from the push's state. And a send
that found no answer is not sent again once the agent has shown it got the message.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from a2a import agent_calls, agent_push, agent_push_body, creation, transports
from a2a.models import Task
from a2a.pause_models import AgentPause
from a2a.scheduling import TaskScheduling
from a2a.states import NextAction, TaskState, Transport
from a2a.worker import process_task
from gateway import presence
from gateway.models import Delivery
from tests.support.agents import TestAgent, run_agent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def peer() -> Iterator[TestAgent]:
    with run_agent() as agent:
        yield agent


@pytest.fixture
def user(make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent, settings: Any) -> Any:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 0  # polled one by one: the plainest way to follow a task
    make_agent(skills=[make_skill(id="ce-review")], a2a_endpoint=peer.url)
    return make_user()


def create(user: Any) -> Task:
    return creation.create_task(
        skill_id="ce-review", input={"product": "lamp", "behaviour": "working"}, user=user
    )


def task_updates(queries: CaptureQueriesContext) -> list[str]:
    table = connection.ops.quote_name(Task._meta.db_table)
    return [q["sql"] for q in queries.captured_queries if q["sql"].startswith(f"UPDATE {table}")]


def assert_followed(task: Task, state: str) -> None:
    """The agent's task id is known, the next poll scheduled, no claim held."""
    task.refresh_from_db()
    assert task.remote_task_id
    assert (task.state, task.next_action, task.lease_until) == (state, NextAction.POLL, None)


def test_the_agents_task_id_is_written_with_the_next_poll(user: Any) -> None:
    task = create(user)
    with CaptureQueriesContext(connection) as queries:
        process_task(task.pk)
    assert_followed(task, TaskState.SUBMITTED)
    writes_id = [sql for sql in task_updates(queries) if "remote_task_id" in sql]
    assert len(writes_id) == 1
    assert "next_action" in writes_id[0]  # one UPDATE: the id and the schedule


def test_a_push_that_beat_the_answer_is_not_written_over(
    user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent pushed WORKING (with its task id) while the send's answer was on its way;
    the worker's copy of the task is older than the row."""
    task = create(user)
    real_transport_for = transports.transport_for
    written: list[set[str]] = []  # the fields of each task write that changed the row
    real_set = TaskScheduling._set

    def recording_set(self: Task, conditions: dict[str, Any], fields: dict[str, Any]) -> bool:
        changed = real_set(self, conditions, fields)
        if changed:
            written.append(set(fields))
        return changed

    class PushFirst:
        def __init__(self, target: Any, **options: Any) -> None:
            self.real = real_transport_for(target, **options)

        def send(self, *args: Any, **kwargs: Any) -> Any:
            reply = self.real.send(*args, **kwargs)
            rid = reply.task["id"]
            body = {"statusUpdate": {"taskId": rid, "status": {"state": "TASK_STATE_WORKING"}}}
            agent_push.apply(task.pk, 1, agent_push_body.parse(body))
            monkeypatch.setattr(TaskScheduling, "_set", recording_set)  # from here on
            return reply

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

    monkeypatch.setattr(agent_calls.transports, "transport_for", PushFirst)
    process_task(task.pk)
    assert_followed(task, TaskState.WORKING)
    assert written, "the worker scheduled the next poll"
    assert all("remote_task_id" not in fields for fields in written)
    assert any("next_action" in fields for fields in written)  # it goes on from WORKING


@pytest.fixture
def hanging(
    make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent, settings: Any
) -> Any:
    """An agent whose answer to the send never comes (the platform times out). It was seen
    to return early before, so the timeout is load, not a hold: its sends are sent again,
    not held (tests/a2a/test_held_sends.py)."""
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_HTTP_TIMEOUT = 0.3
    make_agent(
        skills=[make_skill(id="ce-review")],
        a2a_endpoint=peer.url_for("hang"),
        early_return_seen=True,
    )
    return make_user()


def timed_out_once(user: Any) -> Task:
    task = create(user)
    process_task(task.pk)
    task.refresh_from_db()
    assert (task.next_action, task.attempts, task.metadata["sendFailures"]) == (
        NextAction.SEND,
        1,
        1,
    )
    return task


def resend_due(task: Task) -> Task:
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now())
    process_task(task.pk)
    task.refresh_from_db()
    return task


def test_a_message_the_agent_pushed_about_is_not_sent_again(hanging: Any, peer: TestAgent) -> None:
    """The send timed out, but the agent got the message: it pushed its task. Sending the
    message again would have it do the work twice."""
    task = timed_out_once(hanging)
    body = {"statusUpdate": {"taskId": "agent-task-7", "status": {"state": "TASK_STATE_WORKING"}}}
    agent_push.apply(task.pk, 1, agent_push_body.parse(body))
    task = resend_due(task)
    assert peer.sends == 1
    assert (task.state, task.remote_task_id, task.attempts) == (
        TaskState.WORKING,
        "agent-task-7",
        1,
    )
    assert (task.next_action, task.lease_until, task.error) == (NextAction.POLL, None, None)
    assert task.metadata["sendFailures"] == 0


def test_a_message_the_agent_never_acknowledged_is_sent_again(
    hanging: Any, peer: TestAgent
) -> None:
    task = resend_due(timed_out_once(hanging))
    assert peer.sends == 2
    assert (task.attempts, task.remote_task_id) == (2, "")


@pytest.mark.parametrize(
    ("pushed", "state", "next_action"),
    [
        ("TASK_STATE_WORKING", TaskState.WORKING, NextAction.POLL),
        ("TASK_STATE_FAILED", TaskState.FAILED, NextAction.NONE),
    ],
)
def test_a_push_after_the_resends_claim_still_stops_the_resend(
    hanging: Any, peer: TestAgent, pushed: str, state: str, next_action: str
) -> None:
    """The worker's copy of the task (its claim's read) already knows the agent's task,
    but another push moves the task before the worker schedules: it reads the task again
    and follows it from there (or, ended, only lets go of its claim); nothing is sent."""
    task = timed_out_once(hanging)
    first = {"task": {"id": "agent-task-7", "status": {"state": "TASK_STATE_SUBMITTED"}}}
    agent_push.apply(task.pk, 1, agent_push_body.parse(first))
    claimed = Task.objects.select_related("agent").get(pk=task.pk)
    claimed.extend_lease(60)
    later = {"statusUpdate": {"taskId": "agent-task-7", "status": {"state": pushed}}}
    agent_push.apply(task.pk, 1, agent_push_body.parse(later))
    agent_calls.send(claimed)
    task.refresh_from_db()
    assert peer.sends == 1
    assert (task.state, task.next_action, task.lease_until, task.attempts) == (
        state,
        next_action,
        None,
        1,
    )


@pytest.mark.parametrize("how", ["online_on_socket", "pause_past_deadline"])
def test_a_paused_resend_of_a_message_the_agent_has_is_not_handed_over(
    hanging: Any, peer: TestAgent, how: str
) -> None:
    """The agent pushed about its task after the send timed out, then asked for a pause:
    the resend due meanwhile was answered as a paused send (the gateway at once for an
    agent online on the socket; offline when the pause outlasts the deadline) before
    anyone noticed the agent had the message — assigned again over the socket, or left
    offline to time out while the agent worked on it."""
    task = timed_out_once(hanging)
    body = {"statusUpdate": {"taskId": "agent-task-7", "status": {"state": "TASK_STATE_WORKING"}}}
    agent_push.apply(task.pk, 1, agent_push_body.parse(body))
    if how == "online_on_socket":
        presence.register(task.agent_id, "chan-1")
        AgentPause.ask(task.agent_id, timezone.now() + timedelta(seconds=5))
    else:
        AgentPause.ask(task.agent_id, task.deadline_at + timedelta(seconds=60))
    task = resend_due(task)
    assert peer.sends == 1
    assert task.transport == Transport.A2A
    assert task.remote_task_id == "agent-task-7"
    assert not Delivery.objects.filter(task=task).exists()
