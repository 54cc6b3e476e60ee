from __future__ import annotations

from typing import Any

import pytest

from agent_profiles.authentication import authenticate_bearer
from agent_profiles.models import AgentProfile, AgentStatus, ApiKey


def body(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "agentId": "acme-ce",
        "name": "ACME CE reviewer",
        "description": "Reviews products.",
        "skillIds": ["ce-review"],
        "a2aEndpoint": "http://127.0.0.1:9100/a2a",
        "domain": "compliance",
        "subdomain": "ce_certification",
        "version": "2.1.0",
        "metadata": {"owner": "acme"},
    }
    data.update(overrides)
    return data


def assert_error(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) == {"code", "message", "details"}
    assert error["message"]
    if code:
        assert error["code"] == code
    return error


def assert_nothing_written() -> None:
    assert not AgentProfile.objects.exists()
    assert not ApiKey.objects.exists()


pytestmark = pytest.mark.usefixtures("open_registration")


def test_it_registers_a_new_agent_and_returns_its_key_once(register: Any, skill: Any) -> None:
    response = register(body())
    assert response.status_code == 201
    data = response.json()
    profile = data["profile"]
    assert profile["agentId"] == "acme-ce"
    assert profile["skillIds"] == ["ce-review"]
    assert profile["a2aEndpoint"] == "http://127.0.0.1:9100/a2a"
    assert profile["metadata"] == {"owner": "acme"}
    assert profile["status"] == "active"
    assert profile["lastSeenAt"]
    assert data["apiKey"].startswith(f"a2a_{profile['keyPrefix']}_")
    principal = authenticate_bearer(data["apiKey"])
    assert principal.agent.pk == "acme-ce"
    assert data["apiKey"] not in str(ApiKey.objects.values_list("prefix", "digest"))


def test_it_registers_an_agent_without_endpoint_for_the_websocket(
    register: Any, skill: Any
) -> None:
    data = body()
    del data["a2aEndpoint"]
    response = register(data)
    assert response.status_code == 201
    assert AgentProfile.objects.get().a2a_endpoint == ""


def test_it_accepts_a_minimal_body(register: Any, skill: Any) -> None:
    response = register({"agentId": "min", "skillIds": ["ce-review"]})
    assert response.status_code == 201
    assert response.json()["profile"]["name"] == ""


def test_it_refuses_an_existing_id_without_its_key(register: Any, skill: Any) -> None:
    register(body())
    response = register(body(name="Hijacked"))
    error = assert_error(response, 409, "agent_exists")
    assert "Authorization: Bearer" in error["message"]
    assert AgentProfile.objects.get().name == "ACME CE reviewer"


def test_it_refuses_an_existing_id_with_another_agents_key(
    register: Any, skill: Any, make_agent: Any
) -> None:
    other = make_agent(id="other", skills=[skill])
    register(body())
    assert_error(register(body(name="Hijacked"), key=other.raw_key), 409, "agent_exists")
    assert AgentProfile.objects.get(pk="acme-ce").name == "ACME CE reviewer"


def test_it_updates_an_existing_agent_with_its_own_key(
    register: Any, make_skill: Any, skill: Any
) -> None:
    make_skill(id="other-skill")
    key = register(body()).json()["apiKey"]
    response = register(body(name="Renamed", skillIds=["other-skill"], a2aEndpoint=None), key=key)
    assert response.status_code == 200
    data = response.json()
    assert "apiKey" not in data
    assert data["profile"]["name"] == "Renamed"
    assert data["profile"]["skillIds"] == ["other-skill"]
    assert data["profile"]["a2aEndpoint"] == ""
    assert authenticate_bearer(key).agent.pk == "acme-ce"  # the key keeps working


def test_it_keeps_fields_left_out_of_an_update(register: Any, skill: Any) -> None:
    key = register(body()).json()["apiKey"]
    response = register({"agentId": "acme-ce", "skillIds": ["ce-review"]}, key=key)
    assert response.json()["profile"]["description"] == "Reviews products."


def test_it_refuses_an_update_from_a_disabled_agent(register: Any, skill: Any) -> None:
    key = register(body()).json()["apiKey"]
    AgentProfile.objects.update(status=AgentStatus.DISABLED)
    assert_error(register(body(name="x"), key=key), 403, "agent_disabled")


def test_it_rejects_an_invalid_bearer_key(register: Any, skill: Any) -> None:
    assert_error(register(body(), key="a2a_deadbeef_nope"), 401, "authentication_failed")
    assert_nothing_written()


