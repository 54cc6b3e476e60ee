"""An agent disabled, awaiting approval or without the skill while its task is in flight
gets no work (docs/registry.md, Disable): a queued send goes to another agent of the
skill, else the task ends FAILED ``agent_inactive``; a person's reply or retry is refused
up front (409 ``agent_inactive``), the task left as it was for a person to reassign.
Driven through the real worker against scripted agents on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.utils import timezone
from starlette.responses import Response

from a2a import local_dispatch, reassign, services, worker
from a2a.agent_standing import unable
from a2a.exceptions import AgentInactive
from a2a.face.errors import as_face_error, jsonrpc_error_body, rest_error_body
from a2a.models import Task, TaskEvent
from a2a.states import TaskState
from agent_profiles import access
from agent_profiles.exceptions import NoAgentAvailable
from agent_profiles.models import AgentProfile, AgentStatus, Skill
from tests.a2a.helpers import wait_for
from tests.a2a.test_api import client_for
from tests.support.scripted_agent import (
    COMPLETED,
    ScriptedAgent,
    run_out,
    run_scripted_agent,
    scripted_agent,
    start,
    task_answer,
)

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "which market?"}]}


def done(kind: str = "", body: Any = None) -> Response:
    """The agent completes at once with an output that fits the skill."""
    return task_answer(
        COMPLETED, artifacts=[{"artifactId": "a", "parts": [{"data": {"verdict": "pass"}}]}]
    )


@pytest.fixture(autouse=True)
def _loopback(settings: Any) -> None:
    settings.ALLOW_LOOPBACK_URLS = True


@pytest.fixture
def one(make_agent: Any, make_skill: Any) -> Iterator[ScriptedAgent]:
    """``agent-one``, alone for ``ce-review``, completing whatever it is sent."""
    with scripted_agent(make_agent, make_skill, "HTTP+JSON") as agent:
        agent.answer = done
        yield agent


@pytest.fixture
def two(one: ScriptedAgent, make_agent: Any) -> Iterator[ScriptedAgent]:
    """``agent-two``, another active agent of ``ce-review``, completing what it is sent."""
    with run_scripted_agent() as agent:
        agent.answer = done
        make_agent(
            id="agent-two",
            skills=[Skill.objects.get(pk="ce-review")],
            a2a_endpoint=agent.url,
            card_read_at=timezone.now(),
            protocol_binding="HTTP+JSON",
            protocol_version="1.0",
        )
        yield agent


def agent_one() -> Any:
    return AgentProfile.objects.filter(pk="agent-one")


# --- a queued send to an agent that may not have it -------------------------------------


@pytest.mark.parametrize("status", [AgentStatus.DISABLED, AgentStatus.PENDING])
def test_a_queued_task_of_an_inactive_agent_alone_ends_agent_inactive(
    status: str, one: ScriptedAgent, make_user: Any
) -> None:
    task = start(make_user())
    access.set_status(agent_one(), status)
    task = run_out(task)
    assert one.calls["send"] == 0  # nothing sent to it
    assert task.state == TaskState.FAILED
    assert task.error["code"] == "agent_inactive"
    said = "is disabled" if status == AgentStatus.DISABLED else "is awaiting approval"
    assert f"agent 'agent-one' {said}" in task.error["message"]
    assert "no other active agent offers skill 'ce-review'" in task.error["message"]
    assert task.error["details"] == {
        "agentId": "agent-one",
        "skillId": "ce-review",
        "reason": status,
    }
    assert task.lease_until is None
    assert not task.next_action


def test_an_agent_disabled_in_this_process_gets_no_new_task_at_once(
    one: ScriptedAgent, make_user: Any, settings: Any
) -> None:
    """The admin's Disable (a bulk update, no post_save) drops this process's registry
    cache: the embedded platform claims a new task at birth with the cached agent, whose
    status said active, and sent it to the disabled agent. Now the next creation reads
    the registry again: no active agent (400 no_agent), nothing sent."""
    settings.A2A_HINT_QUEUE = False
    user = make_user()
    local_dispatch.start()
    try:
        for _ in range(2):  # the second fills the registry cache (the first read the card)
            assert wait_for(start(user)).state == TaskState.COMPLETED
        assert access.disable(agent_one()) == 1
        with pytest.raises(NoAgentAvailable):
            start(user)
    finally:
        local_dispatch.stop()
    assert one.calls["send"] == 2
    assert Task.objects.count() == 2


def test_a_queued_task_of_a_disabled_agent_moves_to_another_agent(
    one: ScriptedAgent, two: ScriptedAgent, make_user: Any
) -> None:
    task = start(make_user())
    if task.agent_id != "agent-one":  # the matcher's pick: give it to the one disabled
        Task.objects.filter(pk=task.pk).update(agent_id="agent-one")
    access.disable(agent_one())
    task = run_out(task)
    assert (one.calls["send"], two.calls["send"]) == (0, 1)
    assert (task.state, task.agent_id) == (TaskState.COMPLETED, "agent-two")
    moved = task.metadata["reassignments"][-1]
    assert (moved["by"], moved["from"], moved["to"]) == ("the platform", "agent-one", "agent-two")
    assert moved["reason"] == {
        "code": "agent_inactive",
        "reason": "disabled",
        "message": "is disabled",
    }
    event = TaskEvent.objects.filter(task=task, reason__startswith="reassigned").get()
    assert event.reason.endswith(": agent 'agent-one' is disabled")


def test_a_queued_task_of_an_agent_that_dropped_the_skill_moves(
    one: ScriptedAgent, two: ScriptedAgent, make_user: Any, make_skill: Any
) -> None:
    task = start(make_user())
    if task.agent_id != "agent-one":
        Task.objects.filter(pk=task.pk).update(agent_id="agent-one")
    AgentProfile.objects.get(pk="agent-one").skills.set([make_skill(id="other-skill")])
    task = run_out(task)
    assert (one.calls["send"], two.calls["send"]) == (0, 1)
    assert (task.state, task.agent_id) == (TaskState.COMPLETED, "agent-two")
    reason = task.metadata["reassignments"][-1]["reason"]
    assert reason["reason"] == "skill_dropped"
    assert reason["message"] == "no longer offers skill 'ce-review'"


def test_a_queued_task_of_an_agent_that_dropped_the_skill_alone_ends(
    one: ScriptedAgent, make_user: Any, make_skill: Any
) -> None:
    task = start(make_user())
    AgentProfile.objects.get(pk="agent-one").skills.set([make_skill(id="other-skill")])
    task = run_out(task)
    assert one.calls["send"] == 0
    assert (task.state, task.error["code"]) == (TaskState.FAILED, "agent_inactive")
    assert "no longer offers skill 'ce-review'" in task.error["message"]


def test_a_move_the_task_was_taken_from_meanwhile_changes_nothing(
    one: ScriptedAgent, two: ScriptedAgent, make_user: Any
) -> None:
    """The worker read the task for its send; a person reassigned it before the move:
    the person's move stands (not written over, not failed)."""
    task = start(make_user())
    Task.objects.filter(pk=task.pk).update(
        agent_id="agent-one", next_poll_at=timezone.now(), lease_until=None
    )
    claimed = worker.claim(task.pk)
    assert claimed is not None
    access.disable(agent_one())
    why = unable(claimed, read_again=True)
    assert why is not None
    assert why["reason"] == "disabled"
    person = Task.objects.get(pk=task.pk)
    reassign.reassign_task(person, agent_id="agent-two", by="bob")
    reassign.move_off_unable(claimed, why)  # the worker's move, on its stale claim
    task.refresh_from_db()
    assert (task.state, task.agent_id) == (TaskState.SUBMITTED, "agent-two")
    assert [m["by"] for m in task.metadata["reassignments"]] == ["bob"]
    # No other agent (agent-one disabled): the worker would fail it, but a person's
    # action took the claim first (a cancel, say): not failed over it.
    Task.objects.filter(pk=task.pk).update(lease_until=None, next_poll_at=timezone.now())
    claimed = worker.claim(task.pk)
    assert claimed is not None
    Task.objects.filter(pk=task.pk).update(lease_until=None)
    reassign.move_off_unable(claimed, {"reason": "disabled", "message": "is disabled"})
    task.refresh_from_db()
    assert (task.state, task.error) == (TaskState.SUBMITTED, None)


