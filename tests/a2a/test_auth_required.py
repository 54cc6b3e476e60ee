"""A task waiting for authorization is still followed (A2A 1.0, 7.6): the agent may go on
by itself once the person signed in elsewhere, with no message from the client, which
SHOULD keep following the task. Polled tasks are polled on through AUTH_REQUIRED (backing
off), a pushed newer status resumes them, the time left starts again when the agent goes
on, and a person's reply sent meanwhile is not overwritten by a poll's schedule."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as pb
from django.utils import timezone
from starlette.applications import Starlette

from a2a import agent_answers, creation, deadlines, services
from a2a.agent_updates import apply_agent_reply
from a2a.follow_policy import POLL
from a2a.models import Task
from a2a.states import NextAction, TaskState
from a2a.transports.base import AgentReply
from agent_profiles.interfaces import call_target
from tests.a2a.helpers import embedded_workers, fresh, push, status_update, wait_for
from tests.support.agents import TestAgent, agent_card, run_agent


class SignsInElsewhere(AgentExecutor):
    """Asks for authorization, then, once the person signed in at the identity provider
    (``signed_in``, which the test sets), completes by itself."""

    def __init__(self) -> None:
        self.signed_in = threading.Event()
        self.subscribes: SubscribeOpened | None = None
        self.replies: list[str] = []
        self.waits = 30.0  # how long it waits for the sign-in before it stops listening

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        if context.current_task is not None:  # a person's reply: they signed in
            self.replies.append(context.get_user_input())
            await self._finish(updater)
            return
        await event_queue.enqueue_event(
            pb.Task(
                id=context.task_id,
                context_id=context.context_id,
                status=pb.TaskStatus(state=pb.TaskState.TASK_STATE_SUBMITTED),
            )
        )
        await updater.requires_auth(
            updater.new_agent_message([pb.Part(text="Sign in at https://idp.example/auth")])
        )
        # The credential, out of band; without it, its execution ends (a2a-sdk closes the
        # task's streams) and the task waits for a message.
        if not await asyncio.to_thread(self.signed_in.wait, self.waits):
            return
        await self._finish(updater)

    async def _finish(self, updater: TaskUpdater) -> None:
        await updater.start_work()
        part = pb.Part()
        part.data.struct_value.update({"verdict": "pass"})
        await updater.add_artifact([part], name="result")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        return None


@pytest.fixture
def executor() -> SignsInElsewhere:
    return SignsInElsewhere()


class SubscribeOpened:
    """ASGI middleware: sets ``opened`` once a subscribe's stream sent its first event
    (the agent's task as it is): the subscriber is listening from then on."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.opened = threading.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith(":subscribe"):
            await self.app(scope, receive, send)
            return

        async def sending(message: Any) -> None:
            await send(message)
            if message["type"] == "http.response.body" and message.get("body"):
                self.opened.set()

        await self.app(scope, receive, sending)


@pytest.fixture
def signs_in_elsewhere(executor: SignsInElsewhere) -> Iterator[TestAgent]:
    def build(agent: TestAgent) -> Any:
        card = agent_card(agent.url)
        handler = DefaultRequestHandler(
            agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card
        )
        app = Starlette(routes=[*create_agent_card_routes(card), *create_rest_routes(handler)])
        executor.subscribes = SubscribeOpened(app)
        return executor.subscribes

    with run_agent(build=build) as agent:
        yield agent


def _followed_while_asking(task: Task) -> bool:
    """Still followed while it waits (before, nothing was due: it stayed there)."""
    return task.state == TaskState.AUTH_REQUIRED and task.next_action == NextAction.POLL


@pytest.mark.django_db(transaction=True)
def test_a_task_the_agent_resumes_after_signing_in_elsewhere_completes(
    settings: Any,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    signs_in_elsewhere: TestAgent,
    executor: SignsInElsewhere,
) -> None:
    """Before, polling stopped at AUTH_REQUIRED: the task stayed there for good while the
    agent had completed it."""
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_POLL_INTERVAL = 0.2
    settings.A2A_LIST_INTERVAL = 0  # followed by GetTask polls (as every 0.3 agent is)
    make_agent(skills=[make_skill(id="ce-review")], a2a_endpoint=signs_in_elsewhere.url)
    with embedded_workers():
        task = creation.create_task(skill_id="ce-review", input={"product": "x"}, user=make_user())
        asked = wait_for(task, _followed_while_asking, timeout=30)
        assert asked.question is not None
        executor.signed_in.set()
        task = wait_for(task, timeout=30)
    assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})


