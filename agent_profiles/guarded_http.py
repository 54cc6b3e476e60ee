"""httpx clients that connect only to addresses the URL guard checked
(:mod:`agent_profiles.urlguard`).

When a request leaves (a card fetch, a call to an agent, a push POST), its host name is
resolved, every address it resolves to is checked, and the connection goes to an address
that was checked: never to a second resolution an attacker could have changed meanwhile
(DNS rebinding). :class:`GuardedTransport` / :class:`AsyncGuardedTransport` do this,
keeping the ``Host`` header and the TLS server name (SNI, certificate check) of the URL;
:func:`guarded_client` / :func:`guarded_async_client` build clients with them, redirects
off and proxies from the environment ignored. A refused target raises
:class:`~agent_profiles.urlguard.UnsafeURL` from the request call.
"""

from __future__ import annotations

import os
import ssl
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
import httpx

from agent_profiles import deadlines
from agent_profiles.urlguard import checked_addresses, literal_address


def _pin(request: httpx.Request) -> httpx.Request:
    """Point ``request`` at a checked address of its host; Host and SNI stay the name."""
    url = str(request.url)
    host = request.url.host
    address = checked_addresses(url)[0]
    if literal_address(host) is not None:
        return request  # an IP literal: nothing to resolve twice
    request.url = request.url.copy_with(host=str(address))
    request.extensions = {**request.extensions, "sni_hostname": host}
    return request


# How many hosts' connection pools a guarded transport keeps; the least recently used
# beyond it is closed once no request of it is in flight. The process-wide client
# (``a2a.transports.http``) kept one (~800 kB) for every agent host it ever called.
MAX_HOSTS = 256

_ssl_context: tuple[int, ssl.SSLContext] | None = None
_ssl_context_lock = threading.Lock()


def shared_ssl_context() -> ssl.SSLContext:
    """The process's one TLS client context, the one httpx builds by default (certifi's
    bundle, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``; verification on). Each
    ``httpx.HTTPTransport()`` built its own: 28 ms CPU and 860 kB to load the bundle,
    for every agent on every health check, even over plain http."""
    global _ssl_context
    with _ssl_context_lock:
        if _ssl_context is None or _ssl_context[0] != os.getpid():  # rebuilt after a fork
            _ssl_context = (os.getpid(), httpx.create_ssl_context())
        return _ssl_context[1]


@dataclass(eq=False)
class _Pool:
    """One host's transport, its requests in flight, whether it was evicted (then the
    last of them closes it)."""

    transport: httpx.HTTPTransport
    users: int = 0
    evicted: bool = False


class _Releasing(httpx.SyncByteStream):
    """An answer's body; closing it ends its request (``done``, called once)."""

    def __init__(self, inner: httpx.SyncByteStream, done: Callable[[], None]) -> None:
        self._inner, self._done = inner, done

    def __iter__(self) -> Iterator[bytes]:
        yield from self._inner

    def close(self) -> None:
        done, self._done = self._done, lambda: None
        try:
            self._inner.close()
        finally:
            done()


class GuardedTransport(httpx.BaseTransport):
    """An httpx transport that checks every request's target at send time and connects to
    the checked address. One connection pool per host name, so a TLS connection made for
    one name is never reused for another on the same address; at most :data:`MAX_HOSTS`
    of them (least recently used out: closed at once if idle, else when the last answer
    read from it is closed, never under a stream), all with the process's one TLS context.
    Its connections keep the deadline of :func:`agent_profiles.deadlines.whole_answer_by`
    when a call sets one."""

    def __init__(self, **transport_options: Any) -> None:
        self._options = transport_options
        self._pools: OrderedDict[str, _Pool] = OrderedDict()
        self._lock = threading.Lock()

    def _take(self, host: str) -> tuple[_Pool, list[_Pool]]:
        """``host``'s pool, counted in use, and the idle ones evicted for it (to close)."""
        with self._lock:
            pool = self._pools.get(host)
            if pool is None:
                options = {"verify": shared_ssl_context(), **self._options}
                transport = deadlines.install(httpx.HTTPTransport(**options))
                pool = self._pools[host] = _Pool(transport)
            self._pools.move_to_end(host)
            pool.users += 1
            idle = []
            while len(self._pools) > MAX_HOSTS:
                old = self._pools.popitem(last=False)[1]
                old.evicted = True
                if old.users == 0:  # nobody can take it any more: safe to close
                    idle.append(old)
            return pool, idle

    def _release(self, pool: _Pool) -> None:
        with self._lock:
            pool.users -= 1
            last = pool.evicted and pool.users == 0
        if last:
            pool.transport.close()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        request = _pin(request)
        pool, idle = self._take(host)
        for old in idle:
            old.transport.close()
        try:
            response = pool.transport.handle_request(request)
        except BaseException:
            self._release(pool)
            raise
        assert isinstance(response.stream, httpx.SyncByteStream)
        response.stream = _Releasing(response.stream, lambda: self._release(pool))
        return response

    def close(self) -> None:
        with self._lock:
            pools = list(self._pools.values())
            self._pools.clear()
        for pool in pools:
            pool.transport.close()


class AsyncGuardedTransport(httpx.AsyncBaseTransport):
    """The async :class:`GuardedTransport` (name resolution runs in a thread), for
    short-lived clients: its pools are not bounded."""

    def __init__(self, **transport_options: Any) -> None:
        self._options = {"verify": shared_ssl_context(), **transport_options}
        self._pools: dict[str, httpx.AsyncHTTPTransport] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        request = await anyio.to_thread.run_sync(_pin, request)
        pool = self._pools.get(host)
        if pool is None:
            pool = self._pools[host] = httpx.AsyncHTTPTransport(**self._options)
        return await pool.handle_async_request(request)

    async def aclose(self) -> None:
        for pool in self._pools.values():
            await pool.aclose()
        self._pools.clear()


def guarded_client(**client_options: Any) -> httpx.Client:
    """An ``httpx.Client`` whose every request passes the guard at send time and connects
    to the checked address; redirects off, no proxies from the environment. A refused
    target raises :class:`UnsafeURL` from the request call."""
    client_options["follow_redirects"] = False
    return httpx.Client(transport=GuardedTransport(), trust_env=False, **client_options)


def guarded_async_client(**client_options: Any) -> httpx.AsyncClient:
    """The async :func:`guarded_client`."""
    client_options["follow_redirects"] = False
    return httpx.AsyncClient(transport=AsyncGuardedTransport(), trust_env=False, **client_options)
