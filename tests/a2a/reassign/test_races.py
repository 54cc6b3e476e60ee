"""A person's reassign racing the platform: the worker's send answered, the agent asking,
the old agent reporting the cancel it was told. The task is reassigned from the state it
is in now (refused only once it finished), and the old agent is told only after the move
committed, so its report is another attempt's and changes nothing."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from a2a import agent_updates
from a2a import reassign as reassign_module
from a2a.exceptions import UnknownAgent
from a2a.models import Direction, Task, TaskMessage
from a2a.states import NextAction, TaskState, Transport
from platform_site.errors import NotFound
from tests.a2a.helpers import working
from tests.a2a.reassign.helpers import OldAgent, accepted, meanwhile, old_agent, reassign, stale

pytestmark = pytest.mark.django_db

QUESTION = {"messageId": "q-1", "role": "ROLE_AGENT", "parts": [{"text": "EU or UK?"}]}


def test_a_task_the_agent_started_meanwhile_is_reassigned(
    api: APIClient, task: Task, monkeypatch: Any
) -> None:
    """Read SUBMITTED; the worker's send was answered WORKING before the write."""
    agent = old_agent(monkeypatch, OldAgent(task))
    meanwhile(monkeypatch, working)
    response = reassign(api, task)
    assert response.status_code == 200, response.content
    task.refresh_from_db()
    assert (task.agent_id, task.state, task.next_action) == (
        "agent-two",
        TaskState.SUBMITTED,
        NextAction.SEND,
    )
    moved = task.metadata["reassignments"][-1]
    # What the task was when it was moved, not when it was first read.
    assert (moved["previousState"], moved["previousRemoteTaskId"]) == (TaskState.WORKING, "r-1")
    # Its agent task was started meanwhile: the old agent is told to drop that one.
    assert agent.told == [("r-1", "agent-two", TaskState.SUBMITTED)]
    assert moved["remoteCancel"] == {"state": "TASK_STATE_CANCELED"}
    assert response.json()["metadata"]["reassignments"][-1]["remoteCancel"]


def test_a_task_whose_agent_asked_meanwhile_is_reassigned(
    api: APIClient, task: Task, monkeypatch: Any
) -> None:
    """Read WORKING; the agent asked a question (a state a reassign is also allowed
    from) before the write."""
    old_agent(monkeypatch, OldAgent(task))
    working(task)
    meanwhile(
        monkeypatch,
        lambda row: agent_updates.apply_agent_update(
            row, status={"state": "input-required", "message": QUESTION}, via="a2a"
        ),
    )
    response = reassign(api, task)
    assert response.status_code == 200, response.content
    task.refresh_from_db()
    assert (task.agent_id, task.state, task.question) == ("agent-two", TaskState.SUBMITTED, None)
    assert task.metadata["reassignments"][-1]["previousState"] == TaskState.INPUT_REQUIRED


def test_a_task_that_finished_meanwhile_is_refused_and_its_agent_not_told(
    api: APIClient, task: Task, monkeypatch: Any
) -> None:
    agent = old_agent(monkeypatch, OldAgent(task))
    working(task)
    meanwhile(monkeypatch, lambda row: row.complete({"verdict": "pass"}, []))
    sent = TaskMessage.objects.filter(task=task, direction=Direction.TO_AGENT).count()
    response = reassign(api, task)
    assert (response.status_code, response.json()["error"]["code"]) == (409, "invalid_state")
    assert "only waiting, offline or failed tasks" in response.json()["error"]["message"]
    task.refresh_from_db()
    assert (task.agent_id, task.state) == ("agent-one", TaskState.COMPLETED)
    assert "reassignments" not in task.metadata
    # A refused reassign has no side effect: no cancel, no new first message.
    assert agent.told == []
    assert TaskMessage.objects.filter(task=task, direction=Direction.TO_AGENT).count() == sent


