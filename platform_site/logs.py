"""Logging helpers."""

from __future__ import annotations

import logging


class SkipPeriodicSends(logging.Filter):
    """Drop Celery beat's "Sending due task" lines (one per sweep, every second)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Scheduler: Sending due task")
