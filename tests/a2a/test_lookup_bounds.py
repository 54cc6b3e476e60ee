"""The registry cache (a2a/lookups.py) holds what exists, and no more than LIMIT entries
a table: a caller naming ids that do not exist (a skill in POST /api/tasks, an agent in
the face's tenant route) grew it by one entry per request, without end."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client

from a2a import lookups
from tests.a2a_face.conftest import FaceClient


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_unknown_skills_are_refused_and_not_cached(make_user: Any, make_skill: Any) -> None:
    make_skill()
    user = make_user("bob")
    client = Client(headers={"Authorization": f"Bearer {user.raw_token}"})
    for _ in range(20):
        answer = client.post(
            "/api/tasks",
            {"skillId": f"no-such-{uuid.uuid4().hex}", "input": {}},
            content_type="application/json",
        )
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == "unknown_skill"
    assert lookups._skills == {}
    assert lookups.skill("ce-review") is not None  # a skill that exists is kept
    assert list(lookups._skills) == ["ce-review"]


def test_unknown_tenant_agents_are_refused_and_not_cached(
    make_user: Any, make_skill: Any, make_agent: Any, settings: Any
) -> None:
    settings.A2A_FACE_DB_THREADS = 0  # the face's ORM calls see this test's transaction
    settings.A2A_FACE_AUTH_CACHE_SECONDS = 0
    make_agent(id="known", skills=[make_skill()])
    face = FaceClient(make_user("alice").raw_token, check=False)
    for _ in range(20):
        message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
        answer = face.post(
            f"/v1/a2a/nobody-{uuid.uuid4().hex[:20]}/message:send", {"message": message}
        )
        assert answer.status_code == 404
    assert lookups._offers == {}
    assert lookups.offered("known") == ["ce-review"]
    assert list(lookups._offers) == ["known"]


def put(store: dict[Any, tuple[float, Any]], key: str, value: int) -> None:
    lookups._put(store, key, value, lookups._generation)


def test_a_full_table_drops_the_expired_entries_then_the_oldest(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    settings.A2A_REGISTRY_CACHE_SECONDS = 2.0
    clock = FakeClock()
    monkeypatch.setattr(lookups, "_clock", clock)
    monkeypatch.setattr(lookups, "LIMIT", 8)
    store: dict[Any, tuple[float, Any]] = {}
    for i in range(4):
        put(store, f"old-{i}", i)
    clock.now += 3.0  # those four have expired
    for i in range(4):
        put(store, f"new-{i}", i)
    assert len(store) == 8
    put(store, "new-4", 4)  # full: the expired ones go, the fresh stay
    assert list(store) == ["new-0", "new-1", "new-2", "new-3", "new-4"]
    put(store, "new-0", 0)  # put again: now the youngest
    for i in range(5, 8):
        put(store, f"new-{i}", i)
    assert len(store) == 8
    put(store, "new-8", 8)  # full of fresh ones: the oldest go, down to 6 (3/4)
    assert list(store) == ["new-3", "new-4", "new-0", "new-5", "new-6", "new-7", "new-8"]
    assert lookups._get(store, "new-8") == 8
    clock.now += 3.0
    assert lookups._get(store, "new-8") is lookups._MISSING
