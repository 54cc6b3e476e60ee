"""The batched poll engine and the agent's health: a credential the agent refused on a
sweep's poll is recorded in its health, and so is the recovery when a later batched poll
is answered (as a single poll does), whether that answer has news or is quiet."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from a2a import creation, engine
from a2a.agent_registry import target_for
from a2a.exceptions import A2AAuthError
from a2a.models import Task
from a2a.states import NextAction, TaskState
from a2a.transports.base import AgentReply
from agent_profiles.health import is_known_unreachable
from agent_profiles.models import AgentProfile
from tests.support.agents import TestAgent, run_agent

REFUSED = A2AAuthError("Agent 'agent-one' refused: HTTP 401", status=401)


def _followed(task: Task) -> Task:
    """``task`` as the sweep finds it: WORKING at the agent, its poll due now."""
    Task.objects.filter(pk=task.pk).update(
        state=TaskState.WORKING,
        remote_task_id="agent-task-1",
        attempts=1,
        next_action=NextAction.POLL,
        next_poll_at=timezone.now(),
        lease_until=None,
    )
    return Task.objects.select_related("agent").get(pk=task.pk)


def _refused(task: Task) -> Task:
    """A batched poll of ``task`` refused for the platform's credential; the task read
    again."""
    engine._apply_one(engine.Polled(task, target_for(task.agent), error=REFUSED))
    task = Task.objects.select_related("agent").get(pk=task.pk)
    assert task.error["code"] == "agent_auth_failed"
    task.agent.refresh_from_db()
    assert task.agent.last_call_ok is False
    return task


def test_a_batched_poll_answered_after_a_refused_credential_restores_the_agents_health(
    task: Task, agent: AgentProfile
) -> None:
    """The refusal made the agent unhealthy (unreachable in matching); the engine's
    answered poll clears the task's error and must clear the agent's refusal too, as
    ``agent_polls.poll`` does, not leave it until some other call succeeds."""
    task = _refused(_followed(task))
    working = {"id": "agent-task-1", "status": {"state": "TASK_STATE_WORKING"}}
    engine._apply_one(engine.Polled(task, target_for(task.agent), reply=AgentReply(task=working)))
    task.refresh_from_db()
    assert task.error is None
    agent.refresh_from_db()
    assert agent.last_call_ok is True, (agent.last_call_ok, agent.last_call_code)
    assert not is_known_unreachable(agent)


@pytest.fixture
def peer() -> Any:
    with run_agent() as running:
        yield running


def test_a_quiet_batched_poll_after_an_error_clears_it_and_the_agents_refusal(
    settings: Any, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    """The usual answer after a refusal is "still WORKING, nothing new": one the engine
    re-schedules with the batch's quiet polls, which write only the schedule. A task with
    an error is not quiet: its answer clears the error and the agent's refusal."""
    from a2a.worker import process_task

    settings.ALLOW_LOOPBACK_URLS = True
    skill = make_skill()
    agent = make_agent(skills=[skill], a2a_endpoint=peer.url)
    task = creation.create_task(
        skill_id=skill.id,
        input={"product": "lamp", "behaviour": "working"},
        agent_id=agent.pk,
        user=make_user(),
    )
    process_task(task.pk)
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now())
    engine.poll_due(10)  # the agent reports WORKING: the task is WORKING, as the agent's
    task = Task.objects.select_related("agent").get(pk=task.pk)
    assert task.state == TaskState.WORKING
    task = _refused(task)
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now(), lease_until=None)
    assert engine.poll_due(10) == 1
    task.refresh_from_db()
    assert (task.state, task.error) == (TaskState.WORKING, None)
    assert task.next_action == NextAction.POLL
    assert task.lease_until is None
    agent.refresh_from_db()
    assert agent.last_call_ok is True, (agent.last_call_ok, agent.last_call_code)
    assert not is_known_unreachable(agent)
