"""One last read before a timeout (:mod:`a2a.deadlines`): an end the platform missed (its
worker killed during a long call, a push lost) stands at the deadline; a task the agent
still works on fails ``timeout`` as before, saying what the read found; an agent that does
not answer costs one read per sweep, not one per task. With a real a2a-sdk agent."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone

from a2a import creation, deadlines, worker
from a2a.models import Task
from a2a.states import ACTIVE_STATES, NextAction, TaskState
from a2a.transports.base import AgentReply
from agent_profiles.models import Skill
from tests.a2a.helpers import working
from tests.support.agents import TestAgent

pytestmark = pytest.mark.django_db(transaction=True)

VERSION = {"A2A-Version": "1.0"}


@pytest.fixture
def sent(polled_user: Any) -> Any:
    """Create a task for the agent with ``input``, send it for real (the agent has it)."""

    def make(**input: Any) -> Task:
        task = creation.create_task(
            skill_id="ce-review", input={"product": "lamp", **input}, user=polled_user
        )
        worker.process_task(task.pk)
        task.refresh_from_db()
        assert task.state in ACTIVE_STATES, task.error
        assert task.remote_task_id
        return task

    return make


def overdue(*tasks: Task) -> None:
    """The tasks' deadline passed while nobody polled them (their worker died holding them,
    say: a claim that runs to the deadline)."""
    now = timezone.now()
    Task.objects.filter(pk__in=[t.pk for t in tasks]).update(
        deadline_at=now - timedelta(seconds=1),
        lease_until=now + timedelta(seconds=10),
        next_poll_at=now + timedelta(seconds=60),
    )


def ended_at_agent(peer: TestAgent, task: Task, timeout: float = 10.0) -> None:
    """Wait until the agent's own task of ``task`` ended, then forget the requests."""
    limit = time.monotonic() + timeout
    while time.monotonic() < limit:
        answer = httpx.get(f"{peer.url}/tasks/{task.remote_task_id}", headers=VERSION)
        if answer.json()["status"]["state"] == "TASK_STATE_COMPLETED":
            peer.reset()
            return
        time.sleep(0.05)
    raise AssertionError(f"the agent's task {task.remote_task_id} did not end")


def test_an_end_the_platform_missed_stands_at_the_deadline(
    sent: Any, module_peer: TestAgent
) -> None:
    task = sent(behaviour="slow", seconds=0.3, output={"verdict": "pass", "n": 7})
    ended_at_agent(module_peer, task)
    overdue(task)
    assert deadlines.expire_overdue() == 0
    task.refresh_from_db()
    assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass", "n": 7})
    assert task.lease_until is None
    assert task.next_action == NextAction.NONE
    assert module_peer.requests_for(task.remote_task_id) == 1  # one GetTask


def test_a_task_the_agent_still_works_on_fails_and_says_what_the_read_found(
    sent: Any, module_peer: TestAgent
) -> None:
    task = sent(behaviour="working")
    overdue(task)
    assert deadlines.expire_overdue() == 1
    task.refresh_from_db()
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "timeout")
    assert task.error["details"]["readAtDeadline"] == TaskState.WORKING
    assert (
        "Read once more at the deadline, the agent's task was: TASK_STATE_WORKING"
        in task.error["message"]
    )
    assert task.next_action == NextAction.CANCEL  # the agent is told, as before


def test_a_worker_that_claims_an_overdue_task_reads_it_first(
    sent: Any, module_peer: TestAgent
) -> None:
    task = sent(behaviour="slow", seconds=0.3)
    ended_at_agent(module_peer, task)
    Task.objects.filter(pk=task.pk).update(
        deadline_at=timezone.now() - timedelta(seconds=1), next_poll_at=timezone.now()
    )
    worker.process_task(task.pk)  # its due poll, claimed past the deadline
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED


