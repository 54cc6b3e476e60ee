"""An agent's whole Task (a send's answer, a safety-net poll's) is a snapshot taken before
the pushes that reach the platform while it is on the wire: applied, it must not drop the
artifact chunks those pushes added (each answered 200). The agent here is scripted: it
pushes to the real webhook (the ASGI application, in its own thread and database
connection) while it builds its answer, so the order is fixed, not left to timing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.utils import timezone
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from a2a import overtaken_calls, worker
from a2a.agent_push_asgi import close_pool
from a2a.models import Task
from a2a.states import NextAction, TaskState
from platform_site.asgi import application
from tests.a2a.helpers import fresh, post
from tests.support.scripted_agent import (
    WORKING,
    ScriptedAgent,
    refused,
    register,
    run_scripted_agent,
    start,
)

T1, T3 = "2026-12-01T10:00:01Z", "2026-12-01T10:00:03Z"


def chunk(i: int, append: bool = True, artifact_id: str = "chunked") -> dict[str, Any]:
    """The agent's ``artifactUpdate`` adding (or, not ``append``, starting) the text
    chunk ``c{i}`` of the artifact ``artifact_id``."""
    artifact = {"artifactId": artifact_id, "parts": [{"text": f"c{i}"}]}
    update = {"taskId": "t1", "contextId": "c", "append": append, "artifact": artifact}
    return {"artifactUpdate": update}


def snapshot(state: str, artifacts: list[Any] | None, timestamp: str = T1) -> JSONResponse:
    """The agent's task ``t1`` as it answers a send or a ``GetTask``."""
    task: dict[str, Any] = {"id": "t1", "contextId": "c", "status": {"state": state}}
    task["status"]["timestamp"] = timestamp
    if artifacts is not None:
        task["artifacts"] = artifacts
    return JSONResponse({"task": task})


def texts(task: Task, artifact_id: str = "chunked") -> list[str]:
    artifact = next(a for a in task.artifacts if a["artifactId"] == artifact_id)
    return [part["text"] for part in artifact["parts"]]


class Pusher:
    """The scripted agent's side: its pushes to the webhook the send named, and the
    statuses they were answered with."""

    def __init__(self, agent: ScriptedAgent) -> None:
        self.agent = agent
        self.config: dict[str, Any] = {}
        self.answers: list[int] = []

    async def push(self, *bodies: dict[str, Any]) -> None:
        """Push ``bodies`` one after the other, each answered before the next goes."""
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            for body in bodies:
                response = await c.post(
                    urlsplit(self.config["url"]).path,
                    json=body,
                    headers={"X-A2A-Notification-Token": self.config["token"]},
                )
                self.answers.append(response.status_code)

    def script(
        self,
        send: tuple[list[dict[str, Any]], Callable[[], Response]],
        get: tuple[list[dict[str, Any]], Callable[[], Response]] | None = None,
    ) -> None:
        """Answer the send (and a ``GetTask``) with what ``send`` (``get``) makes, after
        pushing its bodies: the answer's snapshot is older than those pushes."""

        def app(pushes: list[dict[str, Any]], answer: Callable[[], Response]) -> Any:
            async def run(scope: Scope, receive: Receive, send_: Send) -> None:
                await self.push(*pushes)
                await answer()(scope, receive, send_)

            return run

        def answer(kind: str, body: Any) -> Any:
            if kind == "send":
                self.config = body["configuration"]["taskPushNotificationConfig"]
                return app(*send)
            if kind == "get" and get is not None:
                return app(*get)
            return refused(kind, body)

        self.agent.answer = answer


@pytest.fixture
def pusher(
    transactional_db: None, settings: Any, make_agent: Any, make_skill: Any
) -> Iterator[Pusher]:
    """A scripted agent that pushes (``ce-review``, any output valid), the platform's
    webhook at loopback as the agent is."""
    settings.ALLOW_LOOPBACK_URLS = True
    settings.PUBLIC_URL = "http://127.0.0.1:8000"
    with run_scripted_agent() as agent:

        def any_output(**fields: Any) -> Any:
            return make_skill(**{**fields, "output_schema": {}})

        register(make_agent, any_output, agent, push_notifications=True)
        yield Pusher(agent)
    close_pool()
    asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())


