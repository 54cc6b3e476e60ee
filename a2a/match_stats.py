"""What the matcher needs to know about tasks, answered from the task table.

:mod:`agent_profiles.matching` scores agents by their load and recent results, which live
in this app's rows; the registry must not import ``a2a``, so :class:`TaskTableStats` is
registered with it at app start (``A2AConfig.ready``).

Recent results judge the agent, so only outcomes it answers for count (:func:`judged`):
a caller can send any agent tasks, and an agent can be its own caller. Without these
limits an agent won matches with tasks it sent itself and completed at once, and a caller
sank a rival's success by sending it tasks and cancelling them.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from django.db.models import Count, F, Q

from a2a import agent_standing
from a2a.agent_registry import READ_STATUSES
from a2a.models import Task
from a2a.states import ACTIVE_STATES, TaskState
from a2a.transports.credentials import CREDENTIALS_UNREADABLE

# Failures that are not the agent's doing: the platform's own (``internal_error``), an
# operator's (``agent_inactive``: disabled, or its skill dropped, and no one to take the
# task), or a send that called nothing (no endpoint, a credential the platform cannot
# decrypt). A caller's input the agent refused is matched apart (:func:`judged`).
NOT_THE_AGENTS = frozenset(
    {"internal_error", agent_standing.CODE, "no_endpoint", CREDENTIALS_UNREADABLE}
)


def judged() -> Q:
    """The finished tasks that say how well the agent works: COMPLETED, REJECTED, and
    FAILED for its own reasons (its failure, an invalid output, a timeout, unreachable).
    Not CANCELED (a person's or a caller's decision), nor the failures above, nor a send
    the agent refused for what it says (``agent_refused`` of a content status or a
    JSON-RPC error: the caller's input, as :func:`a2a.agent_registry.answered_anyway`
    judges it for health)."""
    read = sorted(READ_STATUSES)
    # A refused send that waited offline for a gateway connection that never came ended
    # with the refusal as its last answer (a2a.deadlines: details.lastAnswer): its status
    # is there. No status anywhere: a JSON-RPC error, the agent's answer to the input.
    # Each IN under its own IS NOT NULL: a missing key's IN is NULL, and NULL OR FALSE,
    # negated below, left the task out of both sides (SQL's three-valued logic).
    top, last = "error__details__httpStatus", "error__details__lastAnswer__details__httpStatus"
    refused_input = Q(error__code="agent_refused") & (
        Q(**{f"{top}__isnull": False, f"{top}__in": read})
        | Q(**{f"{top}__isnull": True})
        & (Q(**{f"{last}__isnull": False, f"{last}__in": read}) | Q(**{f"{last}__isnull": True}))
    )
    failed = Q(state=TaskState.FAILED) & ~Q(error__code__in=sorted(NOT_THE_AGENTS)) & ~refused_input
    return Q(state__in=[TaskState.COMPLETED, TaskState.REJECTED]) | failed


class TaskTableStats:
    """Active task counts and recent outcomes per agent, one query each."""

    def active_counts(self, agent_ids: list[str]) -> dict[str, int]:
        """Tasks each agent has in SUBMITTED or WORKING now."""
        return dict(
            Task.objects.filter(agent_id__in=agent_ids, state__in=ACTIVE_STATES)
            .values_list("agent_id")
            .annotate(n=Count("id"))
            .values_list("agent_id", "n")
        )

    def recent_outcomes(
        self, agent_ids: list[str], since: datetime, per_agent: int
    ) -> dict[str, list[tuple[bool, float]]]:
        """Up to ``per_agent`` judged tasks (:func:`judged`) per agent since ``since``,
        newest first: (completed?, seconds from creation to the end).

        An agent's own tasks (it was their caller) are left out: they prove nothing of
        its work, and it could complete any number at once. Each agent gets its own
        ``per_agent``: one shared limit over all of them, newest first, let a busy
        agent's tasks push every other agent's history out. The shared read comes first
        (one query, which the database answers with a top-N sort); only when it came back
        full is each agent it left short read again alone. Numbering every agent's rows
        in one query (a window function) sorted all of the candidates' finished tasks of
        the period: 0.25 s for 150,000 on PostgreSQL, against 0.06 s for the shared read.
        """
        recent: dict[str, list[tuple[bool, float]]] = defaultdict(list)
        finished = Task.objects.filter(judged(), state_changed_at__gte=since).exclude(
            created_by_agent=F("agent")
        )
        fields = ("agent_id", "state", "created_at", "state_changed_at")
        limit = per_agent * max(1, len(agent_ids))
        rows = list(
            finished.filter(agent_id__in=agent_ids)
            .order_by("-state_changed_at", "-id")
            .values_list(*fields)[:limit]
        )
        if len(rows) == limit:  # full: an agent may have been left short by the others
            short = [a for a in agent_ids if sum(1 for r in rows if r[0] == a) < per_agent]
            rows = [r for r in rows if r[0] not in short]
            for agent_id in short:
                alone = finished.filter(agent_id=agent_id).order_by("-state_changed_at", "-id")
                rows += list(alone.values_list(*fields)[:per_agent])
        for agent_id, state, created, changed in rows:
            if len(recent[agent_id]) < per_agent:
                done = state == TaskState.COMPLETED
                recent[agent_id].append((done, (changed - created).total_seconds()))
        return dict(recent)
