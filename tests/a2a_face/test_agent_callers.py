"""An agent calling the face with its key, on a route that names no agent, is never given
its own task: a router forwarding its skill through the platform took its own tasks back,
one after the other, without end, once the rest of the pool was down. With no other agent
of the skill the send is refused (``no_agent``); the agent's own route names it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from a2a import lookups, reassign, worker
from a2a.agent_standing import unable
from a2a.models import Task
from agent_profiles import access
from agent_profiles.models import AgentProfile, HealthStatus
from tests.a2a_face.conftest import FaceClient, error_reason

pytestmark = pytest.mark.django_db


def send(token: str, skill_id: str, path: str = "/v1/a2a", **message: Any) -> Any:
    body = {
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"data": {"product": "lamp"}}],
            "metadata": {"skillId": skill_id},
            **message,
        },
        "configuration": {"returnImmediately": True},
    }
    return FaceClient(token, check=False).post(f"{path}/message:send", body)


def created(response: Any) -> Task:
    assert response.status_code == 200, response.content
    return Task.objects.get(pk=response.json()["task"]["id"])


def test_a_router_is_not_given_back_what_it_forwards(
    skill: Any, make_agent: Any, make_user: Any
) -> None:
    """The other agent of the skill is unreachable: the matcher would rather pick the
    router, which forwarded the task it got again, and again."""
    router = make_agent(id="router", skills=[skill], health_status=HealthStatus.HEALTHY)
    make_agent(id="specialist", skills=[skill], health_status=HealthStatus.UNHEALTHY)
    lookups.clear()
    assert created(send(make_user("alice").raw_token, skill.id)).agent_id == "router"
    hops = [created(send(router.raw_key, skill.id)) for _ in range(3)]
    assert {t.agent_id for t in hops} == {"specialist"}


def test_the_only_agent_of_a_skill_is_refused_its_own_task(skill: Any, make_agent: Any) -> None:
    solo = make_agent(id="solo", skills=[skill])
    response = send(solo.raw_key, skill.id)
    assert response.status_code == 400
    assert error_reason(response) == "INVALID_PARAMS"
    assert "/v1/a2a/solo" in response.json()["error"]["message"]
    assert not Task.objects.exists()
    # Named on its own route, it takes it.
    assert created(send(solo.raw_key, skill.id, path="/v1/a2a/solo")).agent_id == "solo"


def test_a_conversation_an_agent_continues_is_not_steered_back_to_it(
    skill: Any, make_agent: Any
) -> None:
    """Its own route gave it the conversation's last task; the default route does not."""
    caller = make_agent(id="caller", skills=[skill])
    make_agent(id="other", skills=[skill])
    assert created(send(caller.raw_key, skill.id, "/v1/a2a/caller", contextId="c1")).agent_id == (
        "caller"
    )
    assert created(send(caller.raw_key, skill.id, contextId="c1")).agent_id == "other"


def test_the_platforms_own_move_does_not_give_it_back(skill: Any, make_agent: Any) -> None:
    """The task's agent was disabled before its send: the worker moves it to another agent
    of the skill by itself, never to the agent that sent it."""
    router = make_agent(id="router", skills=[skill])
    make_agent(id="specialist", skills=[skill])
    task = created(send(router.raw_key, skill.id))
    assert (task.agent_id, task.created_by_agent_id) == ("specialist", "router")
    access.disable(AgentProfile.objects.filter(pk="specialist"))
    claimed = worker.claim(task.pk)
    assert claimed is not None
    reassign.move_off_unable(claimed, unable(claimed, read_again=True))
    task = Task.objects.get(pk=task.pk)
    assert task.agent_id == "specialist"  # nobody else to take it: it stays, to reassign
    assert "reassignments" not in task.metadata