def step(task: Task) -> Task:
    """The worker's next action on the task (its send, then its safety-net poll), made
    due now: once, as a WORKING task always has a next poll."""
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now(), lease_until=None)
    worker.process_task(task.pk)
    return fresh(task)


def safety_poll(task: Task) -> Task:
    """The task's safety-net poll, made due now."""
    assert fresh(task).next_action == NextAction.POLL
    return step(task)


def test_the_send_answer_keeps_the_chunks_pushed_before_it(pusher: Pusher, user: Any) -> None:
    pusher.script(
        send=(
            [chunk(0, append=False), chunk(1), chunk(2)],
            lambda: snapshot(WORKING, [{"artifactId": "chunked", "parts": [{"text": "c0"}]}]),
        )
    )
    task = step(start(user))
    assert pusher.answers == [200, 200, 200], (task.state, task.error)
    assert (task.metadata or {}).get("followedBy") == "push"
    assert task.state == TaskState.WORKING
    assert texts(task) == ["c0", "c1", "c2"]


def test_a_poll_answer_keeps_the_chunks_pushed_while_it_was_built(
    pusher: Pusher, user: Any
) -> None:
    """The hunt's case: the agent took its GetTask snapshot (chunk c0), pushed c1 to c3,
    then answered; the bare COMPLETED it pushes last is judged on all four chunks."""
    older = [
        {"artifactId": "a1", "parts": [{"data": {"verdict": "pass"}}]},
        {"artifactId": "chunked", "parts": [{"text": "c0"}]},
    ]
    pusher.script(
        send=([chunk(0, append=False)], lambda: snapshot(WORKING, None)),
        get=([chunk(1), chunk(2), chunk(3)], lambda: snapshot(WORKING, older)),
    )
    task = step(start(user))
    assert texts(task) == ["c0"]
    task = safety_poll(task)
    assert pusher.answers == [200, 200, 200, 200]
    assert [a["artifactId"] for a in task.artifacts] == ["a1", "chunked"]
    assert texts(task) == ["c0", "c1", "c2", "c3"]
    completed = {"taskId": "t1", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}
    completed["status"]["timestamp"] = T3
    token = pusher.config["token"]
    assert post(urlsplit(pusher.config["url"]).path, {"statusUpdate": completed}, token).is_success
    task = fresh(task)
    assert task.state == TaskState.COMPLETED
    assert texts(task) == ["c0", "c1", "c2", "c3"]


def test_a_completed_poll_answer_is_judged_on_the_chunks_pushed_meanwhile(
    pusher: Pusher, user: Any
) -> None:
    pusher.script(
        send=([], lambda: snapshot(WORKING, None)),
        get=(
            [chunk(0, append=False), chunk(1)],
            lambda: snapshot("TASK_STATE_COMPLETED", [], T3),
        ),
    )
    task = safety_poll(step(start(user)))
    assert task.state == TaskState.COMPLETED, task.error
    assert texts(task) == ["c0", "c1"]
    assert task.output == "c0c1"


def test_an_artifact_pushed_meanwhile_that_the_answer_lacks_is_kept(
    pusher: Pusher, user: Any
) -> None:
    report = [{"artifactId": "report", "parts": [{"text": "done"}]}]
    pusher.script(
        send=([], lambda: snapshot(WORKING, None)),
        get=([chunk(0, append=False, artifact_id="notes")], lambda: snapshot(WORKING, report)),
    )
    task = safety_poll(step(start(user)))
    assert [a["artifactId"] for a in task.artifacts] == ["report", "notes"]


def test_the_same_older_answer_again_changes_nothing(pusher: Pusher, user: Any) -> None:
    """Idempotent: a second poll answered with the same snapshot (no push since) keeps
    the chunks the first one kept, as it keeps an artifact the snapshot lacks."""
    older = [{"artifactId": "chunked", "parts": [{"text": "c0"}]}]
    pushes = [chunk(0, append=False), chunk(1), chunk(0, append=False, artifact_id="notes")]
    pusher.script(
        send=([], lambda: snapshot(WORKING, None)),
        get=(pushes, lambda: snapshot(WORKING, older)),
    )
    task = safety_poll(step(start(user)))
    kept = task.artifacts
    assert [a["artifactId"] for a in kept] == ["chunked", "notes"]
    assert texts(task) == ["c0", "c1"]
    pushes.clear()
    task = safety_poll(task)
    assert pusher.agent.calls["get"] == 2
    assert task.artifacts == kept


