"""A question an agent asks in artifacts alone (LangGraph's server: an ``Interrupt``
artifact, no status message nor timestamp), answered by a person.

* The agent refuses the answer (HTTP 400) and its task, read back, still asks: the person
  is asked again with that question and told why (the refusal's reason). It was taken for
  a new question: the task waited again with no word of the refusal.
* The agent answers the reply's send with its task as it was (not taken in yet): that
  echo is no new question (:func:`a2a.question_memory.asked_again`). It was: the task
  waited for a second answer while the agent finished.
* The agent takes the answer and asks the same again (a graph looping until it gets a
  valid answer): a read after the reply's answer that still asks is a new question. Taken
  for the echo, the task was polled until its deadline and nobody was asked.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from starlette.responses import JSONResponse

from a2a import services
from a2a.models import Task, TaskEvent
from a2a.question_memory import ANSWERED, asked_again, message_key
from a2a.states import TaskState
from a2a.wire import question_of
from tests.support.scripted_agent import register, run_out, run_scripted_agent, start

INTERRUPT = {
    "artifactId": "interrupt",
    "name": "Interrupt",
    "parts": [{"data": {"id": "i-1", "value": "Which market, EU or UK?"}}],
}
REFUSAL = {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "EU or UK only"}}


def asking(message: dict[str, Any] | None = None) -> dict[str, Any]:
    """The agent's task ``t1`` asking in its ``Interrupt`` artifact (and ``message``)."""
    status: dict[str, Any] = {"state": "TASK_STATE_INPUT_REQUIRED"}
    if message is not None:
        status["message"] = message
    return {"id": "t1", "contextId": "c", "status": status, "artifacts": [INTERRUPT]}


def is_reply(kind: str, body: Any) -> bool:
    return kind == "send" and bool(((body or {}).get("message") or {}).get("taskId"))


def asks(task: Task) -> list[Any]:
    """The task's transitions into INPUT_REQUIRED."""
    events = TaskEvent.objects.filter(task=task, to_state=TaskState.INPUT_REQUIRED)
    return list(events.values_list("from_state", flat=True))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "message",
    [
        None,
        {"role": "ROLE_AGENT", "parts": []},
        {"messageId": "q1", "role": "ROLE_AGENT", "parts": []},
    ],
    ids=["no-message", "empty-message", "empty-message-with-id"],
)
def test_a_refused_answer_to_an_artifact_question_is_asked_again_with_the_reason(
    make_agent: Any, make_skill: Any, make_user: Any, settings: Any, message: Any
) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    user = make_user()
    with run_scripted_agent() as agent:
        register(make_agent, make_skill, agent)

        def answer(kind: str, body: Any) -> Any:
            if is_reply(kind, body):
                return JSONResponse(REFUSAL, status_code=400)
            task = asking(copy.deepcopy(message))
            return JSONResponse(task if kind == "get" else {"task": task})

        agent.answer = answer
        task = run_out(start(user))
        assert task.state == TaskState.INPUT_REQUIRED, task.error
        question = task.question
        assert question["parts"] == INTERRUPT["parts"]
        services.reply_to_task(task, text="FR")
        task = run_out(task)
        assert agent.calls["get"] >= 1  # the agent's task was read after the refusal
    assert task.state == TaskState.INPUT_REQUIRED
    assert task.question == question
    assert task.error["code"] == "agent_refused"
    assert task.error["message"].startswith("The agent refused the answer; answer again.")
    assert "EU or UK only" in task.error["message"]
    assert asks(task)[1:] == [TaskState.WORKING]  # asked, then asked again after the answer
    # And the person's second answer goes out as any.
    services.reply_to_task(task, text="EU")
    assert Task.objects.get(pk=task.pk).state == TaskState.WORKING


@pytest.mark.django_db(transaction=True)
def test_the_echo_of_an_answered_artifact_question_is_no_new_question(
    make_agent: Any, make_skill: Any, make_user: Any, settings: Any
) -> None:
    """The reply's send is answered with the task as it was (the answer not taken in yet,
    a non-blocking send): the task works on, and completes from the next poll."""
    settings.ALLOW_LOOPBACK_URLS = True
    user = make_user()
    replied: list[Any] = []
    result = {"artifactId": "result", "parts": [{"data": {"verdict": "pass"}}]}
    with run_scripted_agent() as agent:
        register(make_agent, make_skill, agent)

        def answer(kind: str, body: Any) -> Any:
            if is_reply(kind, body):
                replied.append(body)
                return JSONResponse({"task": asking()})
            if kind == "get" and replied:  # the agent took the answer in and finished
                done = {"state": "TASK_STATE_COMPLETED"}
                return JSONResponse({**asking(), "status": done, "artifacts": [INTERRUPT, result]})
            return JSONResponse({"task": asking()})

        agent.answer = answer
        task = run_out(start(user))
        assert task.state == TaskState.INPUT_REQUIRED
        services.reply_to_task(task, text="EU")
        task = run_out(task)
    assert len(asks(task)) == 1  # asked once
    assert task.state == TaskState.COMPLETED, task.error


@pytest.mark.django_db
def test_asked_again_knows_a_question_asked_in_artifacts(task: Task) -> None:
    """The question kept is made of the artifacts (and an empty message, when there is
    one); the same artifacts report it again, other artifacts ask something new."""
    status = {"state": "TASK_STATE_INPUT_REQUIRED"}
    empty = {"role": "ROLE_AGENT", "parts": []}
    asked = question_of(None, [INTERRUPT])
    with_empty = question_of(empty, [INTERRUPT])
    answered = [message_key(asked), message_key(with_empty)]
    Task.objects.filter(pk=task.pk).update(metadata={ANSWERED: answered})
    task.refresh_from_db()
    assert asked_again(task, status, artifacts=[INTERRUPT], replying=True)
    # Not in the answer to the reply: the agent asks the same again (its content is all
    # that tells it), and taken for the echo the task would poll, never asking a person.
    assert not asked_again(task, status, artifacts=[INTERRUPT])
    assert asked_again(task, {**status, "message": empty}, artifacts=[INTERRUPT])
    other = {**INTERRUPT, "parts": [{"data": {"id": "i-2", "value": "Which year?"}}]}
    assert not asked_again(task, status, artifacts=[other], replying=True)
    assert not asked_again(task, {**status, "message": empty}, artifacts=[other])
    assert not asked_again(task, status)  # nothing to tell it by: a new question


@pytest.mark.django_db(transaction=True)
def test_the_same_question_asked_again_after_the_answer_reaches_the_person(
    make_agent: Any, make_skill: Any, make_user: Any, settings: Any
) -> None:
    settings.ALLOW_LOOPBACK_URLS = True
    user = make_user()
    with run_scripted_agent() as agent:
        register(make_agent, make_skill, agent)
        agent.answer = lambda kind, body: JSONResponse(
            asking() if kind == "get" else {"task": asking()}
        )
        task = run_out(start(user))
        assert task.state == TaskState.INPUT_REQUIRED, task.error
        services.reply_to_task(task, text="France")  # the agent takes it and asks again
        task = run_out(task)
    assert task.state == TaskState.INPUT_REQUIRED
    assert task.question == question_of(None, [INTERRUPT])
