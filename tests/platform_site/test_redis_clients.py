"""One Redis client per read timeout, shared by the process's threads."""

from __future__ import annotations

from typing import Any

import pytest

from platform_site import redis_clients


def test_a_client_is_made_once_per_timeout_and_shared(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:9/0"  # nothing is connected until a command
    monkeypatch.setattr(redis_clients, "_clients", {})
    quick, slow = redis_clients.shared(1.0), redis_clients.shared(5.0)
    assert redis_clients.shared(1.0) is quick
    assert slow is not quick
    assert (
        quick.connection_pool.connection_kwargs["socket_timeout"],
        slow.connection_pool.connection_kwargs["socket_timeout"],
    ) == (1.0, 5.0)