def test_the_old_agents_report_of_its_cancel_does_not_undo_the_reassign(
    api: APIClient, task: Task, monkeypatch: Any
) -> None:
    """The old agent is told to cancel and reports the cancel at once: the worker that
    was polling it applies the answer to the task as it read it (WORKING at agent-one).
    The move was made before the old agent heard of it, so that is stale news."""
    working(task)
    polled = Task.objects.get(pk=task.pk)  # the worker's copy, read before the reassign

    def reports(remote_id: str) -> None:
        agent_updates.apply_agent_reply(
            polled,
            task_json={"id": remote_id, "status": {"state": "TASK_STATE_CANCELED"}},
            message=None,
            via="a2a",
        )

    agent = old_agent(monkeypatch, OldAgent(task, then=reports))
    response = reassign(api, task)
    assert response.status_code == 200, response.content
    task.refresh_from_db()
    assert (task.agent_id, task.state, task.remote_task_id) == (
        "agent-two",
        TaskState.SUBMITTED,
        "",
    )
    assert agent.told == [("r-1", "agent-two", TaskState.SUBMITTED)]
    assert task.metadata["reassignments"][-1]["remoteCancel"] == {"state": "TASK_STATE_CANCELED"}


def test_a_later_reassign_keeps_its_own_entry(
    api: APIClient, task: Task, two: Any, make_agent: Any, skill: Any, monkeypatch: Any
) -> None:
    """While the old agent is told, another person reassigns the task again: what the
    first telling gave is not written on the second move's entry."""
    make_agent(skills=[skill], id="agent-three", a2a_endpoint="http://127.0.0.1:9/three")
    working(task)

    def moved_again(remote_id: str) -> None:
        monkeypatch.setattr(reassign_module.transports, "transport_for", lambda t: OldAgent(task))
        reassign_module.reassign_task(
            Task.objects.get(pk=task.pk), agent_id="agent-three", by="ops"
        )

    old_agent(monkeypatch, OldAgent(task, then=moved_again))
    assert reassign(api, task).status_code == 200
    task.refresh_from_db()
    first, second = task.metadata["reassignments"]
    assert (first["to"], second["to"], task.agent_id) == ("agent-two", "agent-three", "agent-three")
    # The first telling ended after the second move: its answer (agent-one's task
    # canceled) belongs to no entry still the task's, and agent-two had no agent task.
    assert "remoteCancel" not in first
    assert "remoteCancel" not in second


def test_an_unexpected_error_telling_the_old_agent_keeps_the_reassign(
    api: APIClient, task: Task, monkeypatch: Any
) -> None:
    working(task)

    def unreadable(agent: Any) -> Any:
        raise RuntimeError("credential unreadable")

    monkeypatch.setattr(reassign_module.agent_registry, "target_for", unreadable)
    response = reassign(api, task)
    assert response.status_code == 200, response.content
    task.refresh_from_db()
    assert (task.agent_id, task.state) == ("agent-two", TaskState.SUBMITTED)
    told = task.metadata["reassignments"][-1]["remoteCancel"]
    assert told["error"]["code"] == "internal_error"


# --- built from the row as it is now, not from the caller's copy ----------------------
# A change in the same state passes the verb's compare-and-set on the state: the move
# and whom it tells come from the row read again (locked) in the move's transaction.


def test_the_agent_task_recorded_after_the_read_is_the_one_canceled(
    api: APIClient, task: Task, monkeypatch: Any
) -> None:
    agent = old_agent(monkeypatch, OldAgent(task))
    meanwhile(monkeypatch, accepted)
    response = reassign(api, task)
    assert response.status_code == 200, response.content
    task.refresh_from_db()
    assert (task.agent_id, task.remote_task_id) == ("agent-two", "")
    # agent-one's task, which nothing follows any more, is told to stop.
    assert agent.told == [("r-1", "agent-two", TaskState.SUBMITTED)]
    moved = task.metadata["reassignments"][-1]
    assert moved["previousRemoteTaskId"] == "r-1"
    assert moved["remoteCancel"] == {"state": "TASK_STATE_CANCELED"}


def test_a_task_the_gateway_took_over_after_the_read_is_canceled_there(
    api: APIClient, task: Task, monkeypatch: Any
) -> None:
    """The old agent's assignment was acknowledged: it gets a ``task.cancel``."""
    from gateway import services as gateway_services
    from gateway.models import Delivery, DeliveryKind, DeliveryStatus

    def handed_over(row: Task) -> None:
        gateway_services.push_task(row, reason="agent_refused (HTTP 404)")
        Delivery.objects.filter(task=row).update(status=DeliveryStatus.ACKED)

    agent = old_agent(monkeypatch, OldAgent(task))
    meanwhile(monkeypatch, handed_over)
    response = reassign(api, task)
    assert response.status_code == 200, response.content
    task.refresh_from_db()
    assert (task.agent_id, task.transport) == ("agent-two", Transport.A2A)
    cancel = Delivery.objects.get(task=task, kind=DeliveryKind.CANCEL)
    assert cancel.agent_id == "agent-one"
    assert agent.told == []  # not over A2A: the gateway carried it
    assert task.metadata["reassignments"][-1]["previousState"] == TaskState.SUBMITTED


