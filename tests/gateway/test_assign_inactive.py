"""A new task of an agent that works over the gateway only is handed to the gateway in the
creation transaction, with the agent the registry cache chose. An agent disabled a moment
ago is refused at connect (4403): its task must not be parked for it until
``OFFLINE_TASK_TTL`` (docs/registry.md, Disable: "it gets no new work")."""

from __future__ import annotations

from typing import Any

import pytest

from a2a import creation
from a2a.models import Task
from a2a.states import TaskState, Transport
from agent_profiles import access
from agent_profiles.exceptions import NoAgentAvailable
from agent_profiles.models import AgentProfile, AgentStatus, Skill
from gateway.models import Delivery
from tests.support.scripted_agent import run_out

pytestmark = pytest.mark.django_db(transaction=True)


def create(user: Any, **fields: Any) -> Task:
    return creation.create_task(
        skill_id="ce-review", input={"product": "kettle"}, user=user, **fields
    )


def disable_elsewhere(agent_id: str) -> None:
    """Disable the agent as another process does: this process's registry cache still
    holds it as active (it is told of its own changes only)."""
    AgentProfile.objects.filter(pk=agent_id).update(status=AgentStatus.DISABLED)


def test_an_agent_disabled_in_this_process_gets_no_new_task(
    agent: AgentProfile, make_user: Any
) -> None:
    """The admin's Disable drops this process's registry cache at once: no active agent
    is left for the skill, so the creation is refused (400 no_agent) and nothing parked."""
    user = make_user()
    assert create(user).transport == Transport.OFFLINE  # fills the registry cache
    assert access.disable(AgentProfile.objects.filter(pk=agent.pk)) == 1
    with pytest.raises(NoAgentAvailable):
        create(user)
    assert Delivery.objects.count() == 1  # the first task's only


def test_a_task_for_an_agent_disabled_elsewhere_is_not_parked_and_fails_agent_inactive(
    agent: AgentProfile, make_user: Any
) -> None:
    """Within the other process's cache window the task is created, but its agent's
    status is read in the creation transaction: it goes to the worker, as an HTTP
    agent's task does, whose claim ends it FAILED agent_inactive (no other agent)."""
    user = make_user()
    create(user)
    disable_elsewhere(agent.pk)
    task = create(user)
    assert (task.transport, task.next_action) == (Transport.A2A, "send")
    assert not Delivery.objects.filter(task=task).exists()
    task = run_out(task)
    assert task.state == TaskState.FAILED
    assert task.error["code"] == "agent_inactive"
    assert task.error["details"]["reason"] == AgentStatus.DISABLED
    assert not Delivery.objects.filter(task=task).exists()


def test_a_task_for_an_agent_disabled_elsewhere_goes_to_another_agent_of_the_skill(
    agent: AgentProfile, skill: Skill, make_agent: Any, make_user: Any
) -> None:
    make_agent(id="agent-two", skills=[skill], a2a_endpoint="")
    user = make_user()
    create(user, agent_id=agent.pk)  # this process caches agent-one for the skill
    disable_elsewhere(agent.pk)
    task = run_out(create(user, agent_id=agent.pk))
    assert (task.agent_id, task.transport) == ("agent-two", Transport.OFFLINE)
    assert task.metadata["reassignments"][-1]["reason"]["code"] == "agent_inactive"
    assert list(Delivery.objects.filter(task=task).values_list("agent_id", flat=True)) == [
        "agent-two"
    ]
