"""Long calls' claims, renewed in short steps while the call runs (:mod:`a2a.lease_keeper`):
never for the whole call up front, so a worker killed during one lets its task go within
``A2A_LONG_CALL_LEASE``; a claim that moved on is never taken back."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError
from django.utils import timezone

from a2a import agent_streams, creation, lease_keeper, services, worker
from a2a.models import Task
from a2a.states import NextAction, TaskState
from tests.a2a.helpers import working
from tests.support.agents import TestAgent


@pytest.fixture
def short(settings: Any) -> Any:
    """A long call's claim of about 3 s (one call's time: a lease is never shorter)."""
    settings.A2A_LEASE_SECONDS = 1
    settings.A2A_HTTP_TIMEOUT = 0.5
    settings.A2A_CONNECT_TIMEOUT = 0.2
    settings.A2A_LONG_CALL_LEASE = 3
    settings.A2A_LONG_CALL_MAX = 120
    return settings


def claimed(task: Task) -> Task:
    working(task)
    task.schedule(NextAction.FOLLOW)
    held = worker.claim(task.pk)
    assert held is not None
    return held


def lease_left(task: Task) -> float:
    lease = Task.objects.get(pk=task.pk).lease_until
    return (lease - timezone.now()).total_seconds() if lease else 0.0


# Transactional: the keeper's thread writes on its own connection, which a test's open
# transaction would hold up (SQLite's write lock).
@pytest.mark.django_db(transaction=True)
def test_a_kept_claim_is_renewed_and_let_go(task: Task, short: Any) -> None:
    held = claimed(task)
    with lease_keeper.kept(held):
        assert 2.5 < lease_left(held) <= 3.0  # not the call's 120 s
        before = held.lease_until
        time.sleep(0.05)
        lease_keeper.renew_due(every=True)
        assert held.lease_until > before
        assert Task.objects.get(pk=held.pk).lease_until == held.lease_until
        assert lease_keeper.kept_ids() == [held.pk]
    assert lease_keeper.kept_ids() == []
    after = held.lease_until
    lease_keeper.renew_due(every=True)
    assert Task.objects.get(pk=held.pk).lease_until == after  # no longer renewed


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("moved", ["scheduled", "ended", "claimed by another worker"])
def test_a_claim_that_moved_on_is_not_taken_back(task: Task, short: Any, moved: str) -> None:
    held = claimed(task)
    lease_keeper.keep(held)
    try:
        other = timezone.now() + timedelta(seconds=99)
        if moved == "scheduled":
            held.schedule(NextAction.POLL, 5)  # what a call writes when it ends
        elif moved == "ended":
            held.complete({"verdict": "pass"}, [])
        else:  # this process stalled past its lease, and another worker claimed the task
            Task.objects.filter(pk=held.pk).update(lease_until=other)
        row = Task.objects.get(pk=held.pk)
        lease_keeper.renew_due(every=True)
        assert Task.objects.get(pk=held.pk).lease_until == row.lease_until
        assert lease_keeper.kept_ids() == []  # not renewed again
    finally:
        lease_keeper.let_go(held)


@pytest.mark.django_db(transaction=True)
def database_away(monkeypatch: pytest.MonkeyPatch) -> None:
    """A renewal step while the database is away: it fails (and the next one works)."""

    def away(self: Task, held: Any, seconds: float) -> bool:
        raise OperationalError("the database is away")

    with monkeypatch.context() as patched:
        patched.setattr(Task, "renew_lease", away)
        lease_keeper.renew_due(every=True)


def test_a_lapsed_claim_taken_by_this_process_goes_back_to_its_running_call(
    task: Task, short: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database was away longer than the claim: renewals failed and it lapsed, and a
    sweep of this process claimed the task. Acting on it would send the held message
    again (the agent runs it twice): the claim goes to the call that still runs, and its
    next renewal goes from it."""
    held = claimed(task)  # the long call's own object
    lease_keeper.keep(held)
    try:
        database_away(monkeypatch)
        lapsed = timezone.now() - timedelta(seconds=1)
        Task.objects.filter(pk=held.pk).update(lease_until=lapsed)
        held.lease_until = lapsed  # as its last renewal left it
        before = Task.objects.get(pk=held.pk)
        worker.process_task(held.pk)  # the sweep's claim, and its run
        row = Task.objects.get(pk=held.pk)
        assert (row.attempts, row.next_action, row.error) == (
            before.attempts,
            before.next_action,
            None,
        )
        assert row.lease_until > timezone.now()  # the sweep's claim, now the call's
        assert held.lease_until == row.lease_until
        assert lease_keeper.kept_ids() == [held.pk]
        lease_keeper.renew_due(every=True)
        assert Task.objects.get(pk=held.pk).lease_until > row.lease_until  # renewed
    finally:
        lease_keeper.let_go(held)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("away", [False, True])
