"""Daphne without two things Twisted does per request that daphne never uses.

**Form parsing.** Twisted's ``http.Request.requestReceived`` parses the ``Content-Type``
of every POST with a body through :class:`email.message.EmailMessage` (about 0.28 ms of
CPU per request on this project's machines) to decide whether to decode an HTML form
into ``request.args``, and decodes ``multipart/form-data`` bodies in full. Daphne never
reads ``request.args``: it hands the raw body to the ASGI app, which parses what it
accepts itself. A py-spy profile of the agent push webhook under load put that header
parsing at 8% of the server's CPU. Twisted has the switch (``parsePOSTFormSubmission``, a
constructor argument of its ``Request``), but daphne builds its ``WebRequest`` without a
way to pass it, so this module pins the attribute to False on daphne's request class.

**Twisted's access log line.** Twisted's ``HTTPFactory.log`` formats a combined-log line
for every response and writes it to Twisted's log. At daphne's default verbosity (1 or
less) daphne sends Twisted's log nowhere (``Server.run``), so the line is formatted only
to be dropped: 2% of the server's CPU in a profile of pushed tasks. This module skips it
at that verbosity; above it Twisted logs as before. Daphne's own access log
(``--access-log``) is separate and unchanged.

**Daphne's access log, with ``LOG_FORMAT=json``.** Daphne writes its access log (on by
default, to stdout) with ``print``-like writes of its own, not through logging: with JSON
logs, every request was a plain line among the JSON ones, which a collector reading one
object per line cannot parse. Then the lines daphne would write to stdout go to the
``daphne.access`` logger at INFO instead (one JSON object each, like every other line); an
access log daphne writes to a file (``--access-log PATH``) stays as it is.

**Bounded requests.** A body kept in memory and no bigger than any route accepts, and
deadlines for a request's headers and body: :mod:`platform_site.request_limits`.

Remove each part when daphne does it itself.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from platform_site import request_limits

access_log = logging.getLogger("daphne.access")


def _never(request: Any) -> bool:
    return False


def _ignore(request: Any, value: bool) -> None:
    """Twisted's ``__init__`` assigns the default (True); the pinned value stays False."""


def _log_unless_discarded(factory: Any, request: Any) -> None:
    """Twisted's access log line, unless daphne discards Twisted's log (verbosity <= 1)."""
    if getattr(factory.server, "verbosity", 2) <= 1:
        return
    from twisted.web import http

    http.HTTPFactory.log(factory, request)


_write_entry: Any = None  # daphne's own AccessLogGenerator.write_entry


def _entry_to_logging(
    generator: Any,
    host: Any,
    date: Any,
    request: str,
    status: Any = None,
    length: Any = None,
    ident: Any = None,
    user: Any = None,
) -> None:
    """Daphne's access line through logging when it would go to stdout; else daphne's."""
    if generator.stream not in (sys.stdout, sys.__stdout__):
        _write_entry(generator, host, date, request, status, length, ident, user)
        return
    # The record's time is the line's: the rest as daphne's NCSA-like line says it.
    access_log.info(
        '%s %s %s "%s" %s %s',
        host,
        ident or "-",
        user or "-",
        request,
        status or "-",
        length or "-",
    )


def install() -> None:
    """Make every daphne request skip Twisted's form parsing and, at daphne's default
    verbosity, its discarded access log line; with ``LOG_FORMAT=json``, send daphne's
    access log to stdout through logging; bound what a request may send (idempotent)."""
    global _write_entry
    from daphne.access import AccessLogGenerator
    from daphne.http_protocol import HTTPFactory, WebRequest
    from django.conf import settings

    WebRequest._parsePOSTFormSubmission = property(_never, _ignore)  # type: ignore[assignment]
    HTTPFactory.log = _log_unless_discarded  # type: ignore[method-assign]
    if _write_entry is None:
        _write_entry = AccessLogGenerator.write_entry
    json_logs = getattr(settings, "LOG_FORMAT", "text") == "json"
    AccessLogGenerator.write_entry = _entry_to_logging if json_logs else _write_entry  # type: ignore[method-assign]
    request_limits.install()
