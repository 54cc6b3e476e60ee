"""How the platform paces its polls of an agent: a ``Retry-After`` on any answer, an
agent's pause (``429``/``503``) held by every poll of its tasks however it is made, an
agent that hangs holding no more than its share of the engine's threads, calls never
made past their batch's claim, and a poll rate under one poll a sweep."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from a2a import creation, engine, engine_claims, worker
from a2a.agent_registry import target_for
from a2a.models import Task
from a2a.pause_models import AgentPause
from a2a.states import TaskState
from agent_profiles.models import Skill
from tests.support.scripted_agent import COMPLETED, WORKING, register, run_scripted_agent

pytestmark = pytest.mark.django_db(transaction=True)

RESULT = [{"artifactId": "a", "parts": [{"data": {"verdict": "pass"}}]}]


def _fresh_pool() -> None:
    """The engine's next pool is sized from A2A_POLL_CONCURRENCY as it is then."""
    if engine._pool is not None:
        engine._pool.shutdown()
        engine._pool = None


@pytest.fixture(autouse=True)
def loopback(settings: Any) -> Iterator[None]:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 0  # polled, not listed
    _fresh_pool()
    yield
    _fresh_pool()


def task_body(task_id: str, state: str = WORKING) -> dict[str, Any]:
    task: dict[str, Any] = {"id": task_id, "contextId": "c", "status": {"state": state}}
    if state == COMPLETED:
        task["artifacts"] = RESULT
    return {"task": task}


class Numbered:
    """Sends answered with agent tasks t1, t2, … (WORKING); ``get`` answers by ``get``."""

    def __init__(self, get: Callable[[str], Any]) -> None:
        self.sent, self.get = 0, get

    def __call__(self, kind: str, body: Any) -> Any:
        if kind in ("send", "SendMessage"):
            self.sent += 1
            return JSONResponse(task_body(f"t{self.sent}"))
        if kind in ("get", "GetTask"):
            return self.get(kind)
        return Response(status_code=405)


class Echo:
    """A GetTask answer about the agent task the path names: still WORKING."""

    def __init__(self, **headers: str) -> None:
        self.headers = headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = task_body(scope["path"].rsplit("/", 1)[-1])
        await JSONResponse(body, headers=self.headers)(scope, receive, send)


class Hangs:
    """An answer that comes long after the timeout of the test that uses it."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await asyncio.sleep(1.5)
        await JSONResponse({})(scope, receive, send)


def started(n: int, user: Any, agent_id: str = "agent-one") -> list[Task]:
    """``n`` tasks sent for real and WORKING at the agent, each poll due now."""
    tasks = []
    for i in range(n):
        task = creation.create_task(
            skill_id="ce-review", input={"product": f"p{i}"}, agent_id=agent_id, user=user
        )
        worker.process_task(task.pk)
        task.refresh_from_db()
        assert task.state == TaskState.WORKING, (task.state, task.error)
        tasks.append(task)
    Task.objects.filter(pk__in=[t.pk for t in tasks]).update(next_poll_at=timezone.now())
    return tasks


def waits(tasks: list[Task]) -> list[float]:
    """Seconds until each task's next poll."""
    now = timezone.now()
    out = []
    for task in tasks:
        task.refresh_from_db()
        out.append((task.next_poll_at - now).total_seconds())
    return out


