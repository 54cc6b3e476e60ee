"""Paging GET /api/tasks while tasks are created and deleted: ``next`` and ``previous`` are
keyset cursors on (created_at, id), so no task shows twice or is skipped; ``limit`` and
``offset`` are taken as before. SQLite and PostgreSQL (the cursor compares timestamps and
UUIDs in the database)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from a2a.models import Task

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(make_skill: Any, make_agent: Any, make_user: Any) -> APIClient:
    make_agent(skills=[make_skill()])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_user().raw_token}")
    return client


def create(api: APIClient) -> str:
    response = api.post(
        "/api/tasks", {"skillId": "ce-review", "input": {"product": "lamp"}}, format="json"
    )
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


def ids(page: dict[str, Any]) -> list[str]:
    return [task["id"] for task in page["results"]]


def newest_first() -> list[str]:
    return [
        str(pk) for pk in Task.objects.order_by("-created_at", "-id").values_list("id", flat=True)
    ]


def test_a_task_created_between_pages_is_neither_repeated_nor_pushes_one_out(
    api: APIClient,
) -> None:
    first = {create(api) for _ in range(6)}
    page1 = api.get("/api/tasks?limit=3").json()
    assert set(page1) == {"count", "next", "previous", "results"}
    assert page1["previous"] is None
    newer = create(api)  # another client creates a task meanwhile
    page2 = api.get(page1["next"]).json()
    assert not set(ids(page1)) & set(ids(page2))
    assert set(ids(page1)) | set(ids(page2)) == first
    assert page2["next"] is None
    assert page2["count"] == 7  # every task matching the filters, as before
    # Back from page 2: page 1 as it was; before it, the task created meanwhile.
    back = api.get(page2["previous"]).json()
    assert ids(back) == ids(page1)
    assert ids(api.get(back["next"]).json()) == ids(page2)
    top = api.get(back["previous"]).json()
    assert ids(top) == [newer]
    assert top["previous"] is None


def test_a_task_deleted_between_pages_skips_none(api: APIClient) -> None:
    for _ in range(6):
        create(api)
    page1 = api.get("/api/tasks?limit=3").json()
    Task.objects.filter(pk=ids(page1)[0]).delete()
    page2 = api.get(page1["next"]).json()
    assert ids(page2) == newest_first()[2:5]


def test_tasks_created_at_the_same_instant_are_ordered_by_id_and_each_shown_once(
    api: APIClient,
) -> None:
    for _ in range(7):
        create(api)
    Task.objects.update(created_at=timezone.now() - timedelta(minutes=1))
    seen: list[str] = []
    url: str | None = "/api/tasks?limit=2"
    while url:
        page = api.get(url).json()
        seen += ids(page)
        url = page["next"]
    assert seen == newest_first()
    assert len(set(seen)) == 7


def test_limit_and_offset_are_taken_and_next_continues_with_a_cursor(api: APIClient) -> None:
    for _ in range(5):
        create(api)
    order = newest_first()
    page = api.get("/api/tasks?limit=2&offset=1&skillId=ce-review").json()
    assert ids(page) == order[1:3]
    assert page["count"] == 5
    assert "offset=" not in page["next"]
    assert "before=" in page["next"]
    assert "limit=2" in page["next"]
    assert "skillId=ce-review" in page["next"]  # the filters carry over
    assert ids(api.get(page["next"]).json()) == order[3:5]
    assert ids(api.get(page["previous"]).json()) == order[:1]
    assert ids(api.get("/api/tasks?offset=4").json()) == order[4:]
    # An offset past the end: nothing, and the previous link by offset as before.
    past = api.get("/api/tasks?limit=2&offset=9").json()
    assert past["results"] == []
    assert past["next"] is None
    assert "offset=7" in past["previous"]


@pytest.mark.parametrize(
    "query",
    [
        "before=yesterday",
        "before=1_abc",
        "after=999999999999999999_0b7c3e1c9a4f4d1e8f3a2b5c6d7e8f90",  # past year 9999
        "before=1%00_0b7c3e1c9a4f4d1e8f3a2b5c6d7e8f90",
        "before=1_0b7c3e1c9a4f4d1e8f3a2b5c6d7e8f90&after=1_0b7c3e1c9a4f4d1e8f3a2b5c6d7e8f90",
        # A pattern's $ matches before a final newline: the cursor went on to a 500.
        "before=1_0b7c3e1c9a4f4d1e8f3a2b5c6d7e8f90%0A",
        "after=1_0b7c3e1c9a4f4d1e8f3a2b5c6d7e8f90%0A",
    ],
)
def test_a_malformed_cursor_is_a_400(api: APIClient, query: str) -> None:
    create(api)
    response = api.get(f"/api/tasks?{query}")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] in ("validation_error", "invalid_text")


def test_the_schema_documents_the_cursors(client: Any) -> None:
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    params = {p["name"]: p for p in schema["paths"]["/api/tasks"]["get"]["parameters"]}
    assert {"limit", "offset", "before", "after"} <= set(params)
    assert params["before"]["schema"]["pattern"].startswith("^")
