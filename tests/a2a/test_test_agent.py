"""The test agent itself: a real a2a-sdk peer answering the wire shapes the platform expects."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.support.agents import run_agent

pytestmark = pytest.mark.slow
HEADERS = {"A2A-Version": "1.0"}


def _send(client: httpx.Client, url: str, data: dict[str, Any]) -> httpx.Response:
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": data}],
        "metadata": {"skillId": "ce-review"},
    }
    body = {"message": message, "configuration": {"returnImmediately": True}}
    return client.post(f"{url}/message:send", json=body, headers=HEADERS)


def test_it_completes_at_once_and_counts_requests() -> None:
    with run_agent() as peer, httpx.Client(timeout=5) as client:
        task = _send(client, peer.url, {"behaviour": "complete"}).json()["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"][0]["data"] == {"verdict": "pass"}
        polled = client.get(f"{peer.url}/tasks/{task['id']}", headers=HEADERS).json()
        assert polled["id"] == task["id"]
        assert peer.sends == 1
        assert peer.requests_for(task["id"]) == 1


def test_it_answers_a_bare_message_and_raw_modes() -> None:
    with run_agent() as peer, httpx.Client(timeout=5) as client:
        reply = _send(client, peer.url, {"behaviour": "message"}).json()
        assert reply["message"]["parts"][0]["data"] == {"verdict": "pass"}
        assert _send(client, peer.url_for("500"), {}).status_code == 500
        assert "html" in _send(client, peer.url_for("html"), {}).headers["content-type"]
        busy = _send(client, peer.url_for("busy"), {})
        assert (busy.status_code, busy.headers["retry-after"]) == (429, "1")
        assert _send(client, peer.url_for("busy"), {}).status_code == 200
