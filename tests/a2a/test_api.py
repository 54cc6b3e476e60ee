"""The platform tasks REST API: shapes, auth, visibility, filters and bad input."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from a2a import agent_updates
from a2a.api.serializers import TaskSerializer
from a2a.models import Task
from a2a.states import TaskState

pytestmark = pytest.mark.django_db

TASK_KEYS = {
    "id",
    "skillId",
    "agentId",
    "state",
    "remoteTaskId",
    "contextId",
    "input",
    "output",
    "artifacts",
    "question",
    "error",
    "attempts",
    "transport",
    "metadata",
    "createdAt",
    "updatedAt",
}


@pytest.fixture
def skill(make_skill: Any) -> Any:
    return make_skill()


@pytest.fixture
def agent(make_agent: Any, skill: Any) -> Any:
    return make_agent(skills=[skill])


@pytest.fixture
def user(make_user: Any) -> Any:
    return make_user()


def client_for(who: Any) -> APIClient:
    client = APIClient()
    token = getattr(who, "raw_token", None) or getattr(who, "raw_key", None)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def api(user: Any) -> APIClient:
    return client_for(user)


def create(api: APIClient, **body: Any) -> Any:
    body.setdefault("skillId", "ce-review")
    body.setdefault("input", {"product": "lamp"})
    return api.post("/api/tasks", body, format="json")


def test_it_creates_a_task_with_the_documented_shape(api: APIClient, agent: Any) -> None:
    response = create(api)
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == TASK_KEYS
    assert body["state"] == TaskState.SUBMITTED
    assert body["agentId"] == "agent-one"
    assert body["transport"] == "a2a"
    assert body["metadata"]["fallbacks"] == []
    assert body["metadata"]["match"]["agentId"] == "agent-one"
    assert body["metadata"]["match"]["terms"].keys() == {
        "fit",
        "success",
        "load",
        "latency",
        "online",
    }


def test_it_returns_the_existing_task_for_a_repeated_idempotency_key(
    api: APIClient, agent: Any
) -> None:
    first = create(api, idempotencyKey="abc")
    again = create(api, idempotencyKey="abc")
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]
    assert Task.objects.count() == 1


def test_a_reused_idempotency_key_with_other_input_conflicts(api: APIClient, agent: Any) -> None:
    create(api, idempotencyKey="abc")
    response = create(api, idempotencyKey="abc", input={"product": "chair"})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "idempotency_conflict"


def test_an_idempotency_key_is_taken_as_given(api: APIClient, agent: Any) -> None:
    """The key is opaque: blanks around it make another key, not the same one trimmed."""
    first = create(api, idempotencyKey="order-7")
    other = create(api, idempotencyKey="order-7 ", input={"product": "chair"})
    assert (first.status_code, other.status_code) == (201, 201), other.content
    assert Task.objects.get(pk=other.json()["id"]).idempotency_key == "order-7 "
    assert create(api, idempotencyKey="order-7 ", input={"product": "chair"}).status_code == 200


@pytest.mark.parametrize("key", [" ", "  ", "\t\n"])
def test_an_idempotency_key_of_only_blanks_is_a_400(api: APIClient, agent: Any, key: str) -> None:
    """Not taken for "no key" (a repeat would make a second task): the caller is told."""
    response = create(api, idempotencyKey=key)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert "idempotencyKey" in error["details"]
    assert not Task.objects.exists()
    assert create(api, idempotencyKey="").status_code == 201  # empty: no key, as before


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"skillId": "nope"}, "unknown_skill"),
        ({"agentId": "ghost"}, "unknown_agent"),
        ({"input": {"market": "EU"}}, "input_invalid"),
        ({"input": [1, 2]}, "validation_error"),
        ({"skillId": ""}, "validation_error"),
    ],
)
def test_bad_input_is_a_clear_400_and_writes_nothing(
    api: APIClient, agent: Any, body: dict[str, Any], code: str
) -> None:
    response = create(api, **body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"]
    assert not Task.objects.exists()


def test_input_errors_list_each_schema_violation(api: APIClient, agent: Any) -> None:
    response = create(api, input={"market": 7})
    errors = response.json()["error"]["details"]["errors"]
    assert {e["path"] for e in errors} == {"(root)", "market"}


def test_no_agent_for_the_skill_is_a_400(api: APIClient, skill: Any) -> None:
    response = create(api)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "no_agent"


def test_it_needs_a_user(agent: Any) -> None:
    assert create(APIClient()).status_code in (401, 403)
    assert APIClient().get("/api/tasks").status_code in (401, 403)


def test_it_refuses_an_agent_key(agent: Any) -> None:
    response = create(client_for(agent))
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"


def test_a_user_sees_only_their_own_tasks(api: APIClient, agent: Any, make_user: Any) -> None:
    mine = create(api).json()["id"]
    other = client_for(make_user("bob"))
    hidden = other.get(f"/api/tasks/{mine}")
    assert hidden.status_code == 404
    assert hidden.json()["error"]["code"] == "not_found"
    assert other.post(f"/api/tasks/{mine}/cancel").status_code == 404
    assert other.get("/api/tasks").json()["results"] == []
    # Staff see others' tasks with the permission to view tasks (tests/a2a/test_api_staff.py).
    staff = client_for(make_user("root", is_staff=True, is_superuser=True))
    assert staff.get(f"/api/tasks/{mine}").status_code == 200
    read = api.get(f"/api/tasks/{mine}").json()
    assert read["id"] == mine
    assert set(read) == set(TaskSerializer.Meta.fields)


def test_it_lists_with_filters_and_pagination(
    api: APIClient, agent: Any, make_agent: Any, skill: Any
) -> None:
    make_agent(id="agent-two", skills=[skill])
    for _ in range(3):
        create(api, agentId="agent-one")
    create(api, agentId="agent-two")
    Task.objects.filter(agent_id="agent-two").first().fail("x", "boom")
    page = api.get("/api/tasks?limit=2").json()
    assert page["count"] == 4
    assert len(page["results"]) == 2
    assert page["next"]
    assert api.get("/api/tasks?agentId=agent-two").json()["count"] == 1
    assert api.get("/api/tasks?state=TASK_STATE_FAILED").json()["count"] == 1
    assert api.get("/api/tasks?state=submitted").json()["count"] == 3
    assert api.get("/api/tasks?skillId=ce-review").json()["count"] == 4
    assert api.get("/api/tasks?skillId=other").json()["count"] == 0
    bad = api.get("/api/tasks?state=sleeping")
    assert bad.status_code == 400


def test_listing_takes_a_bounded_number_of_queries(api: APIClient, agent: Any) -> None:
    for _ in range(3):
        create(api)
    with CaptureQueriesContext(connection) as few:
        api.get("/api/tasks")
    for _ in range(10):
        create(api)
    with CaptureQueriesContext(connection) as many:
        api.get("/api/tasks")
    assert len(many) == len(few) <= 6


def test_reply_cancel_and_retry_guard_the_state(api: APIClient, agent: Any) -> None:
    task_id = create(api).json()["id"]
    reply = api.post(f"/api/tasks/{task_id}/reply", {"text": "hi"}, format="json")
    assert reply.status_code == 409
    assert reply.json()["error"]["code"] == "invalid_state"
    retry = api.post(f"/api/tasks/{task_id}/retry")
    assert retry.status_code == 409
    assert api.post(f"/api/tasks/{task_id}/cancel").json()["state"] == TaskState.CANCELED
    again = api.post(f"/api/tasks/{task_id}/cancel")
    assert again.status_code == 409
    assert Task.objects.get(pk=task_id).state == TaskState.CANCELED


def test_a_reply_needs_text_or_data(api: APIClient, agent: Any) -> None:
    task_id = create(api).json()["id"]
    task = Task.objects.get(pk=task_id)
    agent_updates.apply_agent_update(task, status={"state": "input-required"}, via="a2a")
    assert api.post(f"/api/tasks/{task_id}/reply", {}, format="json").status_code == 400
    bad = api.post(f"/api/tasks/{task_id}/reply", {"data": [1]}, format="json")
    assert bad.status_code == 400
    ok = api.post(f"/api/tasks/{task_id}/reply", {"data": {"market": "EU"}}, format="json")
    assert ok.status_code == 200
    assert ok.json()["state"] == TaskState.WORKING


def test_retry_of_a_failed_task_resubmits_it(api: APIClient, agent: Any) -> None:
    task_id = create(api).json()["id"]
    Task.objects.get(pk=task_id).fail("agent_failed", "boom")
    response = api.post(f"/api/tasks/{task_id}/retry")
    assert response.status_code == 200
    assert response.json()["state"] == TaskState.SUBMITTED
    assert response.json()["error"] is None


def test_unknown_task_ids_are_404(api: APIClient) -> None:
    missing = "00000000-0000-0000-0000-000000000000"
    assert api.get(f"/api/tasks/{missing}").status_code == 404
    assert api.post(f"/api/tasks/{missing}/retry").status_code == 404
