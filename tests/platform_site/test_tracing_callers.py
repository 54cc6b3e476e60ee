"""A caller's W3C ``traceparent`` reaches the platform's trace also on the paths that skip
Django's middleware (and its instrumentation): the A2A face and the tasks API's Bearer
calls. The request is a SERVER span in the caller's trace; the task it creates starts its
own trace (a2a/observe.py), linked to that span."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from platform_site import tracing

pytestmark = pytest.mark.django_db(transaction=True)

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"


def _post(path: str, body: Any, headers: dict[str, str]) -> httpx.Response:
    from platform_site.asgi import application

    async def run() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.post(path, json=body, headers=headers)

    return asyncio.run(run())


def _assert_joined(spans: InMemorySpanExporter, route: str) -> None:
    caller = int(CALLER_TRACE, 16)
    finished = {s.name: s for s in spans.get_finished_spans()}
    server = finished[f"POST {route}"]
    assert server.context.trace_id == caller
    assert server.parent is not None
    assert server.parent.span_id == 0x00F067AA0BA902B7
    create = finished["a2a.task.create"]
    assert [link.context.span_id for link in create.links] == [server.context.span_id]


def test_a_face_send_with_a_traceparent_joins_the_callers_trace(
    spans: InMemorySpanExporter, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    skill = make_skill()
    make_agent(skills=[skill])
    alice = make_user()
    message = {
        "messageId": f"m-{uuid.uuid4().hex[:8]}",
        "role": "ROLE_USER",
        "parts": [{"data": {"product": "lamp"}}],
    }
    body = {"message": message, "configuration": {"returnImmediately": True}}
    headers = {
        "Authorization": f"Bearer {alice.raw_token}",
        "A2A-Version": "1.0",
        "traceparent": TRACEPARENT,
    }
    response = _post("/v1/a2a/message:send", body, headers)
    assert response.status_code == 200, response.text
    _assert_joined(spans, "/v1/a2a")


def test_a_tasks_api_create_with_a_traceparent_joins_the_callers_trace(
    spans: InMemorySpanExporter, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    skill = make_skill()
    make_agent(skills=[skill])
    alice = make_user()
    body = {"skillId": skill.id, "input": {"product": "lamp"}}
    headers = {"Authorization": f"Bearer {alice.raw_token}", "traceparent": TRACEPARENT}
    response = _post("/api/tasks", body, headers)
    assert response.status_code in (200, 201, 202), response.text
    _assert_joined(spans, "/api/tasks")


def test_without_tracing_the_face_opens_no_span(
    db: None, make_skill: Any, make_agent: Any, make_user: Any, monkeypatch: Any
) -> None:
    """Off costs one check: the span helper is never called."""

    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("server_span called with tracing off")

    monkeypatch.setattr(tracing, "server_span", never)
    skill = make_skill()
    make_agent(skills=[skill])
    alice = make_user()
    body = {"skillId": skill.id, "input": {"product": "lamp"}}
    headers = {"Authorization": f"Bearer {alice.raw_token}", "traceparent": TRACEPARENT}
    assert _post("/api/tasks", body, headers).status_code in (200, 201, 202)
