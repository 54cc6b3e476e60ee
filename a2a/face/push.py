"""Push notifications: per-task webhook configs and at-least-once delivery.

On every state change (see :mod:`a2a.face.signals`) one :class:`PushDelivery` row per
enabled config is stored with the ``StreamResponse`` payload, then a Celery task POSTs it
with ``Authorization: <scheme> <credentials>`` and ``X-A2A-Notification-Token``. A config
set over A2A 0.3 is sent what 0.3 servers send instead: the bare 0.3 ``Task``, without
``A2A-Version`` (a 0.3 client's webhook cannot parse a ``StreamResponse``). A
config's deliveries go out one at a time, in the order of the task's events: one waits
while an earlier one is pending, and each that ends (delivered, or failed for good)
starts the next, so a webhook never sees a WORKING after the COMPLETED. A failed
attempt is retried with exponential backoff (``next_attempt_at``; a beat sweep re-queues
anything overdue, so a lost message only delays); a config is disabled after
``A2A_PUSH_DISABLE_AFTER`` consecutive failed attempts. Webhook URLs pass the outbound
URL guard when the config is stored (without DNS: creating a config never touches the
network) and at every POST (the name is resolved, every address checked, and the POST goes
to the checked address, redirects off).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import httpx
from celery import shared_task
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, F, Q
from django.utils import timezone

from a2a.face import legacy, push_pool, push_repair
from a2a.models import Task
from a2a.push_models import DeliveryStatus, PushDelivery, PushNotificationConfig, PushProtocol
from agent_profiles.deadlines import whole_answer_by, whole_answer_seconds
from agent_profiles.guarded_http import guarded_client
from agent_profiles.urlguard import UnsafeURL

log = logging.getLogger(__name__)

TOKEN_HEADER = "X-A2A-Notification-Token"
# --- delivery -------------------------------------------------------------------------


def enabled_config_ids(task_id: Any) -> list[int]:
    """The ids of the task's enabled push configs.

    Asked after every transition of every task, and nearly always to find none, so it is
    one plain statement: the ORM's compiled query cost four times the CPU (measured on
    the push webhook, where it was 8% of the process).
    """
    pk = Task._meta.pk
    assert pk is not None
    value = pk.get_db_prep_value(pk.to_python(task_id), connection)
    table = connection.ops.quote_name(PushNotificationConfig._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {table} WHERE task_id = %s AND enabled", [value])
        return [row[0] for row in cursor.fetchall()]


def _legacy_config_ids(config_ids: list[int]) -> set[int]:
    """Those of ``config_ids`` set over A2A 0.3 (asked only when the task has configs)."""
    return set(
        PushNotificationConfig.objects.filter(
            pk__in=config_ids, protocol_version=PushProtocol.V0_3
        ).values_list("pk", flat=True)
    )


def queue_deliveries(config_ids: list[int], seq: int, task: dict[str, Any]) -> None:
    """Store one delivery per config for this event and queue its first attempt. The
    payload is what the config's webhook is POSTed, in its version: a ``StreamResponse``
    for 1.0, the bare Task in the 0.3 shape the face's 0.3 ``tasks/get`` answers for 0.3."""
    now = timezone.now()
    created: list[int] = []
    legacy_ids = _legacy_config_ids(config_ids) if config_ids else set()
    legacy_task = legacy.task_out(task) if legacy_ids else None
    for config_id in config_ids:
        payload = legacy_task if config_id in legacy_ids else {"task": task}
        delivery, was_created = PushDelivery.objects.get_or_create(
            config_id=config_id,
            seq=seq,
            defaults={
                "task_state": task["status"]["state"],  # the 1.0 name, whatever the payload
                "payload": payload,
                "next_attempt_at": now,
            },
        )
        if was_created:
            created.append(delivery.pk)
    for pk in created:
        transaction.on_commit(lambda pk=pk: deliver_push.delay(pk))


def _headers(config: PushNotificationConfig) -> dict[str, str]:
    """The POST's headers. No ``A2A-Version`` for a 0.3 config: 0.3 servers send none."""
    headers = {"Content-Type": "application/json"}
    if config.protocol_version != PushProtocol.V0_3:
        headers["A2A-Version"] = "1.0"
    if config.token:
        headers[TOKEN_HEADER] = config.token
    if config.auth_scheme and config.auth_credentials:
        headers["Authorization"] = f"{config.auth_scheme} {config.auth_credentials}"
    return headers


