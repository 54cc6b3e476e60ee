"""The embedded mode's channel layer: Channels' in-memory layer, cleaned once a second.

Channels' ``InMemoryChannelLayer`` looks for expired messages and group memberships in
*every* channel and group at every ``group_send`` and ``receive``. A process
holding 1,000 agent sockets has 1,000 waiting channels and 1,000 groups, so each hand-off
of a ``task.assign`` hint scanned some 2,000 entries twice, on the event loop that serves
every socket and request of the process (a quarter of its time in the gateway benchmark).
Expiry is measured in minutes (messages, ``expiry`` 60 s) and a day (group membership), so
looking once a second finds the same things at most a second later.
"""

from __future__ import annotations

import time
from typing import Any

from channels.layers import InMemoryChannelLayer

CLEAN_EVERY = 1.0  # seconds between two looks for expired messages and memberships


class ThrottledInMemoryChannelLayer(InMemoryChannelLayer):
    """``InMemoryChannelLayer`` whose expiry sweep runs at most once per ``CLEAN_EVERY``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._next_clean = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now < self._next_clean:
            return
        self._next_clean = now + CLEAN_EVERY
        super()._clean_expired()
