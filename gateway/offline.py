"""Offline tasks and the periodic repairs: expiry, requeue, cancel, orphaned and pending
deliveries, stale presence (``gateway.tasks.sweep`` and the admin call these)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from a2a.agent_standing import STATUS_TEXT
from a2a.models import Task
from a2a.states import ACTIVE_STATES, TERMINAL_STATES, Transport
from gateway import presence
from gateway.models import OPEN_STATUSES, Delivery, DeliveryKind, DeliveryStatus, Presence
from gateway.notify import DELIVER_EVENT, expiry, group_send_to_agent, notify_on_commit

log = logging.getLogger(__name__)


def close_open_deliveries(task_id: Any, reason: str) -> int:
    """Withdraw what a finished task still owes its agent (cancels excepted).

    Runs after every task's end, and nearly always finds nothing (most tasks never use
    the gateway), so it is one plain statement: a third of the ORM update's CPU.
    """
    task_field = Delivery._meta.get_field("task")
    value = task_field.get_db_prep_value(task_field.to_python(task_id), connection)
    qn = connection.ops.quote_name
    sql = (
        f"UPDATE {qn(Delivery._meta.db_table)} SET {qn('status')} = %s, "
        f"{qn('closed_reason')} = %s WHERE {qn('task_id')} = %s "
        f"AND {qn('status')} IN (%s, %s) AND {qn('kind')} <> %s"
    )
    params = [DeliveryStatus.CANCELED.value, reason[:500], value]
    params += [status.value for status in OPEN_STATUSES] + [DeliveryKind.CANCEL.value]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


def withdraw_unsent(task: Task, reason: str) -> bool:
    """Withdraw a task's deliveries the agent never received (its assignment, a reply),
    all or none: none while one of them is out on a socket (sent, not acked), which the
    agent may act on. True when some were withdrawn. Within the caller's transaction,
    the rows locked."""
    with transaction.atomic():
        owed = Delivery.objects.select_for_update().filter(
            task=task, agent_id=task.agent_id, status__in=OPEN_STATUSES
        )
        statuses = set(owed.values_list("status", flat=True))
        if statuses != {DeliveryStatus.PENDING}:
            return False
        owed.update(status=DeliveryStatus.CANCELED, closed_reason=reason[:500])
    return True


def expire_offline_tasks(limit: int = 500) -> int:
    """Close deliveries unacknowledged past ``OFFLINE_TASK_TTL`` (their ``expires_at``) and
    fail the tasks whose assignment or reply it was; returns how many deliveries expired.

    Cancels expire too, or one the agent never acks would be sent on each of its
    connections forever; they fail nothing (their task has ended, or is another agent's
    now). A reply's task fails as an assignment's does: an offline task is outside the
    deadline sweep, so it would wait for good.
    """
    now = timezone.now()
    due = Delivery.objects.filter(
        status__in=OPEN_STATUSES, expires_at__lt=now
    ).select_related(
        "task",
        "task__agent",  # its status names why an agent never connected
    )[:limit]
    expired = 0
    for delivery in due:
        if not Delivery.objects.filter(pk=delivery.pk, status=delivery.status).update(
            status=DeliveryStatus.EXPIRED, closed_reason="offline TTL passed"
        ):
            continue  # delivered or withdrawn meanwhile
        expired += 1
        task = delivery.task
        if (
            delivery.kind == DeliveryKind.CANCEL
            or task.state in TERMINAL_STATES
            or task.agent_id != delivery.agent_id  # reassigned: it goes on elsewhere
        ):
            continue
        # The wait as it was set (OFFLINE_TASK_TTL, or the agent's offline_wait).
        waited = (delivery.expires_at - delivery.queued_at).total_seconds()
        span = f"{waited / 3600:g} h" if waited >= 3600 else f"{waited:.0f} s"
        what = "the task" if delivery.kind == DeliveryKind.ASSIGN else "the reply to its question"
        inactive = STATUS_TEXT.get(task.agent.status)
        if delivery.status == DeliveryStatus.PENDING and inactive:
            # Not the agent's absence: it may not connect (a disabled agent's sockets are
            # closed), and an operator must act (enable it, or reassign the task).
            message = (
                f"Agent {task.agent_id} {inactive}, so it could not connect to the gateway; "
                f"{what} was never delivered within {span}."
            )
        elif delivery.status == DeliveryStatus.PENDING:
            message = (
                f"Agent {task.agent_id} did not connect to the gateway within "
                f"{span}; {what} was never delivered."
            )
        else:
            message = (
                f"Agent {task.agent_id} received {what} over the gateway but did not "
                f"acknowledge it within {span}."
            )
        last = task.error if isinstance(task.error, dict) else {}
        if last.get("message"):
            message += f" Its last answer over A2A: {last['message']}"
        task.fail("offline_expired", message, {"lastAnswer": last or None})
    return expired


def requeue_orphaned(limit: int = 500) -> int:
    """Put back deliveries sent on a connection that died without a clean close.

    A daphne crash leaves them ``sent`` to a channel nobody holds; once that connection's
    presence is gone (stale or deleted), they become ``pending`` again and the agent's live
    connections, in any process, are told to take them.
    """
    live = Presence.objects.values("channel_name")
    grace = timezone.now() - timedelta(seconds=settings.GATEWAY_HEARTBEAT_TIMEOUT)
    orphaned = list(
        Delivery.objects.filter(status=DeliveryStatus.SENT, sent_at__lt=grace)
        .exclude(channel_name__in=live)
        .values_list("id", "agent_id", "channel_name")[:limit]
    )
    return _requeue(orphaned)


def requeue_closed(channel_name: str) -> int:
    """Put back at once what a connection that just closed was sent and never acked.

    A reconnect can start its session before the old connection's close is handled: the
    new connection's outbox then skips these deliveries as held by a live connection, and
    without this they would wait for :func:`requeue_orphaned` (the heartbeat timeout).
    """
    sent = Delivery.objects.filter(status=DeliveryStatus.SENT, channel_name=channel_name)
    return _requeue(list(sent.values_list("id", "agent_id", "channel_name")))


def _requeue(deliveries: list[tuple[Any, str, str]]) -> int:
    """Make each ``(id, agent, channel)`` delivery still sent on that channel pending again
    and tell the agent's live connections, in any process, to take it."""
    requeued = 0
    for delivery_id, agent_id, channel_name in deliveries:
        if Delivery.objects.filter(
            pk=delivery_id, status=DeliveryStatus.SENT, channel_name=channel_name
        ).update(status=DeliveryStatus.PENDING, channel_name=""):
            requeued += 1
            group_send_to_agent(agent_id, {"type": DELIVER_EVENT, "delivery_id": str(delivery_id)})
    return requeued


