"""The tasks API through the real ASGI application (the lean path for Bearer calls)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from a2a.api.asgi import close_pool
from a2a.models import Task
from platform_site.asgi import application
from tests.support.asgi_calls import body_then_gone, http_scope, recording


def call(method: str, path: str, **kwargs: Any) -> httpx.Response:
    async def run() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            return await c.request(method, path, **kwargs)

    return asyncio.run(run())


@pytest.fixture
def user(transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any) -> Iterator[Any]:
    make_agent(skills=[make_skill()])
    yield make_user()
    # The views ran on the API's pool threads: close their database connections, or
    # PostgreSQL refuses to drop the test database.
    close_pool()
    asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())


def test_a_bearer_call_creates_and_reads_a_task(user: Any) -> None:
    auth = {"Authorization": f"Bearer {user.raw_token}"}
    body = {"skillId": "ce-review", "input": {"product": "lamp"}}
    created = call("POST", "/api/tasks", json=body, headers=auth)
    assert created.status_code == 201, created.text
    assert created.headers["X-Content-Type-Options"] == "nosniff"
    task_id = created.json()["id"]
    assert call("GET", f"/api/tasks/{task_id}", headers=auth).json()["id"] == task_id
    assert Task.objects.filter(pk=task_id, created_by=user).exists()


def test_a_bad_token_gets_the_platform_error_shape(user: Any) -> None:
    response = call("GET", "/api/tasks", headers={"Authorization": "Bearer usr_nope"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"


def test_a_call_without_a_token_takes_the_normal_path(user: Any) -> None:
    response = call("GET", "/api/tasks")
    assert response.status_code in (401, 403)
    assert response.json()["error"]["code"] == "not_authenticated"


def test_a_disallowed_host_is_refused(user: Any, settings: Any) -> None:
    settings.ALLOWED_HOSTS = ["platform.example"]
    auth = {"Authorization": f"Bearer {user.raw_token}"}
    response = call("GET", "/api/tasks", headers=auth)
    assert response.status_code == 400


def test_bad_bodies_get_the_platform_error_shape_on_the_lean_path(user: Any, settings: Any) -> None:
    auth = {"Authorization": f"Bearer {user.raw_token}", "Content-Type": "application/json"}
    broken = call("POST", "/api/tasks", content=b'{"skillId": ', headers=auth)
    assert broken.status_code == 400
    assert broken.json()["error"]["code"]
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    big = {"skillId": "ce-review", "input": {"product": "x" * 5000}}
    too_large = call("POST", "/api/tasks", json=big, headers=auth)
    assert too_large.status_code == 413
    assert too_large.json()["error"]["code"]
    assert not Task.objects.exists()


def test_a_client_that_goes_away_still_gets_its_task_created_once(user: Any) -> None:
    """The view runs to its end on its thread; its answer to the closed connection is
    dropped, and nothing is raised into the server."""
    body = b'{"skillId": "ce-review", "input": {"product": "lamp"}}'
    headers = [
        (b"authorization", f"Bearer {user.raw_token}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    scope = http_scope("/api/tasks", method="POST", headers=headers, host=b"testserver")
    sent: list[dict[str, Any]] = []
    asyncio.run(application(scope, body_then_gone(body), recording(sent)))
    assert Task.objects.filter(created_by=user).count() == 1
    assert sent[0]["status"] == 201
