"""Plain requests to agents over urllib3, through the same URL guard as httpx's calls.

The platform's calls to agents are many and small: a send, a poll, a cancel, each one
JSON body and one JSON answer. Through ``httpx.Client`` such a call cost 1.8 ms of the
caller's CPU with 16 threads calling at once (its client layers, and httpcore's pool
scanning every connection on every change); through a urllib3 pool, 0.6 ms. The batched
poll engine spent half its CPU in httpx. Streams (SSE), token fetches and card reads stay
on httpx: they are few, and long.

Every call has a whole deadline besides its per-read timeouts, kept by a thread
(:mod:`agent_profiles.pool_reaper`): an agent that answers a byte at a time, each within
the read timeout, once held a worker's thread as long as it liked (every sweep thread, at
last, on one such agent's polls).

The guard is the same: the URL is checked and its name resolved once per request
(:func:`~agent_profiles.urlguard.checked_addresses`), the connection goes to the checked
address, and the ``Host`` header, the TLS server name and the certificate check keep the
URL's name. One pool per (address, name), so a TLS connection made for one name is never
reused for another on the same address. No redirects, no retries, no proxies.

Idle connections are few and short-lived: at most :data:`PER_HOST` per agent stay pooled
(a burst's extra ones are closed when they come back), and one idle past
:data:`~agent_profiles.pool_reaper.IDLE_SECONDS` is closed, by the same thread or when it
is taken again (an agent closes its end after a few seconds; ours was kept in CLOSE_WAIT).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from email.message import Message
from typing import Any
from urllib.parse import urlsplit

import certifi
import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import (
    HTTPError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
)
from urllib3.exceptions import (
    TimeoutError as Urllib3Timeout,
)

from agent_profiles.deadlines import whole_answer_seconds
from agent_profiles.pool_reaper import Expiring, _Call, _current, _reaper
from agent_profiles.urlguard import checked_addresses, literal_address, split_url
from platform_site.text import scrub

__all__ = [
    "AnswerTimedOut",
    "AnswerTooLarge",
    "CallFailed",
    "CallTimedOut",
    "GuardedPool",
    "PlainResponse",
    "shared_pool",
]

_CHUNK = 64 * 1024
# Idle connections kept per (address, name). More are opened when calls overlap (the pool
# does not block) and closed when they come back. 8: the embedded worker's threads
# (A2A_EMBEDDED_THREADS) all sending to one busy agent reuse their connections instead of
# opening one per call; 32 kept sockets per agent open for nothing.
PER_HOST = 8


class CallFailed(Exception):
    """The target could not be reached, or broke the connection before answering."""


class CallTimedOut(CallFailed):
    """The target did not accept the connection or send its answer in time."""


class AnswerTimedOut(CallTimedOut):
    """The target took the request but its answer did not come in time: it may be acting
    on it."""


class AnswerTooLarge(Exception):
    """The answer's body is longer than the caller's limit; the rest was not read."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the answer is larger than {limit} bytes")
        self.limit = limit


def _failure(exc: HTTPError) -> CallFailed:
    """urllib3's error as one of ours, its text without the connection's repr (nor a NUL:
    it quotes an agent's bad status line as sent, and the text may be stored)."""
    text = scrub(str(exc))
    if isinstance(exc, (NewConnectionError, ReadTimeoutError)):
        text = text.split("): ", 1)[-1]  # "HTTPConnection(host=..., port=...): <reason>"
    elif isinstance(exc, ProtocolError) and len(exc.args) == 2:
        text = f"{exc.args[0]} {exc.args[1]}"  # ("Connection aborted.", RemoteDisconnected(...))
    if isinstance(exc, ReadTimeoutError):
        return AnswerTimedOut(text or type(exc).__name__)
    if isinstance(exc, Urllib3Timeout) and not isinstance(exc, NewConnectionError):
        return CallTimedOut(text or type(exc).__name__)
    return CallFailed(text or type(exc).__name__)


@dataclass(frozen=True)
class PlainResponse:
    """A whole answer: the status, the headers (case-insensitive ``get``) and the body."""

    status_code: int
    headers: Any
    content: bytes

    def close(self) -> None:
        """Nothing to release: the body was read whole and the connection went back."""

    @property
    def text(self) -> str:
        """The body decoded with the charset its ``Content-Type`` names (UTF-8 if none)."""
        message = Message()
        message["Content-Type"] = self.headers.get("Content-Type", "")
        charset = message.get_content_charset() or "utf-8"
        try:
            return self.content.decode(charset, errors="replace")
        except LookupError:  # a charset Python does not know
            return self.content.decode("utf-8", errors="replace")


class _Attached:
    """Makes a connection the current call's, so that the reaper can end it."""

    # When it last went back to its pool (agent_profiles.pool_reaper's clock); None: never,
    # or taken since.
    idle_since: float | None = None

    def request(self, *args: Any, **kwargs: Any) -> None:
        call: _Call | None = getattr(_current, "call", None)
        if call is not None:
            if call.expired:  # its deadline passed while it waited for a connection
                raise CallTimedOut("no connection in time")
            call.conn = self  # type: ignore[assignment]
        super().request(*args, **kwargs)  # type: ignore[misc]


