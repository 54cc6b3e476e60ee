"""Clean-up that runs to its end when its handler is killed.

Daphne cancels an application that outlives its client by ``application_close_timeout``,
and then again every second until it ends. A handler's ``finally`` reached by the first
cancel was cut off by the next one: a gateway consumer's presence row stayed (its agent
"online" with no socket), and a request's database connections stayed open. Such clean-up
is awaited through :func:`to_the_end`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

# Clean-ups whose caller was cancelled meanwhile: held here until they end (the loop keeps
# only weak references to tasks).
_RUNNING: set[asyncio.Future[Any]] = set()


async def to_the_end(work: Awaitable[T]) -> T:
    """Await ``work``; a cancel of the caller meanwhile is raised to it at once, and
    ``work`` goes on to its end."""
    future = asyncio.ensure_future(work)
    _RUNNING.add(future)
    future.add_done_callback(_RUNNING.discard)
    return await asyncio.shield(future)
