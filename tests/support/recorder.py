"""A plain HTTP server on loopback that records what reaches it, for the outbound clients'
tests (the URL guard's httpx clients, the urllib3 pool for agent calls).

Every request is recorded (``seen``: ``Host`` header, path, body; ``ports``: the client's
port, which tells one connection from another) and answered by path:

==================  ===============================================================
``/redirect``       302 to a private address (a guarded client must not follow it)
``/latin``          200 ``text/plain; charset=latin-1`` "café"
``/odd-charset``    200 ``text/plain`` with a charset Python does not know
``/big``            200 with 300 kB declared in ``Content-Length``
``/chunked``        200 with 300 kB chunked (no declared length)
``/keepalive...``   200 ``text/event-stream``: a comment every 50 ms, for a minute
anything else       200 ``{"ok":true}``
==================  ===============================================================
"""

from __future__ import annotations

import contextlib
import ssl
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BIG_BYTES = 300_000


@dataclass
class Recording:
    """What the server saw; ``port`` is where it listens."""

    port: int = 0
    seen: list[dict[str, Any]] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _RecordingServer

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        recording = self.server.recording
        recording.seen.append({"host": self.headers["Host"], "path": self.path, "body": body})
        recording.ports.append(self.client_address[1])
        if self.path == "/big":
            self._answer(200, b"x" * BIG_BYTES, {"Content-Type": "application/json"})
        elif self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for _ in range(BIG_BYTES // 1000):
                self.wfile.write(b"3e8\r\n" + b"y" * 1000 + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        elif self.path.startswith("/keepalive"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for _ in range(1200):  # an agent keeping its stream alive, and nothing else
                self.wfile.write(b"8\r\n: ping\n\n\r\n")
                self.wfile.flush()
                time.sleep(0.05)
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/redirect":
            self._answer(302, b"", {"Location": "http://10.0.0.1/"})
        elif self.path == "/latin":
            latin = "café".encode("latin-1")
            self._answer(200, latin, {"Content-Type": "text/plain; charset=latin-1"})
        elif self.path == "/odd-charset":
            self._answer(200, b"ok", {"Content-Type": "text/plain; charset=no-such-thing"})
        else:
            self._answer(200, b'{"ok":true}', {"Content-Type": "application/json"})

    def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class _RecordingServer(ThreadingHTTPServer):
    recording: Recording

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-answer (a refused oversize body) is expected."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextlib.contextmanager
def recording_server(tls: ssl.SSLContext | None = None) -> Iterator[Recording]:
    """Serve on 127.0.0.1 (with ``tls``: HTTPS with that server context) until exit."""
    server = _RecordingServer(("127.0.0.1", 0), _Handler)
    server.recording = Recording(port=server.server_address[1])
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.recording
    finally:
        server.shutdown()
        server.server_close()
