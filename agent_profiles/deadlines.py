"""Deadlines for whole answers over httpx, besides its per-read timeouts.

httpx's timeouts hold for each read: an agent (or a webhook, a token endpoint) that sends
its answer a byte at a time, each within the read timeout, keeps a call going as long as
it likes. A call made inside :func:`whole_answer_by` ends at that moment instead: every
connect, read and write of the guarded transports' connections
(:class:`~agent_profiles.guarded_http.GuardedTransport`) waits at most until then, and one
due after it raises httpx's ``ReadTimeout``. The urllib3 pool's calls have their own
reaper (:mod:`agent_profiles.pool_reaper`), with the same budget
(:func:`whole_answer_seconds`).
"""

from __future__ import annotations

import contextvars
import time
import typing
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import httpcore
import httpx

# How long the rest of an answer may take to come once it started, at most.
BODY_SLACK = 5.0

# The moment (time.monotonic()) by which the current call must have its whole answer.
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "whole_answer_deadline", default=None
)


def whole_answer_seconds(connect_timeout: float, read_timeout: float) -> float:
    """How long a call may take in all: to connect, for the answer to start, and a little
    more (at most :data:`BODY_SLACK`) for the rest of it to come; an answer trickled a byte
    at a time ends there. Callers that hold a lease cover it (a send: 10 + 3 + 5 s against
    a 30 s lease; a held send's lease is extended by 10 s past its wait)."""
    return connect_timeout + read_timeout + min(read_timeout, BODY_SLACK)


@contextmanager
def whole_answer_by(seconds: float) -> Iterator[float]:
    """Calls made inside end ``seconds`` from now at the latest (a deadline already set
    further out is brought in, never pushed out); yields the deadline."""
    deadline = time.monotonic() + seconds
    outer = _deadline.get()
    token = _deadline.set(deadline if outer is None else min(outer, deadline))
    try:
        yield deadline
    finally:
        _deadline.reset(token)


PASSED = "no whole answer by the call's deadline"


def _bounded(timeout: float | None) -> tuple[float | None, bool]:
    """The wait allowed, and whether the deadline (not ``timeout``) sets it."""
    deadline = _deadline.get()
    if deadline is None:
        return timeout, False
    left = deadline - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout(PASSED)
    if timeout is None or left < timeout:
        return left, True
    return timeout, False


class _Stream(httpcore.NetworkStream):
    """A connection whose every wait ends by the current call's deadline, if any."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        wait, by_deadline = _bounded(timeout)
        try:
            return self._inner.read(max_bytes, wait)
        except httpcore.ReadTimeout:
            if by_deadline:  # say which limit ended it
                raise httpcore.ReadTimeout(PASSED) from None
            raise

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout)[0])

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: typing.Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        wait = _bounded(timeout)[0]
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, wait))

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    """httpcore's network backend, its connections wrapped in :class:`_Stream`."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        wait = _bounded(timeout)[0]
        return _Stream(self._inner.connect_tcp(host, port, wait, local_address, socket_options))

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        wait = _bounded(timeout)[0]
        return _Stream(self._inner.connect_unix_socket(path, wait, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def install(transport: httpx.HTTPTransport) -> httpx.HTTPTransport:
    """Make ``transport``'s connections keep the deadlines (httpx offers no argument for
    the network backend: its pool's is wrapped in place)."""
    pool = transport._pool
    pool._network_backend = _Backend(pool._network_backend)
    return transport