def test_it_names_unknown_skill_ids(register: Any, skill: Any) -> None:
    response = register(body(skillIds=["ce-review", "nope-1", "nope-2"]))
    error = assert_error(response, 400, "unknown_skills")
    assert "nope-1" in error["message"]
    assert "nope-2" in error["message"]
    assert error["details"] == {"unknownSkillIds": ["nope-1", "nope-2"]}
    assert_nothing_written()


def test_it_treats_inactive_skills_as_unknown(register: Any, make_skill: Any) -> None:
    make_skill(id="retired", is_active=False)
    assert_error(register(body(skillIds=["retired"])), 400, "unknown_skills")


@pytest.mark.parametrize("agent_id", ["Bad Id", "UPPER", "-dash", "a/b", "x" * 101, "é"])
def test_it_rejects_an_agent_id_that_is_not_a_slug(
    register: Any, skill: Any, agent_id: str
) -> None:
    error = assert_error(register(body(agentId=agent_id)), 400, "validation_error")
    assert "agentId" in error["message"]
    assert_nothing_written()


@pytest.mark.parametrize("agent_id", ["tasks", "jsonrpc", "extendedagentcard", "admin"])
def test_it_rejects_a_reserved_agent_id(register: Any, skill: Any, agent_id: str) -> None:
    error = assert_error(register(body(agentId=agent_id)), 400, "reserved_agent_id")
    assert agent_id in error["message"]
    assert_nothing_written()


@pytest.mark.parametrize("missing", ["agentId", "skillIds"])
def test_it_rejects_a_missing_required_field(register: Any, skill: Any, missing: str) -> None:
    data = body()
    del data[missing]
    error = assert_error(register(data), 400, "validation_error")
    assert missing in error["details"]
    assert_nothing_written()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("agentId", 123),
        ("agentId", None),
        ("skillIds", "ce-review"),
        ("skillIds", [1, 2]),
        ("skillIds", []),
        ("name", 5),
        ("name", ["a"]),
        ("description", {"a": 1}),
        ("a2aEndpoint", 80),
        ("domain", True),
        ("version", 1.0),
        ("metadata", ["not", "an", "object"]),
        ("metadata", "text"),
    ],
)
def test_it_rejects_wrong_types(register: Any, skill: Any, field: str, value: Any) -> None:
    error = assert_error(register(body(**{field: value})), 400, "validation_error")
    assert field in error["message"]
    assert_nothing_written()


@pytest.mark.parametrize("raw", ['{"agentId": "x",', "not json", "", "[1, 2]", '"text"', "null"])
def test_it_rejects_a_body_that_is_not_a_json_object(register: Any, skill: Any, raw: str) -> None:
    response = register(raw)
    assert response.status_code == 400
    assert_error(response, 400)
    assert_nothing_written()


def test_it_reports_malformed_json_with_its_own_code(register: Any, skill: Any) -> None:
    assert_error(register('{"agentId": '), 400, "malformed_json")


def test_it_refuses_a_non_json_content_type(client: Any, skill: Any) -> None:
    response = client.post("/api/agent-profiles/register", {"agentId": "x"})
    assert_error(response, 415, "unsupported_media_type")
    assert_nothing_written()


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/a2a",
        "javascript:alert(1)",
        "not a url",
        "http://",
        "https://user:pw@127.0.0.1/a2a",
        "http://127.0.0.1:99999/",
    ],
)
def test_it_rejects_an_invalid_endpoint(register: Any, skill: Any, url: str) -> None:
    error = assert_error(register(body(a2aEndpoint=url)), 400, "invalid_url")
    assert error["message"]
    assert_nothing_written()


def test_it_rejects_a_private_endpoint_unless_allowed(
    register: Any, skill: Any, settings: Any
) -> None:
    settings.ALLOW_PRIVATE_URLS = False
    error = assert_error(register(body(a2aEndpoint="http://10.1.2.3/a2a")), 400, "invalid_url")
    assert "private" in error["message"]
    settings.ALLOW_PRIVATE_URLS = True
    assert register(body(a2aEndpoint="http://10.1.2.3/a2a")).status_code == 201


def test_it_rejects_a_loopback_endpoint_unless_allowed(
    register: Any, skill: Any, settings: Any
) -> None:
    settings.ALLOW_LOOPBACK_URLS = False
    error = assert_error(register(body(a2aEndpoint="http://localhost:8000/")), 400, "invalid_url")
    assert "loopback" in error["message"]
    assert_nothing_written()


