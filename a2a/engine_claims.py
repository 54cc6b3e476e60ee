"""The batched poll engine's claim (:mod:`a2a.engine`): a fair batch of due polls.

Due polls are claimed in one transaction (``select_for_update(skip_locked=True)`` on
PostgreSQL, the write lock on SQLite), longest unseen first (see
:func:`unseen_longest_first`), but at most ``A2A_AGENT_POLL_RATE`` per agent per second (a
budget per sweep, counted over its batches) and round-robin between agents, so one agent
with ten thousand tasks neither starves the others nor gets hammered. An agent that asked
for a pause (``Retry-After``) is left out until it ends.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict, deque
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, FloatField, Func
from django.db.models.expressions import CombinedExpression
from django.utils import timezone

from a2a.claims import due_filter, lease_seconds
from a2a.models import Task
from a2a.pause_models import AgentPause
from a2a.states import NextAction

_sweeps = 0  # the sweeps this process began (:func:`new_sweep`)


def new_sweep() -> None:
    """A sweep begins: the budgets of :func:`agent_budget` are this sweep's."""
    global _sweeps
    _sweeps += 1


def agent_budget() -> int:
    """Polls one agent may get in one sweep: ``A2A_AGENT_POLL_RATE`` per second over the
    ``A2A_SWEEP_INTERVAL`` a sweep stands for (each beat's tick starts one sweep).

    A share that is no whole number is spread over the sweeps: a rate of 0.2 a second
    gives one poll every fifth sweep (rounded up to one a sweep, it was five times the
    rate set), 1.5 gives two and one in turn."""
    share = settings.A2A_AGENT_POLL_RATE * settings.A2A_SWEEP_INTERVAL
    return math.ceil((_sweeps + 1) * share) - math.ceil(_sweeps * share)


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
    longest unseen first, does not hide the other agents' due polls from the next batch;
    so are agents that asked for a pause (:class:`~a2a.pause_models.AgentPause`).
    """
    now = timezone.now()
    lease = now + timedelta(seconds=lease_seconds())
    spent = Counter() if spent is None else spent
    with transaction.atomic():
        rows = Task.objects.filter(due_filter(now), next_action=NextAction.POLL)
        left_out = [*spent_agents(spent), *AgentPause.paused(now)]
        if left_out:
            rows = rows.exclude(agent_id__in=left_out)
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
