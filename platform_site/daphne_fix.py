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

Remove each part when daphne does it itself.
"""

from __future__ import annotations

from typing import Any


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


def install() -> None:
    """Make every daphne request skip Twisted's form parsing and, at daphne's default
    verbosity, its discarded access log line (idempotent)."""
    from daphne.http_protocol import HTTPFactory, WebRequest

    WebRequest._parsePOSTFormSubmission = property(_never, _ignore)  # type: ignore[assignment]
    HTTPFactory.log = _log_unless_discarded  # type: ignore[method-assign]
