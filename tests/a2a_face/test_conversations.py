"""A conversation on the face: a message with a ``contextId`` and no ``taskId`` starts a
new task in that context, and on the default routes it goes to the agent that holds the
conversation (the matcher, picking by load, sent every other message of one context to
another agent of the skill, each seeing half of it). The ``contextId`` filter of
ListTasks lists the tasks shown with that ``contextId``."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from a2a.models import Task
from agent_profiles.models import AgentStatus
from tests.a2a_face.conftest import FaceClient

pytestmark = pytest.mark.django_db


def send(client: FaceClient, path: str = "/v1/a2a", **message: Any) -> dict[str, Any]:
    body = {
        "message": {
            "messageId": f"m-{uuid.uuid4().hex[:8]}",
            "role": "ROLE_USER",
            "parts": [{"data": {"product": "lamp"}}],
            **message,
        },
        "configuration": {"returnImmediately": True},
    }
    response = client.post(f"{path}/message:send", body)
    assert response.status_code == 200, response.content
    return response.json()["task"]  # type: ignore[no-any-return]


def row(task: dict[str, Any]) -> Task:
    return Task.objects.get(pk=task["id"])


def test_a_conversation_stays_with_its_agent(
    as_alice: FaceClient, agent: Any, make_agent: Any, skill: Any
) -> None:
    make_agent(skills=[skill], id="agent-two")
    first = send(as_alice)
    later = [send(as_alice, contextId=first["contextId"]) for _ in range(5)]
    assert {row(t).agent_id for t in [first, *later]} == {row(first).agent_id}
    assert {row(t).context_id for t in later} == {row(first).context_id}
    assert row(later[-1]).metadata["match"]["chosenBy"] == "context"
    # A new conversation is the matcher's again: by load, the other agent.
    assert row(send(as_alice)).agent_id != row(first).agent_id


def test_a_conversation_whose_agent_was_disabled_goes_to_another(
    as_alice: FaceClient, agent: Any, make_agent: Any, skill: Any
) -> None:
    make_agent(skills=[skill], id="agent-two")
    first = send(as_alice)
    holder = row(first).agent
    holder.status = AgentStatus.DISABLED
    holder.save()
    later = send(as_alice, contextId=first["contextId"])
    assert row(later).agent_id not in ("", holder.id)
    assert row(later).metadata["match"].get("chosenBy") != "context"


def test_a_named_agent_wins_over_the_conversations(
    as_alice: FaceClient, agent: Any, make_agent: Any, skill: Any
) -> None:
    other = make_agent(skills=[skill], id="agent-two")
    first = send(as_alice, path=f"/v1/a2a/{agent.id}")
    later = send(as_alice, path=f"/v1/a2a/{other.id}", contextId=first["contextId"])
    assert row(later).agent_id == other.id
    assert row(later).context_id == row(first).context_id


def test_another_callers_conversation_of_the_same_id_does_not_steer(
    as_alice: FaceClient, as_bob: FaceClient, agent: Any, make_agent: Any, skill: Any
) -> None:
    """Bob's "shared" is not Alice's: her tasks never choose his agent."""
    other = make_agent(skills=[skill], id="agent-two")
    send(as_alice, path=f"/v1/a2a/{other.id}", contextId="shared")
    bobs = send(as_bob, contextId="shared")
    assert row(bobs).metadata["match"].get("chosenBy") != "context"


def test_the_context_filter_lists_only_tasks_shown_with_that_context(
    as_alice: FaceClient, agent: Any
) -> None:
    shown_x = send(as_alice, contextId="X")
    stored = row(shown_x).context_id  # "<tag>:X": what the REST API shows
    listed = as_alice.get("/v1/a2a/tasks", {"contextId": stored}).json()["tasks"]
    assert listed == []
    listed = as_alice.get("/v1/a2a/tasks", {"contextId": "X"}).json()["tasks"]
    assert [t["id"] for t in listed] == [shown_x["id"]]
