"""The worker side of dispatch: claim a due task, do its next action, schedule the next.

The row is the source of truth. A task is *due* when ``next_action`` is set and
``next_poll_at <= now``; a worker *claims* it by setting ``lease_until`` with a
conditional update (and ``select_for_update(skip_locked=True)`` on PostgreSQL in the
sweep), so two workers never act on one task at once. A killed worker's lease expires
(``A2A_LEASE_SECONDS``) and the sweep claims the task again: work is delayed, never lost.
Every path ends by releasing the lease: a transition, or a conditional re-schedule.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from a2a import observe
from a2a.agent_client import A2AClientService, AgentReply
from a2a.exceptions import A2ACallError, A2APermanentError
from a2a.models import Direction, Task
from a2a.services import (
    apply_agent_update,
    handle_send_failure,
    queue_processing,
    record_message,
)
from a2a.states import ACTIVE_STATES, NextAction, TaskState, Transport
from agent_profiles.urlguard import UnsafeURL, check_outbound_url

log = logging.getLogger(__name__)

# Internal errors (bugs, database trouble) while processing one task: retried this many
# times with backoff, then the task fails with a clear reason instead of looping.
MAX_INTERNAL_ERRORS = 5


def _due_filter(now: Any) -> Q:
    return (
        ~Q(next_action=NextAction.NONE)
        & Q(next_poll_at__lte=now)
        & (Q(lease_until__isnull=True) | Q(lease_until__lt=now))
    )


def lease_seconds() -> float:
    """A claim's lease: the setting, but never shorter than one agent call can take."""
    call = settings.A2A_HTTP_TIMEOUT + settings.A2A_CONNECT_TIMEOUT + 2.0
    return max(settings.A2A_LEASE_SECONDS, call)


def _lease() -> Any:
    return timezone.now() + timedelta(seconds=lease_seconds())


def claim(task_id: Any) -> Task | None:
    """Claim one task if it is due and nobody holds it; None otherwise."""
    now = timezone.now()
    claimed = Task.objects.filter(_due_filter(now), pk=task_id).update(lease_until=_lease())
    if not claimed:
        return None
    return Task.objects.select_related("skill", "agent").get(pk=task_id)


def claim_due(limit: int) -> list[Any]:
    """Claim up to ``limit`` due tasks, oldest due first; returns their ids."""
    now = timezone.now()
    with transaction.atomic():
        rows = Task.objects.filter(_due_filter(now)).order_by("next_poll_at")
        if connection.vendor == "postgresql":
            rows = rows.select_for_update(skip_locked=True)
        ids = list(rows.values_list("pk", flat=True)[:limit])
        if ids:
            # Inside the transaction the rows are ours (row locks on PostgreSQL, the write
            # lock on SQLite); the due filter again keeps the update a compare-and-set.
            Task.objects.filter(_due_filter(now), pk__in=ids).update(lease_until=_lease())
    return ids


def expire_overdue() -> int:
    """Fail tasks still SUBMITTED/WORKING after their deadline (``A2A_TASK_TIMEOUT``)."""
    now = timezone.now()
    overdue = Task.objects.filter(state__in=ACTIVE_STATES, deadline_at__lt=now).exclude(
        transport=Transport.OFFLINE
    )
    count = 0
    for task in overdue.select_related("skill", "agent")[: settings.A2A_POLL_BATCH]:
        count += int(fail_timeout(task))
    return count


def fail_timeout(task: Task) -> bool:
    """FAILED with code ``timeout``; the agent is asked to cancel its task."""
    fields: dict[str, Any] = {}
    if task.remote_task_id and task.transport == Transport.A2A:
        fields = {"next_action": NextAction.CANCEL, "next_poll_at": timezone.now()}
    seconds = settings.A2A_TASK_TIMEOUT
    last = (task.error or {}).get("message") if isinstance(task.error, dict) else None
    message = (
        f"Timed out: agent '{task.agent_id}' gave no final answer within {seconds:g} s "
        f"(A2A_TASK_TIMEOUT); the task was {task.state}."
    )
    if last:
        message += f" Last error: {last}"
    done = task.fail(
        "timeout", message, {"timeoutSeconds": seconds, "lastState": task.state}, **fields
    )
    if done and fields:
        queue_processing(task.pk)
    return done


# --- processing one claimed task --------------------------------------------------------


def process_task(task_id: Any) -> None:
    """Claim the task and do its due action (the body of the ``a2a.process`` Celery task)."""
    task = claim(task_id)
    if task is not None:
        run_claimed(task)


