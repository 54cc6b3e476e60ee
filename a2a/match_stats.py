"""What the matcher needs to know about tasks, answered from the task table.

:mod:`agent_profiles.matching` scores agents by their load and recent results, which live
in this app's rows; the registry must not import ``a2a``, so :class:`TaskTableStats` is
registered with it at app start (``A2AConfig.ready``).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from django.db.models import Count

from a2a.models import Task
from a2a.states import ACTIVE_STATES, TERMINAL_STATES, TaskState


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
        """Up to ``per_agent`` finished tasks per agent since ``since``, newest first:
        (completed?, seconds from creation to the end)."""
        recent: dict[str, list[tuple[bool, float]]] = defaultdict(list)
        rows = (
            Task.objects.filter(
                agent_id__in=agent_ids, state__in=TERMINAL_STATES, state_changed_at__gte=since
            )
            .order_by("-state_changed_at")
            .values_list("agent_id", "state", "created_at", "state_changed_at")[
                : per_agent * max(1, len(agent_ids))
            ]
        )
        for agent_id, state, created, changed in rows:
            if len(recent[agent_id]) < per_agent:
                done = state == TaskState.COMPLETED
                recent[agent_id].append((done, (changed - created).total_seconds()))
        return dict(recent)
