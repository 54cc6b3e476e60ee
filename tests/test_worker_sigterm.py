"""A worker stopped with SIGTERM (systemd's KillSignal) while a long call runs (a2a/long_calls.py).

A worker used to exit at once and leave its streams to their claims. An agent that cannot
be polled finished its task meanwhile; the next worker subscribed to an agent task that
was over, the agent refused, and the task waited WORKING for its deadline: the answer was
lost. Now a stopping process takes no new long call (each is left due for another one)
and waits for the running ones, up to ``A2A_STOP_WAIT`` (the suite sets 1 s; these tests more).
An operator's second Ctrl-C cuts that wait short (a worker's cold shutdown, the embedded
platform's second Ctrl-C or SIGTERM): the calls are left to their claims.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from a2a import creation, long_calls
from a2a.creation import create_task
from a2a.models import Task, TaskEvent
from a2a.states import NextAction, TaskState
from tests.a2a.helpers import embedded_workers, wait_for
from tests.support.agents import TestAgent
from tests.support.processes import (
    FAST_ENGINE,
    beat_proc,
    celery_worker,
    embedded_platform,
    started,
    worker_proc,
)


@pytest.mark.distributed
@pytest.mark.slow
def test_a_worker_stopped_mid_stream_finishes_the_stream_first(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    """The answer of a task streamed when the worker gets SIGTERM is recorded before the
    worker exits (exit code 0), once, with the message sent once."""
    make_agent(skills=[make_skill()], a2a_endpoint=peer.url, polling=False)
    user = make_user()
    waits = {**FAST_ENGINE, "A2A_STOP_WAIT": 30}
    with started(beat_proc(**FAST_ENGINE), worker_proc("stopped", **waits)) as (_, worker):
        data = {"product": "lamp", "behaviour": "slow", "seconds": 4}
        task = creation.create_task(skill_id="ce-review", input=data, user=user)
        wait_for(task, lambda t: t.state == TaskState.WORKING, timeout=20)
        code = worker.stop(timeout=30)
        log = worker.log_text()
        task.refresh_from_db()
        # Read before beat stops: nothing but the stopped worker could have ended it.
        assert task.state == TaskState.COMPLETED, log[-2000:]
    assert code == 0
    assert "waiting up to" in log
    assert TaskEvent.objects.filter(task=task, to_state=TaskState.COMPLETED).count() == 1
    assert len(peer.messages) == 1


@pytest.mark.django_db(transaction=True)
def test_the_embedded_platform_stopped_mid_stream_finishes_the_stream_first(
    settings: Any, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    """``make run``'s Ctrl-C stops the embedded workers (runplatform's ``finally``): the
    same wait, so the answer is recorded before the process exits."""
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_STOP_WAIT = 30
    make_agent(skills=[make_skill()], a2a_endpoint=peer.url, polling=False)
    user = make_user()
    with embedded_workers():
        data = {"product": "lamp", "behaviour": "slow", "seconds": 2}
        task = creation.create_task(skill_id="ce-review", input=data, user=user)
        wait_for(task, lambda t: t.state == TaskState.WORKING, timeout=20)
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED
    assert len(peer.messages) == 1


@pytest.mark.django_db(transaction=True)
def test_stop_waits_for_running_long_calls_and_takes_no_new_one(
    make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """While stopping, a new long call is left due (claim let go, no attempt counted) and
    the running one is waited for; once stopped, long calls run where asked again."""
    skill = make_skill(id="ce-review")
    make_agent(id="a", skills=[skill], polling=False)
    user = make_user()
    first = create_task(skill_id="ce-review", input={"product": "x"}, user=user, agent_id="a")
    second = create_task(skill_id="ce-review", input={"product": "y"}, user=user, agent_id="a")
    release = threading.Event()
    ran: list[Any] = []

    def run(task: Task) -> None:
        ran.append(task.pk)
        release.wait(10)

    long_calls.start()
    stopped: list[int] = []
    stopper = threading.Thread(target=lambda: stopped.append(long_calls.stop(wait=10)))
    try:
        assert long_calls.take(Task.claim(first.pk), run) is True
        wait_for(first, lambda t: ran == [first.pk])
        stopper.start()
        time.sleep(0.3)
        assert stopped == []  # waiting for the running call
        assert long_calls.take(Task.claim(second.pk), run) is True  # left due
        second.refresh_from_db()
        assert second.lease_until <= timezone.now() < second.next_poll_at
        assert (second.next_action, second.attempts) == (NextAction.SEND, 0)
        assert ran == [first.pk]
        release.set()
        stopper.join(5)
        assert stopped == [0]
    finally:
        release.set()
        long_calls.stop(wait=0)
    assert long_calls.take(Task.claim(second.pk) or second, run) is False  # not taken here


@pytest.mark.django_db(transaction=True)
def test_stop_leaves_a_call_that_outlasts_the_wait_to_its_claim(
    make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """The wait is bounded: a call still running then is counted and left running."""
    make_agent(id="a", skills=[make_skill(id="ce-review")], polling=False)
    task = create_task(skill_id="ce-review", input={"product": "x"}, user=make_user(), agent_id="a")
    release = threading.Event()
    long_calls.start()
    try:
        assert long_calls.take(Task.claim(task.pk), lambda t: release.wait(10)) is True
        began = time.monotonic()
        assert long_calls.stop(wait=0.3) == 1
        assert 0.3 <= time.monotonic() - began < 2
        assert long_calls.running() == {"a": 1}
    finally:
        release.set()
    wait_for(task, lambda t: long_calls.running() == {})


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("how", ["cut", "cold shutdown"])
def test_a_cut_ends_the_wait_for_running_long_calls(
    how: str, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """The stop waited the whole ``A2A_STOP_WAIT`` however the shutdown began: an operator's
    second Ctrl-C did not end it. A cut (runplatform's signal handler, Celery's cold
    shutdown) ends it at once, the call left running on its claim; a warm shutdown waits."""
    make_agent(id="a", skills=[make_skill(id="ce-review")], polling=False)
    task = create_task(skill_id="ce-review", input={"product": "x"}, user=make_user(), agent_id="a")
    release = threading.Event()
    long_calls.start()
    stopped: list[int] = []
    stopper = threading.Thread(target=lambda: stopped.append(long_calls.stop(wait=30)))
    try:
        assert long_calls.take(Task.claim(task.pk), lambda t: release.wait(30)) is True
        wait_for(task, lambda t: long_calls.running() == {"a": 1})
        stopper.start()
        long_calls.stop_taking(sig="SIGINT", how="Warm")  # the first Ctrl-C: still waits
        time.sleep(0.5)
        assert stopped == []
        began = time.monotonic()
        if how == "cut":
            long_calls.cut(signal.SIGINT, None)
        else:
            long_calls.stop_taking(sig="SIGQUIT", how="Cold")
        stopper.join(5)
        assert stopped == [1]
        assert time.monotonic() - began < 1
        assert long_calls.running() == {"a": 1}  # left running, on its claim
        task.refresh_from_db()
        assert task.lease_until is not None
        assert task.lease_until > timezone.now()
        # The cut ended with that stop: the next start's stop waits again.
        long_calls.start()
        assert long_calls.stop(wait=0.3) == 1
    finally:
        release.set()
    wait_for(task, lambda t: long_calls.running() == {})


@pytest.mark.slow
def _release_once_subscribed(peer: TestAgent, task: Task) -> None:
    """Let the agent end its task once the restarted platform subscribed to it: the
    stream outlasted the stop. (Ended before, the task could not be followed: its agent
    answers no polls, and a subscribe to an ended task is refused.)"""
    deadline = time.monotonic() + 30
    while peer.requests_for(task.remote_task_id) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the request counted; its subscription taken by the agent's SDK
    peer.release()


def test_a_second_signal_cuts_the_embedded_platforms_wait(
    transactional_db: None,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    peer: TestAgent,
) -> None:
    """``make run``'s Ctrl-C waits for a running stream (``A2A_STOP_WAIT``). A second
    Ctrl-C or SIGTERM was ignored (Twisted's handlers, still installed, stopped a reactor
    that had stopped) and the process waited on for the agent's stream. Now it exits at
    once, leaving the stream to its claim; the next start follows the task to its answer,
    recorded once, the message sent once. (SIGTERM takes the same handler as Ctrl-C.)"""
    if settings.DISTRIBUTED:
        pytest.skip("the embedded mode (runplatform runs daphne alone in the distributed one)")
    make_agent(skills=[make_skill()], a2a_endpoint=peer.url, polling=False)
    user = make_user()
    with embedded_platform(**{**FAST_ENGINE, "A2A_STOP_WAIT": 120}) as proc:
        data = {"product": "lamp", "behaviour": "held"}
        task = creation.create_task(skill_id="ce-review", input=data, user=user)
        wait_for(task, lambda t: t.state == TaskState.WORKING, timeout=20)
        os.kill(proc.pid, signal.SIGINT)
        proc.wait_log(r"waiting up to \d+ s for 1 long call", timeout=20)
        time.sleep(1)
        assert proc.alive()  # the first Ctrl-C waits for the stream
        os.kill(proc.pid, signal.SIGTERM)
        proc.popen.wait(timeout=15)
        log = proc.log_text()
    assert "stop cut short: 1 long call(s) left to their claims" in log, log[-2000:]
    task.refresh_from_db()
    assert task.state == TaskState.WORKING
    with embedded_platform(**FAST_ENGINE):
        _release_once_subscribed(peer, task)
        assert wait_for(task, timeout=40).state == TaskState.COMPLETED
    assert TaskEvent.objects.filter(task=task, to_state=TaskState.COMPLETED).count() == 1
    assert len(peer.messages) == 1


@pytest.mark.distributed
@pytest.mark.slow
def test_a_workers_cold_shutdown_cuts_the_wait(
    transactional_db: None, make_skill: Any, make_agent: Any, make_user: Any, peer: TestAgent
) -> None:
    """Ctrl-C on a worker: a warm shutdown, which waits for the running stream. Ctrl-C
    again: Celery's cold shutdown ("terminating all running tasks!"), which waited all the
    same. Now the worker goes, leaving the stream to its claim; another worker follows the
    task to its answer, recorded once, the message sent once."""
    make_agent(skills=[make_skill()], a2a_endpoint=peer.url, polling=False)
    user = make_user()
    with celery_worker("impatient", **{**FAST_ENGINE, "A2A_STOP_WAIT": 120}) as worker:
        data = {"product": "lamp", "behaviour": "held"}
        task = creation.create_task(skill_id="ce-review", input=data, user=user)
        wait_for(task, lambda t: t.state == TaskState.WORKING, timeout=20)
        os.kill(worker.pid, signal.SIGINT)
        worker.wait_log(r"waiting up to \d+ s for 1 long call", timeout=20)
        time.sleep(1)
        assert worker.alive()  # the warm shutdown waits for the stream
        os.kill(worker.pid, signal.SIGINT)  # cold shutdown
        worker.popen.wait(timeout=15)
        log = worker.log_text()
    assert "stop cut short: 1 long call(s) left to their claims" in log, log[-2000:]
    task.refresh_from_db()
    assert task.state == TaskState.WORKING
    with started(beat_proc(**FAST_ENGINE), worker_proc("next", **FAST_ENGINE)):
        _release_once_subscribed(peer, task)
        assert wait_for(task, timeout=40).state == TaskState.COMPLETED
    assert TaskEvent.objects.filter(task=task, to_state=TaskState.COMPLETED).count() == 1
    assert len(peer.messages) == 1
