"""Deadlines of tasks the gateway carries: time spent waiting offline (an assignment, a
reply) does not count, the deadline starts when the agent takes the task, a socket task's
timeout tells the agent to cancel, and an expiry says when the agent is not active."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from a2a import agent_updates, creation
from a2a import services as a2a_services
from a2a.deadlines import expire_overdue
from a2a.models import Task
from a2a.states import TaskState, Transport
from agent_profiles.models import AgentProfile, AgentStatus, Skill
from gateway import offline, presence, services, sessions
from gateway.frames import FrameError
from gateway.models import Delivery, DeliveryKind, DeliveryStatus
from gateway.sessions import end_session
from gateway.tasks import sweep

pytestmark = pytest.mark.django_db

QUESTION = {
    "state": "TASK_STATE_INPUT_REQUIRED",
    "message": {"messageId": "q", "role": "ROLE_AGENT", "parts": [{"text": "color?"}]},
}


def _seen(agent: AgentProfile, **fields: Any) -> None:
    """The agent has used the gateway: its offline tasks wait ``OFFLINE_TASK_TTL``."""
    AgentProfile.objects.filter(pk=agent.pk).update(gateway_seen_at=timezone.now(), **fields)


def _take(agent: AgentProfile, task: Task, kind: str, channel: str) -> None:
    """The agent's connection takes the task's open ``kind`` delivery and acks it."""
    delivery = Delivery.objects.get(task=task, kind=kind, status=DeliveryStatus.PENDING)
    assert sessions.claim(delivery.id, agent.id, channel, resend=True) is not None
    assert sessions.ack(agent.id, str(delivery.id))


def _seconds_left(task: Task) -> float:
    task.refresh_from_db()
    return (task.deadline_at - timezone.now()).total_seconds()


@pytest.mark.parametrize("timeout", [None, 3600.0])
def test_an_offline_task_taken_after_its_first_deadline_gets_fresh_time(
    agent: AgentProfile, skill: Skill, make_user: Any, settings: Any, timeout: float | None
) -> None:
    """It waited offline past the deadline set at its creation (OFFLINE_TASK_TTL governs
    that wait); the sweep failed it ``timeout`` a second after the agent got it, saying
    it had had the whole timeout."""
    settings.A2A_TASK_TIMEOUT = 300.0
    _seen(agent, timeout=timeout)
    task = creation.create_task(skill_id=skill.id, input={"product": "x"}, user=make_user())
    assert task.transport == Transport.OFFLINE
    Task.objects.filter(pk=task.pk).update(deadline_at=timezone.now() - timedelta(hours=1))
    assert expire_overdue() == 0  # offline: spared
    presence.register(agent.id, "chan-1")
    _take(agent, task, DeliveryKind.ASSIGN, "chan-1")
    task.refresh_from_db()
    assert task.transport == Transport.WEBSOCKET
    assert _seconds_left(task) == pytest.approx(timeout or 300.0, abs=5)
    assert expire_overdue() == 0
    task.refresh_from_db()
    assert task.state == TaskState.SUBMITTED


def test_an_offline_task_hinted_to_a_new_connection_gets_fresh_time(
    agent: AgentProfile, skill: Skill, make_user: Any
) -> None:
    """The other way a connection takes it: the hint with the frame (``claim_pending``)."""
    _seen(agent)
    task = creation.create_task(skill_id=skill.id, input={"product": "x"}, user=make_user())
    Task.objects.filter(pk=task.pk).update(deadline_at=timezone.now() - timedelta(hours=1))
    presence.register(agent.id, "chan-1")
    delivery = Delivery.objects.get(task=task)
    assert sessions.claim_pending(str(delivery.id), agent.id, "chan-1", str(task.pk), True)
    assert _seconds_left(task) > 60
    assert expire_overdue() == 0


def _asking(agent: AgentProfile, skill: Skill, make_user: Any) -> Task:
    """A socket task the agent took and asked a question in; then it went away."""
    _seen(agent)
    presence.register(agent.id, "chan-1")
    task = creation.create_task(skill_id=skill.id, input={"product": "x"}, user=make_user())
    _take(agent, task, DeliveryKind.ASSIGN, "chan-1")
    task.refresh_from_db()
    agent_updates.apply_agent_update(task, status=QUESTION, artifacts=None, via="websocket")
    task.refresh_from_db()
    assert task.state == TaskState.INPUT_REQUIRED
    end_session("chan-1")
    return task


def test_a_reply_waiting_for_an_agent_that_went_away_waits_offline(
    agent: AgentProfile,
    skill: Skill,
    make_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """docs/gateway.md: a reply while the agent is away waits OFFLINE_TASK_TTL, as an
    assignment does. It failed ``timeout`` at A2A_TASK_TIMEOUT after the reply instead."""
    task = _asking(agent, skill, make_user)
    with django_capture_on_commit_callbacks(execute=True):
        a2a_services.reply_to_task(task, text="blue", by="ops")
    task.refresh_from_db()
    assert task.transport == Transport.OFFLINE  # at once (the reply's transition)
    Task.objects.filter(pk=task.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
    sweep()
    assert expire_overdue() == 0
    task.refresh_from_db()
    assert task.state == TaskState.WORKING
    # The agent comes back and takes the reply from its outbox: its time starts now, not
    # at the next gateway sweep (up to GATEWAY_SWEEP_INTERVAL later).
    presence.register(agent.id, "chan-2")
    _take(agent, task, DeliveryKind.MESSAGE, "chan-2")
    task.refresh_from_db()
    assert task.transport == Transport.WEBSOCKET
    assert _seconds_left(task) > 60
    assert sweep()["relabeled"] == 0
    assert expire_overdue() == 0


def test_the_sweep_labels_a_waiting_reply_offline_too(
    agent: AgentProfile, skill: Skill, make_user: Any
) -> None:
    """Without the reply's hook (its agent left after the reply): the gateway sweep."""
    task = _asking(agent, skill, make_user)
    a2a_services.reply_to_task(task, text="blue", by="ops")  # no on-commit hook here
    task.refresh_from_db()
    assert task.transport == Transport.WEBSOCKET
    assert sweep()["relabeled"] == 1
    task.refresh_from_db()
    assert task.transport == Transport.OFFLINE
    assert sweep()["relabeled"] == 0  # the reply still waits: it stays offline


