"""Reassigning a gateway task whose ``task.assign`` the old agent received but did not
acknowledge: the new agent gets its own assignment, the old one is closed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from a2a import creation, reassign, worker
from a2a.models import Task
from agent_profiles.models import AgentProfile, Skill
from gateway import services, sessions
from gateway.models import Delivery, DeliveryKind, DeliveryStatus
from tests.gateway.conftest import db_async, open_client
from tests.gateway.test_consumer import ping_pong

pytestmark = [pytest.mark.anyio, pytest.mark.django_db(transaction=True)]


async def test_a_task_reassigned_while_its_assignment_is_unacked_reaches_the_new_agent(
    agent: AgentProfile,
    skill: Skill,
    make_agent: Callable[..., AgentProfile],
    make_user: Callable[..., Any],
) -> None:
    """The fresh attempt used to reuse the old agent's open assignment, so the new
    socket-only agent never got the task and it timed out."""
    user = await db_async(make_user)()
    other = await db_async(make_agent)(skills=[skill], id="agent-two", a2a_endpoint="")
    old = await open_client(agent.raw_key)
    await ping_pong(old)
    task = await db_async(creation.create_task)(
        skill_id=skill.id, input={"product": "kettle"}, agent_id=agent.id, user=user
    )
    first = await old.recv()  # sent to agent-one, not acked
    assert first["type"] == "task.assign"

    await db_async(reassign.reassign_task)(
        await db_async(Task.objects.get)(pk=task.pk), agent_id=other.id
    )
    await db_async(worker.process_task)(task.pk)  # the fresh attempt goes to the gateway
    cancel = await old.recv()  # the task was taken from agent-one
    assert (cancel["type"], cancel["taskId"]) == ("task.cancel", str(task.id))
    await old.close()

    new = await open_client(other.raw_key)
    frame = await new.recv()
    assert (frame["type"], frame["task"]["id"]) == ("task.assign", str(task.id))
    assert frame["deliveryId"] != first["deliveryId"]
    assert frame["message"]["messageId"] != first["message"]["messageId"]
    await new.close()

    stale = await db_async(Delivery.objects.get)(pk=first["deliveryId"])
    assert stale.status == DeliveryStatus.CANCELED
    # agent-one gets only the cancel again on its next connection, not the old task.
    old = await open_client(agent.raw_key)
    again = await old.recv()
    assert again["type"] == "task.cancel"
    await ping_pong(old)
    await old.close()


def test_pushing_a_task_does_not_reuse_another_agents_open_assignment(
    agent: AgentProfile, skill: Skill, make_agent: Callable[..., AgentProfile]
) -> None:
    """An open assignment of the task to an agent it was taken from is not the new
    agent's: push_task saves a new one for the task's agent."""
    task = Task.objects.create(skill=skill, agent=agent, input={"product": "kettle"})
    services.push_task(task)
    other = make_agent(skills=[skill], id="agent-two", a2a_endpoint="")
    Task.objects.filter(pk=task.pk).update(agent=other)  # moved without the cancel
    task.refresh_from_db()
    services.push_task(task)
    rows = Delivery.objects.filter(task=task, kind=DeliveryKind.ASSIGN)
    assert sorted(rows.values_list("agent_id", flat=True)) == ["agent-one", "agent-two"]


def test_a_connection_does_not_send_an_assignment_of_a_task_given_to_another_agent(
    agent: AgentProfile, skill: Skill, make_agent: Callable[..., AgentProfile]
) -> None:
    """Whatever left the old agent's assignment open (a reassignment to an agent served
    over HTTP sends the old one no frame to close it), its connection closes it instead
    of sending it again."""
    task = Task.objects.create(skill=skill, agent=agent, input={"product": "kettle"})
    services.push_task(task)
    delivery = Delivery.objects.get(task=task)
    assert sessions.claim(delivery.pk, agent.id, "chan-a") is not None  # sent, not acked
    other = make_agent(skills=[skill], id="agent-two")
    Task.objects.filter(pk=task.pk).update(agent=other)
    assert sessions.claim(delivery.pk, agent.id, "chan-b", resend=True) is None
    delivery.refresh_from_db()
    assert (delivery.status, delivery.closed_reason) == (
        DeliveryStatus.CANCELED,
        "task reassigned",
    )


def test_cancelling_closes_what_the_agent_holds_unacknowledged(
    agent: AgentProfile, skill: Skill, make_agent: Callable[..., AgentProfile]
) -> None:
    """A cancel queued for a task still going on (it was taken from the agent) closes the
    assignment the agent was sent and did not ack: it is not sent again after it."""
    task = Task.objects.create(skill=skill, agent=agent, input={"product": "kettle"})
    services.push_task(task)
    assign = Delivery.objects.get(task=task)
    sessions.claim(assign.pk, agent.id, "chan-a")
    services.send_followup(task, "cancel")
    assign.refresh_from_db()
    assert assign.status == DeliveryStatus.CANCELED
    cancel = Delivery.objects.get(task=task, kind=DeliveryKind.CANCEL)
    assert cancel.status == DeliveryStatus.PENDING


def test_a_cancel_left_for_an_agent_does_not_end_the_task_given_back_to_it(
    agent: AgentProfile, skill: Skill, make_task: Callable[..., Task], make_agent: Callable
) -> None:
    """Taken from A (a cancel for A waits, A offline), then given back to A: A's next
    connection must not get that old cancel, which would end the task it holds again."""
    task = make_task()
    services.send_followup(task, "cancel")  # A's, waiting
    cancel = Delivery.objects.get(task=task, kind=DeliveryKind.CANCEL)
    other = make_agent(skills=[skill], id="agent-two", a2a_endpoint="")
    Task.objects.filter(pk=task.pk).update(agent=other)
    Task.objects.filter(pk=task.pk).update(agent=agent)  # given back
    assert sessions.claim(cancel.id, agent.id, "channel-1") is None
    cancel.refresh_from_db()
    assert (cancel.status, cancel.closed_reason) == (DeliveryStatus.CANCELED, "task given back")
