"""What the OpenAPI document promises, held at the REST boundary: bodies and fields of the
documented type or a 400 with nothing done, task ids in any case, JSON only (406 in the
error shape, documented), and the schema routes' own errors in the error shape."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from rest_framework.test import APIClient

from a2a import agent_updates
from a2a.models import Task
from a2a.states import TaskState
from platform_site.openapi import ERROR_SCHEMA

pytestmark = pytest.mark.django_db

NOT_OBJECTS = ["[]", "[1]", "0", "false", '""', '"x"', "null"]


@pytest.fixture
def api(make_skill: Any, make_agent: Any, make_user: Any) -> APIClient:
    skill = make_skill()
    make_agent(skills=[skill])
    make_agent(skills=[skill], id="agent-two", name="Agent Two")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_user().raw_token}")
    return client


def create(api: APIClient, **extra: Any) -> dict[str, Any]:
    body = {"skillId": "ce-review", "input": {"product": "lamp"}, "agentId": "agent-one"}
    response = api.post("/api/tasks", {**body, **extra}, format="json")
    assert response.status_code == 201, response.content
    return dict(response.json())


def assert_error_shape(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = json.loads(response.content)
    jsonschema.validate(body, ERROR_SCHEMA)
    assert set(body["error"]) == {"code", "message", "details"}
    if code:
        assert body["error"]["code"] == code, body
    return dict(body["error"])


def snapshot(task_id: str) -> tuple[Any, ...]:
    task = Task.objects.get(pk=task_id)
    return task.state, task.agent_id, task.attempts, task.updated_at


# --- Bodies that are not objects ---------------------------------------------------------


@pytest.mark.parametrize("action", ["cancel", "reassign"])
@pytest.mark.parametrize("body", NOT_OBJECTS)
def test_an_action_body_that_is_not_an_object_is_refused_and_changes_nothing(
    api: APIClient, action: str, body: str
) -> None:
    task_id = create(api)["id"]
    before = snapshot(task_id)
    response = api.post(f"/api/tasks/{task_id}/{action}", body, content_type="application/json")
    error = assert_error_shape(response, 400, "validation_error")
    assert error["details"] == {"body": "a JSON object is required"}
    assert snapshot(task_id) == before


@pytest.mark.parametrize("body", NOT_OBJECTS)
def test_a_retry_body_that_is_not_an_object_is_refused_and_retries_nothing(
    api: APIClient, body: str
) -> None:
    task_id = create(api)["id"]
    Task.objects.get(pk=task_id).fail("agent_failed", "boom")
    before = snapshot(task_id)
    response = api.post(f"/api/tasks/{task_id}/retry", body, content_type="application/json")
    assert_error_shape(response, 400, "validation_error")
    assert snapshot(task_id) == before


@pytest.mark.parametrize("body", NOT_OBJECTS)
def test_a_reply_body_that_is_not_an_object_is_refused(api: APIClient, body: str) -> None:
    task_id = create(api)["id"]
    agent_updates.apply_agent_update(
        Task.objects.get(pk=task_id), status={"state": "input-required"}, via="a2a"
    )
    before = snapshot(task_id)
    response = api.post(f"/api/tasks/{task_id}/reply", body, content_type="application/json")
    assert_error_shape(response, 400, "validation_error")
    assert snapshot(task_id) == before


@pytest.mark.parametrize("body", [None, "{}"])
def test_an_empty_body_or_an_empty_object_still_cancels(api: APIClient, body: str | None) -> None:
    task_id = create(api)["id"]
    if body is None:
        response = api.post(f"/api/tasks/{task_id}/cancel")
    else:
        response = api.post(f"/api/tasks/{task_id}/cancel", body, content_type="application/json")
    assert response.status_code == 200, response.content
    assert response.json()["state"] == TaskState.CANCELED


# --- Text fields take JSON strings only --------------------------------------------------


@pytest.mark.parametrize("key", [5, 5.5, True, ["k"], {"k": 1}])
def test_an_idempotency_key_that_is_not_a_string_is_refused(api: APIClient, key: Any) -> None:
    body = {"skillId": "ce-review", "input": {"product": "x"}, "idempotencyKey": key}
    error = assert_error_shape(api.post("/api/tasks", body, format="json"), 400)
    assert "idempotencyKey" in error["details"]
    assert not Task.objects.exists()
    batch = api.post("/api/tasks:batch", {"tasks": [body]}, format="json").json()
    assert batch["results"][0]["status"] == 400
    assert not Task.objects.exists()


def test_reply_text_and_cancel_reason_that_are_not_strings_are_refused(api: APIClient) -> None:
    task_id = create(api)["id"]
    agent_updates.apply_agent_update(
        Task.objects.get(pk=task_id), status={"state": "input-required"}, via="a2a"
    )
    before = snapshot(task_id)
    reply = api.post(f"/api/tasks/{task_id}/reply", {"text": 5}, format="json")
    assert "text" in assert_error_shape(reply, 400, "validation_error")["details"]
    cancel = api.post(f"/api/tasks/{task_id}/cancel", {"reason": 5}, format="json")
    assert "reason" in assert_error_shape(cancel, 400, "validation_error")["details"]
    assert snapshot(task_id) == before


# --- Task ids in any case ----------------------------------------------------------------


def test_a_task_id_in_upper_or_mixed_case_is_the_task(api: APIClient) -> None:
    task_id = create(api)["id"]
    upper, mixed = task_id.upper(), task_id[:9].upper() + task_id[9:]
    assert api.get(f"/api/tasks/{upper}").json()["id"] == task_id
    assert api.get(f"/api/tasks/{mixed}").json()["id"] == task_id
    response = api.post(f"/api/tasks/{upper}/cancel")
    assert response.status_code == 200, response.content
    assert Task.objects.get(pk=task_id).state == TaskState.CANCELED
    assert_error_shape(api.get(f"/api/tasks/{task_id}x"), 404)  # still a UUID or nothing


def test_the_schema_says_task_ids_are_uuids_in_any_case(client: Any) -> None:
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    for path in ("/api/tasks/{id}", "/api/tasks/{id}/cancel", "/api/tasks/{id}/reassign"):
        for operation in schema["paths"][path].values():
            (param,) = [p for p in operation["parameters"] if p["name"] == "id"]
            assert param["schema"]["format"] == "uuid"
            assert jsonschema.Draft202012Validator(param["schema"]).is_valid(
                "0B7C3E1C-9A4F-4D1E-8F3A-2B5C6D7E8F90"
            )


# --- JSON only: 406 documented, in the error shape ----------------------------------------


@pytest.mark.parametrize("accept", ["text/csv", "text/html", "application/xml"])
@pytest.mark.parametrize(
    ("method", "path"),
    [("get", "/api/tasks"), ("post", "/api/tasks"), ("get", "/api/a2a/skills")],
)
def test_an_accept_header_without_json_is_a_documented_406(
    api: APIClient, client: Any, accept: str, method: str, path: str
) -> None:
    kwargs: dict[str, Any] = {"HTTP_ACCEPT": accept}
    if method == "post":
        kwargs.update(data={"skillId": "ce-review", "input": {}}, format="json")
    assert_error_shape(getattr(api, method)(path, **kwargs), 406, "not_acceptable")
    assert not Task.objects.exists()
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    documented = schema["paths"][path][method]["responses"]["406"]
    ref = documented["content"]["application/json"]["schema"]["$ref"]
    assert ref == "#/components/schemas/Error"


def test_a_browser_gets_json_not_an_html_page(api: APIClient) -> None:
    browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    response = api.get("/api/tasks", HTTP_ACCEPT=browser)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"


def test_every_api_operation_documents_the_406(client: Any) -> None:
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert "406" in operation["responses"], (method, path)


# --- The schema and docs routes answer errors in the error shape --------------------------


@pytest.mark.parametrize(
    ("method", "path", "accept", "status"),
    [
        ("post", "/api/schema/", None, 405),
        ("get", "/api/schema/?format=xml", None, 404),
        ("get", "/api/schema/", "text/csv", 406),
        ("delete", "/api/docs/", None, 405),
        ("post", "/api/redoc/", None, 405),
        ("put", "/api/redoc/", "text/html", 405),
    ],
)
def test_the_schema_and_docs_routes_answer_errors_as_json(
    client: Any, method: str, path: str, accept: str | None, status: int
) -> None:
    headers = {"HTTP_ACCEPT": accept} if accept else {}
    assert_error_shape(getattr(client, method)(path, **headers), status)


def test_the_schema_and_docs_routes_still_serve_yaml_json_and_html(client: Any) -> None:
    assert client.get("/api/schema/")["Content-Type"].startswith("application/vnd.oai.openapi")
    assert client.get("/api/schema/?format=json").json()["openapi"].startswith("3.")
    assert client.get("/api/docs/")["Content-Type"].startswith("text/html")
    assert client.get("/api/redoc/")["Content-Type"].startswith("text/html")
