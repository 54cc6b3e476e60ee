"""Reads of agents' cards before calls, one at a time per agent (:func:`agent_profiles.
cards.ensure_card`): the first tasks for a new agent start together, each on its own
thread; one reads the card and the others wait for it and take what it found."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(eq=False)
class CardReadTurn:
    """An agent's card read before a call: its lock, the threads holding or waiting for
    it, when the last read ended (success or not)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0
    ended: float = float("-inf")


# Per process, only while some thread reads or waits for an agent's card (they were kept
# for every agent id ever seen): when a read ended matters only to threads that asked
# before, and those are users until they looked.
_reads: dict[str, CardReadTurn] = {}
_guard = threading.Lock()


@contextlib.contextmanager
def reading(agent_id: str) -> Iterator[tuple[float, CardReadTurn]]:
    """Hold ``agent_id``'s read; yields when this thread asked (a user since) and it."""
    with _guard:
        read = _reads.setdefault(agent_id, CardReadTurn())
        read.users += 1
    asked = time.monotonic()
    try:
        with read.lock:
            yield asked, read
    finally:
        with _guard:
            read.users -= 1
            if read.users == 0:
                del _reads[agent_id]
