"""Clean-up that runs to its end when its handler is killed.

Daphne cancels an application that outlives its client by ``application_close_timeout``,
and then again every second until it ends. A handler's ``finally`` reached by the first
cancel was cut off by the next one: a gateway consumer's presence row stayed (its agent
"online" with no socket), and a request's database connections stayed open. Such clean-up
is awaited through :func:`to_the_end`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)

# Clean-ups whose caller was cancelled meanwhile: held here until they end (the loop keeps
# only weak references to tasks).
_RUNNING: set[asyncio.Future[Any]] = set()


async def to_the_end(work: Awaitable[T]) -> T:
    """Await ``work``; a cancel of the caller meanwhile is raised to it at once, and
    ``work`` goes on to its end (its failure then logged: no caller is left to see it)."""
    future = asyncio.ensure_future(work)
    _RUNNING.add(future)
    future.add_done_callback(_RUNNING.discard)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        future.add_done_callback(_log_failure)
        raise


def _log_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("clean-up of a cancelled handler failed", exc_info=future.exception())