# --- a person's reply and retry ---------------------------------------------------------


def asking(make_user: Any, one: ScriptedAgent) -> tuple[Any, Task]:
    """A task of a new user's, sent once, its agent asking a question."""

    def answer(kind: str, body: Any) -> Response:
        if kind in ("send", "get"):
            return task_answer("TASK_STATE_INPUT_REQUIRED", QUESTION)
        return Response(status_code=404)

    one.answer = answer
    user = make_user()
    task = start(user)
    worker.process_task(task.pk)
    task.refresh_from_db()
    assert task.state == TaskState.INPUT_REQUIRED, task.error
    return user, task


@pytest.mark.parametrize("status", [AgentStatus.DISABLED, AgentStatus.PENDING])
def test_a_reply_for_an_inactive_agent_is_refused_and_the_task_waits(
    status: str, one: ScriptedAgent, make_user: Any
) -> None:
    user, task = asking(make_user, one)
    access.set_status(agent_one(), status)
    response = client_for(user).post(f"/api/tasks/{task.pk}/reply", {"text": "EU"}, format="json")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "agent_inactive"
    said = "is disabled" if status == AgentStatus.DISABLED else "is awaiting approval"
    assert f"Agent 'agent-one' {said}" in error["message"]
    assert "Reassign the task" in error["message"]
    assert error["details"] == {"agentId": "agent-one", "skillId": "ce-review", "reason": status}
    task.refresh_from_db()
    assert task.state == TaskState.INPUT_REQUIRED
    assert task.question is not None
    assert not task.next_action
    assert one.calls["send"] == 1  # the first send only


