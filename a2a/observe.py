"""Watching tasks: metrics, the lifecycle log lines and trace spans, at the task's seams.

* :func:`tasks_created` — :func:`a2a.creation.insert` has it called for every new task
  once its rows are committed (a rolled-back creation created nothing);
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
from platform_site import logs, metrics, tracing

log = logging.getLogger("a2a.lifecycle")


def ids(task: Any) -> dict[str, Any]:
    """The ``extra`` of a log line about ``task`` (JSON logs carry them as keys)."""
    return {
        "task_id": str(task.pk),
        "agent_id": task.agent_id,
        "skill_id": task.skill_id,
        "remote_task_id": getattr(task, "remote_task_id", "") or None,
    }


def span_attributes(task: Any) -> dict[str, Any]:
    """What every span about ``task`` carries (``__`` becomes ``.``)."""
    return {
        "a2a__task__id": str(task.pk),
        "a2a__task__state": task.state,
        "a2a__agent__id": task.agent_id,
        "a2a__skill__id": task.skill_id,
        "a2a__agent__task_id": getattr(task, "remote_task_id", "") or None,
    }


def tasks_creating(tasks: Iterable[Any]) -> None:
    """Before the INSERT: each task starts its own trace, whose context is stored on the
    task (``metadata.trace``) so that every later span about it joins the trace."""
    if not tracing.enabled():
        return
    for task in tasks:
        with tracing.new_trace("a2a.task.create", **span_attributes(task)):
            task.metadata = {**(task.metadata or {}), "trace": tracing.carrier()}


@contextmanager
def task_span(name: str, task: Any, **attributes: Any) -> Iterator[None]:
    """A span in ``task``'s trace: a child of the current span when that is already in the
    trace (a poll's answer inside the worker's span), else of the stored context."""
    if not tracing.enabled():
        yield
        return
    stored = (getattr(task, "metadata", None) or {}).get("trace")
    from opentelemetry import trace

    current = trace.get_current_span().get_span_context()
    parent = None if current.is_valid and _same_trace(current, stored) else stored
    with tracing.span(name, parent, **span_attributes(task), **attributes):
        yield


def _same_trace(current: Any, stored: dict[str, str] | None) -> bool:
    parent = (stored or {}).get("traceparent", "")
    return parent.split("-")[1:2] == [f"{current.trace_id:032x}"]


def tasks_created(tasks: Iterable[Any]) -> None:
    """Count and log new tasks: after their rows were committed (``on_commit``)."""
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
    if tracing.enabled():
        name = "a2a.task.end" if state in TERMINAL_STATES else "a2a.task.transition"
        with task_span(name, task, a2a__task__from_state=from_state or None):
            pass
    extra = {**ids(task), "state": state}
    if state in TERMINAL_STATES:
        # A completed or canceled task keeps the last error it met on the way (a poll that
        # failed while it worked): that is not why it ended, so it is not counted as one.
        ended_ok = state in (TaskState.COMPLETED, TaskState.CANCELED)
        error = {} if ended_ok else (task.error or {})
        code = error.get("code") or ""
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
    """A worker acting on ``task``: its span in the task's trace (calls to the agent inside
    carry ``traceparent``), and every line logged inside carries its ids."""
    with (
        logs.bound(task_id=task.pk, agent_id=task.agent_id, skill_id=task.skill_id),
        task_span(f"a2a.task.{task.next_action or 'check'}", task),
    ):
        yield


def agent_update(task: Any, via: str) -> None:
    """An agent told us about ``task`` (a send's or poll's answer, a push, a frame)."""
    metrics.AGENT_UPDATES.labels(via).inc()
    if tracing.enabled():
        with task_span("a2a.task.update", task, a2a__update__via=via):
            pass


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
