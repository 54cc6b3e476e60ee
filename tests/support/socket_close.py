"""Reading a gateway socket until the server closes it, as an agent would see it."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection

# "Try again later": what the gateway closes with when Redis or the database is out.
TRY_AGAIN = 1013


def until_closed(
    ws: ClientConnection, wait: float = 8.0
) -> tuple[list[dict[str, Any]], int | None]:
    """The frames received until the server closed ``ws``, and its close code."""
    received: list[dict[str, Any]] = []
    deadline = time.monotonic() + wait
    try:
        while True:
            received.append(json.loads(ws.recv(timeout=max(deadline - time.monotonic(), 0))))
    except ConnectionClosed as closed:  # after every frame that came before the close
        return received, closed.rcvd.code if closed.rcvd else None
    except TimeoutError:
        pytest.fail(f"the socket stayed open for {wait} s; received {received}")
