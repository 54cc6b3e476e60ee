"""A message's ``referenceTaskIds`` reach the agent as the agent's own task ids.

A face caller names the platform's tasks; the agent knows its own ids (the platform's
only for tasks the gateway carries). So each id of a task the caller may see, on the agent
the message goes to, is sent as the id that agent knows it by; every other id is left out
(the agent could not resolve it, and another caller's task must never be named to an
agent). The caller keeps seeing its own ids in the task's history.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from a2a import reassign
from a2a.face.ids import REFERENCES
from a2a.models import Task, TaskMessage
from a2a.states import Transport
from tests.a2a_face.conftest import FaceClient

pytestmark = pytest.mark.django_db


def message(*references: Any, **overrides: Any) -> dict[str, Any]:
    msg = {
        "messageId": f"m-{uuid.uuid4().hex[:8]}",
        "role": "ROLE_USER",
        "parts": [{"data": {"product": "lamp"}}],
        "referenceTaskIds": [str(r) for r in references],
    }
    msg.update(overrides)
    return msg


def send(client: FaceClient, msg: dict[str, Any], path: str = "/v1/a2a") -> dict[str, Any]:
    body = {"message": msg, "configuration": {"returnImmediately": True}}
    response = client.post(f"{path}/message:send", body)
    assert response.status_code == 200, response.content
    return response.json()["task"]


def test_the_callers_own_task_goes_as_the_agents_id(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    """The platform id was sent as it was: an id the agent never issued."""
    earlier = make_task(alice, remote_task_id="agent-task-7")
    shown = send(as_alice, message(earlier.id))
    task = Task.objects.get(pk=shown["id"])
    assert task.outbound_message["referenceTaskIds"] == ["agent-task-7"]
    assert task.metadata[REFERENCES] == {"agent-task-7": str(earlier.id)}
    # The caller sees its own ids, now and when it reads the task again.
    assert shown["history"][0]["referenceTaskIds"] == [str(earlier.id)]
    again = as_alice.get(f"/v1/a2a/tasks/{task.id}", {"historyLength": 5}).json()
    assert again["history"][0]["referenceTaskIds"] == [str(earlier.id)]
    assert "agent-task-7" not in str(again)


def test_another_callers_task_is_never_named_to_the_agent(
    as_alice: FaceClient, bob: Any, make_task: Callable[..., Task]
) -> None:
    """Neither by its agent's id (bob's mapping) nor by ours (which a socket-only agent
    would resolve to bob's task)."""
    bobs = make_task(bob, remote_task_id="bobs-agent-task")
    bobs_socket = make_task(bob, transport=Transport.WEBSOCKET)
    shown = send(as_alice, message(bobs.id, bobs_socket.id))
    task = Task.objects.get(pk=shown["id"])
    assert "referenceTaskIds" not in task.outbound_message
    assert "bobs-agent-task" not in str(task.outbound_message)
    assert REFERENCES not in task.metadata
    assert "referenceTaskIds" not in shown["history"][0]


def test_ids_the_agent_could_not_know_are_left_out(
    as_alice: FaceClient,
    alice: Any,
    skill: Any,
    make_agent: Callable[..., Any],
    make_task: Callable[..., Task],
) -> None:
    """A task on another agent, one not sent yet, a bare-Message answer (no agent task),
    and ids that name no task: none of them means anything to this agent. A task the
    gateway carries goes by our id, the id its frames give the agent."""
    other_agent = make_agent(skills=[], id="agent-two")
    elsewhere = make_task(alice, agent=other_agent, remote_task_id="two-7")
    unsent = make_task(alice)
    socket = make_task(alice, transport=Transport.OFFLINE)
    mine = make_task(alice, remote_task_id="one-7")
    refs = (elsewhere.id, unsent.id, "not-a-task", uuid.uuid4(), socket.id, mine.id, mine.id)
    shown = send(as_alice, message(*refs, metadata={"skillId": skill.id}))
    task = Task.objects.get(pk=shown["id"])
    assert task.agent_id == mine.agent_id
    assert task.outbound_message["referenceTaskIds"] == [str(socket.id), "one-7"]
    assert shown["history"][0]["referenceTaskIds"] == [str(socket.id), str(mine.id)]


def test_a_tenant_route_maps_for_its_agent(
    as_alice: FaceClient, alice: Any, agent: Any, make_task: Callable[..., Task]
) -> None:
    earlier = make_task(alice, remote_task_id="agent-task-8")
    shown = send(as_alice, message(earlier.id), path=f"/v1/a2a/{agent.id}")
    task = Task.objects.get(pk=shown["id"])
    assert task.outbound_message["referenceTaskIds"] == ["agent-task-8"]


def test_an_answer_to_the_agents_question_maps_its_references(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    """The follow-up path (a message with the task's ``taskId``) maps them as well, and
    keeps what the task recorded before."""
    earlier = make_task(alice, remote_task_id="agent-task-1")
    task = make_task(alice, remote_task_id="remote-2", metadata={REFERENCES: {"x": "y"}})
    task.require_input({"messageId": "q", "parts": [{"text": "Which one?"}]})
    answer = message(earlier.id, taskId=str(task.id), contextId=task.context_id)
    shown = send(as_alice, answer)
    relayed = TaskMessage.objects.get(task=task, message_id__endswith=answer["messageId"])
    assert relayed.message["referenceTaskIds"] == ["agent-task-1"]
    assert relayed.message["taskId"] == "remote-2"
    task.refresh_from_db()
    assert task.metadata[REFERENCES] == {"x": "y", "agent-task-1": str(earlier.id)}
    assert shown["history"][-1]["referenceTaskIds"] == [str(earlier.id)]


def test_a_0_3_client_references_are_mapped_too(
    as_alice: FaceClient, alice: Any, make_task: Callable[..., Task]
) -> None:
    earlier = make_task(alice, remote_task_id="agent-task-3")
    params = {
        "message": {
            "kind": "message",
            "messageId": "m-03",
            "role": "user",
            "parts": [{"kind": "data", "data": {"product": "lamp"}}],
            "referenceTaskIds": [str(earlier.id)],
        },
        "configuration": {"blocking": False},
    }
    result = as_alice.rpc("message/send", params, **{"A2A-Version": ""}).json()["result"]
    task = Task.objects.get(pk=result["id"])
    assert task.outbound_message["referenceTaskIds"] == ["agent-task-3"]
    assert result["history"][0]["referenceTaskIds"] == [str(earlier.id)]


def test_a_reassigned_task_names_its_references_as_the_new_agent_knows_them(
    as_alice: FaceClient,
    alice: Any,
    bob: Any,
    skill: Any,
    make_agent: Callable[..., Any],
    make_task: Callable[..., Task],
) -> None:
    """Its first message went to the old agent with that agent's ids; sent again to the
    new one, it carries the new agent's ids of the caller's tasks there (never another
    caller's), and the caller still sees its own ids, in the old message and the new."""
    two = make_agent(skills=[], id="agent-two")  # it takes the skill later
    on_one = make_task(alice, remote_task_id="one-7")
    on_two = make_task(alice, agent=two, remote_task_id="two-7")
    bobs_on_two = make_task(bob, agent=two, remote_task_id="bobs-two")
    msg = message(on_one.id, on_two.id, bobs_on_two.id, metadata={"skillId": skill.id})
    shown = send(as_alice, msg)
    task = Task.objects.get(pk=shown["id"])
    assert task.outbound_message["referenceTaskIds"] == ["one-7"]
    two.skills.add(skill)
    reassign.reassign_task(task, agent_id="agent-two", by="ops")
    task.refresh_from_db()
    assert task.agent_id == "agent-two"
    assert task.outbound_message["referenceTaskIds"] == ["two-7"]
    assert "bobs-two" not in str(task.outbound_message)
    assert task.metadata[REFERENCES] == {"one-7": str(on_one.id), "two-7": str(on_two.id)}
    history = as_alice.get(f"/v1/a2a/tasks/{task.id}", {"historyLength": 5}).json()["history"]
    sent = [m["referenceTaskIds"] for m in history if m.get("referenceTaskIds")]
    assert sent == [[str(on_one.id)], [str(on_two.id)]]