def renotify_pending(limit: int = 1000) -> int:
    """Hint again about pending deliveries of online agents (a lost hint only delays)."""
    grace = timezone.now() - timedelta(seconds=min(settings.GATEWAY_SWEEP_INTERVAL, 10.0))
    rows = (
        Delivery.objects.filter(
            status=DeliveryStatus.PENDING,
            created_at__lt=grace,
            agent_id__in=presence.fresh_presence().values("agent_id"),
        )
        .order_by("created_at")
        .values_list("id", "agent_id")[:limit]
    )
    count = 0
    for delivery_id, agent_id in rows:
        group_send_to_agent(agent_id, {"type": DELIVER_EVENT, "delivery_id": str(delivery_id)})
        count += 1
    return count


def requeue_offline(delivery: Delivery) -> bool:
    """Admin: restart an offline task's expiry clock and push it again now."""
    now = timezone.now()
    with transaction.atomic():
        changed = Delivery.objects.filter(pk=delivery.pk, status__in=OPEN_STATUSES).update(
            status=DeliveryStatus.PENDING, channel_name="", queued_at=now, expires_at=expiry()
        )
        if changed:
            notify_on_commit(delivery)
    return bool(changed)


def cancel_offline(delivery: Delivery, *, by: Any = None) -> bool:
    """Admin: cancel the task of an offline delivery (the unsent assignment is withdrawn).

    False for a task already ended; a task that ends between this read and the cancel
    (its agent answered) is refused by the cancel, :class:`~a2a.models.InvalidTransition` (409)."""
    from a2a.services import cancel_task

    task = Task.objects.get(pk=delivery.task_id)
    if task.state in TERMINAL_STATES:
        close_open_deliveries(task.pk, f"task {task.state}")
        return False
    cancel_task(task, by=by, reason="canceled by an operator while waiting offline")
    return True