def run_claimed(task: Task) -> None:
    """Do the claimed task's next action; never raises (a failure is recorded on the task)."""
    with observe.working_on(task):  # the task's ids on every log line, its trace span
        _run_claimed(task)


def _run_claimed(task: Task) -> None:
    try:
        if (
            task.state in ACTIVE_STATES
            and task.deadline_at is not None
            and task.deadline_at <= timezone.now()
            and task.transport != Transport.OFFLINE
        ):
            fail_timeout(task)
            return
        action = task.next_action
        if task.transport != Transport.A2A:
            # The gateway carries this task now; nothing for the A2A worker to do.
            Task.objects.filter(pk=task.pk, transport=task.transport).update(
                next_action=NextAction.NONE, next_poll_at=None, lease_until=None
            )
            return
        if action == NextAction.SEND:
            _send(task)
        elif action == NextAction.POLL:
            _poll(task)
        elif action == NextAction.CANCEL:
            _cancel(task)
        else:
            _release(task)
    except Exception as exc:
        log.exception("task %s: internal error during %s", task.pk, task.next_action)
        _internal_error(task, exc)


def _release(task: Task) -> None:
    Task.objects.filter(pk=task.pk).update(lease_until=None)


def _internal_error(task: Task, exc: Exception) -> None:
    try:
        task.refresh_from_db()
        metadata = dict(task.metadata or {})
        count = int(metadata.get("internalErrors", 0)) + 1
        metadata["internalErrors"] = count
        if count >= MAX_INTERNAL_ERRORS and not task.is_terminal:
            task.fail(
                "internal_error",
                f"The platform failed {count} times processing this task: {exc!r}",
                metadata=metadata,
            )
            return
        delay = min(settings.A2A_POLL_INTERVAL_MAX, 2.0**count)
        Task.objects.filter(pk=task.pk).update(
            metadata=metadata,
            lease_until=None,
            next_poll_at=timezone.now() + timedelta(seconds=delay),
        )
    except Exception:
        log.exception("task %s: could not record the internal error", task.pk)


def _base_interval(task: Task) -> float:
    base = task.agent.poll_interval
    return float(base if base is not None and base > 0 else settings.A2A_POLL_INTERVAL)


def schedule_poll(task: Task, *, grow: bool, retry_after: float | None = None) -> bool:
    """Poll again later: from the base interval, times A2A_POLL_BACKOFF while nothing changes.

    Conditional on the state the worker saw, so a person's cancel or reply meanwhile wins.
    """
    base = _base_interval(task)
    interval = task.poll_interval or base
    interval = min(interval * settings.A2A_POLL_BACKOFF, settings.A2A_POLL_INTERVAL_MAX)
    interval = max(interval, base) if grow else base
    delay = max(interval, retry_after or 0.0)
    due = timezone.now() + timedelta(seconds=delay)
    updated = Task.objects.filter(pk=task.pk, state=task.state).update(
        next_action=NextAction.POLL, next_poll_at=due, lease_until=None, poll_interval=interval
    )
    if updated:
        task.next_action, task.next_poll_at, task.poll_interval = NextAction.POLL, due, interval
        if settings.A2A_POLL_MESSAGES and delay < settings.A2A_SWEEP_INTERVAL * 2:
            queue_processing(task.pk, countdown=delay)
    return bool(updated)


def _after_answer(task: Task, reply: AgentReply, state_before: str) -> None:
    """Keep following a task that is still active; tell the agent if we canceled meanwhile.

    ``task`` is current: transitions update it, and a lost compare-and-set reloads it.
    """
    if task.state in ACTIVE_STATES and task.transport == Transport.A2A:
        grow = task.state == state_before
        if schedule_poll(task, grow=grow, retry_after=reply.retry_after):
            return
        task.refresh_from_db()  # someone changed it meanwhile (a cancel, most likely)
    if task.state == TaskState.CANCELED and task.remote_task_id and not task.next_action:
        # Canceled while our send was on the wire: the agent has a task now; stop it.
        task.schedule(NextAction.CANCEL)
        queue_processing(task.pk)
    elif task.lease_until is not None:
        _release(task)


