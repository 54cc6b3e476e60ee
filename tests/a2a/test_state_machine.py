from __future__ import annotations

from typing import Any

import pytest

from a2a.agent_updates import apply_agent_update
from a2a.face.serializers import task_status
from a2a.models import InvalidTransition, Task, TaskEvent
from a2a.services import reply_to_task
from a2a.states import NextAction, TaskState, normalize_state


@pytest.fixture
def task(make_skill: Any, make_agent: Any) -> Task:
    skill = make_skill()
    agent = make_agent(skills=[skill])
    return Task.objects.create(skill=skill, agent=agent, input={"product": "lamp"})


def test_it_records_each_transition(task: Task) -> None:
    assert task.start_work("sent")
    assert task.complete({"verdict": "pass"}, [])
    events = list(TaskEvent.objects.filter(task=task).values_list("from_state", "to_state"))
    assert events == [
        (TaskState.SUBMITTED, TaskState.WORKING),
        (TaskState.WORKING, TaskState.COMPLETED),
    ]


def test_it_refuses_to_leave_a_terminal_state(task: Task) -> None:
    task.fail("agent_failed", "boom")
    with pytest.raises(InvalidTransition):
        task.start_work()
    task.refresh_from_db()
    assert task.state == TaskState.FAILED


def test_a_stale_copy_loses_the_race(task: Task) -> None:
    stale = Task.objects.get(pk=task.pk)
    assert task.start_work()
    assert not stale.cancel("late")
    assert stale.state == TaskState.WORKING  # reloaded
    assert TaskEvent.objects.filter(task=task).count() == 1


def test_interruption_stops_scheduling(task: Task) -> None:
    task.schedule(NextAction.POLL, 1.0)
    task.require_input({"role": "ROLE_AGENT", "parts": [{"text": "Which market?"}]})
    task.refresh_from_db()
    assert task.next_action == NextAction.NONE
    assert task.next_poll_at is None
    assert task.question["parts"][0]["text"] == "Which market?"


def test_only_failed_tasks_can_be_resubmitted(task: Task) -> None:
    with pytest.raises(InvalidTransition):
        task.resubmit("retry")
    task.reject("no")
    assert task.resubmit("retry by a person")
    assert task.state == TaskState.SUBMITTED


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("TASK_STATE_WORKING", TaskState.WORKING),
        ("completed", TaskState.COMPLETED),
        ("input-required", TaskState.INPUT_REQUIRED),
        ("cancelled", TaskState.CANCELED),
        ("bogus", None),
        (3, None),
    ],
)
def test_it_normalizes_agent_state_spellings(raw: object, expected: str | None) -> None:
    assert normalize_state(raw) == expected


def test_a_status_message_belongs_to_its_status(task: Task) -> None:
    """A2A's TaskStatus carries the message of that status: once a question is answered,
    the task's status (as the face shows it) no longer repeats it, not even when a 0.3
    agent answers the reply with the task as it was; nor does the finished task show an
    old progress note."""
    progress = {"messageId": "p1", "role": "ROLE_AGENT", "parts": [{"text": "Reading..."}]}
    question = {"messageId": "q1", "role": "ROLE_AGENT", "parts": [{"text": "Which market?"}]}
    working = {"state": "TASK_STATE_WORKING", "message": progress}
    apply_agent_update(task, status=working, via="poll")
    assert task_status(task)["message"]["parts"] == progress["parts"]
    asked = {"state": "TASK_STATE_INPUT_REQUIRED", "message": question}
    apply_agent_update(task, status=asked, via="poll")
    assert task_status(task)["message"]["parts"] == question["parts"]
    reply_to_task(task, text="EU")
    assert (task.state, task.status_message) == (TaskState.WORKING, None)
    apply_agent_update(task, status=asked, via="send")  # the question again: stale
    task.refresh_from_db()
    assert (task.state, task.status_message) == (TaskState.WORKING, None)
    assert "message" not in task_status(task)
    apply_agent_update(task, status=working, via="poll")
    done = [{"artifactId": "a", "parts": [{"data": {"verdict": "pass"}}]}]
    apply_agent_update(task, status={"state": "TASK_STATE_COMPLETED"}, artifacts=done, via="poll")
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED
    assert "message" not in task_status(task)


def test_a_question_first_reported_as_work_is_still_asked(task: Task) -> None:
    """ADK reports its question's message with a WORKING status, then asks (INPUT_REQUIRED)
    with the same message: a listing or a send's answer may bring the WORKING first. The
    message was seen, but never answered: it is the question (it used to be taken for a
    repeat of an answered one, and the task waited for its safety poll)."""
    call = {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"data": {"name": "ask_person"}}]}
    apply_agent_update(task, status={"state": "TASK_STATE_WORKING", "message": call}, via="send")
    asked = {"state": "TASK_STATE_INPUT_REQUIRED", "message": call}
    apply_agent_update(task, status=asked, via="list")
    task.refresh_from_db()
    assert (task.state, task.question) == (TaskState.INPUT_REQUIRED, call)
    reply_to_task(task, text="EU")
    assert task.metadata["answeredQuestions"] == ["m1"]
    apply_agent_update(task, status=asked, via="list")  # now it is a repeat
    task.refresh_from_db()
    assert task.state == TaskState.WORKING
