"""An agent's ``Retry-After`` holds its sends too: a send answered ``429``/``503`` with
``Retry-After`` pauses the agent (its other sends and its polls wait for the pause's end),
and a send taken up during a pause a poll asked for waits instead of calling. Before,
only polls obeyed a pause, and each task's send learned of it by its own ``429``: a burst
of new tasks for a busy agent was sent, refused and counted against each task's attempts
one by one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from starlette.responses import JSONResponse, Response

from a2a import creation, worker
from a2a.models import Task
from a2a.pause_models import AgentPause
from a2a.states import NextAction, TaskState, Transport
from gateway import presence
from tests.support.scripted_agent import WORKING, register, run_scripted_agent

pytestmark = pytest.mark.django_db(transaction=True)

BUSY = {"Retry-After": "60"}


@pytest.fixture(autouse=True)
def loopback(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 0  # polled, not listed


class Agent:
    """Sends answered with agent tasks t1, t2, … (WORKING), or refused with ``busy``
    (an HTTP status and its headers) while it is set; polls answered WORKING."""

    def __init__(self) -> None:
        self.sent = 0
        self.busy: tuple[int, dict[str, str]] | None = None

    def __call__(self, kind: str, body: Any) -> Any:
        if kind in ("send", "SendMessage", "stream") and self.busy is not None:
            status, headers = self.busy
            return JSONResponse({"error": "busy"}, status_code=status, headers=headers)
        if kind == "send":
            self.sent += 1
            return JSONResponse({"task": _task(f"t{self.sent}")})
        if kind == "SendMessage":
            self.sent += 1
            result = {"task": _task(f"t{self.sent}")}
            return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": result})
        if kind == "get":
            return JSONResponse(_task("t1"))
        return Response(status_code=405)


@contextmanager
def busy_agent(make_agent: Any, make_skill: Any, **fields: Any) -> Iterator[tuple[Any, Agent]]:
    """A scripted agent (:class:`Agent`) registered for ``ce-review``; ``fields`` as in
    :func:`register`."""
    script = Agent()
    with run_scripted_agent() as agent:
        agent.answer = script
        register(make_agent, make_skill, agent, fields.pop("binding", "HTTP+JSON"), **fields)
        yield agent, script


def _due_now(task: Task) -> Task:
    """Process the task now (its pause lifted): its next call is due."""
    AgentPause.objects.all().delete()
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now())
    worker.process_task(task.pk)
    task.refresh_from_db()
    return task


def _task(task_id: str) -> dict[str, Any]:
    return {"id": task_id, "contextId": "c", "status": {"state": WORKING}}


def _new(user: Any, product: str) -> Task:
    task = creation.create_task(skill_id="ce-review", input={"product": product}, user=user)
    worker.process_task(task.pk)
    task.refresh_from_db()
    return task


def _wait(task: Task) -> float:
    task.refresh_from_db()
    return (task.next_poll_at - timezone.now()).total_seconds()


@pytest.mark.parametrize(("binding", "status"), [("HTTP+JSON", 429), ("JSONRPC", 503)])
def test_a_send_answered_busy_pauses_the_agents_other_sends_and_polls(
    binding: str, status: int, make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    user = make_user()
    with busy_agent(make_agent, make_skill, binding=binding) as (agent, script):
        working = _new(user, "first")  # sent: its poll is due at the interval
        assert working.state == TaskState.WORKING
        Task.objects.filter(pk=working.pk).update(next_poll_at=timezone.now())
        script.busy = (status, BUSY)
        refused = _new(user, "second")
        send = "send" if binding == "HTTP+JSON" else "SendMessage"
        assert agent.calls[send] == 2
        assert refused.next_action == NextAction.SEND
        assert refused.metadata["sendFailures"] == 0  # asked to wait: not a failure
        assert _wait(refused) > 50
        assert AgentPause.objects.get(agent_id=refused.agent_id).until > timezone.now()
        # The agent's poll due now was moved past the pause too.
        assert _wait(working) > 50
        # A new task's send, taken up now, waits for the pause instead of calling; it is
        # not charged with an attempt (the agent was not called).
        script.busy = None
        waiting = _new(user, "third")
        assert agent.calls[send] == 2
        assert waiting.state == TaskState.SUBMITTED
        assert waiting.next_action == NextAction.SEND
        assert waiting.metadata["sendFailures"] == 0
        assert "busyAnswers" not in waiting.metadata  # no answer of the agent's
        assert waiting.error["code"] == "agent_paused"
        assert _wait(waiting) > 50
        # The pause over (lifted on the console), the send goes.
        waiting = _due_now(waiting)
        assert agent.calls[send] == 3
        assert waiting.state == TaskState.WORKING


def test_a_streamed_send_answered_busy_pauses_the_agent(
    make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """The same for an agent followed by streams (``message:stream`` refused)."""
    user = make_user()
    with busy_agent(make_agent, make_skill, stream=True) as (agent, script):
        script.busy = (429, BUSY)
        refused = _new(user, "first")
        assert agent.calls["stream"] == 1
        assert refused.next_action == NextAction.SEND
        assert AgentPause.objects.get(agent_id=refused.agent_id).until > timezone.now()
        waiting = _new(user, "second")
        assert agent.calls["stream"] == 1
        assert _wait(waiting) > 50


def test_a_send_waits_for_a_pause_a_poll_asked_for(
    make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    user = make_user()
    with busy_agent(make_agent, make_skill) as (agent, _script):
        AgentPause.ask("agent-one", timezone.now() + timedelta(seconds=30))
        task = _new(user, "lamp")
        assert agent.calls["send"] == 0
        assert task.next_action == NextAction.SEND
        assert 20 < _wait(task) <= 31  # its end, plus up to a second so as not to herd


def test_a_send_without_retry_after_pauses_nothing(
    make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """A 503 alone is a failed send retried with the usual backoff: no pause."""
    user = make_user()
    with busy_agent(make_agent, make_skill) as (_agent, script):
        script.busy = (503, {})
        refused = _new(user, "lamp")
        assert refused.metadata["sendFailures"] == 1
        assert not AgentPause.objects.exists()
        script.busy = None
        assert _new(user, "lamp").state == TaskState.WORKING


def test_an_agent_that_keeps_asking_to_wait_is_waited_for_not_given_up(
    settings: Any, make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """Each 429 with Retry-After counted as a failed send: after A2A_MAX_ATTEMPTS of
    them the task went to the gateway, where an agent without a socket never takes it.
    Now the agent is called again after each pause until the deadline."""
    settings.A2A_MAX_ATTEMPTS = 2
    user = make_user()
    with busy_agent(make_agent, make_skill) as (agent, script):
        script.busy = (429, {"Retry-After": "1"})
        task = _new(user, "lamp")
        for _ in range(3):  # each pause over, sent again and refused again
            _due_now(task)
        task.refresh_from_db()
        assert agent.calls["send"] == 4
        assert task.transport == "a2a"
        assert task.next_action == NextAction.SEND
        assert task.metadata["sendFailures"] == 0
        # Not every second, though the agent says so: the wait doubles with each busy
        # answer (2, 4, 8, 16 s at the default backoff), up to a minute.
        assert task.metadata["busyAnswers"] == 4
        assert 14 < _wait(task) <= 16
        script.busy = None
        task = _due_now(task)
        assert task.state == TaskState.WORKING
        assert agent.calls["send"] == 5
        assert "busyAnswers" not in task.metadata  # the agent took it: the count starts again


def test_busy_answers_never_resend_in_under_a_second(
    settings: Any, make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """A Retry-After under a second (or an HTTP date just past) with A2A_RETRY_BACKOFF=0
    had an uncounted send made again at once, every time, until the deadline."""
    settings.A2A_RETRY_BACKOFF = 0.0
    with busy_agent(make_agent, make_skill) as (agent, script):
        script.busy = (429, {"Retry-After": "0.001"})
        task = _new(make_user(), "lamp")
        worker.process_task(task.pk)  # not due yet: nothing is sent
        assert agent.calls["send"] == 1
        assert _wait(task) > 0.9


def test_an_agent_online_on_the_socket_gets_its_tasks_at_once_during_a_pause(
    make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """A send answered 429 goes to the socket of an agent online on the gateway at once;
    so do its other tasks while the pause lasts (they waited for it over HTTP)."""
    user = make_user()
    with busy_agent(make_agent, make_skill) as (agent, script):
        presence.register("agent-one", "chan-1")
        script.busy = (429, BUSY)
        assert _new(user, "first").transport == Transport.WEBSOCKET
        assert AgentPause.objects.filter(agent_id="agent-one").exists()
        assert _new(user, "second").transport == Transport.WEBSOCKET
        assert agent.calls["send"] == 1


def test_a_pause_past_the_deadline_hands_the_send_to_the_gateway(
    make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """A pause that outlasts the task's deadline: the task goes to the gateway (offline,
    for the agent to take when it connects), as the task whose send met the 429 did,
    instead of waiting to be timed out unsent."""
    user = make_user()
    with busy_agent(make_agent, make_skill, timeout=30.0, gateway_seen_at=timezone.now()) as (
        agent,
        script,
    ):
        script.busy = (429, BUSY)  # Retry-After: 60, past the 30 s deadline
        assert _new(user, "first").transport == Transport.OFFLINE
        second = _new(user, "second")
        assert second.transport == Transport.OFFLINE
        assert agent.calls["send"] == 1


def test_a_busy_wait_that_would_pass_the_deadline_tries_once_more_in_time(
    make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """The doubled wait, not the agent's Retry-After, decided that the task would miss
    its deadline: it went to the gateway with time left for the agent's own second."""
    with busy_agent(make_agent, make_skill, timeout=20.0) as (agent, script):
        script.busy = (429, {"Retry-After": "1"})
        task = _new(make_user(), "lamp")
        # Four busy answers already: the next wait would be 32 s, past the deadline.
        Task.objects.filter(pk=task.pk).update(
            metadata={**task.metadata, "busyAnswers": 4}, next_poll_at=timezone.now()
        )
        AgentPause.objects.all().delete()
        worker.process_task(task.pk)
        task.refresh_from_db()
        assert agent.calls["send"] == 2
        assert task.transport == Transport.A2A
        assert task.next_action == NextAction.SEND
        assert 0.5 < _wait(task) <= 1.1
