"""A call's answer that comes back after a person reassigned or retried the task.

Against real a2a-sdk agents: the person's reassign (or a retry, after the sweep failed
the task) lands while the worker's send, poll or stream to the first agent is on the
wire. The answer belongs to the earlier attempt: it must not be applied to the fresh one
(the first agent's task id on the new attempt made it poll the new agent for a task it
never had; a poll's answer replaced its send, or showed the old agent's question), and
the first agent's task a send started is canceled, since nothing follows it any more. A
send overtaken by a person's reply to the same agent task keeps that task. A send
overtaken before its call (a retry, or another worker's send after this one's claim ran
out) is not made at all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.utils import timezone

from a2a import (
    agent_answers,
    agent_calls,
    agent_push,
    agent_push_body,
    agent_reads,
    agent_streams,
    agent_updates,
    creation,
    services,
)
from a2a.exceptions import A2APermanentError, A2AProtocolError, A2ATransientError
from a2a.models import Task
from a2a.reassign import reassign_task
from a2a.states import NextAction, TaskState
from a2a.transports.base import AgentReply
from a2a.transports.rest import RestTransport
from a2a.worker import process_task
from agent_profiles.models import AgentProfile
from tests.support.agents import TestAgent, run_agent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def peers() -> Iterator[tuple[TestAgent, TestAgent]]:
    with run_agent() as one, run_agent() as two:
        yield one, two


@pytest.fixture
def user(
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    peers: tuple[TestAgent, TestAgent],
    settings: Any,
) -> Any:
    settings.ALLOW_LOOPBACK_URLS = True
    settings.A2A_LIST_INTERVAL = 0  # polled one by one: the plainest way to follow a task
    skill = make_skill(id="ce-review")
    now = timezone.now()
    make_agent(skills=[skill], a2a_endpoint=peers[0].url, card_read_at=now)
    make_agent(skills=[skill], id="agent-two", a2a_endpoint=peers[1].url, card_read_at=now)
    return make_user()


def create(user: Any) -> Task:
    return creation.create_task(
        skill_id="ce-review",
        input={"product": "lamp", "behaviour": "working"},
        agent_id="agent-one",
        user=user,
    )


def meanwhile(
    monkeypatch: pytest.MonkeyPatch, act: Callable[[], None], raises: Exception | None = None
) -> None:
    """The first send reaches the agent; ``act`` runs before its answer is applied (or
    ``raises`` is what the send answers instead)."""
    real_send = RestTransport.send

    def send(self: RestTransport, *args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(RestTransport, "send", real_send)  # the first send only
        reply = real_send(self, *args, **kwargs)
        act()
        if raises is not None:
            raise raises
        return reply

    monkeypatch.setattr(RestTransport, "send", send)


def reassign(task: Task, user: Any) -> Callable[[], None]:
    def act() -> None:
        row = Task.objects.select_related("agent", "skill").get(pk=task.pk)
        reassign_task(row, agent_id="agent-two", by=user)

    return act


def retry(task: Task, user: Any) -> Callable[[], None]:
    """The sweep fails the task (its deadline) and a person retries it at once."""

    def act() -> None:
        row = Task.objects.select_related("agent", "skill").get(pk=task.pk)
        row.fail("timeout", "timed out")
        services.retry_task(row, by=user)

    return act


def assert_fresh_attempt_at(task: Task, agent_id: str) -> None:
    """The fresh attempt stands, its send still due, nothing of the old answer on it."""
    task.refresh_from_db()
    assert task.agent_id == agent_id
    assert (task.state, task.next_action, task.remote_task_id) == (
        TaskState.SUBMITTED,
        NextAction.SEND,
        "",
    )
    assert task.error is None


def before_the_call(monkeypatch: pytest.MonkeyPatch, act: Callable[[], None]) -> None:
    """``act`` runs once the worker has claimed and read the task, before its send records
    the attempt and calls the agent."""
    real = agent_calls.follow_mode

    def follow_mode(*args: Any) -> Any:
        monkeypatch.setattr(agent_calls, "follow_mode", real)  # the first send only
        act()
        return real(*args)

    monkeypatch.setattr(agent_calls, "follow_mode", follow_mode)


def test_a_send_overtaken_by_a_retry_before_its_call_is_not_made(
    user: Any, peers: tuple[TestAgent, TestAgent], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old attempt's message never reaches the agent (its task there would be one
    nothing follows); the retry's send is the one sent."""
    one, _ = peers
    task = create(user)

    before_the_call(monkeypatch, retry(task, user))
    process_task(task.pk)
    assert one.sends == 0
    assert_fresh_attempt_at(task, "agent-one")
    assert task.attempts == 0
    process_task(task.pk)
    task.refresh_from_db()
    assert one.sends == 1
    assert (task.attempts, task.push_serial) == (1, task.push_offset + 1)


