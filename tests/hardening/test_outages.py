"""A database outage answers JSON 503 + Retry-After under /api/, never Django's HTML 500,
and /readyz does not tell anonymous callers where the database lives.

The outage is real: the test points the connection at a database that cannot be opened
(a closed port on PostgreSQL, a missing directory on SQLite) and restores it after.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from tests.support.serving import free_port


@pytest.fixture
def database_down(transactional_db: None, make_user: Any) -> Iterator[Any]:
    user = make_user()
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "sqlite":
        connection.settings_dict["NAME"] = "/nonexistent-dir/for/sure/db.sqlite3"
    else:
        connection.settings_dict.update(HOST="127.0.0.1", PORT=str(free_port()))
    try:
        yield user
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


def assert_unavailable(response: Any) -> None:
    assert response.status_code == 503, response.content
    assert response["Content-Type"].startswith("application/json")
    assert int(response["Retry-After"]) > 0
    error = response.json()["error"]
    assert error["code"] == "unavailable"
    assert "database" in error["message"]


def test_a_public_api_route_answers_json_503(client: Any, database_down: Any) -> None:
    assert_unavailable(client.get("/api/a2a/skills"))
    assert_unavailable(client.get("/api/a2a/agent-card/some-agent"))


def test_registration_answers_json_503(client: Any, database_down: Any) -> None:
    body = {"agentId": "a1", "skillIds": ["s"]}
    assert_unavailable(client.post("/api/agent-profiles/register", body, "application/json"))


def test_a_token_call_answers_json_503(client: Any, database_down: Any) -> None:
    auth = f"Bearer {database_down.raw_token}"
    assert_unavailable(client.get("/api/tasks", HTTP_AUTHORIZATION=auth))
    body = {"skillId": "s", "input": {}}
    response = client.post("/api/tasks", body, "application/json", HTTP_AUTHORIZATION=auth)
    assert_unavailable(response)


def test_a_session_call_answers_json_503(client: Any, database_down: Any) -> None:
    client.cookies["sessionid"] = "x" * 32  # the session lookup hits the database
    assert_unavailable(client.get("/api/tasks"))


def test_readyz_names_the_failure_without_the_database_address(
    client: Any, database_down: Any
) -> None:
    response = client.get("/readyz")
    assert response.status_code == 503
    check = response.json()["checks"]["database"]
    assert check["ok"] is False
    assert "OperationalError" in check["error"]
    text = response.content.decode()
    port = str(connection.settings_dict.get("PORT") or "")
    for secret in ("127.0.0.1", "nonexistent-dir", "port", port):
        if secret:
            assert secret not in text, text


def test_a_page_outside_the_api_answers_503_not_a_traceback(
    client: Any, database_down: Any
) -> None:
    client.raise_request_exception = False
    client.cookies["sessionid"] = "x" * 32
    response = client.get("/admin/")
    assert response.status_code == 503
    assert "Retry-After" in response


def test_the_agent_push_webhook_answers_json_503(database_down: Any) -> None:
    """An agent's sender may retry a 503 (nothing was applied); a 500 said the push was
    wrong, and each was logged with a traceback."""
    import uuid

    from a2a import agent_push_asgi, agent_push_tokens
    from tests.a2a.helpers import post

    agent_push_asgi.close_pool()  # its threads open their connections anew: on the outage
    task_id = uuid.uuid4()
    token = agent_push_tokens.token_for(task_id, "agent-one", 1)
    body = {"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_WORKING"}}}
    try:
        response = post(f"/api/a2a/push/{task_id}/agent-one/1", body, token)
    finally:
        agent_push_asgi.close_pool()
    assert response.status_code == 503, response.text
    assert int(response.headers["Retry-After"]) > 0
    assert response.json()["error"]["code"] == "unavailable"


def test_the_a2a_face_answers_unavailable_with_retry_after(
    client: Any, database_down: Any, settings: Any
) -> None:
    """In each binding's own shape: google.rpc UNAVAILABLE (503) and a JSON-RPC error,
    retryable, where an unexpected failure is INTERNAL (500)."""
    settings.A2A_FACE_DB_THREADS = 0  # the face's ORM calls on this thread: on the outage
    auth = {"HTTP_AUTHORIZATION": f"Bearer {database_down.raw_token}", "HTTP_A2A_VERSION": "1.0"}
    rest = client.get("/v1/a2a/tasks", **auth)
    assert rest.status_code == 503, rest.content
    assert int(rest["Retry-After"]) > 0
    assert rest.json()["error"]["status"] == "UNAVAILABLE"
    assert rest.json()["error"]["details"][0]["reason"] == "UNAVAILABLE"
    rpc = client.post(
        "/v1/a2a/jsonrpc",
        {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
        "application/json",
        **auth,
    )
    assert rpc.json()["error"]["code"] == -32000
    assert rpc.json()["error"]["data"][0]["reason"] == "UNAVAILABLE"
