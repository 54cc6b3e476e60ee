"""A caller that loses access loses its open streams too, not only its next request.

Revoking a user's token, deactivating the user, revoking an agent's key or disabling the
agent refuses a new request once the process's token cache lets go of the caller
(``A2A_FACE_AUTH_CACHE_SECONDS``); an open ``SubscribeToTask`` or ``SendStreamingMessage``
(1.0 and 0.3, HTTP+JSON and JSON-RPC) then sends no more of the task: its next event is
one in-band ``UNAUTHENTICATED`` error in its binding's shape and the stream closes, giving
its stream slot back. A quiet stream (a task waiting in INPUT_REQUIRED for hours) ends on
its next re-read tick. Anonymous callers have nothing to lose. Runs on the in-memory layer
(SQLite pass) and the Redis layer (PostgreSQL pass)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from django.contrib.auth import get_user_model
from django.db import connections
from django.utils import timezone

from a2a.face import context
from a2a.face.context import principal_cache
from a2a.face.db import close_pool
from a2a.face.stream_slots import stream_slots
from a2a.models import Task
from agent_profiles.models import AgentProfile, AgentStatus, ApiKey, UserToken
from tests.support.asgi_calls import http_scope
from tests.support.face_streams import FaceStream
from tests.support.processes import LivePlatform

pytestmark = pytest.mark.django_db(transaction=True)

CACHE_SECONDS = 0.3
QUESTION = {"messageId": "q", "role": "ROLE_AGENT", "parts": [{"text": "Which market?"}]}


@pytest.fixture(autouse=True)
def _short_cache(settings: Any) -> Iterator[None]:
    """A token lookup is reused for 0.3 s (the default is 5 s); a fresh channel layer per
    test (the Redis layer keeps its receive state per event loop)."""
    settings.A2A_FACE_AUTH_CACHE_SECONDS = CACHE_SECONDS
    settings.A2A_STREAM_RECHECK = 0.1
    principal_cache.clear()
    channel_layers.backends.clear()
    yield
    principal_cache.clear()
    channel_layers.backends.clear()
    close_pool()


# --- a client of the real face ---------------------------------------------------------


class Stream(FaceStream):
    """A stream request to the face with the caller's token (:class:`FaceStream`); open
    once its first event came, with 200."""

    def __init__(self, path: str, token: str | None, body: bytes = b"", **headers: str) -> None:
        raw = [(b"content-type", b"application/json")]
        raw.append((b"a2a-version", headers.get("version", "1.0").encode()))
        raw.append((b"content-length", str(len(body)).encode()))
        if token is not None:
            raw.append((b"authorization", f"Bearer {token}".encode()))
        super().__init__(http_scope(path, method="POST" if body else "GET", headers=raw), body)

    async def open(self) -> Stream:
        await super().open()
        await self.wait_events(1)
        assert self.status == 200, self.sent
        return self


def run(scenario: Any) -> Any:
    """Run a scenario in its own loop; close the thread's connections afterwards."""

    async def main() -> Any:
        try:
            return await scenario
        finally:
            await sync_to_async(connections.close_all)()

    return asyncio.run(main())


def _rpc(method: str, **params: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).encode()


def _message(skill_id: str, *, legacy: bool = False) -> dict[str, Any]:
    if legacy:
        return {
            "kind": "message",
            "messageId": str(uuid.uuid4()),
            "role": "user",
            "parts": [{"kind": "data", "data": {"product": "lamp"}}],
            "metadata": {"skillId": skill_id},
        }
    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": {"product": "lamp"}}],
        "metadata": {"skillId": skill_id},
    }


