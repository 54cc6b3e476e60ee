"""The tasks' part of the admin console: dashboard figures and an agent's task panel.

Registered with :mod:`platform_site.console` from ``a2a/admin.py``. Each panel costs a few
aggregate queries, whatever the number of tasks.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Min, Q
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from a2a.models import Task
from a2a.states import INTERRUPTED_STATES, RETRYABLE_STATES, TaskState

# What a user needs to see the panels (they show tasks): as the task list asks.
PANEL_PERMISSIONS = ("a2a.view_task",)

# What the panels show of a task (templates admin/a2a/dashboard.html, agent_tasks.html):
# loading whole rows read every recent task's artifacts (megabytes each) to show its id.
OLDEST_FIELDS = ("pk", "skill_id", "agent_id", "state_changed_at")
RECENT_FIELDS = ("pk", "skill_id", "state", "created_at")

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


def state_table(tasks: Any) -> list[dict[str, Any]]:
    """Per state: tasks in it now, and those that reached it within the last hour / day."""
    now = timezone.now()
    rows = tasks.values("state").annotate(
        now=Count("pk"),
        hour=Count("pk", filter=Q(state_changed_at__gte=now - HOUR)),
        day=Count("pk", filter=Q(state_changed_at__gte=now - DAY)),
    )
    by_state = {row["state"]: row for row in rows}
    changelist = reverse("admin:a2a_task_changelist")
    return [
        {
            "state": state,
            "now": by_state.get(state, {}).get("now", 0),
            "hour": by_state.get(state, {}).get("hour", 0),
            "day": by_state.get(state, {}).get("day", 0),
            "url": f"{changelist}?state__exact={state}",
        }
        for state in TaskState.values
    ]


def dashboard_stats() -> dict[str, Any]:
    """What the admin index shows about tasks."""
    now = timezone.now()
    waiting = Task.objects.filter(state__in=INTERRUPTED_STATES)
    # The columns the panel shows: a task's artifacts and JSON can run to megabytes.
    oldest = waiting.order_by("state_changed_at").only(*OLDEST_FIELDS).first()
    failures = (
        Task.objects.filter(state__in=RETRYABLE_STATES, state_changed_at__gte=now - DAY)
        .values("error__code")
        .annotate(count=Count("pk"), last=Min("state_changed_at"))
        .order_by("-count")
    )
    changelist = reverse("admin:a2a_task_changelist")
    kept = settings.TASK_RETENTION_DAYS
    return {
        "states": state_table(Task.objects.all()),
        "waiting_count": waiting.count(),
        "waiting_url": f"{changelist}?waiting=yes",
        "oldest_waiting": oldest,
        "oldest_waiting_for": (now - oldest.state_changed_at) if oldest else None,
        "failures": [
            {"code": row["error__code"] or "(none)", "count": row["count"]} for row in failures
        ],
        "failed_url": f"{changelist}?state__exact={TaskState.FAILED}",
        # "now" of a final state counts the ended tasks still kept (docs/operations.md).
        "retention_days": f"{kept:g}" if kept else "",
    }


def dashboard_panel(request: HttpRequest) -> str:
    return render_to_string("admin/a2a/dashboard.html", dashboard_stats(), request=request)


def agent_panel(request: HttpRequest, agent: Any) -> str:
    """An agent's tasks: counts by state over 24 h, the recent ones, a link to all."""
    tasks = Task.objects.filter(agent=agent)
    since = timezone.now() - DAY
    counts = dict(
        tasks.filter(created_at__gte=since)
        .values_list("state")
        .annotate(n=Count("pk"))
        .values_list("state", "n")
    )
    changelist = reverse("admin:a2a_task_changelist")
    context = {
        "agent": agent,
        "counts": [(state, counts.get(state, 0)) for state in TaskState.values],
        "total_day": sum(counts.values()),
        "recent": tasks.only(*RECENT_FIELDS).order_by("-created_at")[:10],
        "all_url": f"{changelist}?agent__id__exact={agent.pk}",
    }
    return render_to_string("admin/a2a/agent_tasks.html", context, request=request)
