"""The batched poll engine: many due polls per claim, their HTTP calls at once, few writes.

One Celery message and a handful of transactions per poll do not scale to thousands of
long tasks. The sweep hands due polls to :func:`poll_due`, which

1. **claims a batch** in one transaction (``select_for_update(skip_locked=True)`` on
   PostgreSQL, the write lock on SQLite): the due polls, longest unseen first (see
   :func:`unseen_longest_first`), but at most ``A2A_AGENT_POLL_RATE`` per agent per
   second (a budget per sweep, counted over its batches) and taken round-robin between
   agents, so one agent with ten thousand tasks neither starves the others nor gets
   hammered. An agent that answered ``429``/``503`` with ``Retry-After`` has all its
   polls moved past that time (:meth:`~a2a.models.Task.pause_polls`): the row says so,
   every worker obeys;
2. **calls the agents concurrently** on a thread pool (``A2A_POLL_CONCURRENCY`` threads)
   over the transports' shared connection pool;
3. **applies the answers in few transactions**: the usual answer of a long task is "still
   WORKING, nothing new" — those are re-scheduled together, one UPDATE per batch and
   state, conditional on the state the worker saw and on the batch's own lease (a person's
   cancel meanwhile wins). Anything else (a new state, a question, artifacts, an error)
   goes through the one agent-update mapping task by task, as a single poll would.

Guarantees kept: the row is the truth (a killed worker's lease runs out and a later sweep
claims the tasks again: work is delayed, never lost), a transition is a compare-and-set
(nothing is applied twice), and two workers never hold one task.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F, FloatField, Func
from django.db.models.expressions import CombinedExpression
from django.utils import timezone

from a2a import (
    agent_answers,
    agent_listing,
    agent_polls,
    agent_reads,
    agent_registry,
    follow_policy,
    overtaken_calls,
    remote_ids,
)
from a2a.agent_updates import apply_agent_reply
from a2a.claims import due_filter, lease_seconds
from a2a.exceptions import A2ACallError, A2AUnsupportedOperation
from a2a.models import Task
from a2a.observe import ids as log_ids
from a2a.states import NextAction, normalize_state
from a2a.transports.base import AgentReply
from a2a.transports.redaction import describe_failure
from agent_profiles.interfaces import CallTarget
from platform_site.metrics import cpu_stage

log = logging.getLogger(__name__)

_pool: ThreadPoolExecutor | None = None


def executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        width = max(1, settings.A2A_POLL_CONCURRENCY)
        _pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="a2a-poll")
    return _pool


# --- 1. claiming a fair batch --------------------------------------------------------------


def agent_budget() -> int:
    """Polls one agent may get in one sweep: ``A2A_AGENT_POLL_RATE`` per second over the
    ``A2A_SWEEP_INTERVAL`` a sweep stands for (each beat's tick starts one sweep)."""
    return max(1, round(settings.A2A_AGENT_POLL_RATE * settings.A2A_SWEEP_INTERVAL))


class _Seconds(Func):
    """A datetime column as a number of seconds (PostgreSQL: since 1970; SQLite: since
    the Julian epoch): what only orders rows needs no common epoch."""

    output_field = FloatField()
    template = "date_part('epoch', %(expressions)s)"  # double precision (EXTRACT: numeric)

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(
            compiler, connection, template="(julianday(%(expressions)s) * 86400.0)", **extra
        )


def unseen_longest_first() -> CombinedExpression:
    """The order due polls are claimed in: the task seen longest ago first (when its
    last poll was: ``next_poll_at`` less ``poll_interval``), not the one due longest ago.

    A poll notices an agent's end at most the time since the task's last poll after it;
    this order keeps the longest of those short when the workers fall behind. Claimed
    oldest due first, every due poll came equally late: a young task polled every
    second and a task at the 10 s cap, both 3 s late, noticed an end up to 4 and 13 s
    after it. Now the polls at the cap go first, and a young task's wait stretches its
    next interval (:func:`a2a.follow_policy.quiet_spell`), so a backlog thins itself.
    No due poll waits for ever: the longer it waits, the earlier it comes. Measured on
    10,000 polled tasks (embedded, two pairs of runs): notice p95 8.4 and 9.1 s against
    9.5 and 9.4 s, 6.2 and 7.6 polls per task against 7.7 and 7.8. The price is a sort
    of the due polls instead of a walk of the index: searching 10,000 due at once, 6.0
    against 1.7 ms on SQLite and 7 against 2 ms on PostgreSQL, some 25 us per poll of a
    200-poll batch; with few polls due, next to nothing.
    """
    return _Seconds("next_poll_at") - F("poll_interval")


def pick_fairly(
    candidates: list[tuple[Any, str]],
    limit: int,
    per_agent: int,
    spent: Counter[str] | None = None,
) -> list[Any]:
    """Round-robin over agents, in the order of ``candidates`` within each (longest unseen
    first), at most ``per_agent`` each less what ``spent`` says the agent had already
    (``spent`` is counted up)."""
    spent = Counter() if spent is None else spent
    queues: dict[str, deque[Any]] = defaultdict(deque)
    for pk, agent_id in candidates:
        if len(queues[agent_id]) < per_agent - spent[agent_id]:
            queues[agent_id].append(pk)
    for agent_id in [agent_id for agent_id, queue in queues.items() if not queue]:
        del queues[agent_id]  # its budget is spent
    picked: list[Any] = []
    while queues and len(picked) < limit:
        for agent_id in list(queues):
            queue = queues[agent_id]
            picked.append(queue.popleft())
            spent[agent_id] += 1
            if not queue:
                del queues[agent_id]
            if len(picked) >= limit:
                break
    return picked


def spent_agents(spent: Counter[str]) -> list[str]:
    """The agents whose polls this sweep have used their budget."""
    per_agent = agent_budget()
    return [agent_id for agent_id, used in spent.items() if used >= per_agent]


POLL_DEFERS = ("input", "outbound_message")


def claim_polls(limit: int, spent: Counter[str] | None = None) -> tuple[list[Task], Any]:
    """Claim up to ``limit`` due polls fairly; the tasks and the batch's lease.

    ``spent``: the polls each agent had in this sweep's earlier batches, counted up here.
    Agents that used their budget are left out of the search, so that their backlog,
    longest unseen first, does not hide the other agents' due polls from the next batch.
    """
    now = timezone.now()
    lease = now + timedelta(seconds=lease_seconds())
    spent = Counter() if spent is None else spent
    with transaction.atomic():
        rows = Task.objects.filter(due_filter(now), next_action=NextAction.POLL)
        full = spent_agents(spent)
        if full:
            rows = rows.exclude(agent_id__in=full)
        rows = rows.order_by(unseen_longest_first())
        if connection.vendor == "postgresql":
            rows = rows.select_for_update(skip_locked=True)
        candidates = list(rows.values_list("pk", "agent_id")[: limit * 4])
        ids = pick_fairly(candidates, limit, agent_budget(), spent)
        if not ids:
            return [], lease
        Task.objects.filter(due_filter(now), pk__in=ids).update(lease_until=lease)
    # The batch's few agents and skills are read once each, not joined to every row: the
    # joined columns (an agent's card data, a skill's schemas) cost more than the task's.
    # A poll never reads the task's input or the message sent (the rare path that sends
    # again loads it then): decoding them for every poll grew with every input's size.
    held = Task.objects.filter(pk__in=ids, lease_until=lease).defer(*POLL_DEFERS)
    return list(held.prefetch_related("skill", "agent")), lease


# --- 2. the calls ---------------------------------------------------------------------------


@dataclass
class Polled:
    task: Task
    target: CallTarget
    reply: AgentReply | None = None
    error: A2ACallError | None = None


@cpu_stage("poll")
def _call(polled: Polled) -> Polled:
    try:
        polled.reply = agent_reads.read_task(polled.target, polled.task.remote_task_id)
    except A2ACallError as exc:
        polled.error = exc
    except Exception as exc:  # a bug in a transport must not sink the batch
        log.exception("task %s: poll failed", polled.task.pk, extra=log_ids(polled.task))
        # Not its repr: an encoding error's quotes the header it failed on (a credential).
        said = describe_failure(exc, polled.target)
        polled.error = A2ACallError(f"internal error while polling: {said}")
    return polled


# --- 3. applying ----------------------------------------------------------------------------


def _message_id(message: Any) -> Any:
    return message.get("messageId") if isinstance(message, dict) else None


def is_quiet(task: Task, reply: AgentReply) -> bool:
    """Whether the answer says nothing new: same state, same status message, no new
    artifacts, same agent task, and no error of an earlier poll on the task (an answer
    clears it, and a refused credential's in the agent's health: :func:`_apply_one`)."""
    remote = reply.task
    if not isinstance(remote, dict) or reply.message is not None or task.error:
        return False
    status = remote.get("status") or {}
    if normalize_state(status.get("state")) != task.state:
        return False
    if _message_id(status.get("message")) != _message_id(task.status_message):
        return False
    if remote.get("artifacts") and remote.get("artifacts") != task.artifacts:
        return False
    return not (remote.get("id") and remote.get("id") != task.remote_task_id)


def reschedule_quiet(quiet: list[Polled], lease: Any) -> int:
    """Re-schedule the quiet polls of a batch together (see :meth:`Task.poll_later`)."""
    now = timezone.now()
    rows = []
    for polled in quiet:
        delay, interval = follow_policy.next_poll(polled.task, polled.target, grow=True)
        rows.append((polled.task, now + timedelta(seconds=delay), interval))
    return Task.poll_later(rows, lease)


def _apply_one(polled: Polled) -> None:
    """Apply one poll's answer (or failure), only to the agent task it read: a person may
    have reassigned or retried the task while the batch was on the wire
    (:mod:`a2a.overtaken_calls`). What concerns the agent (its health, its listing's
    cursor, a pause it asked for) is written outside the task row's lock."""
    task, target = polled.task, polled.target
    if polled.error is None and polled.reply is not None:
        if task.error and follow_policy.auth_refused(task):
            # The credential works again: the agent's health says so too, as after a
            # single poll (agent_polls.poll); else it stayed unhealthy (unreachable in
            # matching, no "agent back") until some other call succeeded.
            agent_answers.outcome(task, None)
        try:
            # An answer about another agent task is refused before its status time is
            # taken for a change the listings missed (which moves the agent's cursor).
            remote_ids.remote_fields(task, polled.reply.task)
            agent_listing.check_poll(task, target, polled.reply)
        except A2ACallError as exc:
            polled.error = exc
    if polled.error is not None and polled.error.retry_after:
        # The agent asked for a pause: every poll of its tasks waits, in every worker.
        until = timezone.now() + timedelta(seconds=polled.error.retry_after)
        try:
            Task.pause_polls(task.agent_id, until)
        except DatabaseError as exc:
            # The pause spares the agent; it is not this task's work: the answer is still
            # applied below, and the task is not charged with an internal error.
            log.warning(
                "agent %s: could not pause its polls (%s)",
                task.agent_id,
                exc,
                extra={"agent_id": task.agent_id},
            )
    with overtaken_calls.still_current(task) as still:
        if still:
            _apply_current(polled)
    if not still:
        overtaken_calls.drop(task, target, polled.reply, "poll")


def _apply_current(polled: Polled) -> None:
    """:func:`_apply_one` for a task still at the agent task polled, under its row's lock."""
    task, target = polled.task, polled.target
    state_before, held = task.state, task.lease_until
    news: dict[str, Any] = {}  # written with the next poll's schedule
    try:
        if polled.error is not None:
            _failed(polled)
            return
        assert polled.reply is not None
        if task.error:  # an earlier poll error: the agent answers again
            task.note(error=None, if_state=task.state)
        apply_agent_reply(task, task_json=polled.reply.task, message=None, via="a2a", pending=news)
    except A2ACallError as exc:
        polled.error = exc
        _failed(polled)
        return
    agent_answers.after_answer(
        task, target, polled.reply, state_before, follow_policy.POLL, news, held=held
    )


def _failed(polled: Polled) -> None:
    task, target, exc = polled.task, polled.target, polled.error
    assert exc is not None
    if isinstance(exc, A2AUnsupportedOperation):
        agent_polls.no_polling(task, target, exc)
        return
    agent_polls.poll_failed(task, target, exc)


def poll_due(limit: int, spent: Counter[str] | None = None) -> int:
    """Claim up to ``limit`` due polls, poll them at once, apply; how many were polled.
    ``spent``: the sweep's polls per agent so far (see :func:`claim_polls`)."""
    from a2a.worker import _internal_error

    tasks, lease = claim_polls(limit, spent)
    if not tasks:
        return 0
    targets: dict[str, CallTarget] = {}
    batch = []
    for task in tasks:
        if task.agent_id not in targets:
            targets[task.agent_id] = agent_registry.target_for(task.agent)
        batch.append(Polled(task, targets[task.agent_id]))
    quiet = []
    # News is applied as its answer comes (in the order of the calls), while the batch's
    # later calls are still out: an end found by the batch's first call is not held back
    # for the others (a loaded batch of 200 takes a second). Quiet answers are re-scheduled
    # together at the end, in one statement.
    for polled in executor().map(_call, batch):
        calm = polled.error is None and polled.reply and is_quiet(polled.task, polled.reply)
        if calm and not settings.A2A_POLL_MESSAGES:  # else each schedules its own message
            quiet.append(polled)
            continue
        try:
            _apply_one(polled)
        except Exception as exc:
            log.exception(
                "task %s: internal error applying a poll",
                polled.task.pk,
                extra=log_ids(polled.task),
            )
            _internal_error(polled.task, exc)
    if quiet:
        try:
            reschedule_quiet(quiet, lease)
        except Exception:
            log.exception("could not re-schedule %d quiet polls; their leases run out", len(quiet))
    return len(tasks)
