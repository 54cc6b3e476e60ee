"""Per-agent state kept by a process lasts only while it matters: a send gate while a send
holds or waits for one of its slots (a2a/send_gate.py), a follow memo for FOLLOW_MEMO
(a2a/listing_models.py). Both were kept for every agent id ever seen (20,000 ids: 20,000
entries)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from a2a import listing_models, send_gate
from a2a.listing_models import FOLLOW_MEMO, AgentListing


@pytest.fixture
def two_slots(settings: Any) -> None:
    settings.A2A_AGENT_SENDS_IN_FLIGHT = 2
    send_gate._gates.clear()


def test_a_gate_goes_when_its_agent_has_no_send_in_flight(two_slots: None) -> None:
    for i in range(500):
        with send_gate.slot(f"agent-{i}", wait=0) as got:
            assert got is True
            assert (f"agent-{i}", 2) in send_gate._gates
    assert send_gate._gates == {}


def test_a_gate_stays_exact_while_slots_are_held_or_waited_for(two_slots: None) -> None:
    """The limit holds across the gate's comings and goings: a send that waits keeps it
    (its slot comes from the one that frees), and a gate made anew has every slot free."""
    with send_gate.slot("agent-x", wait=0) as first, send_gate.slot("agent-x", wait=0) as second:
        assert (first, second) == (True, True)
        with send_gate.slot("agent-x", wait=0) as third:
            assert third is False  # both slots taken: the limit is exact
        assert send_gate._gates[("agent-x", 2)].users == 2  # the refused one left
        waiting = threading.Event()
        got: list[bool] = []

        def wait_for_a_slot() -> None:
            with send_gate.slot("agent-x", wait=10) as slot:
                got.append(slot)

        waiter = threading.Thread(target=wait_for_a_slot)
        gate = send_gate._gates[("agent-x", 2)]
        waiter.start()
        while gate.users < 3:  # the waiter is in
            waiting.wait(0.01)
    # Both slots freed at the end of the block: the waiter took one, then left.
    waiter.join(10)
    assert got == [True]
    assert send_gate._gates == {}
    with (
        send_gate.slot("agent-x", wait=0) as a,
        send_gate.slot("agent-x", wait=0) as b,
        send_gate.slot("agent-x", wait=0) as c,
    ):
        assert (a, b, c) == (True, True, False)  # a new gate: every slot free, no more


def test_a_failing_send_leaves_no_gate(two_slots: None) -> None:
    with pytest.raises(RuntimeError), send_gate.slot("agent-x", wait=0):
        raise RuntimeError("the send broke")
    assert send_gate._gates == {}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_follow_memos_older_than_the_memo_time_are_dropped(
    make_skill: Any, make_agent: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(listing_models, "_clock", clock)
    skill = make_skill()
    for i in range(5):
        make_agent(id=f"agent-{i}", skills=[skill])
    for i in range(4):
        AgentListing.follow(f"agent-{i}")
    assert set(listing_models._followed) == {f"agent-{i}" for i in range(4)}
    AgentListing.follow("agent-0")  # memoized: not written again, nor noted again
    assert AgentListing.objects.count() == 4
    clock.now += FOLLOW_MEMO
    AgentListing.follow("agent-4")  # the four memos no longer matter
    assert set(listing_models._followed) == {"agent-4"}
    # The memo still works: a follow within FOLLOW_MEMO is not written again.
    AgentListing.objects.filter(pk="agent-4").update(next_at=None)
    clock.now += FOLLOW_MEMO / 2
    AgentListing.follow("agent-4")
    assert AgentListing.objects.get(pk="agent-4").next_at is None
    clock.now += FOLLOW_MEMO / 2
    AgentListing.follow("agent-4")
    assert AgentListing.objects.get(pk="agent-4").next_at is not None
