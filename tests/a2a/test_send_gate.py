"""Back-pressure on sends (a2a/send_gate.py): an agent gets at most
A2A_AGENT_SENDS_IN_FLIGHT sends at once from a process; the others wait in the rows."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.utils import timezone

from a2a import agent_calls, creation, send_gate
from a2a.models import Task
from a2a.states import NextAction, TaskState
from tests.support.agents import TestAgent


@pytest.fixture
def one_slot(settings: Any) -> Iterator[None]:
    settings.A2A_AGENT_SENDS_IN_FLIGHT = 1
    settings.ALLOW_LOOPBACK_URLS = True
    yield
    send_gate._gates.clear()


def test_a_slot_is_taken_and_freed() -> None:
    with send_gate.slot("agent-x", wait=0) as first:
        assert first is True
    with send_gate.slot("agent-x", wait=0) as again:
        assert again is True


def test_a_full_agent_turns_the_next_send_away(one_slot: None) -> None:
    with send_gate.slot("agent-x", wait=0) as first:
        assert first is True
        with send_gate.slot("agent-x", wait=0) as second:
            assert second is False
        with send_gate.slot("agent-y", wait=0) as other_agent:
            assert other_agent is True  # each agent has its own slots


def test_a_send_without_a_slot_defers_its_task_and_counts_no_attempt(
    one_slot: None,
    db: None,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    peer: TestAgent,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
) -> None:
    monkeypatch.setattr(send_gate, "SLOT_WAIT", 0.05)
    monkeypatch.setattr(send_gate, "DEFER_SECONDS", 0.0)
    make_agent(skills=[make_skill()], a2a_endpoint=peer.url)
    task = creation.create_task(skill_id="ce-review", input={"product": "lamp"}, user=make_user())
    task = Task.claim(task.pk)
    assert task is not None
    taken = threading.Event()
    release = threading.Event()

    def hold() -> None:  # another thread of this process is sending to the agent
        with send_gate.slot(task.agent_id, wait=0):
            taken.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert taken.wait(5)
        agent_calls.send(task)
    finally:
        release.set()
        holder.join()
    task.refresh_from_db()
    assert peer.messages == []  # nothing reached the agent
    assert (task.state, task.next_action, task.attempts) == (
        TaskState.SUBMITTED,
        NextAction.SEND,
        0,
    )
    assert task.lease_until <= timezone.now()  # given back, due again
    # Due again for the sweep, which does not take it for a new task its hint will start:
    # that hint was used up by the claim just let go. With the slot free, it goes out.
    assert Task.claim_due(10, leave_new_for=settings.A2A_HINT_GRACE) == [task.pk]
    agent_calls.send(Task.objects.get(pk=task.pk))
    task.refresh_from_db()
    assert len(peer.messages) == 1
    assert task.attempts == 1
