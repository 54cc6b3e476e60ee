"""A person's reply sent again after the worker that sent it died (killed after the agent
took the reply, before the platform recorded its answer).

The agent finished its task with the reply, so the re-sent reply is refused: a2a-sdk
answers a message to a task in a final state with HTTP 400 (reason
UNSUPPORTED_OPERATION, "Task … is in terminal state"). The refusal is about the agent's
task, not about the reply: the platform reads the agent's task (``GetTask``) and goes on
from what it says, instead of handing the task to the gateway (which an agent that never
connects there left to fail at the deadline). Only a task that cannot be read either
goes the old way.

Against the real test agent (:mod:`tests.support.agents`: ``ask`` asks a question, a
reply completes the task with the answer), polled one task at a time (no listing, as an
A2A 0.3 agent or one whose ``ListTasks`` is missing). The crash is simulated by a
transport whose send passes the reply to the agent and then kills the worker (an
exception no handler of the worker catches); the claim is then made to have run out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a import creation, services
from a2a.exceptions import A2ATransientError, A2AUnsupportedOperation
from a2a.models import Task
from a2a.states import INTERRUPTED_STATES, TERMINAL_STATES, NextAction, TaskState, Transport
from a2a.transports.rest import RestTransport
from a2a.worker import process_task
from tests.support.agents import TestAgent

ANSWER = {"verdict": "pass", "answer": "EU"}  # the test agent's output for the reply "EU"


class WorkerKilled(BaseException):
    """The worker's process dies: nothing of the worker handles it (SIGKILL)."""


def settled(task: Task) -> bool:
    return task.state in TERMINAL_STATES or task.state in INTERRUPTED_STATES


def drive(task: Task, until: Callable[[Task], bool] = settled, timeout: float = 15.0) -> Task:
    """Run the worker on ``task`` in this thread until ``until(task)``, each next action
    made due at once (the test does not wait out poll intervals)."""
    deadline = time.monotonic() + timeout
    while True:
        task.refresh_from_db()
        if until(task):
            return task
        assert time.monotonic() < deadline, f"task still {task.state}: {task.error}"
        if task.next_action:
            Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now(), lease_until=None)
            process_task(task.pk)
        else:
            time.sleep(0.02)


def asking(user: Any) -> Task:
    """A task the agent asks about ("Which market?"), waiting for the person."""
    task = creation.create_task(
        skill_id="ce-review", input={"product": "lamp", "behaviour": "ask"}, user=user
    )
    task = drive(task)
    assert task.state == TaskState.INPUT_REQUIRED, task.error
    assert task.remote_task_id
    return task


