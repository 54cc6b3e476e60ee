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
import logging.config
import re
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger(__name__)

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


# Characters that would start a new line (or move the cursor, recolour the terminal) in a
# text log: C0 but the tab, DEL, C1, and Unicode's line and paragraph separators.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


_NAMED = {"\n": "\\n", "\r": "\\r"}


def _as_unicode_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


class PlainFormatter(logging.Formatter):
    """The text format (``LOG_FORMAT=text``): one line per message. A message's control
    characters are escaped (``\\n``): a message quotes what others wrote (a request's
    path, an agent's failure text), and a newline in it wrote a whole line of the log
    that looked like the platform's own (a forged ``ERROR django.security`` line, from an
    unauthenticated request). A traceback keeps its lines, they are the platform's, but
    not its exceptions' messages: those quote others too (an agent's answer in a
    validation error, a URL in a connection error)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        message = record.message
        if _CONTROL.search(message):
            record.message = _CONTROL.sub(_escaped, message)
        try:
            return super().formatMessage(record)
        finally:
            record.message = message

    def formatException(self, ei: Any) -> str:
        if ei[1] is None:
            return super().formatException(ei)
        summary = traceback.TracebackException(*ei[:3])
        for exception in _chain(summary):
            # Each exception of the chain formats its own last line: replace the bound
            # method on this one summary only (the stack lines stay as Python writes them).
            exception.format_exception_only = _escaped_only(exception)  # type: ignore[method-assign]
        return "".join(summary.format()).rstrip("\n")


def _chain(summary: traceback.TracebackException) -> Iterator[traceback.TracebackException]:
    """A traceback's exceptions: the one raised, its causes and contexts, a group's."""
    pending, seen = [summary], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        pending.extend(getattr(current, "exceptions", None) or ())


def _escaped_only(summary: traceback.TracebackException) -> Any:
    """``summary.format_exception_only`` with each yielded line's control characters
    escaped but its own end of line (a SyntaxError's caret lines come one by one)."""
    original = summary.format_exception_only

    def format_exception_only(*args: Any, **kwargs: Any) -> Iterator[str]:
        for line in original(*args, **kwargs):
            body = line[:-1] if line.endswith("\n") else line
            yield _CONTROL.sub(_escaped, body) + ("\n" if line.endswith("\n") else "")

    return format_exception_only


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
        # JSON escapes C0 itself; the rest of _CONTROL (DEL, C1, U+2028/2029) would go raw,
        # and a request path carrying them split the line for readers that split on
        # Unicode line ends (str.splitlines), or drove the terminal (CSI).
        return _CONTROL.sub(_as_unicode_escape, json.dumps(line, ensure_ascii=False, default=str))


class SkipPeriodicSends(logging.Filter):
    """Drop Celery beat's "Sending due task" lines (one per sweep, every second)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Scheduler: Sending due task")


class SkipFavicon(logging.Filter):
    """Browsers that ignore the page's icon link ask ``/favicon.ico``; it is served now,
    and this keeps an old client's 404 for it out of the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "favicon.ico" not in str(record.getMessage())


def configure(config: dict[str, Any]) -> None:
    """Django's ``LOGGING_CONFIG``: ``dictConfig(LOGGING)``, then route through logging what
    would be written around it. Warnings (a library's deprecation) always: Python prints
    them to stderr by itself. With ``LOG_FORMAT=json``, uncaught exceptions too (of the
    main thread and of any other): Python prints their traceback as plain lines, which a
    log collector reading one JSON object per line cannot parse. In text mode those stay
    Python's own, whatever ``LOG_LEVEL`` hides."""
    from django.conf import settings

    logging.config.dictConfig(config)
    logging.captureWarnings(True)
    if getattr(settings, "LOG_FORMAT", "text") == "json":
        sys.excepthook = _uncaught
        threading.excepthook = _uncaught_in_thread
        _celery_notices_as_json()


def _celery_notices_as_json() -> None:
    """A Celery worker says "worker: Warm shutdown (MainProcess)" (and the like) from its
    signal handlers with a raw write, not logging (no lock taken in a handler): with JSON
    logs, that write gets the notice as one JSON line instead. Django starts (and so this
    runs) once the worker's module is loaded; in other processes it is not, and nothing
    is patched."""
    worker = sys.modules.get("celery.apps.worker")
    if worker is None or getattr(worker.safe_say, "as_json", False):
        return
    say = worker.safe_say
    formatter = JSONFormatter()

    def say_as_json(msg: str, f: Any = sys.__stderr__) -> None:
        record = logging.makeLogRecord(
            {
                "name": worker.__name__,
                "levelno": logging.WARNING,
                "levelname": "WARNING",
                "msg": msg,
            }
        )
        say(formatter.format(record), f)

    say_as_json.as_json = True  # type: ignore[attr-defined]
    worker.safe_say = say_as_json


def _uncaught(kind: type[BaseException], value: BaseException, tb: Any) -> None:
    """``sys.excepthook``: one ERROR line with the traceback (Ctrl-C stays Python's)."""
    if issubclass(kind, KeyboardInterrupt) or not log.isEnabledFor(logging.ERROR):
        sys.__excepthook__(kind, value, tb)
        return
    log.error("uncaught exception", exc_info=(kind, value, tb))


def _uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    """``threading.excepthook``: as :func:`_uncaught`, naming the thread."""
    if args.exc_type is SystemExit:  # as Python's own hook: a thread may end so
        return
    if args.exc_value is None or not log.isEnabledFor(logging.ERROR):
        threading.__excepthook__(args)
        return
    name = args.thread.name if args.thread is not None else "?"
    exc_info = (args.exc_type, args.exc_value, args.exc_traceback)
    log.error("uncaught exception in thread %s", name, exc_info=exc_info)