@pytest.fixture
def waiting(pushed_task: Task) -> Task:
    """A task whose agent asked for authorization an hour ago (its deadline past)."""
    question = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "Sign in"}]}
    assert pushed_task.require_input(question, auth=True)
    past = timezone.now() - timedelta(hours=1)
    Task.objects.filter(pk=pushed_task.pk).update(deadline_at=past)
    return fresh(pushed_task)


def test_the_agent_going_on_by_itself_gets_fresh_time(waiting: Task) -> None:
    """Its deadline was set before the wait: kept, the sweep failed the task at once."""
    task = Task.objects.select_related("agent").get(pk=waiting.pk)
    reply = AgentReply(task={"id": "agent-task-1", "status": {"state": "TASK_STATE_WORKING"}})
    apply_agent_reply(task, task_json=reply.task, message=None, via="a2a")
    task = fresh(task)
    assert (task.state, task.question) == (TaskState.WORKING, None)
    assert task.deadline_at > timezone.now()
    deadlines.expire_overdue()
    assert fresh(task).state == TaskState.WORKING


def _poll_answers(task: Task, state: str) -> None:
    """What the worker does with its poll's answer (``agent_polls.poll``), on the task as
    its claim read it."""
    news: dict[str, Any] = {}
    held = task.lease_until
    answer = AgentReply(task={"id": "agent-task-1", "status": {"state": state}})
    apply_agent_reply(task, task_json=answer.task, message=None, via="a2a", pending=news)
    target = call_target(task.agent)
    agent_answers.after_answer(task, target, answer, TaskState.AUTH_REQUIRED, POLL, news, held=held)


@pytest.mark.parametrize("state", ["TASK_STATE_AUTH_REQUIRED", "TASK_STATE_WORKING"])
@pytest.mark.parametrize("send_claimed", [False, True])
def test_a_reply_sent_while_a_poll_was_out_stands(
    waiting: Task, state: str, send_claimed: bool
) -> None:
    """The poll of a task waiting for authorization is out when the person answers. The
    poll's answer (still asking, or working: the agent went on as the person signed in)
    must not schedule a poll over the reply's send, whether a worker holds that send yet
    or not: the reply was lost."""
    lease = timezone.now() + timedelta(seconds=30)
    Task.objects.filter(pk=waiting.pk).update(next_action=NextAction.POLL, lease_until=lease)
    claimed = Task.objects.select_related("agent").get(pk=waiting.pk)  # the poll's claim
    services.reply_to_task(Task.objects.get(pk=waiting.pk), text="signed in")  # meanwhile
    sending = timezone.now() + timedelta(seconds=60)
    if send_claimed:  # another worker took the reply's send
        Task.objects.filter(pk=waiting.pk).update(lease_until=sending)
    _poll_answers(claimed, state)
    task = fresh(claimed)
    assert (task.state, task.next_action) == (TaskState.WORKING, NextAction.SEND)
    assert task.outbound_message["parts"][0]["text"] == "signed in"
    assert task.lease_until == (sending if send_claimed else None)


def test_a_poll_answer_keeps_an_authorization_request_followed(waiting: Task) -> None:
    """The poll that brings the question (WORKING to AUTH_REQUIRED, which clears what is
    due) schedules the next poll."""
    Task.objects.filter(pk=waiting.pk).update(state=TaskState.WORKING)
    lease = timezone.now() + timedelta(seconds=30)
    Task.objects.filter(pk=waiting.pk).update(next_action=NextAction.POLL, lease_until=lease)
    claimed = Task.objects.select_related("agent").get(pk=waiting.pk)
    _poll_answers(claimed, "TASK_STATE_AUTH_REQUIRED")
    task = fresh(claimed)
    assert (task.state, task.next_action) == (TaskState.AUTH_REQUIRED, NextAction.POLL)
    assert task.lease_until is None


