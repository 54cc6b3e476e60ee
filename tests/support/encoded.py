"""A real HTTP server on loopback answering compressed bodies (``Content-Encoding``), for
the tests of bodies read decoded within their caps: gzip bombs, gzip and deflate cards,
answers and streams.

::

    with encoded_server({"/card": (200, {"Content-Encoding": "gzip"}, gzipped)}) as url:
        ...

A route answers ``(status, headers, body)``, or is a function of the request's body
(JSON, or ``None``) returning one (a JSON-RPC answer must carry the request's id). Paths
not listed answer 404; the query string is not part of the path. Every answer declares
its ``Content-Length`` unless its headers say ``Transfer-Encoding: chunked``.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import sys
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.serving import threaded

Answer = tuple[int, dict[str, str], bytes]
Route = Answer | Callable[[Any], Answer]

# What a gzip bomb expands to: far past every cap, and past what a test may hold.
BOMB_BYTES = 20_000_000


@functools.cache
def gzip_bomb(fill: bytes = b"\0") -> bytes:
    """``BOMB_BYTES`` of ``fill`` gzipped (about 20 kB on the wire)."""
    return gzip.compress(fill * BOMB_BYTES, compresslevel=9)


def deflated(data: bytes, *, raw: bool = False) -> bytes:
    """``data`` as ``Content-Encoding: deflate``: a zlib stream, or raw deflate as some
    servers send it."""
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


def encoded(coding: str, data: bytes, content_type: str = "application/json") -> Answer:
    """A 200 of ``data`` in ``coding`` (``gzip``, ``deflate``, ``raw-deflate``)."""
    if coding == "gzip":
        body = gzip.compress(data)
    else:
        body = deflated(data, raw=coding == "raw-deflate")
        coding = "deflate"
    return 200, {"Content-Type": content_type, "Content-Encoding": coding}, body


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:
        self._answer(None)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            self._answer(json.loads(raw) if raw else None)
        except ValueError:
            self._answer(None)

    def _answer(self, request: Any) -> None:
        route = self.server.routes.get(self.path.split("?")[0], (404, {}, b"not found"))
        status, headers, body = route(request) if callable(route) else route
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if headers.get("Transfer-Encoding") == "chunked":
            self.end_headers()
            for at in range(0, len(body), 8192):
                piece = body[at : at + 8192]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    routes: dict[str, Route]

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-answer (a refused oversize body) is expected."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextlib.contextmanager
def encoded_server(routes: dict[str, Route]) -> Iterator[str]:
    """Serve ``routes`` on 127.0.0.1 until exit; yields the base URL."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.routes = routes
    with threaded(server) as url:
        yield url


@contextlib.contextmanager
def peak_memory() -> Iterator[list[int]]:
    """The most memory Python held at once inside (``tracemalloc``, every thread), above
    what it held on entry: ``[peak]`` once the block ends."""
    import tracemalloc

    held: list[int] = []
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    start = tracemalloc.get_traced_memory()[0]
    try:
        yield held
    finally:
        held.append(tracemalloc.get_traced_memory()[1] - start)
        if not tracing:
            tracemalloc.stop()
