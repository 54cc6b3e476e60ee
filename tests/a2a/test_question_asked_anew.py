"""An agent that asks again while its task already waits for a person: the person sees,
and answers, the question asked now (a second question, a fresh sign-in link), on every
path; the same question rebuilt with a new messageId is not a new one. An answer the
agent refuses goes back to the person with the question it answered, even past
``TASK_AGENT_MESSAGES_MAX``."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from a2a import agent_updates, creation, services
from a2a.exceptions import A2APermanentError
from a2a.models import Task
from a2a.send_failures import handle_send_failure
from a2a.services import QuestionChanged
from a2a.states import TaskState
from tests.a2a.helpers import fresh, push, status_update
from tests.a2a.test_console_defects import ask

pytestmark = pytest.mark.django_db

T1, T2 = "2026-12-01T10:00:01Z", "2026-12-01T10:00:02Z"


def question(message_id: str, text: str) -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_AGENT", "parts": [{"text": text}]}


def test_a_second_question_while_waiting_is_shown_and_answered(asked_task: Task) -> None:
    asked_at = fresh(asked_task).state_changed_at
    ask(asked_task, "Which voltage?", "q2")  # the task still waits on "EU or UK?"
    task = fresh(asked_task)
    assert (task.state, task.question["messageId"]) == (TaskState.INPUT_REQUIRED, "q2")
    assert task.state_changed_at > asked_at  # the reply form's token moved: asked anew
    services.reply_to_task(task, text="230V", by="x", question_id="q2")
    assert fresh(task).outbound_message["taskId"] == "r-1"


def test_the_same_question_under_a_new_message_id_is_not_asked_anew(asked_task: Task) -> None:
    """An agent that builds its status message afresh at every read (a new random id):
    each poll would otherwise move the question on under the person, whose reply, from a
    form read before, was then refused as answering "something else"."""
    asked_at = fresh(asked_task).state_changed_at
    ask(asked_task, "EU or UK?", "q1-again")
    task = fresh(asked_task)
    assert (task.question["messageId"], task.state_changed_at) == ("q1", asked_at)
    services.reply_to_task(task, text="EU", by="x", asked_at=asked_at)
    assert fresh(task).state == TaskState.WORKING


def test_a_question_answered_before_reported_again_is_not_asked_anew(asked_task: Task) -> None:
    services.reply_to_task(asked_task, text="EU", by="x")  # answers q1
    ask(asked_task, "Which voltage?", "q2")
    ask(asked_task, "EU or UK?", "q1")  # stale news of the answered question
    assert fresh(asked_task).question["messageId"] == "q2"
    with pytest.raises(QuestionChanged):
        services.reply_to_task(fresh(asked_task), text="EU", by="x", question_id="q1")


def test_a_fresh_sign_in_link_is_shown(make_skill: Any, make_agent: Any, make_user: Any) -> None:
    """AUTH_REQUIRED stays followed (polled): a later read brings a new link, the first
    expired; the person must be shown the new one."""
    skill = make_skill()
    make_agent(skills=[skill])
    task = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=make_user())
    for message_id, link in (("a1", "https://idp.example/old"), ("a2", "https://idp.example/new")):
        status = {"state": "TASK_STATE_AUTH_REQUIRED", "message": question(message_id, link)}
        agent_updates.apply_agent_reply(
            fresh(task),
            task_json={"id": "r-1", "contextId": "c-1", "status": status},
            message=None,
            via="a2a",
        )
    task = fresh(task)
    assert task.state == TaskState.AUTH_REQUIRED
    assert task.question["parts"] == [{"text": "https://idp.example/new"}]


def test_a_pushed_second_question_is_shown(pushed_task: Task) -> None:
    first = status_update("TASK_STATE_INPUT_REQUIRED", T1, message=question("q1", "EU or UK?"))
    assert push(pushed_task, first).status_code == 200
    second = question("q2", "Which voltage?")
    answer = push(pushed_task, status_update("TASK_STATE_INPUT_REQUIRED", T2, message=second))
    assert answer.status_code == 200, answer.text
    task = fresh(pushed_task)
    assert (task.state, task.question["messageId"]) == (TaskState.INPUT_REQUIRED, "q2")


@override_settings(TASK_AGENT_MESSAGES_MAX=2)
def test_a_refused_answer_brings_back_the_question_it_answered_past_the_cap(
    asked_task: Task,
) -> None:
    """Past the cap the question asked last is not kept: the latest kept message is an
    older question, answered already, and was shown again instead."""
    services.reply_to_task(asked_task, text="EU", by="x")  # answers q1
    ask(asked_task, "Which voltage?", "q2")  # kept: the second message
    services.reply_to_task(fresh(asked_task), text="230V", by="x")
    ask(asked_task, "Which plug type?", "q3")  # past the cap: not kept
    assert fresh(asked_task).question["messageId"] == "q3"
    services.reply_to_task(fresh(asked_task), text="Type Z", by="x", question_id="q3")
    refusal = A2APermanentError("no such plug type", code="agent_refused", status=400)
    handle_send_failure(fresh(asked_task), refusal)
    task = fresh(asked_task)
    assert (task.state, task.question["messageId"]) == (TaskState.INPUT_REQUIRED, "q3")
    assert "no such plug type" in task.error["message"]


def test_a_refused_answer_brings_back_the_kept_question_it_answered(asked_task: Task) -> None:
    """Within the cap the question is read from the conversation, not copied."""
    services.reply_to_task(asked_task, text="EU", by="x")
    assert fresh(asked_task).metadata["repliedToQuestion"] == {"key": "q1"}
    refusal = A2APermanentError("say EU or UK", code="agent_refused", status=400)
    handle_send_failure(fresh(asked_task), refusal)
    assert fresh(asked_task).question == question("q1", "EU or UK?")


# LangGraph's server asks with a blank status message and an ``Interrupt`` artifact.
INTERRUPT = {
    "artifactId": "interrupt-1",
    "name": "Interrupt",
    "parts": [{"data": {"id": "i-1", "value": "Which market: EU or UK?"}}],
}


def blank(message_id: str) -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_AGENT", "parts": [{"text": ""}]}


def asked_in_artifacts(make_skill: Any, make_agent: Any, make_user: Any, *before: Any) -> Task:
    skill = make_skill()
    make_agent(skills=[skill])
    task = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=make_user())
    status = {"state": "TASK_STATE_INPUT_REQUIRED", "message": blank("m-1")}
    agent_updates.apply_agent_update(
        task, status=status, artifacts=[*before, INTERRUPT], remote={"id": "r-1"}, via="a2a"
    )
    task = fresh(task)
    assert task.state == TaskState.INPUT_REQUIRED
    return task


def test_a_blank_status_again_keeps_the_question_asked_in_artifacts(
    make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """A status that says nothing (a blank text part), reported while the task waits on a
    question asked in artifacts, without them (a gateway frame, a stream's status event,
    a push): not a new question, on which the person's form would have been refused."""
    task = asked_in_artifacts(make_skill, make_agent, make_user)
    status = {"state": "TASK_STATE_INPUT_REQUIRED", "message": blank("m-2")}
    agent_updates.apply_agent_update(task, status=status, remote={"id": "r-1"}, via="a2a")
    after = fresh(task)
    assert after.question["parts"] == INTERRUPT["parts"]
    assert after.state_changed_at == task.state_changed_at