def _stamp(seconds: float) -> str:
    """An agent's status time, ``seconds`` from now."""
    return (timezone.now() + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


@pytest.mark.parametrize(("after", "status"), [(5, 200), (-5, 409)])
def test_a_pushed_status_newer_than_the_authorization_request_resumes_the_task(
    pushed_task: Task, after: float, status: int
) -> None:
    """A newer WORKING says the agent went on (it was refused as older than the
    question); an older one still is."""
    asked = push(pushed_task, status_update("TASK_STATE_AUTH_REQUIRED", _stamp(0)))
    assert asked.status_code == 200
    assert fresh(pushed_task).state == TaskState.AUTH_REQUIRED
    answer = push(pushed_task, status_update("TASK_STATE_WORKING", _stamp(after)))
    assert answer.status_code == status
    task = fresh(pushed_task)
    if status == 200:
        assert (task.state, task.question) == (TaskState.WORKING, None)
    else:
        assert task.state == TaskState.AUTH_REQUIRED


def test_a_late_push_does_not_undo_an_authorization_request_a_poll_brought(
    pushed_task: Task,
) -> None:
    """WORKING pushed at t1, AUTH_REQUIRED read by a poll at t3, a delayed push of a
    WORKING from t2: older than the question, though newer than the last push."""
    first = push(pushed_task, status_update("TASK_STATE_WORKING", _stamp(-10)))
    assert first.status_code == 200
    task = Task.objects.select_related("agent").get(pk=pushed_task.pk)
    _poll_answers(task, "TASK_STATE_AUTH_REQUIRED")
    assert fresh(task).state == TaskState.AUTH_REQUIRED
    late = push(pushed_task, status_update("TASK_STATE_WORKING", _stamp(-5)))
    assert late.status_code == 409
    assert fresh(task).state == TaskState.AUTH_REQUIRED


def test_a_pushed_working_after_a_question_for_input_is_still_older_than_it(
    pushed_task: Task,
) -> None:
    """A question for input waits for the person's reply: an agent does not go on by
    itself there, so a WORKING pushed after it is an old one arriving late."""
    asked = push(pushed_task, status_update("TASK_STATE_INPUT_REQUIRED", _stamp(0)))
    assert asked.status_code == 200
    answer = push(pushed_task, status_update("TASK_STATE_WORKING", _stamp(5)))
    assert answer.status_code == 409
    assert fresh(pushed_task).state == TaskState.INPUT_REQUIRED


@pytest.fixture
def stream_only(
    settings: Any, make_skill: Any, make_agent: Any, signs_in_elsewhere: TestAgent
) -> None:
    """The agent registered as one that cannot be polled (its tasks are streamed)."""
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_POLL_INTERVAL = 0.2
    make_agent(
        skills=[make_skill(id="ce-review")], a2a_endpoint=signs_in_elsewhere.url, polling=False
    )


def _asking_while_subscribed(user: Any, executor: SignsInElsewhere) -> Task:
    """A streamed task that asked for authorization, once a subscribe listens to it."""
    task = creation.create_task(skill_id="ce-review", input={"product": "x"}, user=user)
    asked = wait_for(task, lambda t: t.state == TaskState.AUTH_REQUIRED, timeout=30)
    assert asked.question is not None
    assert asked.metadata.get("followedBy") == "stream"
    assert executor.subscribes is not None
    assert executor.subscribes.opened.wait(30), "never subscribed to again"
    return asked


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("stream_only")
def test_a_streamed_task_the_agent_resumes_after_signing_in_elsewhere_completes(
    make_user: Any, executor: SignsInElsewhere
) -> None:
    """An agent that cannot be polled but streams: its stream ended at AUTH_REQUIRED and
    nothing subscribed again, so the task stayed there for good while the agent had
    completed it. It is subscribed to again, and the subscribe listens while it waits."""
    with embedded_workers():
        task = _asking_while_subscribed(make_user(), executor)
        executor.signed_in.set()  # the agent goes on while the subscribe listens
        task = wait_for(task, timeout=30)
    assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("stream_only")
def test_a_reply_while_the_subscribe_listens_reaches_the_agent_once(
    make_user: Any, executor: SignsInElsewhere
) -> None:
    """A person answers the streamed task while a subscribe listens to it: the reply is
    sent (the subscribe's schedule, when the agent closes its stream, does not replace
    it), once, and the task ends. a2a-sdk runs the reply once the execution that asked
    has ended (here: a second after the subscribe began)."""
    executor.waits = 1.0
    with embedded_workers():
        task = _asking_while_subscribed(make_user(), executor)
        services.reply_to_task(task, text="signed in")
        task = wait_for(task, timeout=30)
    assert (task.state, task.output) == (TaskState.COMPLETED, {"verdict": "pass"})
    assert executor.replies == ["signed in"]