def drop_stale_presence() -> int:
    return presence.drop_stale()


def relabel_undelivered() -> int:
    """Label ``offline`` the active tasks labelled ``websocket`` whose assignment or reply
    is still pending while their agent has no live connection; how many (with those
    labelled ``websocket`` again by :func:`relabel_delivered`).

    A task is labelled when it is pushed, by the agent's presence then. A presence row
    outlives its connection a little (its close is handled after the socket is gone; a
    connection that died without a close keeps it up to ``GATEWAY_HEARTBEAT_TIMEOUT``):
    a task pushed meanwhile was labelled ``websocket`` though no connection took it. The
    deadline sweep spares offline tasks, not those: it failed such a task ``timeout``, "sent",
    though the agent never had it, where an offline one waits for the agent to connect.

    A person's reply to an agent that went away waits the same way (docs/gateway.md): its
    deadline, set at the reply, would fail the task while the reply waits undelivered.
    """
    return relabel_waiting() + relabel_delivered()


def _waiting() -> Q:
    """The condition, on tasks, that their assignment or a reply to them waits for an
    agent with no live connection."""
    pending = Delivery.objects.filter(
        task=OuterRef("pk"),
        agent_id=OuterRef("agent_id"),
        kind__in=(DeliveryKind.ASSIGN, DeliveryKind.MESSAGE),
        status=DeliveryStatus.PENDING,
    )
    online = presence.fresh_presence().filter(agent_id=OuterRef("agent_id"))
    return Exists(pending) & ~Exists(online)


def relabel_waiting(task_id: Any = None) -> int:
    """Label ``offline`` the active ``websocket`` tasks (or the one ``task_id``) whose
    assignment or reply waits for an agent with no live connection; how many."""
    waiting = _waiting()
    candidates = Task.objects.filter(
        waiting, state__in=ACTIVE_STATES, transport=Transport.WEBSOCKET
    )
    if task_id is not None:
        candidates = candidates.filter(pk=task_id)
    ids = list(candidates.values_list("pk", flat=True)[:500])
    if not ids:
        return 0
    # The same condition again in the UPDATE: a connection that took the assignment since
    # the read leaves the task as it is.
    relabeled = Task.gateway_undelivered(waiting & Q(pk__in=ids))
    if relabeled:
        log.info("%d task(s) whose agent went away wait offline", relabeled)
    return relabeled


def relabel_delivered() -> int:
    """Label ``websocket`` again, their deadline starting now, the active ``offline``
    tasks whose agent took all it was owed for them (nothing pending, something sent or
    acknowledged); how many.

    A connection's claim of an assignment or a reply does this at once
    (:meth:`Task.gateway_connected`); this is the safety net for a claim whose task the
    sweep labelled offline just after it. Left offline, the task was outside the deadline
    sweep for good: nothing expires a delivery the agent acknowledged.
    """
    owed = Delivery.objects.filter(task=OuterRef("pk"), agent_id=OuterRef("agent_id")).exclude(
        kind=DeliveryKind.CANCEL
    )
    pending = owed.filter(status=DeliveryStatus.PENDING)
    taken = owed.filter(status__in=(DeliveryStatus.SENT, DeliveryStatus.ACKED))
    delivered = Exists(taken) & ~Exists(pending)
    candidates = Task.objects.filter(
        delivered, state__in=ACTIVE_STATES, transport=Transport.OFFLINE
    )
    ids = list(candidates.values_list("pk", flat=True)[:500])
    if not ids:
        return 0
    # Again in the UPDATE: a reply queued since the read keeps the task offline.
    relabeled = Task.gateway_connected(ids, still=delivered)
    if relabeled:
        log.info("%d offline task(s) whose agent took them are on its socket", relabeled)
    return relabeled
