"""Watching tasks: metrics, the lifecycle log lines and trace spans, at the task's seams.

* :func:`tasks_created` — called by :func:`a2a.creation.insert` for every new task;
* :func:`on_task_changed` — the ``task_changed`` receiver (after each transition commits,
  with the task, its previous and new state);
* :func:`agent_update` — each status an agent sent (a poll's answer, a push, a frame);
* scrape-time gauges from the database: tasks by state, the sweep's lag.

Receivers never raise: watching must not break the work it watches.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from a2a.signals import task_changed
from a2a.states import INTERRUPTED_STATES, TERMINAL_STATES, NextAction, TaskState
from platform_site import logs, metrics

log = logging.getLogger("a2a.lifecycle")


def ids(task: Any) -> dict[str, Any]:
    """The ``extra`` of a log line about ``task`` (JSON logs carry them as keys)."""
    return {
        "task_id": str(task.pk),
        "agent_id": task.agent_id,
        "skill_id": task.skill_id,
        "remote_task_id": getattr(task, "remote_task_id", "") or None,
    }


def tasks_created(tasks: Iterable[Any]) -> None:
    for task in tasks:
        try:
            metrics.TASKS_CREATED.labels(task.skill_id, task.agent_id, task.origin).inc()
            log.info(
                "task %s created: skill %s, agent %s (%s)",
                task.pk,
                task.skill_id,
                task.agent_id,
                task.origin,
                extra=ids(task),
            )
        except Exception:  # never break creation
            log.exception("observing a created task failed")


def on_task_changed(sender: Any, task_id: Any = None, **kwargs: Any) -> None:
    task, state = kwargs.get("task"), kwargs.get("state")
    if task is None or state is None:
        return
    try:
        _transition(task, kwargs.get("from_state") or "", state)
    except Exception:
        log.exception("observing task %s failed", task_id)


def _transition(task: Any, from_state: str, state: str) -> None:
    metrics.TASK_TRANSITIONS.labels(state).inc()
    extra = {**ids(task), "state": state}
    if state in TERMINAL_STATES:
        error = task.error or {}
        code = (error.get("code") or "") if state != TaskState.COMPLETED else ""
        metrics.TASKS_ENDED.labels(task.skill_id, task.agent_id, state, code).inc()
        took = (task.state_changed_at - task.created_at).total_seconds()
        metrics.TASK_DURATION.labels(task.skill_id, state).observe(max(took, 0.0))
        detail = f" ({code}: {error.get('message', '')})" if code else ""
        log.info("task %s ended %s after %.2f s%s", task.pk, state, took, detail, extra=extra)
    elif state in INTERRUPTED_STATES:
        log.info("task %s waits for a person (%s)", task.pk, state, extra=extra)
    elif state == TaskState.SUBMITTED and from_state in TERMINAL_STATES:
        log.info("task %s retried (was %s)", task.pk, from_state, extra=extra)


@contextmanager
def working_on(task: Any) -> Iterator[None]:
    """A worker acting on ``task``: every line logged inside carries its ids."""
    with logs.bound(task_id=task.pk, agent_id=task.agent_id, skill_id=task.skill_id):
        yield


def agent_update(via: str) -> None:
    metrics.AGENT_UPDATES.labels(via).inc()


def database_gauges() -> Iterable[Metric]:
    """Tasks by state and the sweep's lag, read at scrape time."""
    from a2a.models import Task

    by_state = GaugeMetricFamily("a2a_tasks", "Platform tasks by current state.", labels=["state"])
    counts = dict(
        Task.objects.values_list("state").annotate(n=Count("pk")).values_list("state", "n")
    )
    for state in TaskState.values:
        by_state.add_metric([state], counts.get(state, 0))
    yield by_state
    now = timezone.now()
    oldest = (
        Task.objects.exclude(next_action=NextAction.NONE)
        .filter(next_poll_at__lte=now)
        .aggregate(oldest=Min("next_poll_at"))["oldest"]
    )
    yield GaugeMetricFamily(
        "a2a_sweep_lag_seconds",
        "How overdue the oldest due task action (send, poll, cancel) is; 0 when none is.",
        value=(now - oldest).total_seconds() if oldest else 0.0,
    )


def connect() -> None:
    task_changed.connect(on_task_changed, dispatch_uid="a2a.observe")
    metrics.add_scrape_collector(database_gauges)