def replied_and_killed(task: Task, monkeypatch: pytest.MonkeyPatch) -> Task:
    """The person replies "EU"; the worker sends the reply, the agent takes it (and
    completes its task) and the worker dies before it records the answer. Then its
    claim runs out: the task is due to be sent again, as the sweep finds it."""
    services.reply_to_task(task, text="EU")
    real_send = RestTransport.send

    def send_and_die(self: RestTransport, message: dict[str, Any], **kwargs: Any) -> Any:
        real_send(self, message, **kwargs)
        # The agent ends its task with the reply before the sweep sends it again (the
        # claim runs for A2A_LEASE_SECONDS): wait for that here, so the re-send meets it.
        for _ in range(500):
            if self.get_task(message["taskId"]).state == TaskState.COMPLETED:
                raise WorkerKilled
            time.sleep(0.01)
        raise AssertionError("the agent did not complete its task with the reply")

    monkeypatch.setattr(RestTransport, "send", send_and_die)
    with pytest.raises(WorkerKilled):
        process_task(task.pk)
    monkeypatch.setattr(RestTransport, "send", real_send)
    task.refresh_from_db()
    assert (task.state, task.next_action) == (TaskState.WORKING, NextAction.SEND)
    assert task.lease_until is not None  # the dead worker's claim
    Task.objects.filter(pk=task.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    task.refresh_from_db()
    return task


def sends(module_peer: TestAgent) -> int:
    """``message:send`` requests the agent received (the task's and its replies)."""
    return module_peer.counts["/message:send"]


def test_a_reply_the_agent_took_before_the_worker_died_completes_the_task(
    polled_user: Any, module_peer: TestAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The re-sent reply is refused for the agent's ended task; one read of that task
    completes the platform's with the agent's output, the work done once."""
    task = asking(polled_user)
    remote = task.remote_task_id
    task = replied_and_killed(task, monkeypatch)
    assert len(module_peer.replies[remote]) == 1  # the agent took the reply once

    process_task(task.pk)  # the sweep's worker: the reply is sent again

    task.refresh_from_db()
    assert (task.state, task.output) == (TaskState.COMPLETED, ANSWER), task.error
    assert task.transport == Transport.A2A  # never handed to the gateway
    assert "fallbacks" not in task.metadata or not task.metadata["fallbacks"]
    assert task.error is None
    assert task.remote_task_id == remote
    assert len(module_peer.replies[remote]) == 1  # the agent did the work once
    assert sends(module_peer) == 3  # the task, the dead worker's reply, the re-send it refused


def test_a_refused_reply_the_agent_still_waits_for_goes_back_to_the_person(
    polled_user: Any, module_peer: TestAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent refuses the reply (as an operation it does not take) and its task still
    asks: the question stands, so the person answers again; not the gateway."""
    task = asking(polled_user)
    question = task.question
    services.reply_to_task(task, text="EU")

    def refuse(self: RestTransport, message: dict[str, Any], **kwargs: Any) -> Any:
        raise A2AUnsupportedOperation("Agent 'x' does not offer POST …: HTTP 400", status=400)

    monkeypatch.setattr(RestTransport, "send", refuse)
    process_task(task.pk)
    task.refresh_from_db()
    assert (task.state, task.transport) == (TaskState.INPUT_REQUIRED, Transport.A2A)
    assert task.question == question
    assert task.error["code"] == "unsupported_operation"
    assert task.error["message"].startswith("The agent refused the answer; answer again.")
    assert task.next_action == NextAction.NONE

    monkeypatch.undo()
    services.reply_to_task(task, text="EU")
    task = drive(task)
    assert (task.state, task.output) == (TaskState.COMPLETED, ANSWER), task.error


def test_a_refused_reply_whose_agent_task_cannot_be_read_goes_to_the_gateway(
    polled_user: Any, module_peer: TestAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The re-sent reply is refused and the agent's task cannot be read either: nothing
    says where the agent is, so the task falls back as before."""
    task = replied_and_killed(asking(polled_user), monkeypatch)

    def unreadable(self: RestTransport, task_id: str, *, history: int = 0) -> Any:
        raise A2ATransientError("Agent 'x' answered HTTP 503", code="agent_http_error")

    monkeypatch.setattr(RestTransport, "get_task", unreadable)
    process_task(task.pk)
    task.refresh_from_db()
    assert (task.state, task.transport) == (TaskState.WORKING, Transport.OFFLINE)
    assert task.error["code"] == "unsupported_operation"
    assert "terminal state" in task.error["message"]


def test_a_refused_reply_goes_back_with_its_question_when_the_agent_s_are_not_kept(
    polled_user: Any, module_peer: TestAgent, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """The same, past ``TASK_AGENT_MESSAGES_MAX`` (none kept here): the question the
    reply answered comes back, not the latest message kept (an older question, or none)."""
    settings.TASK_AGENT_MESSAGES_MAX = 0
    task = asking(polled_user)
    question = task.question
    services.reply_to_task(task, text="EU")

    def refuse(self: RestTransport, message: dict[str, Any], **kwargs: Any) -> Any:
        raise A2AUnsupportedOperation("Agent 'x' does not offer POST …: HTTP 400", status=400)

    monkeypatch.setattr(RestTransport, "send", refuse)
    process_task(task.pk)
    task.refresh_from_db()
    assert (task.state, task.question) == (TaskState.INPUT_REQUIRED, question)
    assert task.error["message"].startswith("The agent refused the answer; answer again.")
