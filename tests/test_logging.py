"""`make run` keeps its terminal readable: no per-second sweep chatter."""

from __future__ import annotations

import logging

from platform_site.logs import SkipPeriodicSends


def _record(msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("celery.beat", logging.INFO, __file__, 1, msg, args, None)


def test_it_drops_beats_periodic_send_lines() -> None:
    line = _record("Scheduler: Sending due task %s (%s)", "a2a-sweep", "a2a.sweep")
    assert not SkipPeriodicSends().filter(line)


def test_it_keeps_beats_other_lines() -> None:
    assert SkipPeriodicSends().filter(_record("beat: Starting..."))