def _open(
    binding: str, operation: str, token: str | None, task: Task | None, skill_id: str
) -> Stream:
    """A stream of ``operation`` ("subscribe" or "stream") on ``binding``: "rest", "rpc"
    (JSON-RPC, A2A 1.0) or "rpc-0.3"."""
    if binding == "rest":
        if operation == "subscribe":
            assert task is not None
            return Stream(f"/v1/a2a/tasks/{task.id}:subscribe", token)
        body = json.dumps({"message": _message(skill_id)}).encode()
        return Stream("/v1/a2a/message:stream", token, body)
    if binding == "rpc":
        if operation == "subscribe":
            assert task is not None
            return Stream("/v1/a2a/jsonrpc", token, _rpc("SubscribeToTask", id=str(task.id)))
        return Stream(
            "/v1/a2a/jsonrpc", token, _rpc("SendStreamingMessage", message=_message(skill_id))
        )
    if operation == "subscribe":
        assert task is not None
        body = _rpc("tasks/resubscribe", id=str(task.id))
    else:
        body = _rpc("message/stream", message=_message(skill_id, legacy=True))
    return Stream("/v1/a2a/jsonrpc", token, body, version="0.3")


def _task_id(binding: str, first: Any) -> str:
    """The task id of a stream's first event, in any binding."""
    if binding == "rest":
        return str(first["task"]["id"])
    result = first["result"]
    return str(result["task"]["id"] if binding == "rpc" else result["id"])


def _lose_access(how: str, caller: Any) -> None:
    """What an operator does: the admin's revoke, deactivate or disable."""
    now = timezone.now()
    if how == "revoke token":
        UserToken.objects.filter(user=caller).update(revoked_at=now)
    elif how == "deactivate user":
        get_user_model().objects.filter(pk=caller.pk).update(is_active=False)
    elif how == "revoke key":
        ApiKey.objects.filter(agent=caller).update(revoked_at=now)
    else:
        AgentProfile.objects.filter(pk=caller.pk).update(status=AgentStatus.DISABLED)


def _assert_unauthenticated(binding: str, name: str, data: Any) -> None:
    """The in-band error of the binding: HTTP+JSON's google.rpc.Status, or a JSON-RPC
    error envelope with the request's id (the code a new request of that caller gets)."""
    assert name == "error"
    if binding == "rest":
        error = data["error"]
        assert (error["code"], error["status"]) == (401, "UNAUTHENTICATED")
        reason = error["details"][0]["reason"]
    else:
        assert (data["jsonrpc"], data["id"]) == ("2.0", 7)
        error = data["error"]
        assert error["code"] == -32000
        reason = error["data"][0]["reason"]
    assert reason == "UNAUTHENTICATED"


def _updates(events: list[tuple[str, Any]]) -> list[Any]:
    """The task events (status or artifact updates) among ``events``, in any binding."""
    found = []
    for name, data in events:
        body = data.get("result", data) if name == "" else {}
        if {"statusUpdate", "artifactUpdate"} & body.keys() or body.get("kind") in (
            "status-update",
            "artifact-update",
        ):
            found.append(body)
    return found


CASES = [
    ("rest", "subscribe", "user", "revoke token"),
    ("rest", "stream", "agent", "disable agent"),
    ("rpc", "subscribe", "agent", "revoke key"),
    ("rpc", "stream", "user", "deactivate user"),
    ("rpc-0.3", "subscribe", "user", "deactivate user"),
    ("rpc-0.3", "stream", "agent", "revoke key"),
]


