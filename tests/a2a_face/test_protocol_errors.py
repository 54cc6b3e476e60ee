"""Spec points of A2A 1.0 that ordinary servers get wrong: versions, content types,
JSON errors everywhere, auth."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from a2a.face.errors import ERROR_TABLE, TaskNotFound, rest_error_body
from a2a.models import Task
from tests.a2a_face.conftest import FaceClient, error_reason

pytestmark = pytest.mark.django_db


def test_it_answers_unknown_face_paths_with_json_404(as_alice: FaceClient) -> None:
    response = as_alice.get("/v1/a2a/nothing/here/at/all")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert error_reason(response) == "METHOD_NOT_FOUND"


def test_it_answers_wrong_methods_with_json_405(as_alice: FaceClient) -> None:
    response = as_alice.delete("/v1/a2a/message:send")
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert error_reason(response) == "UNSUPPORTED_OPERATION"


def test_it_answers_wrong_methods_on_push_config_paths_with_json_405(
    as_alice: FaceClient,
) -> None:
    response = as_alice.delete("/v1/a2a/tasks/x/pushNotificationConfigs")
    assert response.status_code == 405
    assert error_reason(response) == "UNSUPPORTED_OPERATION"


def test_it_refuses_a_non_json_content_type_before_parsing(as_alice: FaceClient) -> None:
    response = as_alice.post("/v1/a2a/message:send", "not json at all", content_type="text/plain")
    assert response.status_code == 415
    assert error_reason(response) == "CONTENT_TYPE_NOT_SUPPORTED"
    assert Task.objects.count() == 0


def test_it_refuses_form_posts_with_415(as_alice: FaceClient) -> None:
    response = as_alice.post(
        "/v1/a2a/message:send", "a=b", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 415


def test_it_accepts_the_a2a_json_media_type(as_alice: FaceClient) -> None:
    response = as_alice.post("/v1/a2a/message:send", "{}", content_type="application/a2a+json")
    assert response.status_code == 400
    assert error_reason(response) == "INVALID_PARAMS"


def test_it_reports_malformed_json(as_alice: FaceClient) -> None:
    response = as_alice.post("/v1/a2a/message:send", "{nope", content_type="application/json")
    assert response.status_code == 400
    assert error_reason(response) == "INVALID_REQUEST"
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_it_reports_a_json_array_body(as_alice: FaceClient) -> None:
    response = as_alice.post("/v1/a2a/message:send", "[1]", content_type="application/json")
    assert error_reason(response) == "INVALID_REQUEST"


@pytest.mark.parametrize("version", ["2.0", "0.3", "abc", "2"])
def test_it_refuses_unsupported_versions(as_alice: FaceClient, version: str) -> None:
    response = as_alice.get("/v1/a2a/tasks", **{"A2A-Version": version})
    assert response.status_code == 400
    assert error_reason(response) == "VERSION_NOT_SUPPORTED"
    assert response.json()["error"]["details"][0]["domain"] == "a2a-protocol.org"


@pytest.mark.parametrize("version", ["1.0", "1", "1.1", "1.0.3", "", " "])
def test_it_accepts_1x_and_a_missing_or_empty_version(as_alice: FaceClient, version: str) -> None:
    response = as_alice.get("/v1/a2a/tasks", **{"A2A-Version": version})
    assert response.status_code == 200


def test_it_does_not_crash_without_a_version_header(alice: Any) -> None:
    client = Client()
    response = client.get("/v1/a2a/tasks", headers={"Authorization": f"Bearer {alice.raw_token}"})
    assert response.status_code == 200


def test_it_requires_authentication(db: None) -> None:
    response = FaceClient(None).get("/v1/a2a/tasks")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert error_reason(response) == "UNAUTHENTICATED"


def test_it_refuses_an_unknown_token(db: None) -> None:
    response = FaceClient("usr_not-a-real-token").get("/v1/a2a/tasks")
    assert response.status_code == 401


def test_it_refuses_a_malformed_authorization_header(db: None) -> None:
    response = FaceClient(None).get("/v1/a2a/tasks", Authorization="Basic Zm9vOmJhcg==")
    assert response.status_code == 401


def test_it_accepts_an_agent_api_key(agent: Any) -> None:
    response = FaceClient(agent.raw_key).get("/v1/a2a/tasks")
    assert response.status_code == 200


def test_anonymous_callers_are_served_when_allowed(db: None, settings: Any) -> None:
    settings.A2A_ALLOW_ANONYMOUS = True
    response = FaceClient(None).get("/v1/a2a/tasks")
    assert response.status_code == 200
    assert response.json()["tasks"] == []


def test_a_wrong_token_is_refused_even_when_anonymous_is_allowed(db: None, settings: Any) -> None:
    settings.A2A_ALLOW_ANONYMOUS = True
    response = FaceClient("usr_wrong").get("/v1/a2a/tasks")
    assert response.status_code == 401


def test_every_error_class_has_a_table_row_with_a_distinct_a2a_code() -> None:
    a2a_codes = sorted(
        m.jsonrpc_code for m in ERROR_TABLE.values() if -32009 <= m.jsonrpc_code <= -32001
    )
    assert a2a_codes == list(range(-32009, -32000))


def test_the_sdk_client_maps_our_rest_errors_to_its_exceptions() -> None:
    from a2a.client.transports.rest import _parse_rest_error
    from a2a.utils.errors import TaskNotFoundError

    _status, body = rest_error_body(TaskNotFound("gone", metadata={"taskId": "t"}))
    error = _parse_rest_error(body, "fallback")
    assert isinstance(error, TaskNotFoundError)
    assert error.data == {"taskId": "t"}


def test_a_token_lookup_is_reused_briefly_but_failures_are_not(
    alice: Any, settings: Any, django_assert_num_queries: Any
) -> None:
    from a2a.face.context import PrincipalCache

    settings.A2A_FACE_AUTH_CACHE_SECONDS = 60
    cache = PrincipalCache(size=1)
    assert cache.lookup(alice.raw_token) == alice
    with django_assert_num_queries(0):
        assert cache.lookup(alice.raw_token) == alice
    assert cache.lookup("usr_nope") is None
    assert cache.lookup("usr_nope_again") is None
    # size 1: the failed lookups did not evict alice
    with django_assert_num_queries(0):
        assert cache.lookup(alice.raw_token) == alice


def test_an_oversized_body_is_a_json_413(as_alice: FaceClient, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    response = as_alice.post("/v1/a2a/message:send", {"message": {"parts": ["x" * 500]}})
    assert response.status_code == 413
    assert error_reason(response) == "INVALID_REQUEST"
