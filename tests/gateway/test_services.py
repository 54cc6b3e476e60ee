"""AgentGatewayService without sockets: push bookkeeping, fallbacks, follow-ups, offline
expiry, requeue/cancel, presence staleness and the sweep."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone

from a2a.deadlines import expire_overdue
from a2a.models import Task
from a2a.states import NextAction, TaskState, Transport
from agent_profiles.models import AgentProfile, AgentStatus
from gateway import offline, presence, services, sessions
from gateway.models import Delivery, DeliveryKind, DeliveryStatus, OfflineTask, Presence
from gateway.sessions import end_session
from gateway.tasks import sweep
from platform_site.errors import PlatformError

pytestmark = pytest.mark.django_db


def online(agent: AgentProfile, channel: str = "chan-1", age: float = 0.0) -> Presence:
    row = presence.register(agent.id, channel)
    if age:
        Presence.objects.filter(pk=row.pk).update(
            last_heartbeat_at=timezone.now() - timedelta(seconds=age)
        )
    return row


def test_it_stores_an_offline_task_when_the_agent_is_not_connected(
    make_task: Callable[..., Task],
) -> None:
    task = make_task(next_action=NextAction.SEND, next_poll_at=timezone.now())
    assert services.push_task(task) == "offline"
    task.refresh_from_db()
    assert task.transport == Transport.OFFLINE
    assert (task.next_action, task.next_poll_at) == (NextAction.NONE, None)
    offline = OfflineTask.objects.get()
    assert offline.task_id == task.id
    assert offline.payload["type"] == "task.assign"
    assert offline.payload["deliveryId"] == str(offline.id)
    assert offline.expires_at is not None
    assert not task.metadata.get("fallbacks")  # served directly, not a fallback


def test_it_pushes_to_the_socket_when_the_agent_is_online(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    online(agent)
    task = make_task()
    assert services.push_task(task, reason="connect error") == "websocket"
    task.refresh_from_db()
    assert task.transport == Transport.WEBSOCKET
    (fallback,) = task.metadata["fallbacks"]
    assert fallback["from"] == "a2a"
    assert fallback["to"] == "websocket"
    assert fallback["reason"] == "connect error"
    assert fallback["at"]


def test_stale_presence_does_not_count_as_online(
    agent: AgentProfile, make_task: Callable[..., Task], settings: object
) -> None:
    online(agent, age=10_000)
    assert not presence.is_online(agent.id)
    assert presence.online_agent_ids() == set()
    assert services.push_task(make_task()) == "offline"
    assert presence.drop_stale() == 1


def test_a_disabled_agent_is_not_online(agent: AgentProfile) -> None:
    online(agent)
    AgentProfile.objects.filter(pk=agent.pk).update(status=AgentStatus.DISABLED)
    assert presence.online_agent_ids() == set()


def test_pushing_twice_keeps_one_assignment(make_task: Callable[..., Task]) -> None:
    task = make_task()
    services.push_task(task, reason="timeout")
    services.push_task(task, reason="timeout")
    assert Delivery.objects.filter(task=task).count() == 1
    task.refresh_from_db()
    assert len(task.metadata["fallbacks"]) == 2


def test_it_refuses_to_push_a_finished_task(make_task: Callable[..., Task]) -> None:
    task = make_task()
    task.cancel()
    with pytest.raises(PlatformError):
        services.push_task(task)
    assert not Delivery.objects.exists()


def test_the_assignment_carries_the_stored_outbound_message(
    make_task: Callable[..., Task],
) -> None:
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"data": {"a": 1}}]}
    task = make_task(outbound_message=message)
    services.push_task(task)
    assert Delivery.objects.get().payload["message"] == message


def test_a_finished_task_withdraws_its_open_deliveries(
    make_task: Callable[..., Task], django_capture_on_commit_callbacks: Callable[..., object]
) -> None:
    task = make_task()
    services.push_task(task)
    with django_capture_on_commit_callbacks(execute=True):  # type: ignore[operator]
        task.fail("boom", "it broke")
    assert Delivery.objects.get().status == DeliveryStatus.CANCELED
    assert not OfflineTask.objects.exists()


def test_withdrawing_touches_only_that_tasks_open_deliveries_and_keeps_cancels(
    make_task: Callable[..., Task],
) -> None:
    from gateway.offline import close_open_deliveries

    task, other = make_task(), make_task()
    assign = Delivery.objects.create(
        task=task, agent_id=task.agent_id, kind=DeliveryKind.ASSIGN, payload={}
    )
    cancel = Delivery.objects.create(
        task=task, agent_id=task.agent_id, kind=DeliveryKind.CANCEL, payload={}
    )
    acked = Delivery.objects.create(
        task=task,
        agent_id=task.agent_id,
        kind=DeliveryKind.MESSAGE,
        status=DeliveryStatus.ACKED,
        payload={},
    )
    elsewhere = Delivery.objects.create(
        task=other, agent_id=other.agent_id, kind=DeliveryKind.ASSIGN, payload={}
    )
    assert close_open_deliveries(str(task.pk), "task TASK_STATE_FAILED") == 1
    assign.refresh_from_db()
    assert (assign.status, assign.closed_reason) == (
        DeliveryStatus.CANCELED,
        "task TASK_STATE_FAILED",
    )
    for untouched, status in ((cancel, "pending"), (acked, "acked"), (elsewhere, "pending")):
        untouched.refresh_from_db()
        assert untouched.status == status


def test_a_reply_while_offline_waits_in_the_outbox(make_task: Callable[..., Task]) -> None:
    task = make_task(transport=Transport.WEBSOCKET)
    reply = {"messageId": "r-1", "role": "ROLE_USER", "parts": [{"text": "blue"}]}
    assert services.send_followup(task, "message", reply) == "offline"
    delivery = Delivery.objects.get(kind=DeliveryKind.MESSAGE)
    assert delivery.payload == {
        "type": "task.message",
        "taskId": str(task.id),
        "message": {**reply, "taskId": str(task.id), "contextId": "ctx-1"},
        "deliveryId": str(delivery.id),
    }
    assert sessions.outbox(task.agent_id) == [delivery.id]


def test_followups_refuse_unknown_kinds(make_task: Callable[..., Task]) -> None:
    task = make_task()
    with pytest.raises(ValueError, match="unknown"):
        services.send_followup(task, "explode", None)
    with pytest.raises(ValueError, match="Message"):
        services.send_followup(task, "message", None)


def test_outbox_sends_unacked_before_pending_each_oldest_first(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    first, second, third = make_task(), make_task(), make_task()
    for task in (first, second, third):
        services.push_task(task)
    # The third was sent once on a connection that is gone.
    third_delivery = Delivery.objects.get(task=third)
    assert sessions.claim(third_delivery.id, agent.id, "gone") is not None
    order = sessions.outbox(agent.id)
    assert order == [
        third_delivery.id,
        Delivery.objects.get(task=first).id,
        Delivery.objects.get(task=second).id,
    ]


def test_a_live_connections_unacked_delivery_is_not_taken_by_another(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    task = make_task()
    services.push_task(task)
    delivery = Delivery.objects.get()
    online(agent, "chan-a")
    assert sessions.claim(delivery.id, agent.id, "chan-a") is not None
    assert sessions.claim(delivery.id, agent.id, "chan-b", resend=True) is None
    presence.unregister("chan-a")
    assert sessions.claim(delivery.id, agent.id, "chan-b", resend=True) is not None


def test_expired_offline_tasks_fail_with_a_clear_reason(
    make_task: Callable[..., Task], settings: object
) -> None:
    task = make_task()
    services.push_task(task)
    Delivery.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert sweep() == {
        "expired": 1,
        "stale_presence": 0,
        "requeued": 0,
        "relabeled": 0,
        "renotified": 0,
    }
    task.refresh_from_db()
    assert task.state == TaskState.FAILED
    assert task.error["code"] == "offline_expired"
    assert "did not connect" in task.error["message"]
    assert Delivery.objects.get().status == DeliveryStatus.EXPIRED
    assert sweep()["expired"] == 0  # idempotent


def test_an_unacked_assignment_expires_too(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    task = make_task()
    services.push_task(task)
    delivery = Delivery.objects.get()
    sessions.claim(delivery.id, agent.id, "chan-a")
    Delivery.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    offline.expire_offline_tasks()
    task.refresh_from_db()
    assert "did not acknowledge" in task.error["message"]


def test_requeue_restarts_the_clock(make_task: Callable[..., Task]) -> None:
    task = make_task()
    services.push_task(task)
    waiting = OfflineTask.objects.get()
    old = timezone.now() - timedelta(hours=5)
    Delivery.objects.update(queued_at=old, expires_at=old)
    assert offline.requeue_offline(waiting)
    waiting.refresh_from_db()
    assert waiting.queued_at > old
    assert waiting.expires_at > timezone.now()
    assert waiting.age_seconds < 60


def test_cancel_offline_cancels_the_task(make_task: Callable[..., Task]) -> None:
    task = make_task()
    services.push_task(task)
    assert offline.cancel_offline(OfflineTask.objects.get())
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED
    assert not OfflineTask.objects.exists()
    assert not offline.cancel_offline(Delivery.objects.get())


def test_the_sweep_drops_stale_presence(agent: AgentProfile) -> None:
    online(agent, "fresh")
    online(agent, "dead", age=10_000)
    assert sweep()["stale_presence"] == 1
    assert list(Presence.objects.values_list("channel_name", flat=True)) == ["fresh"]


def test_the_sweep_is_scheduled(settings: object) -> None:
    from django.conf import settings as dj

    entry = dj.CELERY_BEAT_SCHEDULE["gateway-sweep"]
    assert entry["task"] == "gateway.tasks.sweep"


def test_the_sweep_requeues_what_a_dead_connection_never_acked(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    task = make_task()
    services.push_task(task)
    delivery = Delivery.objects.get()
    online(agent, "crashed")
    sessions.claim(delivery.id, agent.id, "crashed")
    long_ago = timezone.now() - timedelta(hours=1)
    Delivery.objects.update(sent_at=long_ago)
    assert sweep()["requeued"] == 0  # its connection still looks alive
    Presence.objects.update(last_heartbeat_at=long_ago)
    assert sweep()["requeued"] == 1  # presence dropped, then the delivery requeued
    delivery.refresh_from_db()
    assert (delivery.status, delivery.channel_name) == (DeliveryStatus.PENDING, "")


def test_a_closed_connection_puts_back_what_it_never_acked_at_once(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    """The agent reconnected before its old connection's close was handled: the new
    connection's outbox skipped the delivery as held by a live connection. The close puts
    it back (and hints), so the new connection takes it now, not after the heartbeat
    timeout and the sweep."""
    services.push_task(make_task())
    delivery = Delivery.objects.get()
    online(agent, "old")
    assert sessions.claim(delivery.id, agent.id, "old") is not None
    online(agent, "new")
    assert sessions.claim(delivery.id, agent.id, "new", resend=True) is None  # "old" holds it
    assert end_session("old") == 1
    assert not Presence.objects.filter(channel_name="old").exists()
    delivery.refresh_from_db()
    assert (delivery.status, delivery.channel_name) == (DeliveryStatus.PENDING, "")
    assert sessions.claim(delivery.id, agent.id, "new") is not None  # what its hint does
    assert end_session("new") == 1  # sent on "new" now, and never acked either


def test_the_sweep_hints_again_about_pending_deliveries_of_online_agents(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    services.push_task(make_task())
    assert sweep()["renotified"] == 0  # offline agent: nobody to hint
    online(agent)
    Delivery.objects.update(created_at=timezone.now() - timedelta(minutes=1))
    assert sweep()["renotified"] == 1


def test_a_starting_connection_is_owed_nothing_another_live_connection_holds(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    tasks = [make_task() for _ in range(3)]
    for task in tasks:
        services.push_task(task)
    held, gone, pending = (Delivery.objects.get(task=task).id for task in tasks)
    online(agent, "chan-a")
    assert sessions.claim(held, agent.id, "chan-a") is not None
    assert sessions.claim(gone, agent.id, "chan-gone") is not None
    # chan-b starts: the delivery chan-a holds is not its to send; the one sent on a
    # connection that is gone, and the pending one, are.
    assert sessions.start_session(agent, "chan-b", "127.0.0.1") == [gone, pending]
    presence.unregister("chan-a")
    assert sessions.start_session(agent, "chan-c", "127.0.0.1") == [held, gone, pending]


def test_a_task_pushed_as_the_agents_connection_closed_waits_offline(
    agent: AgentProfile, make_task: Callable[..., Task]
) -> None:
    """Its presence outlived the connection a moment: the task was labelled websocket,
    no connection took it, and the deadline sweep failed it "timeout" (sent) although the
    agent never had it. The sweep labels it offline; the agent's next connection takes it
    and labels it again."""
    AgentProfile.objects.filter(pk=agent.pk).update(gateway_seen_at=timezone.now())
    online(agent, "closing")
    task = make_task(deadline_at=timezone.now() - timedelta(seconds=1))
    assert services.push_task(task) == "websocket"
    held = make_task()  # another, which the connection took: stays websocket
    services.push_task(held)
    delivery = Delivery.objects.get(task=held)
    assert sessions.claim(delivery.id, agent.id, "closing") is not None
    assert sessions.ack(agent.id, str(delivery.id))
    assert sweep()["relabeled"] == 0  # the connection is alive: nothing to relabel
    end_session("closing")  # its close is handled only now
    assert sweep()["relabeled"] == 1
    task.refresh_from_db()
    assert task.transport == Transport.OFFLINE
    held.refresh_from_db()
    assert held.transport == Transport.WEBSOCKET
    expire_overdue()
    task.refresh_from_db()
    assert task.state == TaskState.SUBMITTED  # waits for the agent, no timeout
    online(agent, "back")
    assert sessions.claim(Delivery.objects.get(task=task).id, agent.id, "back") is not None
    task.refresh_from_db()
    assert task.transport == Transport.WEBSOCKET
