"""Time-limited channel-layer calls for the paths a caller or an agent waits on (and the
cancel of a reader's receive, which may ignore one).

The Redis channel layer waits up to its ``socket_timeout`` for an answer (30 s, for the
receive's ``BZPOPMIN``: see ``CHANNEL_LAYERS`` in the settings). A Redis that refuses
connections fails at once, and the callers fall back (a stream re-reads its task, a
gateway socket is closed 1013 "try again"); a Redis that *stalls* (a frozen host, a
partition, ``SIGSTOP``: connections open, no answer) held those same calls for as long as
the stall lasted, so the fallbacks never started: a new stream sent nothing, a new agent
socket stayed accepted and silent. A group join, a group leave or a send is one or two
round trips on loopback Redis; past :data:`LAYER_CALL_WAIT` the layer counts as away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

# A few hundred times a loaded Redis's round trip, and well inside what a caller waits
# for a stream's first bytes or an agent for its socket's first answer (its ping's pong).
LAYER_CALL_WAIT = 2.0
# A cancelled reader cancels its receive again until it ends: this many times, this far
# apart.
RECANCEL_TRIES = 50
RECANCEL_PAUSE = 0.1

log = logging.getLogger(__name__)


async def within(call: Awaitable[T], seconds: float = LAYER_CALL_WAIT) -> T:
    """``await call``, raising :class:`TimeoutError` after ``seconds`` (the call is
    cancelled: redis-py drops a connection whose command was cut off, not reused).

    Not ``asyncio.wait_for``: on Python 3.11 it loses a cancel landing as the call
    completes (CPython gh-86296), and the caller's own cancel must get through."""
    async with asyncio.timeout(seconds):
        return await call


async def cancel_until_done(receive: asyncio.Future[Any]) -> None:
    """Cancel a reader's channel-layer receive until it ends (bounded:
    :data:`RECANCEL_TRIES`), however often it ignores a cancel; a message it got meanwhile
    goes with the reader."""
    for _ in range(RECANCEL_TRIES):
        receive.cancel()
        # Cancelled again itself (its reader's close gave up): it ends all the same.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({receive}, timeout=RECANCEL_PAUSE)
        if receive.done():
            if not receive.cancelled():
                receive.exception()  # retrieved: the layer's failure is no news here
            return
    log.warning("a channel-layer receive did not end when cancelled")
