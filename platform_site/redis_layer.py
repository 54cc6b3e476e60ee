"""The distributed mode's channel layer: channels_redis's, keeping no message for a channel
nobody in the process reads any more.

One reader pops the process's shared Redis list for every local channel (a stream's, an
agent socket's) and buffers what it pops under the message's channel in
``receive_buffer``, an entry that only a ``receive`` on that channel removes. A
``group_send`` reads the group's members, then pushes to each in a later round trip: a
stream that closed in between (a client that left, a blocking send that saw the end in
the row) still got the snapshot, another reader popped it, and its entry stayed for the
life of the process (up to ``capacity`` snapshots each, artifacts and history included).
Here a channel is read from its creation (or first ``receive``) until it is forgotten
(:func:`forget_channel`, when its reader ended); a message popped for any other channel is
dropped.
"""

from __future__ import annotations

import collections
import functools
from typing import Any

from channels_redis.core import BoundedQueue
from channels_redis.core import RedisChannelLayer as BaseRedisChannelLayer


class _ReadChannelsBuffer(collections.defaultdict[str, BoundedQueue]):
    """``receive_buffer`` that keeps an entry only for a channel still read."""

    def __init__(self, capacity: int, read: set[str]) -> None:
        super().__init__(functools.partial(BoundedQueue, capacity))
        self._read = read

    def __missing__(self, channel: str) -> BoundedQueue:
        if channel in self._read:
            return super().__missing__(channel)
        # A queue nobody holds: what is put in it is gone with it.
        assert self.default_factory is not None
        return self.default_factory()

    def __delitem__(self, channel: str) -> None:
        # channels_redis deletes the entry of a channel its receive left (empty, or
        # cancelled): one forgotten meanwhile has none.
        self.pop(channel, None)


class RedisChannelLayer(BaseRedisChannelLayer):  # type: ignore[misc]
    """channels_redis's layer whose process-local buffer forgets closed channels."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read: set[str] = set()
        self.receive_buffer = _ReadChannelsBuffer(self.capacity, self._read)

    async def new_channel(self, prefix: str = "specific") -> str:
        channel = str(await super().new_channel(prefix))
        self._read.add(channel)  # a message may come before its first receive
        return channel

    async def receive(self, channel: str) -> dict[str, Any]:
        # Whatever made the name: a channel received on is read until forgotten.
        if "!" in channel:
            self._read.add(channel)
        return await super().receive(channel)  # type: ignore[no-any-return]

    def forget_channel(self, channel: str) -> None:
        """Nothing of this process reads ``channel`` any more: drop what waits for it, and
        what comes for it later."""
        self._read.discard(channel)
        self.receive_buffer.pop(channel, None)


def forget_channel(layer: Any, channel: str) -> None:
    """Tell ``layer`` that nothing of this process reads ``channel`` any more (layers that
    keep no per-channel buffer, like the embedded mode's in-memory one, need not hear)."""
    forget = getattr(layer, "forget_channel", None)
    if forget is not None:
        forget(channel)