def test_it_refuses_an_oversize_body_with_413(register: Any, skill: Any, settings: Any) -> None:
    settings.MAX_BODY_BYTES = 2_000
    response = register(body(description="x" * 5_000))
    error = assert_error(response, 413, "payload_too_large")
    assert "2000" in error["message"]
    assert_nothing_written()


class TestRegistrationModes:
    def test_open_mode_activates_new_agents(self, register: Any, skill: Any, settings: Any) -> None:
        settings.REGISTRATION_MODE = "open"
        assert register(body()).json()["profile"]["status"] == "active"

    def test_token_mode_refuses_a_missing_token(
        self, register: Any, skill: Any, settings: Any
    ) -> None:
        settings.REGISTRATION_MODE, settings.REGISTRATION_TOKEN = "token", "s3cret"
        error = assert_error(register(body()), 403, "registration_token_required")
        assert "X-Registration-Token" in error["message"]
        assert_nothing_written()

    def test_token_mode_refuses_a_wrong_token(
        self, register: Any, skill: Any, settings: Any
    ) -> None:
        settings.REGISTRATION_MODE, settings.REGISTRATION_TOKEN = "token", "s3cret"
        response = register(body(), **{"X-Registration-Token": "guess"})
        assert_error(response, 403, "registration_token_required")
        assert_nothing_written()

    def test_token_mode_accepts_the_right_token(
        self, register: Any, skill: Any, settings: Any
    ) -> None:
        settings.REGISTRATION_MODE, settings.REGISTRATION_TOKEN = "token", "s3cret"
        response = register(body(), **{"X-Registration-Token": "s3cret"})
        assert response.status_code == 201
        assert response.json()["profile"]["status"] == "active"

    def test_token_mode_lets_an_agent_update_itself_with_its_key(
        self, register: Any, skill: Any, settings: Any
    ) -> None:
        settings.REGISTRATION_MODE, settings.REGISTRATION_TOKEN = "token", "s3cret"
        key = register(body(), **{"X-Registration-Token": "s3cret"}).json()["apiKey"]
        assert register(body(name="New"), key=key).status_code == 200

    def test_approval_mode_starts_new_agents_pending(
        self, register: Any, skill: Any, settings: Any
    ) -> None:
        settings.REGISTRATION_MODE = "approval"
        response = register(body())
        assert response.status_code == 201
        assert response.json()["profile"]["status"] == "pending"
        assert response.json()["apiKey"]
        assert AgentProfile.objects.get().status == AgentStatus.PENDING

    def test_approval_mode_keeps_a_pending_agent_pending_on_update(
        self, register: Any, skill: Any, settings: Any
    ) -> None:
        settings.REGISTRATION_MODE = "approval"
        key = register(body()).json()["apiKey"]
        assert register(body(name="x"), key=key).json()["profile"]["status"] == "pending"


def test_it_throttles_registration(register: Any, skill: Any, settings: Any) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK}
    settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] = {"registration": "2/min"}
    assert register(body(agentId="a1")).status_code == 201
    assert register(body(agentId="a2")).status_code == 201
    error = assert_error(register(body(agentId="a3")), 429, "throttled")
    assert error["message"]
    assert not AgentProfile.objects.filter(pk="a3").exists()


def test_a_registration_that_loses_the_race_for_its_id_is_a_409(
    register: Any, skill: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_profiles import services

    real_validate = services._validate

    def a_rival_inserts_first(agent: AgentProfile) -> None:  # as a concurrent request would
        real_validate(agent)
        AgentProfile.objects.bulk_create([AgentProfile(id=agent.id, name="Rival")])

    monkeypatch.setattr(services, "_validate", a_rival_inserts_first)
    assert_error(register(body()), 409, "agent_exists")


def test_another_integrity_error_is_not_taken_for_a_taken_id(
    client: Any, register: Any, skill: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A constraint the checks let through was answered 409 agent_exists, for an agent
    that did not exist (SQLite's JSON check on a number beyond a float's range did so)."""
    from django.db import IntegrityError

    def refused(self: AgentProfile, *args: Any, **kwargs: Any) -> None:
        raise IntegrityError("CHECK constraint failed")

    monkeypatch.setattr(AgentProfile, "save", refused)
    client.raise_request_exception = False
    assert_error(register(body()), 500, "internal_error")
    assert_nothing_written()
