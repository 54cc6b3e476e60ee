"""Only an active agent's key makes a caller of the face: a pending agent (in the approval
mode anyone may register one and get a key) and a disabled one get 401, on every binding
and for the extended card, and create nothing. A disabled agent's card is gone from the
tenant routes too, and it cannot have its card read again."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.test import Client

from a2a.face.context import principal_cache
from a2a.models import Task
from agent_profiles import access
from agent_profiles.models import AgentProfile, AgentStatus, ApiKey
from tests.a2a_face.conftest import FaceClient, error_reason

pytestmark = pytest.mark.django_db


def _message(skill_id: str) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": {"product": "lamp"}}],
        "metadata": {"skillId": skill_id},
    }


def _send(key: str, skill_id: str) -> Any:
    body = {"message": _message(skill_id), "configuration": {"returnImmediately": True}}
    return FaceClient(key, check=False).post("/v1/a2a/message:send", body)


def test_a_self_registered_pending_agent_is_no_caller_until_approved(
    settings: Any, skill: Any, agent: Any
) -> None:
    settings.REGISTRATION_MODE = "approval"
    settings.A2A_ALLOW_ANONYMOUS = False
    settings.A2A_EXTENDED_CARD_BEARER_TOKEN = "xcard"
    registered = Client().post(
        "/api/agent-profiles/register",
        {"agentId": "stranger", "skillIds": [skill.id]},
        content_type="application/json",
    )
    assert registered.status_code == 201, registered.content
    assert registered.json()["profile"]["status"] == "pending"
    key = registered.json()["apiKey"]

    refused = _send(key, skill.id)
    assert refused.status_code == 401
    assert error_reason(refused) == "UNAUTHENTICATED"
    assert "stranger" in refused.json()["error"]["message"]
    assert "pending" in refused.json()["error"]["message"]
    rpc = FaceClient(key, check=False).rpc("SendMessage", {"message": _message(skill.id)})
    assert rpc.json()["error"]["code"] == -32000
    card = FaceClient(key, check=False).get("/v1/a2a/extendedAgentCard")
    assert card.status_code == 401
    assert not Task.objects.filter(created_by_agent_id="stranger").exists()

    AgentProfile.objects.filter(pk="stranger").update(status=AgentStatus.ACTIVE)
    assert _send(key, skill.id).status_code == 200  # approved: a caller like any other


def test_a_disabled_agent_is_no_caller_and_keeps_no_access_to_its_tasks(
    skill: Any, make_agent: Any, make_task: Any
) -> None:
    caller = make_agent(skills=[skill], id="caller-agent")
    task = make_task(agent_caller=caller)
    face = FaceClient(caller.raw_key, check=False)
    assert face.get(f"/v1/a2a/tasks/{task.id}").status_code == 200
    AgentProfile.objects.filter(pk=caller.pk).update(status=AgentStatus.DISABLED)
    assert face.get(f"/v1/a2a/tasks/{task.id}").status_code == 401
    assert _send(caller.raw_key, skill.id).status_code == 401
    assert Task.objects.filter(created_by_agent=caller).count() == 1


@pytest.mark.parametrize("status", [AgentStatus.DISABLED, AgentStatus.PENDING])
def test_a_disabled_or_pending_agents_card_is_gone_from_the_tenant_routes(
    agent: Any, alice: Any, settings: Any, status: str
) -> None:
    """A pending agent (self-registered, not yet approved) has no card either: anyone may
    register in approval mode, and its name and description were published on the
    platform's origin, as its provider, before staff looked at it."""
    settings.A2A_EXTENDED_CARD_BEARER_TOKEN = "xcard"
    client = Client()
    public = f"/v1/a2a/{agent.pk}/.well-known/agent-card.json"
    extended = f"/v1/a2a/{agent.pk}/extendedAgentCard"
    headers = {"Authorization": "Bearer xcard", "A2A-Version": "1.0"}
    assert client.get(public).status_code == 200
    assert client.get(extended, headers=headers).status_code == 200
    AgentProfile.objects.filter(pk=agent.pk).update(status=status)
    assert client.get(f"/api/a2a/agent-card/{agent.pk}").status_code == 404
    for response in (client.get(public), client.get(extended, headers=headers)):
        assert response.status_code == 404
        assert json.loads(response.content)["error"]["details"][0]["reason"] == ("AGENT_NOT_FOUND")


def test_a_disabled_agent_cannot_have_its_card_read_again(agent: Any) -> None:
    AgentProfile.objects.filter(pk=agent.pk).update(status=AgentStatus.DISABLED)
    response = Client().post(
        f"/api/agent-profiles/{agent.pk}/refresh",
        headers={"Authorization": f"Bearer {agent.raw_key}"},
    )
    assert response.status_code == 403, response.content
    assert response.json()["error"]["code"] == "agent_disabled"


@pytest.mark.django_db(transaction=True)  # the announcement goes out on commit
@pytest.mark.parametrize("change", ["disable", "revoke_keys", "rotate_key"])
def test_the_admins_bulk_changes_take_a_callers_access_in_this_process_at_once(
    settings: Any, skill: Any, agent: Any, make_agent: Any, change: str
) -> None:
    """Disable, Revoke selected and Rotate API key are bulk updates (no post_save): they
    announce the change, and this process's token cache forgets its callers at once
    instead of serving the cached (active) agent for A2A_FACE_AUTH_CACHE_SECONDS."""
    settings.A2A_FACE_AUTH_CACHE_SECONDS = 5.0
    principal_cache.clear()
    caller = make_agent(skills=[skill], id="caller-agent")
    assert _send(caller.raw_key, skill.id).status_code == 200  # its key is cached now
    if change == "disable":
        access.disable(AgentProfile.objects.filter(pk="caller-agent"))
    elif change == "revoke_keys":
        access.revoke_keys(ApiKey.objects.filter(agent_id="caller-agent"))
    else:
        access.rotate_key(caller)
    try:
        assert _send(caller.raw_key, skill.id).status_code == 401
    finally:
        principal_cache.clear()
    assert Task.objects.filter(created_by_agent_id="caller-agent").count() == 1
