"""How many task streams one caller holds open in this server process.

Every stream (``SendStreamingMessage``, ``SubscribeToTask`` and their 0.3 names) keeps a
subscription, its reader and whatever daphne has not yet written to the client for as long
as the task runs: minutes to hours. Without a bound one token could open them until the
process ran out of memory (or, with the shared layer, Redis out of connections).
``A2A_MAX_STREAMS_PER_CALLER`` bounds them per caller (a user's token, an agent's key, or
all anonymous callers together) and process; one more is refused before anything is sent,
so a refused ``SendStreamingMessage`` creates no task. Clients that follow more tasks than
that use ``returnImmediately`` with push notifications or polling.
"""

from __future__ import annotations

import threading
from collections import Counter

from django.conf import settings

from a2a.face.context import CallContext
from a2a.face.errors import TooManyStreams


def caller_key(ctx: CallContext) -> str:
    """Who the streams count against: the agent, the user, or every anonymous caller."""
    if ctx.agent_caller is not None:
        return f"agent:{ctx.agent_caller.pk}"
    if ctx.user is not None:
        return f"user:{ctx.user.pk}"
    return "anonymous"


class Slot:
    """One open stream of one caller; :meth:`release` (idempotent) gives it back. A slot
    whose stream was dropped without being closed gives itself back when collected."""

    def __init__(self, slots: StreamSlots, key: str) -> None:
        self._slots = slots
        self.key = key
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._slots._give_back(self.key)

    def __del__(self) -> None:
        self.release()


class StreamSlots:
    """The open streams of this process by caller (threads take them: the face's
    database calls run on a pool)."""

    def __init__(self) -> None:
        # Reentrant: a slot dropped without a release gives itself back from ``__del__``,
        # which the garbage collector may run on a thread that holds the lock already.
        self._lock = threading.RLock()
        self._open: Counter[str] = Counter()

    def take(self, ctx: CallContext) -> Slot:
        """A slot for one more stream of ``ctx``'s caller; :class:`TooManyStreams` past
        ``A2A_MAX_STREAMS_PER_CALLER``."""
        key, limit = caller_key(ctx), settings.A2A_MAX_STREAMS_PER_CALLER
        with self._lock:
            full = self._open[key] >= limit
            if not full:
                self._open[key] += 1
        if full:
            raise TooManyStreams(
                f"This caller has {limit} task streams open on this server already "
                "(A2A_MAX_STREAMS_PER_CALLER); close one, or follow tasks with "
                "returnImmediately and push notifications or GetTask.",
                metadata={"limit": str(limit)},
            )
        return Slot(self, key)

    def open_streams(self, ctx: CallContext) -> int:
        with self._lock:
            return self._open[caller_key(ctx)]

    def _give_back(self, key: str) -> None:
        with self._lock:
            self._open[key] -= 1
            if self._open[key] <= 0:
                del self._open[key]


stream_slots = StreamSlots()
