"""Daphne without Twisted's form parsing: a POST body reaches the app as it came, cheaper.

Twisted's ``http.Request.requestReceived`` parses the ``Content-Type`` of every POST with a
body through :class:`email.message.EmailMessage` (about 0.28 ms of CPU per request on this
project's machines) to decide whether to decode an HTML form into ``request.args``, and
decodes ``multipart/form-data`` bodies in full. Daphne never reads ``request.args``: it
hands the raw body to the ASGI app, which parses what it accepts itself. A py-spy profile
of the agent push webhook under load put that header parsing at 8% of the server's CPU.

Twisted has the switch (``parsePOSTFormSubmission``, a constructor argument of its
``Request``), but daphne builds its ``WebRequest`` without a way to pass it, so this
module pins the attribute to False on daphne's request class. Remove it when daphne passes
the switch itself.
"""

from __future__ import annotations

from typing import Any


def _never(request: Any) -> bool:
    return False


def _ignore(request: Any, value: bool) -> None:
    """Twisted's ``__init__`` assigns the default (True); the pinned value stays False."""


def install() -> None:
    """Make every daphne request skip Twisted's form parsing (idempotent)."""
    from daphne.http_protocol import WebRequest

    WebRequest._parsePOSTFormSubmission = property(_never, _ignore)  # type: ignore[assignment]