def test_two_reassigns_from_the_same_read_keep_both_moves(
    task: Task, make_agent: Any, skill: Any, monkeypatch: Any
) -> None:
    """Two people reassign the task they both read at agent-one; agent-two started it
    after the first move. The second move is from agent-two, which is told."""
    make_agent(skills=[skill], id="agent-three", a2a_endpoint="http://127.0.0.1:9/three")
    agent = old_agent(monkeypatch, OldAgent(task))
    working(task)
    first, second = stale(task), stale(task)
    reassign_module.reassign_task(first, agent_id="agent-two", by="ann")
    working(stale(task), remote_id="r-2")
    agent.told.clear()
    reassign_module.reassign_task(second, agent_id="agent-three", by="bob")
    task.refresh_from_db()
    steps = [(s["from"], s["to"], s["by"]) for s in task.metadata["reassignments"]]
    assert steps == [("agent-one", "agent-two", "ann"), ("agent-two", "agent-three", "bob")]
    assert task.metadata["reassignments"][-1]["previousRemoteTaskId"] == "r-2"
    assert agent.told == [("r-2", "agent-three", TaskState.SUBMITTED)]
    # The caller's copy is the task as the move left it.
    assert (second.agent_id, second.metadata) == ("agent-three", task.metadata)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_reassign_at_the_same_time_waits_for_the_other_to_commit(
    task: Task, make_agent: Any, skill: Any, monkeypatch: Any
) -> None:
    """Two people's reassigns from the same read, at the same time: the second reads the
    row only once the first committed (its lock), not the row the first is moving. Read
    unlocked, both moves passed the compare-and-set on SUBMITTED, the second's metadata
    written over the first's."""
    make_agent(skills=[skill], id="agent-three", a2a_endpoint="http://127.0.0.1:9/three")
    old_agent(monkeypatch, OldAgent(task))
    first, second = stale(task), stale(task)
    build = reassign_module._move
    other: list[threading.Thread] = []

    def second_person() -> None:
        try:
            reassign_module.reassign_task(second, agent_id="agent-three", by="bob")
        finally:
            connection.close()

    def moving(row: Task, *args: Any) -> Any:
        if not other:  # the first move, its row read and locked: the second starts now
            other.append(threading.Thread(target=second_person))
            other[0].start()
            other[0].join(0.5)
            assert other[0].is_alive()  # waits on the first move's lock
        return build(row, *args)

    monkeypatch.setattr(reassign_module, "_move", moving)
    reassign_module.reassign_task(first, agent_id="agent-two", by="ann")
    other[0].join(10)
    task.refresh_from_db()
    steps = [(s["from"], s["to"]) for s in task.metadata["reassignments"]]
    assert steps == [("agent-one", "agent-two"), ("agent-two", "agent-three")]


def test_a_reassign_from_a_stale_read_to_the_agent_that_has_it_is_refused(
    task: Task, monkeypatch: Any
) -> None:
    """Read at agent-one; meanwhile reassigned to agent-two, whose send was answered:
    naming agent-two is refused as up front, and its running task is still followed."""
    agent = old_agent(monkeypatch, OldAgent(task))
    seen = stale(task)
    reassign_module.reassign_task(stale(task), agent_id="agent-two", by="ann")
    accepted(stale(task), remote_id="r-2")
    with pytest.raises(UnknownAgent, match="already assigned to agent 'agent-two'"):
        reassign_module.reassign_task(seen, agent_id="agent-two", by="bob")
    task.refresh_from_db()
    assert (task.agent_id, task.remote_task_id) == ("agent-two", "r-2")
    assert len(task.metadata["reassignments"]) == 1
    assert agent.told == []


def test_a_task_deleted_after_the_read_is_not_found(task: Task) -> None:
    seen = stale(task)
    Task.objects.filter(pk=task.pk).delete()
    with pytest.raises(NotFound):
        reassign_module.reassign_task(seen, agent_id="agent-two", by="ann")