def test_a_reply_to_an_agent_that_dropped_the_skill_still_reaches_it(
    one: ScriptedAgent, make_user: Any, make_skill: Any
) -> None:
    """The agent asked mid-task: a person's reply is judged by its status alone, by the
    API and by the worker alike. The worker judged the reply's send by the skill too, and
    failed the task agent_inactive after the API had said the reply was sent."""
    user, task = asking(make_user, one)
    AgentProfile.objects.get(pk="agent-one").skills.set([make_skill(id="other-skill")])
    response = client_for(user).post(f"/api/tasks/{task.pk}/reply", {"text": "EU"}, format="json")
    assert response.status_code == 200, response.content
    worker.process_task(task.pk)  # the reply's send
    task.refresh_from_db()
    assert one.calls["send"] == 2  # the reply went to the agent that asked
    assert (task.agent_id, task.error) == ("agent-one", None)
    assert task.state == TaskState.WORKING


def test_a_reply_refused_for_a_disabled_agent_can_be_reassigned(
    one: ScriptedAgent, two: ScriptedAgent, make_user: Any
) -> None:
    user, task = asking(make_user, one)
    access.disable(agent_one())
    with pytest.raises(AgentInactive):
        services.reply_to_task(task, text="EU")
    task = reassign.reassign_task(Task.objects.get(pk=task.pk), by=user)
    task = run_out(task)
    assert (task.state, task.agent_id) == (TaskState.COMPLETED, "agent-two")
    assert one.calls["send"] == 1


def test_a_retry_for_a_disabled_agent_is_refused_and_the_task_stays_failed(
    one: ScriptedAgent, make_user: Any
) -> None:
    one.answer = lambda kind, body: task_answer("TASK_STATE_FAILED")
    user = make_user()
    task = run_out(start(user))
    assert task.state == TaskState.FAILED
    access.disable(agent_one())
    response = client_for(user).post(f"/api/tasks/{task.pk}/retry")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "agent_inactive"
    assert "Agent 'agent-one' is disabled" in error["message"]
    after = Task.objects.get(pk=task.pk)
    assert (after.state, after.error, after.metadata.get("retries")) == (
        TaskState.FAILED,
        task.error,
        None,
    )
    assert one.calls["send"] == 1


def test_a_retry_for_an_agent_without_the_skill_is_refused(
    one: ScriptedAgent, make_user: Any, make_skill: Any
) -> None:
    one.answer = lambda kind, body: task_answer("TASK_STATE_FAILED")
    user = make_user()
    task = run_out(start(user))
    AgentProfile.objects.get(pk="agent-one").skills.set([make_skill(id="other-skill")])
    response = client_for(user).post(f"/api/tasks/{task.pk}/retry")
    assert response.status_code == 409
    assert response.json()["error"]["details"]["reason"] == "skill_dropped"
    assert Task.objects.get(pk=task.pk).state == TaskState.FAILED


def test_a_retry_of_a_task_that_is_not_failed_is_still_invalid_state(
    one: ScriptedAgent, make_user: Any
) -> None:
    """The state is refused first, as before: the agent's standing is not the problem."""
    user, task = asking(make_user, one)
    access.disable(agent_one())
    response = client_for(user).post(f"/api/tasks/{task.pk}/retry")
    assert (response.status_code, response.json()["error"]["code"]) == (409, "invalid_state")


def test_the_a2a_face_maps_agent_inactive_on_both_bindings() -> None:
    exc = AgentInactive(
        "Agent 'agent-one' is disabled: ...",
        {"agentId": "agent-one", "skillId": "ce-review", "reason": "disabled"},
    )
    error = as_face_error(exc, "send_message")
    status, body = rest_error_body(error)
    assert status == 400
    info = body["error"]["details"][0]
    assert info["reason"] == "UNSUPPORTED_OPERATION"
    assert info["metadata"] == {
        "code": "agent_inactive",
        "agentId": "agent-one",
        "skillId": "ce-review",
        "reason": "disabled",
    }
    assert jsonrpc_error_body(error, 1)["error"]["code"] == -32004
