"""The same rules on the lean ASGI path that Bearer calls to /api/tasks take (no
middleware stack): text rule on path, query and body, JSON 404, 413."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from a2a.api.asgi import close_pool
from a2a.models import Task
from tests.a2a.test_api_asgi import call


@pytest.fixture
def auth(transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any) -> Iterator[Any]:
    make_agent(skills=[make_skill()])
    user = make_user()
    yield {"Authorization": f"Bearer {user.raw_token}"}
    close_pool()
    asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())


def test_a_nul_in_a_query_is_400_on_the_lean_path(auth: Any) -> None:
    response = call("GET", "/api/tasks?skillId=a%00b", headers=auth)
    assert response.status_code == 400
    assert response.json()["error"]["details"] == {"field": "skillId", "problem": "a NUL character"}


def test_a_nul_in_a_body_is_400_on_the_lean_path(auth: Any) -> None:
    body = b'{"skillId": "ce-review", "input": {"p": "\\u0000"}}'
    headers = {**auth, "Content-Type": "application/json"}
    response = call("POST", "/api/tasks", content=body, headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == "input.p"
    assert not Task.objects.exists()


def test_deep_json_is_400_on_the_lean_path(auth: Any) -> None:
    body = b'{"skillId": "ce-review", "input": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    headers = {**auth, "Content-Type": "application/json"}
    response = call("POST", "/api/tasks", content=body, headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "json_too_deep"


def test_an_oversize_body_is_413_on_the_lean_path(auth: Any, settings: Any) -> None:
    headers = {**auth, "Content-Type": "application/json"}
    body = b'{"skillId": "ce-review", "input": {"p": "' + b"x" * 1_100_000 + b'"}}'
    response = call("POST", "/api/tasks", content=body, headers=headers)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"


def test_an_unparseable_task_id_is_a_json_404_on_the_lean_path(auth: Any) -> None:
    response = call("GET", "/api/tasks/abc", headers=auth)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_too_many_query_fields_is_a_json_400_on_the_lean_path(auth: Any) -> None:
    query = "&".join(f"f{i}=1" for i in range(1500))
    response = call("GET", f"/api/tasks?{query}", headers=auth)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_request"


def _chunked(body: bytes) -> Any:
    async def chunks() -> Any:  # a generator body: httpx sends it without a Content-Length
        for start in range(0, len(body), 1000):
            yield body[start : start + 1000]

    return chunks()


def test_a_chunked_body_is_read_on_the_lean_path(auth: Any) -> None:
    """Django REST framework took a body without a Content-Length for an empty one."""
    body = b'{"skillId": "ce-review", "input": {"product": "' + b"k" * 3000 + b'"}}'
    headers = {**auth, "Content-Type": "application/json"}
    response = call("POST", "/api/tasks", content=_chunked(body), headers=headers)
    assert response.status_code == 201, response.content
    assert Task.objects.get().input == {"product": "k" * 3000}


def test_a_chunked_oversize_body_is_413(auth: Any) -> None:
    headers = {**auth, "Content-Type": "application/json"}
    body = b'{"skillId": "ce-review", "input": {"p": "' + b"x" * 1_100_000 + b'"}}'
    response = call("POST", "/api/tasks", content=_chunked(body), headers=headers)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    # The same through the middleware stack (a registration) and on the A2A face.
    response = call("POST", "/api/agent-profiles/register", content=_chunked(body), headers=headers)
    assert response.status_code == 413
    response = call("POST", "/v1/a2a/message:send", content=_chunked(body), headers=headers)
    assert response.status_code == 413


def test_a_chunked_registration_is_read_through_the_middleware_stack(auth: Any) -> None:
    body = b'{"agentId": "chunked-agent", "skillIds": ["ce-review"]}'
    response = call(
        "POST",
        "/api/agent-profiles/register",
        content=_chunked(body),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 201, response.content
