"""Fixtures for the A2A face: a skill, an agent, two callers and a task factory."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from channels.layers import channel_layers
from django.test import Client

from a2a.face import push_pool
from a2a.models import Direction, Task, TaskMessage
from tests.a2a_face.schema import check_answer
from tests.a2a_face.webhook import Webhook
from tests.support.agents import TestAgent
from tests.support.processes import LivePlatform, live_platform_for_mode

A2A_HEADERS = {"A2A-Version": "1.0"}


@pytest.fixture
def skill(make_skill: Callable[..., Any]) -> Any:
    return make_skill()


@pytest.fixture
def agent(make_agent: Callable[..., Any], skill: Any) -> Any:
    return make_agent(skills=[skill])


@pytest.fixture
def alice(make_user: Callable[..., Any]) -> Any:
    return make_user("alice")


@pytest.fixture
def bob(make_user: Callable[..., Any]) -> Any:
    return make_user("bob")


class FaceClient:
    """Django's test client with the A2A headers and a caller's bearer token."""

    def __init__(self, token: str | None, *, check: bool = True) -> None:
        self.client = Client()
        self.check = check  # every answer is checked against the A2A 1.0 schema
        self.headers = dict(A2A_HEADERS)
        if token:
            self.headers["Authorization"] = f"Bearer {token}"

    def get(self, path: str, params: dict[str, Any] | None = None, **headers: str) -> Any:
        response = self.client.get(path, params or {}, headers={**self.headers, **headers})
        if self.check:
            check_answer("GET", path, response)
        return response

    def post(
        self, path: str, body: Any = None, content_type: str = "application/json", **headers: str
    ) -> Any:
        response = self.client.post(
            path,
            body if body is not None else {},
            content_type=content_type,
            headers={**self.headers, **headers},
        )
        method = body.get("method") if isinstance(body, dict) else None
        if self.check:
            rpc_method = method if isinstance(method, str) else None
            check_answer("POST", path, response, rpc_method=rpc_method)
        return response

    def delete(self, path: str, **headers: str) -> Any:
        response = self.client.delete(path, headers={**self.headers, **headers})
        if self.check:
            check_answer("DELETE", path, response)
        return response

    def rpc(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        path: str = "/v1/a2a/jsonrpc",
        **headers: str,
    ) -> Any:
        body = {"jsonrpc": "2.0", "id": "1", "method": method, "params": params or {}}
        return self.post(path, body, **headers)


@pytest.fixture
def as_alice(alice: Any) -> FaceClient:
    return FaceClient(alice.raw_token)


@pytest.fixture
def as_bob(bob: Any) -> FaceClient:
    return FaceClient(bob.raw_token)


@pytest.fixture
def make_task(skill: Any, agent: Any) -> Callable[..., Task]:
    """A face task owned by ``user`` (or ``agent_caller``), with one client message."""

    def make(user: Any = None, agent_caller: Any = None, **fields: Any) -> Task:
        values: dict[str, Any] = {
            "skill": skill,
            "agent": agent,
            "created_by": user,
            "created_by_agent": agent_caller,
            "anonymous": user is None and agent_caller is None,  # as the face creates it
            "context_id": f"ctx-{uuid.uuid4().hex[:8]}",
            "origin": "a2a",
        }
        values.update(fields)
        task = Task.objects.create(**values)
        TaskMessage.objects.create(
            task=task,
            direction=Direction.TO_AGENT,
            message_id="m-1",
            message={
                "messageId": "m-1",
                "role": "ROLE_USER",
                "parts": [{"text": "hello"}],
                "taskId": "remote-id",
            },
        )
        return task

    return make


def error_reason(response: Any) -> str:
    body = response.json()
    return body["error"]["details"][0]["reason"]


@pytest.fixture(autouse=True)
def _face_db_in_the_test_thread(settings: Any) -> None:
    """Run the face's ORM calls where the test's transaction is visible; no token cache
    (ids are reused across tests' rolled-back transactions)."""
    settings.A2A_FACE_DB_THREADS = 0
    settings.A2A_FACE_AUTH_CACHE_SECONDS = 0


@pytest.fixture(autouse=True)
def _fresh_channel_layer() -> Iterator[None]:
    """Each test gets channel layers of its own. Django's test client runs each async
    view in an event loop of its own, and the Redis layer keeps its receive state (its
    lock, its pending receive) in the loop that first used it: a later test's blocking
    send once waited on a layer another test's loop had used, and the run hung."""
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture(autouse=True)
def _push_threads_stopped() -> Iterator[None]:
    """After each test, its webhook POSTs (a2a/face/push_pool.py) end before the next
    begins: a thread whose hung POST ended as its webhook closed took up the next test's
    deliveries."""
    yield
    push_pool.stop()


# --- a live platform with a real a2a-sdk agent (slow tests) ----------------------------

EXTENDED_TOKEN = "extended-card-secret"
PLATFORM_ENV: dict[str, Any] = {
    "ALLOW_LOOPBACK_URLS": True,
    "A2A_POLL_INTERVAL": 0.1,
    "A2A_POLL_INTERVAL_MAX": 0.3,
    "A2A_EXTENDED_CARD_BEARER_TOKEN": EXTENDED_TOKEN,
    "A2A_STREAM_RECHECK": 1.0,
    "A2A_PUSH_BACKOFF": 0.2,
    "LOG_LEVEL": "WARNING",
}


@pytest.fixture
def platform(transactional_db: None) -> Iterator[LivePlatform]:
    with live_platform_for_mode(**PLATFORM_ENV) as live:
        yield live


@pytest.fixture
def world(
    platform: LivePlatform,
    peer: TestAgent,
    make_skill: Callable[..., Any],
    make_agent: Callable[..., Any],
    make_user: Callable[..., Any],
) -> dict[str, Any]:
    skill = make_skill()
    agent = make_agent(skills=[skill], a2a_endpoint=peer.url)
    return {
        "url": platform.url,
        "agent": agent,
        "alice": make_user("alice").raw_token,
        "bob": make_user("bob").raw_token,
    }


@pytest.fixture
def loopback_webhooks(settings: Any) -> None:
    """Webhooks on 127.0.0.1 allowed (refused by default in the distributed mode)."""
    settings.ALLOW_LOOPBACK_URLS = True


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    try:
        yield hook
    finally:
        hook.close()


@pytest.fixture
def hung_port() -> Iterator[int]:
    """A webhook that takes connections and never answers (they wait in its backlog);
    closed at the end, which resets them, so the POSTs end at once."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(512)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


@pytest.fixture
def task(alice: Any, make_task: Callable[..., Task]) -> Task:
    """A face task of alice's."""
    return make_task(alice)


def talk(task: Task, count: int) -> list[str]:
    """``count`` more agent messages on ``task``; every message id of it, oldest first.
    A microsecond apart: after the task's first message, before any later one."""
    times = TaskMessage.objects.filter(task=task).values_list("created_at", flat=True)
    base = max(times)
    for n in range(count):
        TaskMessage.objects.create(
            task=task,
            direction="from_agent",
            message_id=f"a-{n}",
            message={"messageId": f"a-{n}", "parts": [{"text": f"turn {n}"}]},
            created_at=base + timedelta(microseconds=n + 1),
        )
    return ["m-1", *(f"a-{n}" for n in range(count))]


@pytest.fixture
def loaded_messages(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the conversation rows the request read from the database."""
    seen: list[str] = []
    original = TaskMessage.from_db.__func__  # type: ignore[attr-defined]

    def from_db(cls: type[TaskMessage], *args: Any) -> TaskMessage:
        row = original(cls, *args)
        seen.append(row.message_id)
        return row

    monkeypatch.setattr(TaskMessage, "from_db", classmethod(from_db))
    return seen