def _backoff(attempts: int) -> float:
    return float(settings.A2A_PUSH_BACKOFF) * (2 ** max(attempts - 1, 0))


def _claim(delivery_id: int) -> PushDelivery | None:
    """Take the next attempt of a due delivery; None if not due, done, or taken."""
    now = timezone.now()
    lease = now + timedelta(seconds=float(settings.A2A_PUSH_TIMEOUT) + 30)
    claimed = PushDelivery.objects.filter(
        pk=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now
    ).update(next_attempt_at=lease, attempts=F("attempts") + 1)
    if not claimed:
        return None
    return PushDelivery.objects.select_related("config").get(pk=delivery_id)


def _fail_config(config: PushNotificationConfig, reason: str) -> bool:
    """Count a failed POST against the config; True when that disabled it."""
    PushNotificationConfig.objects.filter(pk=config.pk).update(
        consecutive_failures=F("consecutive_failures") + 1
    )
    config.refresh_from_db(fields=["consecutive_failures"])
    if config.consecutive_failures >= settings.A2A_PUSH_DISABLE_AFTER:
        PushNotificationConfig.objects.filter(pk=config.pk).update(
            enabled=False, disabled_reason=f"disabled after repeated failures: {reason}"[:500]
        )
        PushDelivery.objects.filter(config=config, status=DeliveryStatus.PENDING).update(
            status=DeliveryStatus.FAILED, next_attempt_at=None
        )
        log.warning(
            "push config %s disabled after repeated failures",
            config.pk,
            extra={"task_id": str(config.task_id)},  # a line about a task names it
        )
        return True
    return False


def _earlier_pending(event: dict[str, Any]) -> bool:
    """Whether an earlier event of the same config is still to be delivered."""
    return PushDelivery.objects.filter(
        config_id=event["config_id"], seq__lt=event["seq"], status=DeliveryStatus.PENDING
    ).exists()


def _superseded(delivery_id: int, event: dict[str, Any]) -> bool:
    """Whether a later event of the same config was POSTed already (delivered, under way,
    or tried): then this one is not (marked superseded), or the webhook would see a
    WORKING after the CANCELED. Each event is written after its transaction commits, so
    two transitions close together may write theirs in the other order, the later one
    sent before the earlier one is even stored; each payload is the whole task, so the
    later one says it all."""
    later = PushDelivery.objects.filter(
        Q(status=DeliveryStatus.DELIVERED) | Q(attempts__gt=0),
        config_id=event["config_id"],
        seq__gt=event["seq"],
    )
    if not later.exists():
        return False
    return bool(
        PushDelivery.objects.filter(pk=delivery_id, status=DeliveryStatus.PENDING).update(
            status=DeliveryStatus.SUPERSEDED, next_attempt_at=None
        )
    )


def _start_next(event: dict[str, Any]) -> None:
    """This event ended: the config's next pending one (which waited for it) goes now."""
    following = (
        PushDelivery.objects.filter(
            config_id=event["config_id"], seq__gt=event["seq"], status=DeliveryStatus.PENDING
        )
        .order_by("seq")
        .values_list("pk", flat=True)
        .first()
    )
    if following is not None:
        # Due now: while it waited it was not (see attempt).
        PushDelivery.objects.filter(pk=following, status=DeliveryStatus.PENDING).update(
            next_attempt_at=timezone.now()
        )
        deliver_push.delay(following)


def attempt(delivery_id: int) -> str:
    """One POST of a delivery, recorded; returns the delivery status after it (``waiting``:
    an earlier event of the same config goes first, and starts this one when it ends)."""
    event = PushDelivery.objects.filter(pk=delivery_id).values("config_id", "seq").first()
    if event is None:
        return "skipped"
    if _earlier_pending(event):
        # That one starts this one when it ends (_start_next); until then not due, or the
        # push threads and the sweep would take it up again and again. In one statement
        # with the check: one that ended meanwhile made this one due, and that stands.
        later = timezone.now() + timedelta(seconds=settings.A2A_PUSH_SWEEP_INTERVAL)
        earlier = PushDelivery.objects.filter(
            config_id=event["config_id"], seq__lt=event["seq"], status=DeliveryStatus.PENDING
        )
        PushDelivery.objects.filter(
            Exists(earlier), pk=delivery_id, status=DeliveryStatus.PENDING
        ).update(next_attempt_at=later)
        return "waiting"
    if _superseded(delivery_id, event):
        _start_next(event)
        return DeliveryStatus.SUPERSEDED
    delivery = _claim(delivery_id)
    if delivery is None:
        return "skipped"
    outcome = _post(delivery)
    if outcome != DeliveryStatus.PENDING:
        _start_next(event)
    return outcome