@pytest.mark.parametrize(("binding", "operation", "kind", "how"), CASES)
def test_a_caller_that_lost_access_gets_no_more_events_but_one_error_and_the_end(
    binding: str,
    operation: str,
    kind: str,
    how: str,
    settings: Any,
    alice: Any,
    skill: Any,
    agent: Any,
    make_agent: Callable[..., Any],
    make_task: Callable[..., Task],
) -> None:
    """The next event of the task after the caller lost access (and the cache let go of
    it) is not sent: the binding's UNAUTHENTICATED error is, and the stream closes. No
    quiet re-read tick comes in between (it is 30 s), so the event itself is checked."""
    settings.A2A_STREAM_RECHECK = 30.0
    caller = alice if kind == "user" else make_agent(id="caller-agent")
    token = alice.raw_token if kind == "user" else caller.raw_key
    task = make_task(alice) if kind == "user" else make_task(agent_caller=caller)

    async def scenario() -> tuple[list[Any], bool]:
        stream = await _open(binding, operation, token, task, skill.id).open()
        before = stream.events()
        task_id = _task_id(binding, before[0][1])
        await sync_to_async(_lose_access)(how, caller)
        await asyncio.sleep(CACHE_SECONDS + 0.1)  # a new request is refused from now on
        changed = await sync_to_async(Task.objects.get)(pk=task_id)
        await sync_to_async(changed.start_work)()
        ended = await stream.ended()
        if not ended:
            await stream.leave()
        return stream.events()[len(before) :], ended

    after, ended = run(scenario())
    assert ended, f"the stream went on: {after}"
    assert _updates(after) == [], f"the stream still delivered {after}"
    assert len(after) == 1
    _assert_unauthenticated(binding, *after[0])
    assert stream_slots._open == {}  # the stream's slot was given back


@pytest.mark.parametrize("cache_seconds", [CACHE_SECONDS, 0.0])
def test_a_quiet_subscription_of_a_revoked_token_ends_on_its_next_reread(
    cache_seconds: float, settings: Any, alice: Any, make_task: Callable[..., Task]
) -> None:
    """A task waiting for an answer sends nothing for hours: the stream re-checks its
    caller on its re-read ticks (every A2A_STREAM_RECHECK), also with the token cache
    off, and ends once the caller is gone."""
    settings.A2A_FACE_AUTH_CACHE_SECONDS = cache_seconds
    task = make_task(alice)
    task.require_input(QUESTION)

    async def scenario() -> tuple[list[Any], bool]:
        stream = await _open("rest", "subscribe", alice.raw_token, task, "").open()
        await sync_to_async(_lose_access)("revoke token", alice)
        ended = await stream.ended()
        if not ended:
            await stream.leave()
        return stream.events()[1:], ended

    after, ended = run(scenario())
    assert ended, "the quiet stream of a revoked token stayed open"
    assert len(after) == 1
    _assert_unauthenticated("rest", *after[0])
    assert "revoked" in after[0][1]["error"]["message"]
    assert stream_slots._open == {}


def test_a_disabled_agent_hears_why_its_stream_ended(
    agent: Any, make_agent: Callable[..., Any], make_task: Callable[..., Task]
) -> None:
    """The error says what a new request would: the agent is disabled."""
    caller = make_agent(id="caller-agent")
    task = make_task(agent_caller=caller)

    async def scenario() -> list[Any]:
        stream = await _open("rpc", "subscribe", caller.raw_key, task, "").open()
        await sync_to_async(_lose_access)("disable agent", caller)
        assert await stream.ended()
        return stream.events()[1:]

    (name, data), *_rest = run(scenario())
    _assert_unauthenticated("rpc", name, data)
    assert "'caller-agent' is disabled" in data["error"]["message"]


