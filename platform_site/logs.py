"""Logging helpers: the JSON format (``LOG_FORMAT=json``), the ids of what a line is
about, and filters that keep the terminal readable.

Lines about a task or an agent carry ``task_id`` / ``agent_id``: given as ``extra=`` by the
lifecycle lines, or bound for a stretch of work with :func:`bound` (a worker acting on a
task, a gateway connection of one agent), which every line logged inside inherits.
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

# The ids a line is about, beyond those given as ``extra``.
ID_KEYS = ("task_id", "agent_id", "skill_id", "remote_task_id", "state")
_bound: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "log_ids", default=None
)


@contextmanager
def bound(**ids: Any) -> Iterator[None]:
    """Every log line inside carries ``ids`` (``task_id=..., agent_id=...``)."""
    current = _bound.get() or {}
    token = _bound.set({**current, **{k: str(v) for k, v in ids.items() if v not in (None, "")}})
    try:
        yield
    finally:
        _bound.reset(token)


def bind(**ids: Any) -> None:
    """Bind ``ids`` for the rest of the current context (e.g. one WebSocket consumer)."""
    current = _bound.get() or {}
    _bound.set({**current, **{k: str(v) for k, v in ids.items() if v not in (None, "")}})


class BoundIds(logging.Filter):
    """Copies the bound ids onto each record (a handler filter: sees every record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in (_bound.get() or {}).items():
            if getattr(record, key, None) in (None, ""):
                setattr(record, key, value)
        return True


class JSONFormatter(logging.Formatter):
    """One JSON object per line: ``time``, ``level``, ``logger``, ``message``, the ids the
    line is about, and ``exc_info`` (the traceback) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in ID_KEYS:
            value = getattr(record, key, None)
            if value not in (None, ""):
                line[key] = str(value)
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        elif record.stack_info:
            line["stack_info"] = record.stack_info
        return json.dumps(line, ensure_ascii=False, default=str)


class SkipPeriodicSends(logging.Filter):
    """Drop Celery beat's "Sending due task" lines (one per sweep, every second)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Scheduler: Sending due task")


class SkipFavicon(logging.Filter):
    """Browsers that ignore the page's icon link ask ``/favicon.ico``; it is served now,
    and this keeps an old client's 404 for it out of the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "favicon.ico" not in str(record.getMessage())
