"""A person's cancel of a task the platform follows over a stream (an agent that cannot
be polled) reaches the agent once. The worker's ``CancelTask`` ends the agent's task, and
the stream then ends with the agent's CANCELED; its thread took that for a cancel made
while its call was on the wire and sent ``CancelTask`` again. The agent refused the second
(its task was canceled already): ``metadata.remoteCancel`` then showed that refusal, and
the agent was marked unhealthy for it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from a2a import creation, services
from a2a.states import TaskState
from agent_profiles.models import AgentProfile
from tests.a2a.helpers import embedded_workers, wait_for
from tests.support.agents import TestAgent
from tests.support.peers import run_peer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def streamer() -> Iterator[TestAgent]:
    with run_peer(no_get_task=True, streaming=True) as agent:
        yield agent


def test_a_cancel_of_a_streamed_task_reaches_the_agent_once(
    settings: Any, make_skill: Any, make_agent: Any, make_user: Any, streamer: TestAgent
) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 0
    skill = make_skill(id="ce-review")
    make_agent(id="streamer", skills=[skill], a2a_endpoint=streamer.url, polling=False)
    user = make_user()
    data = {"product": "lamp", "behaviour": "working"}
    with embedded_workers():
        # The second CancelTask raced the worker's first (about one time in two): a few
        # tasks make the test fail reliably without the fix.
        tasks = [
            creation.create_task(skill_id="ce-review", input=data, user=user) for _ in range(5)
        ]
        for task in tasks:
            wait_for(task, lambda t: t.state == TaskState.WORKING and bool(t.remote_task_id))
        time.sleep(1.0)  # the streams are followed by now
        for task in tasks:
            services.cancel_task(task)
        for task in tasks:
            wait_for(task, lambda t: "remoteCancel" in (t.metadata or {}))
        time.sleep(2.0)  # room for the streams to end with the agent's CANCELED
    cancels = {path: n for path, n in streamer.counts.items() if path.endswith(":cancel")}
    assert len(cancels) == len(tasks)
    assert set(cancels.values()) == {1}, cancels
    for task in tasks:
        task.refresh_from_db()
        assert task.metadata["remoteCancel"]["state"] == TaskState.CANCELED
    agent = AgentProfile.objects.get(pk="streamer")
    assert agent.last_call_ok is not False, (agent.last_call_code, agent.last_call_error)


def test_a_cancel_told_to_an_earlier_attempts_task_does_not_count_for_the_new_one(
    pushed_task: Any,
) -> None:
    """Attempt 1's cancel went to its agent task; the person retried, then canceled while
    the new send was on the wire: the send's answer names the new agent task, which must
    be told too (``remoteCancel`` left from attempt 1 kept it from being told)."""
    from a2a import agent_answers
    from a2a.follow_policy import POLL
    from a2a.models import Task
    from a2a.states import NextAction
    from a2a.transports.base import AgentReply
    from agent_profiles.interfaces import call_target

    told = {"at": "2026-12-01T10:00:00+00:00", "taskId": "old-agent-task", "state": "x"}
    Task.objects.filter(pk=pushed_task.pk).update(metadata={"remoteCancel": told})
    task = Task.objects.select_related("agent").get(pk=pushed_task.pk)
    assert task.cancel("canceled by a person")
    answer = AgentReply(task={"id": "agent-task-1", "status": {"state": "TASK_STATE_WORKING"}})
    agent_answers.after_answer(task, call_target(task.agent), answer, TaskState.SUBMITTED, POLL)
    task.refresh_from_db()
    assert task.next_action == NextAction.CANCEL