def test_a_question_asked_in_artifacts_is_not_copied_into_the_metadata(
    make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """The reply keeps where the question is (the task's artifacts), not a copy of them,
    which metadata, served with the task and rewritten often, would carry for good; a
    refused answer brings the question back from them."""
    report = {"artifactId": "report", "parts": [{"text": "x" * 50_000}]}
    task = asked_in_artifacts(make_skill, make_agent, make_user, report)
    services.reply_to_task(task, text="EU", by="x")
    replied = fresh(task).metadata["repliedToQuestion"]
    assert "x" * 100 not in str(replied)
    assert replied["inArtifacts"]["messageId"] == "m-1"
    refusal = A2APermanentError("say EU or UK", code="agent_refused", status=400)
    handle_send_failure(fresh(task), refusal)
    again = fresh(task)
    assert again.state == TaskState.INPUT_REQUIRED
    assert again.question["parts"] == report["parts"] + INTERRUPT["parts"]


def test_a_reply_without_a_question_pinned_answers_the_question_asked_when_it_lands(
    asked_task: Task, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An A2A client's reply through the face names no question: it answers what the task
    asks when it arrives. The agent asked anew after the reply read the task: the reply
    recorded the question read before as answered (a refusal brought that one back, and
    the agent's report of the new one, stale news, was asked again)."""
    from a2a import services

    real = services.refuse_if_unable

    def agent_asks_anew_meanwhile(task: Task, *args: Any, **kwargs: Any) -> Any:
        ask(Task.objects.get(pk=task.pk), "Which voltage?", "q2")
        return real(task, *args, **kwargs)

    monkeypatch.setattr(services, "refuse_if_unable", agent_asks_anew_meanwhile)
    services.reply_to_task(asked_task, text="230V", by="a client")  # read on "EU or UK?"
    task = fresh(asked_task)
    assert task.state == TaskState.WORKING
    assert task.metadata["repliedToQuestion"] == {"key": "q2"}
    assert "q2" in task.metadata["answeredQuestions"]
    refusal = A2APermanentError("say 110V or 230V", code="agent_refused", status=400)
    handle_send_failure(task, refusal)
    assert fresh(task).question == question("q2", "Which voltage?")