def _post(delivery: PushDelivery) -> str:
    """POST a claimed delivery and record the outcome (retry, delivered or failed)."""
    config = delivery.config
    if not config.enabled:
        PushDelivery.objects.filter(pk=delivery.pk).update(
            status=DeliveryStatus.FAILED, next_attempt_at=None, last_error="config disabled"
        )
        return DeliveryStatus.FAILED
    status_code: int | None = None
    try:
        seconds = float(settings.A2A_PUSH_TIMEOUT)
        # The status is all a delivery needs: the webhook's body is never read (an endless
        # or compressed one would hold the thread and its memory), and the answer must
        # start by its whole deadline (one trickled a byte at a time held it as long).
        with (
            guarded_client(timeout=seconds) as client,
            whole_answer_by(whole_answer_seconds(seconds, seconds)),
            client.stream(
                "POST", config.url, json=delivery.payload, headers=_headers(config)
            ) as response,
        ):
            status_code = response.status_code
        error = "" if response.is_success else f"HTTP {response.status_code}"
    except UnsafeURL as exc:
        error = f"Webhook URL refused: {exc.message}"
    except (httpx.LocalProtocolError, UnicodeError) as exc:
        # Its text quotes the header it refused: the token or the credentials. (Refused
        # when a config is stored since; one stored before may still hold such a value.)
        error = f"{type(exc).__name__}: a header of this config cannot be sent"
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"[:1000]
    now = timezone.now()
    if not error:
        PushDelivery.objects.filter(pk=delivery.pk).update(
            status=DeliveryStatus.DELIVERED,
            delivered_at=now,
            next_attempt_at=None,
            last_status=status_code,
            last_error="",
        )
        PushNotificationConfig.objects.filter(pk=config.pk).update(consecutive_failures=0)
        return DeliveryStatus.DELIVERED
    exhausted = delivery.attempts >= settings.A2A_PUSH_MAX_ATTEMPTS
    delay = _backoff(delivery.attempts)
    PushDelivery.objects.filter(pk=delivery.pk).update(
        status=DeliveryStatus.FAILED if exhausted else DeliveryStatus.PENDING,
        next_attempt_at=None if exhausted else now + timedelta(seconds=delay),
        last_status=status_code,
        last_error=error[:1000],
    )
    log.info(
        "push delivery %s attempt %s failed: %s",
        delivery.pk,
        delivery.attempts,
        error,
        extra={"task_id": str(config.task_id)},  # a line about a task names it
    )
    if _fail_config(config, error):
        return DeliveryStatus.FAILED
    if not exhausted:
        deliver_push.apply_async((delivery.pk,), countdown=delay)
        return DeliveryStatus.PENDING
    return DeliveryStatus.FAILED


@shared_task(name="a2a.face.deliver_push", acks_late=True, soft_time_limit=60, time_limit=90)
def deliver_push(delivery_id: int) -> str:
    """POST one push notification (idempotent: a delivered or not-due one is skipped), on
    a push thread (:mod:`a2a.face.push_pool`): never on this worker's, which poll agents
    and start tasks. ``handed``, or ``busy``: no room, due again a little later."""
    return "handed" if push_pool.hand(delivery_id) else "busy"


@shared_task(name="a2a.face.sweep_push", soft_time_limit=60, time_limit=90)
def sweep_push() -> int:
    """Re-queue deliveries whose attempt is overdue (a lost message, a killed worker), after
    queueing the changes whose delivery was never written (:mod:`a2a.face.push_repair`)."""
    push_repair.queue_missed()
    now = timezone.now()
    due = list(
        PushDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .order_by("next_attempt_at")  # the longest waiting first: those of a full host are
        .values_list("pk", flat=True)[:200]  # put back (push_pool.hand), the others surface
    )
    for pk in due:
        deliver_push.delay(pk)
    return len(due)