class _HTTPConnection(_Attached, HTTPConnection):
    pass


class _HTTPSConnection(_Attached, HTTPSConnection):
    pass


class _HTTPPool(Expiring, HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(Expiring, HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


def _ca_locations() -> dict[str, str]:
    """The certificates agents' HTTPS is checked against, as httpx picks them (its
    ``create_ssl_context``): ``SSL_CERT_FILE``, else ``SSL_CERT_DIR``, else certifi's
    bundle. Plain calls took certifi's alone, so an operator's own CA (docs/registry.md)
    verified card reads and pushes but failed every call to the same agent."""
    if os.environ.get("SSL_CERT_FILE"):
        return {"ca_certs": os.environ["SSL_CERT_FILE"]}
    if os.environ.get("SSL_CERT_DIR"):
        return {"ca_cert_dir": os.environ["SSL_CERT_DIR"]}
    return {"ca_certs": certifi.where()}


class GuardedPool:
    """Pooled keep-alive connections to agents, every request through the URL guard."""

    def __init__(self, *, per_host: int = PER_HOST, hosts: int = 256) -> None:
        # block=False: past ``per_host`` connections a request opens one more and closes
        # it afterwards instead of waiting; the callers' threads bound the concurrency.
        self._manager = urllib3.PoolManager(
            num_pools=hosts,
            maxsize=per_host,
            block=False,
            retries=False,
            **_ca_locations(),
        )
        self._manager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str],
        body: bytes | None,
        connect_timeout: float,
        read_timeout: float,
        max_bytes: int | None = None,
    ) -> PlainResponse:
        """Send one request and read the whole answer. Raises
        :class:`~agent_profiles.urlguard.UnsafeURL` for a refused target,
        :class:`CallTimedOut` when it does not answer in time, :class:`CallFailed` when
        it cannot be reached, :class:`AnswerTooLarge` when its body (decoded) is longer
        than ``max_bytes``.

        Besides each read's ``read_timeout``, the whole answer must come within
        :func:`whole_answer_seconds`: else :class:`AnswerTimedOut`."""
        scheme, host, port = split_url(url)
        address = checked_addresses(url)[0]
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        pool_options: dict[str, Any] = {}
        if scheme == "https" and literal_address(host) is None:
            pool_options = {"server_hostname": host, "assert_hostname": host}
        pool = self._manager.connection_from_host(
            str(address), port=port, scheme=scheme, pool_kwargs=pool_options
        )
        call = _Call(time.monotonic() + whole_answer_seconds(connect_timeout, read_timeout))
        _current.call = call
        _reaper.watch(call)
        try:
            answer = pool.urlopen(
                method,
                path,
                body=body,
                headers={**headers, "Host": parts.netloc},
                redirect=False,
                retries=False,
                assert_same_host=False,
                timeout=urllib3.Timeout(connect=connect_timeout, read=read_timeout),
                preload_content=False,
            )
            content = _read_body(answer, max_bytes)
            if call.expired:  # a body without a length ends where the socket was shut
                raise OSError("the call's deadline passed")
        except (HTTPError, OSError) as exc:
            if call.expired:
                seconds = whole_answer_seconds(connect_timeout, read_timeout)
                raise AnswerTimedOut(f"no whole answer within {seconds:g} s") from exc
            if isinstance(exc, HTTPError):
                raise _failure(exc) from exc
            raise
        finally:
            _reaper.done(call)
            _current.call = None
        return PlainResponse(answer.status, answer.headers, content)

    def clear(self) -> None:
        """Close every pooled connection."""
        self._manager.clear()


def _read_body(answer: urllib3.BaseHTTPResponse, max_bytes: int | None) -> bytes:
    """The whole body, read in chunks so that an agent's endless or huge answer costs at
    most ``max_bytes`` of memory; the connection goes back to the pool only when read to
    its end."""
    try:
        declared = int(answer.headers.get("Content-Length", ""))
    except ValueError:
        declared = -1
    chunks: list[bytes] = []
    size = 0
    try:
        if max_bytes is not None and declared > max_bytes:
            raise AnswerTooLarge(max_bytes)
        while chunk := answer.read(_CHUNK):
            size += len(chunk)
            if max_bytes is not None and size > max_bytes:
                raise AnswerTooLarge(max_bytes)
            chunks.append(chunk)
    except BaseException:
        answer.close()  # unread bytes left: this connection cannot serve another request
        raise
    finally:
        answer.release_conn()
    return b"".join(chunks)


_lock = threading.Lock()
_shared: tuple[int, GuardedPool] | None = None


def shared_pool() -> GuardedPool:
    """The process-wide pool (made again after a fork: sockets are not shared)."""
    global _shared
    with _lock:
        if _shared is None or _shared[0] != os.getpid():
            _shared = (os.getpid(), GuardedPool())
        return _shared[1]