@pytest.mark.parametrize("binding", ["HTTP+JSON", "JSONRPC"])
def test_a_retry_after_on_a_quiet_answer_delays_the_next_poll(
    binding: str, make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """ "A Retry-After header on any answer delays the next call": a single poll obeyed
    it, the engine re-scheduled a quiet answer without it (and the JSON-RPC transport
    never read it on a 200)."""
    pause = {"Retry-After": "120"}

    def answer(kind: str, body: Any) -> Any:
        if kind == "send":
            return JSONResponse(task_body("t1"))
        if kind == "get":
            return JSONResponse(task_body("t1"), headers=pause)
        result = task_body("t1")["task"]
        rpc = {"jsonrpc": "2.0", "id": body["id"], "result": result}
        if kind == "SendMessage":
            return JSONResponse({**rpc, "result": {"task": result}})
        if kind == "GetTask":
            return JSONResponse(rpc, headers=pause)
        return Response(status_code=405)

    with run_scripted_agent() as agent:
        agent.answer = answer
        register(make_agent, make_skill, agent, binding)
        (task,) = started(1, make_user())
        assert engine.poll_due(10) == 1
        assert agent.calls["get" if binding == "HTTP+JSON" else "GetTask"] == 1
    assert waits([task])[0] > 110


def test_a_429_on_a_single_poll_pauses_every_poll_of_the_agent(
    make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """A poll made on its own (a hint's, or with A2A_POLL_MESSAGES) answered 429 with
    Retry-After moved only its own task: the agent's other polls went on at once."""
    busy = {"on": False}

    def get(kind: str) -> Any:
        if busy["on"]:
            return JSONResponse({}, status_code=429, headers={"Retry-After": "60"})
        return JSONResponse(task_body("t1"))

    with run_scripted_agent() as agent:
        agent.answer = Numbered(get)
        register(make_agent, make_skill, agent)
        tasks = started(3, make_user())
        busy["on"] = True
        worker.process_task(tasks[0].pk)
        assert agent.calls["get"] == 1
        assert all(wait > 50 for wait in waits(tasks)), waits(tasks)
        # A single poll of another task, made now, waits for the pause instead of calling.
        Task.objects.filter(pk=tasks[1].pk).update(next_poll_at=timezone.now())
        worker.process_task(tasks[1].pk)
        assert agent.calls["get"] == 1
        assert waits(tasks[1:2])[0] > 50


def test_a_pause_asked_in_a_batch_holds_for_the_batchs_other_polls(
    settings: Any, make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """One poll of a batch answers 429 Retry-After: 60; the batch's other polls of the
    agent, answered "still WORKING" just before, were re-scheduled at the batch's end at
    their usual interval, over the pause: a batch holds up to 100 polls of one agent."""
    settings.A2A_POLL_CONCURRENCY = 1  # the calls in the batch's order
    gets = {"n": 0, "busy": False}

    def get(kind: str) -> Any:
        gets["n"] += 1
        if gets["busy"] and gets["n"] == 3:
            return JSONResponse({}, status_code=429, headers={"Retry-After": "60"})
        return Echo()

    with run_scripted_agent() as agent:
        agent.answer = Numbered(get)
        register(make_agent, make_skill, agent)
        tasks = started(4, make_user())
        engine.poll_due(10)  # a first round sees them WORKING (news, applied one by one)
        Task.objects.filter(pk__in=[t.pk for t in tasks]).update(next_poll_at=timezone.now())
        gets.update(n=0, busy=True)
        assert engine.poll_due(10) == 4
        assert gets["n"] == 3  # the fourth call was not made: the agent asked for a pause
        assert all(wait > 50 for wait in waits(tasks)), waits(tasks)
        assert AgentPause.until_of("agent-one", timezone.now()) is not None
        # Due again by some other way (a person's reply, a hint): the claim leaves it.
        Task.objects.filter(pk__in=[t.pk for t in tasks]).update(next_poll_at=timezone.now())
        assert engine.poll_due(10) == 0
        assert gets["n"] == 3


def test_an_agent_that_hangs_holds_its_share_of_the_threads_not_the_batch(
    settings: Any, make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """Forty polls of an agent that hangs and one of a healthy agent whose task ended, in
    one batch on four threads: the calls went in the batch's order and their answers were
    taken in that order, so the hanging agent held every thread for its timeout, ten
    rounds, and the healthy agent's end waited behind them (noticed 25 s late at a 3 s
    cap). Now the hanging agent gets its share of the threads, its calls left are put
    back once one ran out of time, and the healthy agent's answer is applied as it comes."""
    settings.A2A_POLL_CONCURRENCY = 4
    settings.A2A_HTTP_TIMEOUT = 0.5
    user = make_user()
    with run_scripted_agent() as slow, run_scripted_agent() as fast:
        slow.answer = Numbered(lambda kind: Hangs())
        fast.answer = Numbered(lambda kind: JSONResponse(task_body("t1", COMPLETED)))
        register(make_agent, make_skill, slow, id="slow-agent")
        register(make_agent, lambda **_: Skill.objects.get(pk="ce-review"), fast, id="fast-agent")
        hanging = started(40, user, "slow-agent")
        (ended,) = started(1, user, "fast-agent")
        assert engine.poll_due(100) == 41
        # Its share of the four threads (all, once the healthy agent's one call was done):
        # one round, then its calls left were put back. Before: forty, ten rounds.
        assert slow.calls["get"] <= 4
    ended.refresh_from_db()
    assert ended.state == TaskState.COMPLETED
    put_back = waits(hanging)
    # Due again later, as if polled and found WORKING: at once, the sweep's next batch
    # would wait for the agent again.
    assert all(wait > 0.5 for wait in put_back), put_back
    assert not Task.objects.filter(pk__in=[t.pk for t in hanging], lease_until__isnull=False)


def test_a_call_that_could_end_after_its_claim_is_not_made(
    settings: Any, make_agent: Any, make_skill: Any, make_user: Any
) -> None:
    """A batch's calls wait for a thread; behind an agent that hangs they started after
    the batch's claim had run out, while a later sweep had claimed and polled the same
    tasks: two workers held one task, and the agent got its polls twice."""
    with run_scripted_agent() as agent:
        agent.answer = Numbered(lambda kind: Echo())
        register(make_agent, make_skill, agent)
        tasks = started(3, make_user())
        claimed, _ = engine_claims.claim_polls(10)
        target = target_for(claimed[0].agent)
        short = timezone.now() + timedelta(seconds=1)  # less than one call can take
        claimed[0].lease_until = short
        batch = [engine.Polled(task, target) for task in claimed]
        out = list(engine.calls(batch))
        assert agent.calls["get"] == 2
    put_back = [polled for polled in out if polled.put_back is not None]
    assert [polled.task.pk for polled in put_back] == [claimed[0].pk]
    assert put_back[0].put_back == engine.SHORT_CLAIM
    assert len(tasks) == 3


def test_a_poll_rate_under_one_poll_a_sweep_is_kept(settings: Any) -> None:
    """A2A_AGENT_POLL_RATE 0.2 (one poll every five seconds) was rounded up to one poll a
    sweep: five times the rate set."""
    settings.A2A_SWEEP_INTERVAL = 1.0
    for rate, sweeps, polls in ((0.2, 10, 2), (1.5, 10, 15), (100.0, 3, 300)):
        settings.A2A_AGENT_POLL_RATE = rate
        budgets = []
        for _ in range(sweeps):
            engine_claims.new_sweep()
            budgets.append(engine_claims.agent_budget())
        assert sum(budgets) == polls, (rate, budgets)
        assert max(budgets) - min(budgets) <= 1


def test_with_more_agents_than_threads_every_agent_gets_its_turn(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads, agents A, B and C: a freed thread went to the first agent in the
    batch's order every time, so C got none before its claim was too short and was put
    back, batch after batch (the batch's order is stable: newest tasks first)."""
    settings.A2A_POLL_CONCURRENCY = 2
    settings.A2A_HTTP_TIMEOUT, settings.A2A_CONNECT_TIMEOUT = 0.5, 0.1  # a call: up to 1.1 s
    _fresh_pool()
    made: list[str] = []

    def slow(polled: engine.Polled) -> engine.Polled:
        made.append(polled.task.agent_id)
        time.sleep(0.3)  # slow, well within its timeout
        return polled

    monkeypatch.setattr(engine, "_call", slow)
    lease = timezone.now() + timedelta(seconds=1.5)  # calls may start up to 0.4 s in
    batch = []
    for agent_id in ["A", "A", "A", "B", "B", "B", "C"]:
        task = Task(agent_id=agent_id, lease_until=lease)
        batch.append(engine.Polled(task, None))  # type: ignore[arg-type]
    put_back = [polled.task.agent_id for polled in engine.calls(batch) if polled.put_back]
    assert "C" in made, (made, put_back)


@pytest.mark.postgres
def test_concurrent_pauses_keep_the_latest(make_agent: Any, make_skill: Any) -> None:
    """Six workers pausing one agent at once: updating first (nothing to update yet) and
    then finding the row another worker had just created, one returned without moving
    it, and the pause kept an earlier end than the agent asked for."""
    agent = make_agent(skills=[make_skill()])
    base = timezone.now() + timedelta(seconds=100)
    for turn in range(10):
        AgentPause.objects.filter(agent_id=agent.pk).delete()
        untils = [base + timedelta(seconds=turn * 10 + i) for i in range(6)]
        assert _pause_at_once(agent.pk, untils) == []
        assert AgentPause.objects.get(agent_id=agent.pk).until == max(untils)


def _pause_at_once(agent_id: str, untils: list[Any]) -> list[BaseException]:
    """Each of ``untils`` asked by a worker of its own, all at once; what they raised."""
    barrier = threading.Barrier(len(untils))
    errors: list[BaseException] = []

    def ask(until: Any) -> None:
        try:
            barrier.wait()
            Task.pause_polls(agent_id, until)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=ask, args=(until,)) for until in untils]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_a_call_is_not_started_without_time_for_the_whole_answer(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard counted a connect and a read (0.6 s here), but a call may take up to the
    body's slack more (1.1 s): started with 0.8 s of claim left, it could end past it."""
    settings.A2A_HTTP_TIMEOUT, settings.A2A_CONNECT_TIMEOUT = 0.5, 0.1
    _fresh_pool()
    made: list[str] = []
    monkeypatch.setattr(engine, "_call", lambda polled: made.append("call") or polled)
    lease = timezone.now() + timedelta(seconds=0.8)
    batch = [engine.Polled(Task(agent_id="A", lease_until=lease), None)]  # type: ignore[arg-type]
    assert [polled.put_back for polled in engine.calls(batch)] == [engine.SHORT_CLAIM]
    assert made == []
