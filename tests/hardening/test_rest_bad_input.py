"""Bad input at the REST boundaries: a clear 4xx in the platform error shape naming the
field, and nothing written. Runs on SQLite (pass 1) and PostgreSQL (pass 2), where a NUL
would otherwise reach the database and fail there."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from a2a.models import Task
from a2a.states import TaskState
from agent_profiles.models import AgentProfile
from platform_site.text import MAX_JSON_DEPTH

NUL = "a\u0000b"
# A lone surrogate cannot be encoded as UTF-8: JSON carries it as an escape.
SURROGATE_BODY = '{"skillId": "ce-review", "input": {"product": "a\\udcffb"}}'
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture
def api(make_user: Any) -> APIClient:
    client = APIClient()
    user = make_user()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {user.raw_token}")
    client.user = user  # type: ignore[attr-defined]
    return client


@pytest.fixture
def agent(make_skill: Any, make_agent: Any) -> AgentProfile:
    return make_agent(skills=[make_skill()])


def post_raw(api: APIClient, path: str, body: str) -> Any:
    return api.generic("POST", path, body.encode("utf-8", "surrogatepass"), "application/json")


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == code, error
    return error


def test_a_nul_in_a_task_input_is_refused_naming_the_field(api: APIClient, agent: Any) -> None:
    body = {"skillId": "ce-review", "input": {"product": NUL}}
    error = assert_error(api.post("/api/tasks", body, format="json"), 400, "invalid_text")
    assert error["details"]["field"] == "input.product"
    assert "NUL" in error["message"]
    assert not Task.objects.exists()


def test_a_lone_surrogate_in_a_task_input_is_refused(api: APIClient, agent: Any) -> None:
    error = assert_error(post_raw(api, "/api/tasks", SURROGATE_BODY), 400, "invalid_text")
    assert error["details"] == {"field": "input.product", "problem": "a lone surrogate"}
    assert not Task.objects.exists()


def test_a_nul_in_a_key_is_refused(api: APIClient, agent: Any) -> None:
    body = {"skillId": "ce-review", "input": {NUL: "lamp"}}
    assert_error(api.post("/api/tasks", body, format="json"), 400, "invalid_text")
    assert not Task.objects.exists()


@pytest.mark.parametrize("body", [DEEP, '{"a":' * 5_000 + "1" + "}" * 5_000])
def test_deeply_nested_json_is_refused_before_parsing(
    api: APIClient, agent: Any, body: str
) -> None:
    error = assert_error(post_raw(api, "/api/tasks", body), 400, "json_too_deep")
    assert error["details"] == {"maxDepth": MAX_JSON_DEPTH}


# Not JSON numbers, and PostgreSQL's jsonb refuses them: 1e400 is what Python reads as
# infinity (it went through, then failed at the database with a 500). An integer as large
# is stored, but A2A carries numbers as doubles: an agent's SDK refused the send and the
# task waited offline until its deadline.
NOT_NUMBERS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e999",
    "1" + "0" * 400,
    "-" + "9" * 310,
]


@pytest.mark.parametrize("number", NOT_NUMBERS)
def test_nan_infinity_and_numbers_beyond_a_float_are_not_json(
    api: APIClient, agent: Any, number: str
) -> None:
    body = '{"skillId": "ce-review", "input": {"product": "lamp", "n": N}}'.replace("N", number)
    error = assert_error(post_raw(api, "/api/tasks", body), 400, "malformed_json")
    assert "number" in error["message"]
    assert not Task.objects.exists()


def test_large_but_finite_numbers_are_taken(api: APIClient, agent: Any) -> None:
    body = '{"skillId": "ce-review", "input": {"product": "lamp", "n": 1e300, "m": 1%s}}' % (
        "0" * 300
    )
    response = post_raw(api, "/api/tasks", body)
    assert response.status_code == 201, response.content
    stored = Task.objects.get().input
    assert float(stored["n"]) == 1e300  # PostgreSQL's jsonb gives it back without exponent
    assert stored["m"] == 10**300  # within a float's range: an agent can read it


def test_a_body_that_is_not_utf8_is_malformed(api: APIClient, agent: Any) -> None:
    response = api.generic("POST", "/api/tasks", b'{"skillId": "\xff"}', "application/json")
    assert_error(response, 400, "malformed_json")


def test_an_oversize_body_is_413(api: APIClient, agent: Any, settings: Any) -> None:
    settings.MAX_BODY_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = {"skillId": "ce-review", "input": {"product": "x" * 2000}}
    assert_error(api.post("/api/tasks", body, format="json"), 413, "payload_too_large")
    assert not Task.objects.exists()


def test_a_nul_in_a_reply_changes_nothing(api: APIClient, agent: Any) -> None:
    from a2a import creation

    task = creation.create_task(skill_id="ce-review", input={"product": "x"}, user=api.user)  # type: ignore[attr-defined]
    task.require_input({"role": "ROLE_AGENT", "parts": [{"text": "Which?"}], "messageId": "q"})
    error = assert_error(
        api.post(f"/api/tasks/{task.id}/reply", {"text": NUL}, format="json"), 400, "invalid_text"
    )
    assert error["details"]["field"] == "text"
    task.refresh_from_db()
    assert task.state == TaskState.INPUT_REQUIRED
    reply = post_raw(api, f"/api/tasks/{task.id}/reply", '{"data": {"k": "\\ud800"}}')
    assert_error(reply, 400, "invalid_text")


def test_a_nul_in_a_cancel_reason_is_refused(api: APIClient, agent: Any) -> None:
    from a2a import creation

    task = creation.create_task(skill_id="ce-review", input={"product": "x"}, user=api.user)  # type: ignore[attr-defined]
    response = api.post(f"/api/tasks/{task.id}/cancel", {"reason": NUL}, format="json")
    assert_error(response, 400, "invalid_text")
    task.refresh_from_db()
    assert task.state == TaskState.SUBMITTED


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("metadata", {"a": NUL}),
        ("metadata", {NUL: 1}),
        ("name", NUL),
        ("description", "x\udcff"),
        ("skillIds", [NUL]),
    ],
)
def test_registration_refuses_bad_text_anywhere(
    client: Any, make_skill: Any, field: str, value: Any
) -> None:
    make_skill()
    body = {"agentId": "new-agent", "skillIds": ["ce-review"], field: value}
    raw = json.dumps(body).encode()  # escapes the NUL and the surrogate
    response = client.post("/api/agent-profiles/register", raw, content_type="application/json")
    error = assert_error(response, 400, "invalid_text")
    assert error["details"]["field"].startswith(field)
    assert not AgentProfile.objects.filter(pk="new-agent").exists()


def test_registration_refuses_a_number_beyond_a_float(client: Any, make_skill: Any) -> None:
    make_skill()
    body = '{"agentId": "new-agent", "skillIds": ["ce-review"], "metadata": {"x": 1e400}}'
    response = client.post("/api/agent-profiles/register", body, content_type="application/json")
    assert_error(response, 400, "malformed_json")  # it was a 500, or a 409 on SQLite
    assert not AgentProfile.objects.filter(pk="new-agent").exists()


def test_registration_refuses_deep_json(client: Any, db: None) -> None:
    response = client.post(
        "/api/agent-profiles/register", '{"metadata":' + DEEP + "}", content_type="application/json"
    )
    assert_error(response, 400, "json_too_deep")


@pytest.mark.parametrize(
    "path",
    [
        "/api/a2a/agent-card/%00",
        "/api/a2a/agent-card/a%00b",
        "/api/a2a/skills?domain=a%00b",
        "/api/a2a/skills?tag=%00",
        "/api/tasks?skillId=a%00b",
        "/api/tasks?agentId=%00",
        "/api/tasks?state=%00",
        "/api/tasks?a%00=1",
    ],
)
def test_a_nul_in_a_path_or_query_is_400_json(api: APIClient, agent: Any, path: str) -> None:
    error = assert_error(api.get(path), 400, "invalid_text")
    assert "NUL" in error["message"]


def test_an_unparseable_task_id_is_a_json_404(api: APIClient, agent: Any) -> None:
    error = assert_error(api.get("/api/tasks/abc"), 404, "not_found")
    assert "/api/tasks/abc" in error["message"]
    assert_error(api.post("/api/tasks/abc/cancel"), 404, "not_found")


def test_an_unknown_api_route_is_a_json_404(client: Any, db: None) -> None:
    assert_error(client.get("/api/nothing-here"), 404, "not_found")


def test_pages_outside_the_api_keep_html_404s(client: Any, db: None) -> None:
    response = client.get("/nothing-here")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_an_unknown_agent_card_is_a_json_404(client: Any, db: None) -> None:
    assert_error(client.get("/api/a2a/agent-card/nobody"), 404, "not_found")


def test_a_bearer_key_with_a_nul_is_refused_as_invalid(client: Any, db: None) -> None:
    response = client.get("/api/tasks", HTTP_AUTHORIZATION="Bearer usr_ab\x00cdefg_xyz")
    assert_error(response, 401, "authentication_failed")


@pytest.mark.parametrize(
    "query",
    [
        "offset=null",
        "offset=-1",
        "limit=0",
        "limit=abc",
        "limit=501",
        "offset=1e3",
        "offset=99999999999999999999999",
        "limit=%EF%BC%95",
    ],
)
def test_paging_parameters_that_are_not_whole_numbers_in_range_are_400(
    api: APIClient, agent: Any, query: str
) -> None:
    error = assert_error(api.get(f"/api/tasks?{query}"), 400, "validation_error")
    assert error["details"]["field"] == query.split("=")[0]


def test_paging_within_range_works(api: APIClient, agent: Any) -> None:
    response = api.get("/api/tasks?limit=500&offset=0")
    assert response.status_code == 200
    assert response.json()["results"] == []


def test_the_schema_documents_errors_bounds_and_the_text_rule(client: Any, db: None) -> None:
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    listing = schema["paths"]["/api/tasks"]["get"]
    assert {"400", "401", "403", "503"} <= set(listing["responses"])
    limits = {p["name"]: p["schema"] for p in listing["parameters"]}
    assert (limits["limit"]["minimum"], limits["limit"]["maximum"]) == (1, 500)
    assert limits["skillId"]["pattern"]
    reply = schema["paths"]["/api/tasks/{id}/reply"]["post"]["responses"]
    assert {"400", "404", "409", "413", "503"} <= set(reply)
    assert reply["409"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"
    }
    assert "Retry-After" in reply["503"]["headers"]
    assert "NUL" in reply["400"]["description"]


def test_a_nul_in_one_batch_item_is_that_items_error_and_the_others_are_created(
    api: APIClient, agent: Any
) -> None:
    good = {"skillId": "ce-review", "input": {"product": "ok"}}
    bad = {"skillId": "ce-review", "input": {"product": NUL}}
    response = api.post("/api/tasks:batch", {"tasks": [good, bad]}, format="json")
    assert response.status_code == 200, response.content
    first, second = response.json()["results"]
    assert first["status"] == 201
    assert second["status"] == 400
    assert second["error"]["code"] == "invalid_text"
    assert second["error"]["details"]["field"] == "tasks[1].input.product"
    assert list(Task.objects.values_list("input", flat=True)) == [{"product": "ok"}]


def test_a_nul_outside_the_batch_items_refuses_the_batch(api: APIClient, agent: Any) -> None:
    good = {"skillId": "ce-review", "input": {"product": "ok"}}
    response = api.post("/api/tasks:batch", {"tasks": [good], "x": NUL}, format="json")
    assert_error(response, 400, "invalid_text")
    assert not Task.objects.exists()


def test_a_number_beyond_a_float_in_a_batch_refuses_the_batch(api: APIClient, agent: Any) -> None:
    body = '{"tasks": [{"skillId": "ce-review", "input": {"product": "ok", "n": -1e999}}]}'
    assert_error(post_raw(api, "/api/tasks:batch", body), 400, "malformed_json")
    assert not Task.objects.exists()


def test_deep_json_in_a_batch_is_refused(api: APIClient, agent: Any) -> None:
    response = post_raw(api, "/api/tasks:batch", '{"tasks": [' + DEEP + "]}")
    assert_error(response, 400, "json_too_deep")


def test_too_many_query_fields_is_a_json_400(client: Any, db: None) -> None:
    query = "&".join(f"f{i}=1" for i in range(1500))
    assert_error(client.get(f"/api/a2a/skills?{query}"), 400, "bad_request")