def _send(task: Task) -> None:
    message = task.outbound_message or {}
    client = A2AClientService()
    is_followup = bool(message.get("taskId"))
    if not is_followup:
        Task.objects.filter(pk=task.pk).update(attempts=task.attempts + 1)
        task.attempts += 1
    state_before = task.state
    try:
        if task.transport == Transport.A2A and not is_followup:
            _check_url(task.agent.a2a_endpoint)
        reply = client.send_message(task.agent.a2a_endpoint, message)
    except A2ACallError as exc:
        handle_send_failure(task, exc)
        return
    _clear_send_failures(task)
    seen = task.agent.last_seen_at
    if seen is None or (timezone.now() - seen).total_seconds() > 30:
        task.agent.touch()
    if reply.message is not None:
        # A bare Message is the agent's whole answer: its data parts are the output.
        record_message(task, Direction.FROM_AGENT, reply.message)
        artifacts = [{"artifactId": "message", "parts": reply.message.get("parts") or []}]
        status = {"state": TaskState.COMPLETED}
        apply_agent_update(task, status=status, artifacts=artifacts, remote=None, via="a2a")
    else:
        remote = reply.task or {}
        try:
            apply_agent_update(
                task,
                status=remote.get("status") or {},
                artifacts=remote.get("artifacts"),
                remote=remote,
                via="a2a",
            )
        except A2ACallError as exc:
            handle_send_failure(task, exc)
            return
    _after_answer(task, reply, state_before)


def _check_url(url: str) -> None:
    """The outbound URL guard, again at send time: DNS may have changed since registration."""
    try:
        check_outbound_url(url)
    except UnsafeURL as exc:
        raise A2APermanentError(
            f"The agent's endpoint is not allowed: {exc.message}", code="endpoint_refused"
        ) from None


def _clear_send_failures(task: Task) -> None:
    metadata = task.metadata or {}
    if metadata.get("sendFailures") or task.error:
        metadata = {**metadata, "sendFailures": 0}
        Task.objects.filter(pk=task.pk).update(metadata=metadata, error=None)
        task.metadata, task.error = metadata, None


def _poll(task: Task) -> None:
    state_before = task.state
    try:
        reply = A2AClientService().get_task(task.agent.a2a_endpoint, task.remote_task_id)
        remote = reply.task or {}
        if task.error:  # an earlier transient poll error: the agent answers again
            Task.objects.filter(pk=task.pk, state=task.state).update(error=None)
            task.error = None
        apply_agent_update(
            task,
            status=remote.get("status") or {},
            artifacts=remote.get("artifacts"),
            remote=remote,
            via="a2a",
        )
    except A2ACallError as exc:
        _poll_failed(task, exc)
        return
    _after_answer(task, reply, state_before)


def _poll_failed(task: Task, exc: A2ACallError) -> None:
    """Transient → keep polling (the deadline bounds it); otherwise the task fails."""
    if exc.transient:
        Task.objects.filter(pk=task.pk, state=task.state).update(error=exc.as_error())
        task.error = exc.as_error()
        schedule_poll(task, grow=True, retry_after=exc.retry_after)
        return
    task.fail(
        exc.code,
        f"Lost track of the task at agent '{task.agent_id}': {exc.message}",
        exc.as_error()["details"],
    )


def _cancel(task: Task) -> None:
    """Propagate a cancel to the agent: one try; the outcome is noted in metadata."""
    metadata = dict(task.metadata or {})
    try:
        reply = A2AClientService().cancel_task(task.agent.a2a_endpoint, task.remote_task_id)
        metadata["remoteCancel"] = {"at": timezone.now().isoformat(), "state": reply.state}
    except A2ACallError as exc:
        metadata["remoteCancel"] = {"at": timezone.now().isoformat(), "error": exc.as_error()}
    Task.objects.filter(pk=task.pk, next_action=NextAction.CANCEL).update(
        metadata=metadata, next_action=NextAction.NONE, next_poll_at=None, lease_until=None
    )


# --- the sweep ---------------------------------------------------------------------------


def _run_in_thread(task_id: Any) -> None:
    try:
        task = Task.objects.select_related("skill", "agent").get(pk=task_id)
        run_claimed(task)
    except Exception:
        log.exception("task %s: sweep could not process it", task_id)
    finally:
        connection.close()  # this pool thread's own connection


def sweep() -> dict[str, int]:
    """Fail overdue tasks, then claim due ones and process them concurrently.

    Claims are taken ``A2A_POLL_CONCURRENCY`` at a time and processed at once (up to
    ``A2A_POLL_BATCH`` per sweep), so no claimed task waits in a queue while its lease
    runs out.
    """
    expired = expire_overdue()
    width = max(1, settings.A2A_POLL_CONCURRENCY)
    processed = 0
    pool: ThreadPoolExecutor | None = None
    try:
        while processed < settings.A2A_POLL_BATCH:
            ids = claim_due(min(width, settings.A2A_POLL_BATCH - processed))
            if not ids:
                break
            if pool is None:
                pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="a2a-sweep")
            list(pool.map(_run_in_thread, ids))
            processed += len(ids)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    return {"expired": expired, "processed": processed}