def test_an_agent_that_does_not_answer_costs_one_read_per_pass(
    polled_user: Any, module_peer: TestAgent, make_agent: Any, settings: Any
) -> None:
    settings.A2A_HTTP_TIMEOUT = 0.5
    hanging = make_agent(
        id="agent-hang",
        a2a_endpoint=module_peer.url_for("hang"),
        skills=[Skill.objects.get(pk="ce-review")],
    )
    tasks = []
    for n in range(3):
        task = creation.create_task(
            skill_id="ce-review", input={"product": "lamp"}, agent_id=hanging.id, user=polled_user
        )
        working(task, remote_id=f"r-{n}")
        tasks.append(task)
    module_peer.reset()
    overdue(*tasks)
    assert deadlines.expire_overdue() == 3
    reads = sum(n for path, n in module_peer.counts.items() if path.startswith("/x/hang/tasks/"))
    assert reads == 1
    for task in tasks:
        task.refresh_from_db()
        assert (task.state, task.error["code"]) == (TaskState.FAILED, "timeout")
        assert task.error["details"]["readAtDeadline"] == "agent_timeout", task.error


@pytest.mark.parametrize("why", ["no GetTask", "credential refused", "not named"])
def test_a_task_that_cannot_be_read_fails_without_a_call(
    sent: Any, module_peer: TestAgent, why: str
) -> None:
    task = sent(behaviour="slow", seconds=0.3)
    ended_at_agent(module_peer, task)
    if why == "no GetTask":
        task.agent.__class__.objects.filter(pk=task.agent_id).update(polling=False)
    elif why == "credential refused":
        Task.objects.filter(pk=task.pk).update(
            error={"code": "agent_auth_failed", "message": "401"}
        )
    else:
        Task.objects.filter(pk=task.pk).update(remote_task_id="")
    module_peer.reset()
    overdue(task)
    assert deadlines.expire_overdue() == 1
    assert module_peer.total == 0
    task.refresh_from_db()
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "timeout")
    assert "readAtDeadline" not in task.error["details"]


def test_an_agent_that_answers_slowly_has_its_other_tasks_read_in_later_passes(
    sent: Any, module_peer: TestAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep waits for these reads: after a slow first read (any read, here), the
    agent's other overdue tasks wait for the next passes, one each, and are read then."""
    monkeypatch.setattr(deadlines, "PROMPT_SECONDS", 0.0)
    tasks = [sent(behaviour="working") for _ in range(3)]
    module_peer.reset()
    overdue(*tasks)
    assert [deadlines.expire_overdue() for _ in range(4)] == [1, 1, 1, 0]
    assert sum(module_peer.requests_for(t.remote_task_id) for t in tasks) == 3
    for task in tasks:
        task.refresh_from_db()
        assert task.error["details"]["readAtDeadline"] == TaskState.WORKING


@pytest.mark.parametrize("action", [NextAction.POLL, NextAction.SEND])
def test_a_read_answered_as_another_agent_task_is_never_taken(
    sent: Any, module_peer: TestAgent, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    """Even for a task whose send is due again (a retry's backoff, its agent task named by
    a push meanwhile): the rule that lets a send's own answer name its task is not this
    read's. The answer stands in for an agent that answers ``GET /tasks/r-1`` with
    another task (no a2a-sdk agent does)."""
    task = sent(behaviour="working")
    Task.objects.filter(pk=task.pk).update(next_action=action)
    other = {
        "id": "someone-else",
        "contextId": "c",
        "status": {"state": "TASK_STATE_COMPLETED"},
        "artifacts": [{"artifactId": "a", "parts": [{"data": {"verdict": "pass"}}]}],
    }
    monkeypatch.setattr(
        deadlines.agent_reads, "read_task", lambda target, remote_id: AgentReply(task=other)
    )
    overdue(task)
    assert deadlines.expire_overdue() == 1
    failed = Task.objects.get(pk=task.pk)
    assert (failed.state, failed.remote_task_id) == (TaskState.FAILED, task.remote_task_id)
    assert failed.error["details"]["readAtDeadline"] == "not_a2a"
    assert failed.output is None
