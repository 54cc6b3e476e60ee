"""A raw HTTP peer that answers a byte at a time: each byte within any read timeout, the
whole answer never (or only after ``seconds``). For the deadlines of whole answers."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Trickle:
    """The running peer: its port, and whether a client hung up on it mid-answer."""

    port: int
    hung_up: threading.Event = field(default_factory=threading.Event)


@contextmanager
def trickling_server(head: bytes, drip: bytes, seconds: float = 8.0) -> Iterator[Trickle]:
    """Serve every connection ``head``, then ``drip`` a byte every 20 ms for ``seconds`` at
    most; ``hung_up`` is set when a client closes the connection before that."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stopping = threading.Event()
    peer = Trickle(listener.getsockname()[1])

    def serve(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            try:
                conn.sendall(head)
                ends = time.monotonic() + seconds
                for byte in drip * 10_000:
                    if stopping.is_set() or time.monotonic() > ends:
                        return
                    conn.sendall(bytes([byte]))
                    time.sleep(0.02)
            except OSError:
                peer.hung_up.set()

    def accept() -> None:
        while not stopping.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield peer
    finally:
        stopping.set()
        listener.close()
