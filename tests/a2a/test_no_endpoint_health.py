"""A socket-only agent (no A2A endpoint) whose task is retried or reassigned to it stays
healthy: the worker's HTTP send meets ``no_endpoint`` and hands the task to the gateway,
which says nothing of the agent's health. Recorded, it would show the agent unhealthy
for good (no HTTP answer ever clears it) and keep it out of matching while offline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from a2a import agent_registry, creation, reassign, services, worker
from a2a.exceptions import A2ACallError
from a2a.models import Task
from a2a.states import Transport
from agent_profiles.health import health_of
from agent_profiles.matching import score_agents
from agent_profiles.models import AgentProfile, Skill

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(make_agent: Callable[..., AgentProfile], skill: Skill) -> AgentProfile:
    """A gateway-only agent (offline: no socket open)."""
    return make_agent(skills=[skill], a2a_endpoint="")


def healthy_and_matched(agent: AgentProfile, skill: Skill, *others: AgentProfile) -> None:
    """``agent`` is not unhealthy and the matcher still offers it (with ``others``)."""
    agent.refresh_from_db()
    assert health_of(agent).status != "unhealthy", (agent.last_call_code, agent.last_call_error)
    assert agent.last_call_ok is not False
    assert {r["agentId"] for r in score_agents(skill)} == {agent.id, *(o.id for o in others)}


def test_retrying_a_socket_only_agents_task_keeps_it_healthy(
    agent: AgentProfile, skill: Skill, make_agent: Callable[..., AgentProfile], user: Any
) -> None:
    """A person's retry sends over HTTP first; the agent has none: the task goes to the
    gateway (offline) and the agent keeps its health and its place in matching."""
    other = make_agent(skills=[skill], id="agent-two", a2a_endpoint="")
    task = creation.create_task(
        skill_id=skill.id, input={"product": "kettle"}, agent_id=agent.id, user=user
    )
    task.fail("output_invalid", "bad output")
    services.retry_task(Task.objects.get(pk=task.pk))
    worker.process_task(task.pk)
    task.refresh_from_db()
    assert task.transport == Transport.OFFLINE
    healthy_and_matched(agent, skill, other)


def test_reassigning_to_a_socket_only_agent_keeps_it_healthy(
    agent: AgentProfile, skill: Skill, make_agent: Callable[..., AgentProfile], user: Any
) -> None:
    """A task reassigned to the socket-only agent: its send meets ``no_endpoint`` too."""
    first = make_agent(skills=[skill], id="agent-two", a2a_endpoint="")
    task = creation.create_task(
        skill_id=skill.id, input={"product": "kettle"}, agent_id=first.id, user=user
    )
    task.fail("agent_failed", "it broke")
    reassign.reassign_task(Task.objects.get(pk=task.pk), agent_id=agent.id)
    worker.process_task(task.pk)
    task.refresh_from_db()
    assert (task.agent_id, task.transport) == (agent.id, Transport.OFFLINE)
    healthy_and_matched(agent, skill, first)


def test_no_endpoint_is_not_recorded_but_a_real_failure_is(agent: AgentProfile) -> None:
    """The rule itself: ``no_endpoint`` is left out; a connection failure still counts."""
    agent_registry.record_call_outcome(agent, A2ACallError("none", code="no_endpoint"))
    agent.refresh_from_db()
    assert agent.last_call_ok is None
    agent_registry.record_call_outcome(agent, A2ACallError("refused", code="connect_error"))
    agent.refresh_from_db()
    assert (agent.last_call_ok, agent.last_call_code) == (False, "connect_error")