def test_a_cancel_during_a_long_call_is_acted_on_at_once(
    task: Task, short: Any, monkeypatch: pytest.MonkeyPatch, away: bool
) -> None:
    """A person cancels while the call runs (and, or not, after its renewals failed): the
    hint's claim tells the agent at once; it is no lapsed claim for the call to take."""
    held = claimed(task)
    told: list[Any] = []
    monkeypatch.setitem(worker.ACTIONS, NextAction.CANCEL, lambda t: told.append(t.pk))
    with lease_keeper.kept(held):
        if away:
            database_away(monkeypatch)
        services.cancel_task(Task.objects.get(pk=held.pk), by="ops")
        worker.process_task(held.pk)  # the cancel's hint
    assert told == [held.pk]


@pytest.mark.django_db(transaction=True)
def test_the_keeper_thread_renews_while_a_stream_runs_and_stops_after(
    short: Any,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    peer: TestAgent,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real stream (an agent that cannot be polled) of 4 s, longer than the claim's
    3 s: at its last event the claim still holds (renewed by the thread), and nobody
    else could claim the task meanwhile; the stream's end writes the task's end, and
    the thread stops."""
    short.ALLOW_LOOPBACK_URLS = True
    make_agent(skills=[make_skill()], a2a_endpoint=peer.url, polling=False)
    task = creation.create_task(
        skill_id="ce-review",
        input={"product": "lamp", "behaviour": "slow", "seconds": 4},
        user=make_user(),
    )
    seen: list[float] = []

    def watched(events: Any) -> Any:
        for event in events:
            seen.append(lease_left(task))
            assert worker.claim(task.pk) is None  # nobody else takes it meanwhile
            yield event

    follow_events = agent_streams.follow_events
    monkeypatch.setattr(
        agent_streams,
        "follow_events",
        lambda t, target, events, sending: follow_events(
            t, target, watched(events), sending=sending
        ),
    )
    began = time.monotonic()
    worker.process_task(task.pk)  # the stream that sends it: WORKING, then its end
    assert time.monotonic() - began > 3.5  # the stream outlived one claim
    task.refresh_from_db()
    assert (task.state, task.metadata["followedBy"]) == (TaskState.COMPLETED, "stream")
    assert len(seen) >= 2
    assert min(seen) > 0  # still held at the end: renewed
    assert max(seen) <= 3.0  # never the call's whole time up front
    assert task.lease_until is None
    assert lease_keeper.kept_ids() == []
    deadline = time.monotonic() + 5
    while lease_keeper._thread is not None:
        assert time.monotonic() < deadline, "the keeper thread did not stop"
        time.sleep(0.1)


@pytest.mark.django_db(transaction=True)
def test_no_renewal_lands_after_the_call_let_go(
    task: Task, short: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keeper picked the claim to renew; before it could, the call ended and its task
    was deferred (an internal error's retry: its claim ends now). The renewal must not
    take that claim back (the retry waited out a whole lease)."""
    held = claimed(task)
    lease_keeper.keep(held)
    renew = lease_keeper._renew

    def late(entry: Any, keep_for: float) -> None:
        lease_keeper.let_go(held)
        held.defer(2.0)
        renew(entry, keep_for)

    monkeypatch.setattr(lease_keeper, "_renew", late)
    lease_keeper.renew_due(every=True)
    row = Task.objects.get(pk=held.pk)
    assert row.lease_until <= timezone.now()
    assert lease_keeper.kept_ids() == []


@pytest.mark.django_db(transaction=True)
def test_a_write_between_a_renewal_and_its_end_stands_on_the_object(
    task: Task, short: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The renewal's UPDATE went in; the call's thread then ended the task (its row's
    claim gone) before the renewal took the new lease on: the object must show the end,
    not a claim its row no longer has."""
    held = claimed(task)
    lease_keeper.keep(held)
    renew_lease = Task.renew_lease

    def then_the_end(self: Task, was: Any, seconds: float) -> bool:
        real_update = Task.objects.filter

        def filter_then_end(*args: Any, **kwargs: Any) -> Any:
            rows = real_update(*args, **kwargs)
            update = rows.update

            def update_then_end(**fields: Any) -> int:
                count = update(**fields)
                monkeypatch.setattr(Task.objects, "filter", real_update)
                held.complete({"verdict": "pass"}, [])  # the call's thread, meanwhile
                return count

            rows.update = update_then_end  # type: ignore[method-assign]
            return rows

        monkeypatch.setattr(Task.objects, "filter", filter_then_end)
        return renew_lease(self, was, seconds)

    monkeypatch.setattr(Task, "renew_lease", then_the_end)
    try:
        lease_keeper.renew_due(every=True)
    finally:
        lease_keeper.let_go(held)
    row = Task.objects.get(pk=held.pk)
    assert (row.state, row.lease_until) == (TaskState.COMPLETED, None)
    assert held.lease_until is None