def test_a_send_another_worker_made_after_this_claim_ran_out_is_not_made_twice(
    user: Any, peers: tuple[TestAgent, TestAgent], monkeypatch: pytest.MonkeyPatch
) -> None:
    """This worker's claim ran out before its call (a long pause); another worker claimed
    the task and sent it. This worker's send, one attempt behind, is not made: the agent
    does the work once."""
    one, _ = peers
    task = create(user)

    def other_worker_sends() -> None:
        Task.objects.filter(pk=task.pk).update(lease_until=timezone.now())
        process_task(task.pk)

    before_the_call(monkeypatch, other_worker_sends)
    process_task(task.pk)
    task.refresh_from_db()
    assert one.sends == 1
    assert task.attempts == 1
    assert task.remote_task_id
    assert task.next_action == NextAction.POLL


def test_a_reassign_during_the_send_is_not_taken_over_by_its_answer(
    user: Any, peers: tuple[TestAgent, TestAgent], monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = peers
    task = create(user)
    meanwhile(monkeypatch, reassign(task, user))
    process_task(task.pk)
    assert_fresh_attempt_at(task, "agent-two")
    assert len(one.canceled) == 1  # the first agent's task, which nothing follows now
    process_task(task.pk)  # the fresh attempt goes to the new agent
    task.refresh_from_db()
    assert two.sends == 1
    assert task.remote_task_id
    assert task.state == TaskState.SUBMITTED
    assert task.next_action == NextAction.POLL


def test_a_retry_during_the_send_gets_its_own_send(
    user: Any, peers: tuple[TestAgent, TestAgent], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep failed the task while its send was on the wire, and a person retried it
    at once: the retry's send (a new message) is not replaced by the first one's task."""
    one, _ = peers
    task = create(user)

    meanwhile(monkeypatch, retry(task, user))
    process_task(task.pk)
    assert_fresh_attempt_at(task, "agent-one")
    assert len(one.canceled) == 1
    process_task(task.pk)
    assert one.sends == 2


@pytest.mark.parametrize(
    "failure",
    [
        A2AProtocolError("The agent's answer is not A2A."),
        A2ATransientError("down", code="agent_unreachable"),
    ],
    ids=["not_a2a", "transient"],
)
def test_a_failed_send_overtaken_by_a_reassign_leaves_the_new_attempt_alone(
    user: Any, monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    """A failure of the old send neither fails the new attempt (blaming the old agent)
    nor puts its send off, nor writes over its metadata (the reassignment's record)."""
    task = create(user)
    meanwhile(monkeypatch, reassign(task, user), raises=failure)
    process_task(task.pk)
    assert_fresh_attempt_at(task, "agent-two")
    assert task.next_poll_at is not None
    assert task.next_poll_at <= timezone.now()
    assert len(task.metadata["reassignments"]) == 1
    assert "sendFailures" not in task.metadata


def test_a_reply_during_the_send_keeps_the_agent_task_it_goes_to(
    user: Any, peers: tuple[TestAgent, TestAgent], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent pushed a question while the first send was on the wire, and a person
    answered it at once: the send's answer is stale (dropped), but the agent task it names
    is the one the reply goes to, never canceled."""
    one, _ = peers
    task = create(user)
    question = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "Which colour?"}]}
    real_send = RestTransport.send

    def send(self: RestTransport, *args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(RestTransport, "send", real_send)
        reply = real_send(self, *args, **kwargs)
        asked = {
            **reply.task,
            "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": question},
        }
        agent_push.apply(task.pk, 1, agent_push_body.parse({"task": asked}), agent_id="agent-one")
        row = Task.objects.select_related("agent", "skill").get(pk=task.pk)
        services.reply_to_task(row, text="red", by=user)
        return reply

    monkeypatch.setattr(RestTransport, "send", send)
    process_task(task.pk)
    task.refresh_from_db()
    assert (task.state, task.next_action) == (TaskState.WORKING, NextAction.SEND)
    assert task.remote_task_id
    assert one.canceled == []


def test_a_reassign_during_a_poll_is_not_taken_over_by_its_answer(
    user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = create(user)
    process_task(task.pk)  # sent: agent-one has it, polled next
    task.refresh_from_db()
    assert (task.state, task.next_action) == (TaskState.SUBMITTED, NextAction.POLL)
    question = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "Which colour?"}]}
    remote = {
        "id": task.remote_task_id,
        "contextId": "ctx-of-agent-one",
        "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": question},
    }

    def read_task(target: Any, remote_task_id: str, **kwargs: Any) -> AgentReply:
        reassign(task, user)()  # while the poll is on the wire
        return AgentReply(task=remote)

    monkeypatch.setattr(agent_reads, "read_task", read_task)
    Task.objects.filter(pk=task.pk).update(next_poll_at=timezone.now())
    process_task(task.pk)
    assert_fresh_attempt_at(task, "agent-two")
    assert (task.remote_context_id, task.question) == ("", None)


def test_a_failed_stream_send_overtaken_by_a_reassign_leaves_the_new_attempt_alone(
    user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent followed by streams (not polled): its stream's failure, after the person
    reassigned the task, does not fail the new attempt, blaming the old agent."""
    AgentProfile.objects.filter(pk="agent-one").update(streaming=True, polling=False)
    task = create(user)
    act = reassign(task, user)

    def stream(self: RestTransport, *args: Any, **kwargs: Any) -> Any:
        def events() -> Iterator[Any]:  # as the transport's: the request goes out here
            act()
            raise A2AProtocolError("The agent's answer is not A2A.")
            yield

        return events()

    monkeypatch.setattr(RestTransport, "stream", stream)
    process_task(task.pk)
    assert_fresh_attempt_at(task, "agent-two")


@pytest.mark.parametrize("message_id", ["12345", "true", "1.5"])
def test_a_message_id_that_reads_as_json_is_still_its_send(
    user: Any, peers: tuple[TestAgent, TestAgent], message_id: str
) -> None:
    """A caller's message id such as "12345" (SQLite decodes a JSON key read back)."""
    one, _ = peers
    task = create(user)
    Task.objects.filter(pk=task.pk).update(
        outbound_message={**task.outbound_message, "messageId": message_id}
    )
    process_task(task.pk)
    task.refresh_from_db()
    assert task.remote_task_id  # the answer was applied
    assert (task.state, task.next_action) == (TaskState.SUBMITTED, NextAction.POLL)
    assert one.canceled == []


def test_an_overtaken_send_keeps_the_reassigns_record(
    user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A send failed once before (its failures noted on the task); the send again is on
    the wire when the person reassigns. Clearing those failures wrote the worker's copy
    of the metadata over the reassign's (its record, the new match)."""
    task = create(user)
    Task.objects.filter(pk=task.pk).update(
        metadata={**(task.metadata or {}), "sendFailures": 1},
        error={"code": "agent_unreachable", "message": "once", "details": None},
    )
    meanwhile(monkeypatch, reassign(task, user))
    process_task(task.pk)
    assert_fresh_attempt_at(task, "agent-two")
    assert len(task.metadata["reassignments"]) == 1
    assert task.metadata["match"]["agentId"] == "agent-two"


def test_a_reassign_just_after_a_streams_first_event_keeps_its_send(
    user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first event of a sending stream named the agent's task, and the person
    reassigned before the send was marked done (its one condition: the send is due,
    which the fresh attempt's is too): the new agent's send became following no task.
    Now the mark is made under the row's lock with the event, so the reassign waits."""
    task = create(user)
    claimed = Task.claim(task.pk)
    assert claimed is not None
    target = agent_answers.target_of(claimed)
    real_mark_sent = Task.mark_sent
    person = threading.Thread(target=reassign(task, user))

    def mark_sent(self: Task) -> bool:
        person.start()
        person.join(1.0)  # done at once if nothing holds the row; else after the commit
        return real_mark_sent(self)

    monkeypatch.setattr(Task, "mark_sent", mark_sent)
    event = {"id": "old-1", "contextId": "c1", "status": {"state": "TASK_STATE_SUBMITTED"}}
    events = iter([AgentReply(task=event), AgentReply(task=event)])
    agent_streams.follow_events(claimed, target, events, sending=True)
    person.join(15)
    assert_fresh_attempt_at(task, "agent-two")


def test_a_reassign_during_a_refused_reply_is_not_taken_over_by_its_read(
    user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A person's reply is on the wire when the task is reassigned; the old agent refuses
    the reply (400), and the platform reads the old agent's task to see where it stands:
    that read is the old attempt's, and its answer replaced the new attempt's send."""
    task = create(user)
    process_task(task.pk)
    task.refresh_from_db()
    question = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "Sure?"}]}
    agent_updates.apply_agent_update(
        task, status={"state": "TASK_STATE_INPUT_REQUIRED", "message": question}, via="a2a"
    )
    services.reply_to_task(Task.objects.get(pk=task.pk), text="yes")

    def send(self: RestTransport, *args: Any, **kwargs: Any) -> Any:
        reassign(task, user)()  # while the reply is on the wire
        raise A2APermanentError("The agent refused the message.", code="agent_refused", status=400)

    monkeypatch.setattr(RestTransport, "send", send)
    process_task(task.pk)
    assert_fresh_attempt_at(task, "agent-two")
    assert (task.artifacts, task.status_message) == ([], None)