def test_a_reply_to_a_connected_agent_stays_on_its_socket(
    agent: AgentProfile,
    skill: Skill,
    make_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    task = _asking(agent, skill, make_user)
    presence.register(agent.id, "chan-2")  # back before the reply
    with django_capture_on_commit_callbacks(execute=True):
        a2a_services.reply_to_task(task, text="blue", by="ops")
    assert sweep()["relabeled"] == 0
    task.refresh_from_db()
    assert task.transport == Transport.WEBSOCKET


def _timed_out_on_its_socket(agent: AgentProfile, skill: Skill, make_user: Any) -> Task:
    """A task the agent took over its socket, failed at its deadline by the sweep."""
    _seen(agent)
    presence.register(agent.id, "chan-1")
    task = creation.create_task(skill_id=skill.id, input={"product": "x"}, user=make_user())
    _take(agent, task, DeliveryKind.ASSIGN, "chan-1")
    Task.objects.filter(pk=task.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
    assert expire_overdue() == 1
    return task


def test_a_socket_tasks_timeout_tells_the_agent_to_cancel(
    agent: AgentProfile, skill: Skill, make_user: Any
) -> None:
    """docs/dispatch.md, Deadline: "the agent is asked to cancel its task": a person's
    cancel queued a task.cancel, the timeout nothing."""
    task = _timed_out_on_its_socket(agent, skill, make_user)
    task.refresh_from_db()
    assert task.state == TaskState.FAILED
    assert task.error["code"] == "timeout"
    cancel = Delivery.objects.get(task=task, kind=DeliveryKind.CANCEL)
    assert cancel.status == DeliveryStatus.PENDING
    assert cancel.agent_id == agent.id


def test_a_socket_task_never_taken_has_its_assignment_withdrawn_at_the_timeout(
    agent: AgentProfile, skill: Skill, make_user: Any
) -> None:
    """Nothing to cancel at the agent: no task.cancel, the assignment is not sent."""
    _seen(agent)
    presence.register(agent.id, "chan-1")
    task = creation.create_task(skill_id=skill.id, input={"product": "x"}, user=make_user())
    assert task.transport == Transport.WEBSOCKET
    Task.objects.filter(pk=task.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
    assert expire_overdue() == 1
    assert not Delivery.objects.filter(task=task, kind=DeliveryKind.CANCEL).exists()
    assert Delivery.objects.get(task=task).status == DeliveryStatus.CANCELED


@pytest.mark.parametrize(
    ("status", "said"),
    [(AgentStatus.DISABLED, "is disabled"), (AgentStatus.PENDING, "is awaiting approval")],
)
def test_an_expiry_says_the_agent_is_not_active(
    agent: AgentProfile, make_task: Any, status: str, said: str
) -> None:
    task = make_task()
    services.push_task(task)
    AgentProfile.objects.filter(pk=agent.pk).update(status=status)
    Delivery.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert offline.expire_offline_tasks() == 1
    task.refresh_from_db()
    assert task.error["code"] == "offline_expired"
    assert f"Agent {agent.id} {said}" in task.error["message"]
    assert "was never delivered" in task.error["message"]


def test_the_agents_canceled_answer_to_a_timeouts_cancel_acknowledges_it(
    agent: AgentProfile, skill: Skill, make_user: Any
) -> None:
    """docs/gateway.md, task.cancel: the task ended FAILED, so the CANCELED is refused
    (``invalid_state``), and the cancel is acknowledged all the same (not sent again)."""
    task = _timed_out_on_its_socket(agent, skill, make_user)
    cancel = Delivery.objects.get(task=task, kind=DeliveryKind.CANCEL)
    assert sessions.claim(cancel.id, agent.id, "chan-1") is not None
    with pytest.raises(FrameError) as refused:
        sessions.apply_update(agent.id, str(task.pk), {"state": "TASK_STATE_CANCELED"}, None)
    assert refused.value.code == "invalid_state"
    cancel.refresh_from_db()
    assert cancel.status == DeliveryStatus.ACKED
