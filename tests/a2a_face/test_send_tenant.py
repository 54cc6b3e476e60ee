"""SendMessage on a tenant route (``/v1/a2a/{agentId}``): sent to that agent, the skill
chosen among its own, and what the registry cache may and may not decide."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from a2a.models import Task
from tests.a2a_face.conftest import FaceClient, error_reason
from tests.a2a_face.test_send import message, send

pytestmark = pytest.mark.django_db


def test_a_tenant_route_sends_to_its_agent(
    as_alice: FaceClient, make_agent: Callable[..., Any], skill: Any, agent: Any
) -> None:
    make_agent(id="agent-two", skills=[skill])
    response = send(as_alice, message(), path="/v1/a2a/agent-two")
    task = Task.objects.get(pk=response.json()["task"]["id"])
    assert task.agent_id == "agent-two"
    assert response.json()["task"]["metadata"]["agentId"] == "agent-two"


def test_a_tenant_route_to_an_unknown_agent_is_404(as_alice: FaceClient, agent: Any) -> None:
    response = send(as_alice, message(), path="/v1/a2a/nobody-here")
    assert response.status_code == 404
    assert error_reason(response) == "AGENT_NOT_FOUND"


def test_a_tenant_route_refuses_a_skill_its_agent_lacks(
    as_alice: FaceClient, make_skill: Callable[..., Any], agent: Any
) -> None:
    make_skill(id="other")
    response = send(as_alice, message(metadata={"skillId": "other"}), path="/v1/a2a/agent-one")
    assert error_reason(response) == "INVALID_PARAMS"


def test_a_tenant_route_picks_the_default_skill_or_the_only_one(
    as_alice: FaceClient,
    settings: Any,
    make_skill: Callable[..., Any],
    make_agent: Callable[..., Any],
) -> None:
    one, two = make_skill(id="one"), make_skill(id="two")
    make_agent(id="both", skills=[one, two])
    make_agent(id="only-two", skills=[two])
    response = send(as_alice, message(), path="/v1/a2a/both")
    assert error_reason(response) == "INVALID_PARAMS"
    assert response.json()["error"]["details"][0]["metadata"]["skills"] == '["one", "two"]'
    response = send(as_alice, message(), path="/v1/a2a/only-two")
    assert Task.objects.get(pk=response.json()["task"]["id"]).skill_id == "two"
    settings.A2A_DEFAULT_SKILL = "one"
    response = send(as_alice, message(), path="/v1/a2a/both")
    assert Task.objects.get(pk=response.json()["task"]["id"]).skill_id == "one"


def test_a_tenant_route_reads_no_registry_rows_while_cached(
    as_alice: FaceClient, agent: Any
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    send(as_alice, message(), path="/v1/a2a/agent-one")  # fills the caches
    with CaptureQueriesContext(connection) as queries:
        response = send(as_alice, message(), path="/v1/a2a/agent-one")
    assert response.status_code == 200
    registry = ("agent_profiles_skill", "agent_profiles_agentprofile")
    assert [
        q["sql"] for q in queries.captured_queries if any(t in q["sql"] for t in registry)
    ] == []


def test_a_tenant_route_never_refuses_from_its_cache(
    as_alice: FaceClient, make_skill: Callable[..., Any], make_agent: Callable[..., Any]
) -> None:
    """An agent or an offer registered without a signal here (another process, a bulk
    insert) is looked up again before the caller is told no."""
    one = make_skill(id="one")
    assert error_reason(send(as_alice, message(), path="/v1/a2a/late")) == "AGENT_NOT_FOUND"
    late = make_agent(id="late", skills=[])
    response = send(as_alice, message(metadata={"skillId": "one"}), path="/v1/a2a/late")
    assert error_reason(response) == "INVALID_PARAMS"  # cached: "late" offers nothing
    late.skills.through.objects.bulk_create(  # no m2m_changed signal
        [late.skills.through(agentprofile_id="late", skill_id=one.pk)]
    )
    response = send(as_alice, message(metadata={"skillId": "one"}), path="/v1/a2a/late")
    assert Task.objects.get(pk=response.json()["task"]["id"]).agent_id == "late"


def test_a_tenant_route_sees_a_disabled_agent_at_once(as_alice: FaceClient, agent: Any) -> None:
    send(as_alice, message(), path="/v1/a2a/agent-one")
    agent.status = "disabled"
    agent.save()
    response = send(as_alice, message(), path="/v1/a2a/agent-one")
    assert error_reason(response) == "AGENT_NOT_FOUND"