def test_a_pushed_chunk_that_does_not_extend_the_answer_gives_way_to_it(
    pusher: Pusher, user: Any
) -> None:
    """Both hold the artifact, and the kept one is not the answer's with more parts: the
    agent replaced it, and its answer's stands (a chunk count alone cannot order them)."""
    whole = [{"artifactId": "chunked", "parts": [{"text": "rewritten"}]}]
    pusher.script(
        send=([], lambda: snapshot(WORKING, None)),
        get=([chunk(0, append=False), chunk(1)], lambda: snapshot(WORKING, whole)),
    )
    task = safety_poll(step(start(user)))
    assert task.artifacts == whole


def test_a_task_not_followed_by_pushes_costs_no_read(
    task: Task, django_assert_num_queries: Any
) -> None:
    """The read again is for tasks an agent pushes to: any other's answer is applied from
    the worker's copy, with no query more (polls run for every task in flight)."""
    answer = [{"artifactId": "a1", "parts": [{"text": "x"}]}]
    with django_assert_num_queries(0):
        assert overtaken_calls.pushed_meanwhile(task, answer) is answer
    task.metadata = {**(task.metadata or {}), "followedBy": "push"}
    with django_assert_num_queries(1):
        assert overtaken_calls.pushed_meanwhile(task, answer) == answer


# A question asked in an artifact (LangGraph's ``Interrupt``), answered by a person: the
# agent leaves it out of its task from then on, and the merge must not bring it back.
QUESTION_ARTIFACT = {"artifactId": "interrupt", "parts": [{"data": {"question": "Ship it?"}}]}


def _answered_in_artifacts(make_skill: Any, make_agent: Any, make_user: Any, **skill: Any) -> Task:
    """A pushed task at work again after a person answered its artifact's question."""
    from a2a import creation
    from a2a.question_memory import wait_ended

    chosen = make_skill(**skill)
    make_agent(skills=[chosen])
    task = creation.create_task(skill_id=chosen.id, input={"product": "lamp"}, user=make_user())
    task.artifacts = [QUESTION_ARTIFACT]
    metadata = wait_ended(task, {**(task.metadata or {}), "followedBy": "push"})
    Task.objects.filter(pk=task.pk).update(
        state=TaskState.WORKING,
        remote_task_id="t1",
        artifacts=[QUESTION_ARTIFACT],
        metadata=metadata,
    )
    return fresh(task)


@pytest.mark.django_db
def test_an_answered_questions_artifact_the_answer_left_out_stays_out(
    make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    from a2a.agent_updates import apply_agent_reply

    schema = {
        "type": "object",
        "properties": {"verdict": {"type": "string"}},
        "required": ["verdict"],
        "additionalProperties": False,
    }
    task = _answered_in_artifacts(make_skill, make_agent, make_user, output_schema=schema)
    result = {"artifactId": "result", "parts": [{"data": {"verdict": "pass"}}]}
    answer = {"id": "t1", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}
    apply_agent_reply(task, task_json={**answer, "artifacts": [result]}, message=None, via="a2a")
    task = fresh(task)
    assert (task.state, task.output, task.artifacts) == (
        TaskState.COMPLETED,
        {"verdict": "pass"},
        [result],
    )


@pytest.mark.django_db
def test_a_second_question_in_artifacts_is_not_mixed_with_the_answered_one(
    make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    from a2a.agent_updates import apply_agent_reply

    task = _answered_in_artifacts(make_skill, make_agent, make_user)
    second = {"artifactId": "interrupt-2", "parts": [{"data": {"question": "Which colour?"}}]}
    answer = {"id": "t1", "contextId": "c", "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}
    apply_agent_reply(task, task_json={**answer, "artifacts": [second]}, message=None, via="a2a")
    task = fresh(task)
    assert task.state == TaskState.INPUT_REQUIRED
    assert task.question["parts"] == second["parts"]