def test_a_caller_that_keeps_access_keeps_its_stream_and_is_looked_up_once_a_period(
    alice: Any, make_task: Callable[..., Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream re-checks its caller through the token cache: one lookup per cache period
    for all its re-read ticks and events (ten ticks a second here), never one per event;
    a caller in good standing loses nothing."""
    lookups: list[str] = []
    real = context.authenticate_bearer
    monkeypatch.setattr(
        context, "authenticate_bearer", lambda raw: lookups.append(raw) or real(raw)
    )
    task = make_task(alice)

    async def scenario() -> tuple[list[Any], float]:
        stream = await _open("rest", "subscribe", alice.raw_token, task, "").open()
        started = time.monotonic()
        for turn in range(3):
            await asyncio.sleep(0.4)  # past the cache period: the stream looks its caller up
            current = await sync_to_async(Task.objects.get)(pk=task.pk)
            if turn % 2 == 0:
                await sync_to_async(current.require_input)(QUESTION)
            else:
                await sync_to_async(current.start_work)()
            await stream.wait_events(2 + turn)
        elapsed = time.monotonic() - started
        await stream.leave()
        return stream.events()[1:], elapsed

    after, elapsed = run(scenario())
    states = [data["statusUpdate"]["status"]["state"] for _name, data in after]
    assert states == [
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_WORKING",
        "TASK_STATE_INPUT_REQUIRED",
    ]
    # The opening request's lookup, then the stream's: at least one, at most one a period.
    assert 2 <= len(lookups) <= 1 + elapsed / CACHE_SECONDS + 1, (len(lookups), elapsed)
    assert stream_slots._open == {}


def test_only_the_caller_that_lost_access_loses_its_stream_not_anonymous_ones(
    settings: Any, alice: Any, make_task: Callable[..., Task]
) -> None:
    """With A2A_ALLOW_ANONYMOUS an anonymous stream has no token to revoke: it follows
    its task past any number of re-checks while the revoked caller's stream of the same
    moment ends."""
    settings.A2A_ALLOW_ANONYMOUS = True
    anonymous_task, alices_task = make_task(), make_task(alice)

    async def scenario() -> tuple[list[Any], list[Any]]:
        anonymous = await _open("rest", "subscribe", None, anonymous_task, "").open()
        alices = await _open("rest", "subscribe", alice.raw_token, alices_task, "").open()
        await sync_to_async(_lose_access)("revoke token", alice)
        await asyncio.sleep(CACHE_SECONDS * 2)  # several re-read ticks, past the cache
        for task in (anonymous_task, alices_task):
            await sync_to_async(task.start_work)()
        await anonymous.wait_events(2)
        assert await alices.ended()
        assert not anonymous.handler.done()  # type: ignore[union-attr]
        await anonymous.leave()
        return anonymous.events()[1:], alices.events()[1:]

    anonymous, alices = run(scenario())
    assert [data["statusUpdate"]["status"]["state"] for _n, data in anonymous] == [
        "TASK_STATE_WORKING"
    ]
    assert len(alices) == 1
    _assert_unauthenticated("rest", *alices[0])
    assert stream_slots._open == {}


@pytest.mark.slow
def test_a_revoked_tokens_stream_on_the_running_platform_ends_with_an_error(
    platform: LivePlatform, alice: Any, make_task: Callable[..., Task]
) -> None:
    """The whole way, in this pass's mode (embedded, or daphne + worker on PostgreSQL and
    Redis): the admin's revoke of a token with an open subscription (default token cache,
    5 s) ends the subscription with the error, before the task's next change reaches it."""
    task = make_task(alice)
    headers = {"Authorization": f"Bearer {alice.raw_token}", "A2A-Version": "1.0"}
    frames: list[str] = []
    first, done = threading.Event(), threading.Event()

    def read() -> None:
        url = f"{platform.url}/v1/a2a/tasks/{task.id}:subscribe"
        try:
            with (
                httpx.Client(timeout=httpx.Timeout(30.0)) as client,
                client.stream("GET", url, headers=headers) as response,
            ):
                for line in response.iter_lines():
                    if line.startswith(("data:", "event:")):
                        frames.append(line)
                        first.set()
        finally:
            done.set()

    threading.Thread(target=read, daemon=True).start()
    assert first.wait(20), "the stream did not start"
    UserToken.objects.filter(user=alice).update(revoked_at=timezone.now())
    time.sleep(5.5)  # past A2A_FACE_AUTH_CACHE_SECONDS: a new request is refused now
    refused = httpx.get(f"{platform.url}/v1/a2a/tasks/{task.id}", headers=headers)
    assert refused.status_code == 401
    task.start_work()
    assert done.wait(10), f"the revoked caller's stream stayed open: {frames}"
    assert not any("statusUpdate" in frame for frame in frames), frames
    assert frames[-2] == "event: error"
    error = json.loads(frames[-1].removeprefix("data:"))["error"]
    assert (error["code"], error["status"]) == (401, "UNAUTHENTICATED")
