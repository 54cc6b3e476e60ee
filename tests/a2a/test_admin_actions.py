"""The task list's actions over a selection (cancel, retry): they read no task whole, a
chunk at a time, and tell each selected task once (a2a/admin_actions.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from a2a.models import Task
from a2a.states import TaskState
from tests.support.queries import selected_columns

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(asked_task: Task) -> Task:
    return asked_task


def ended_like(task: Task, count: int, **fields: Any) -> list[Task]:
    """``count`` tasks of ``task``'s skill and agent, ended with a megabyte of artifacts."""
    blob = [{"artifactId": "a", "parts": [{"text": "x" * 1_000_000}]}]
    fields = {"state": TaskState.COMPLETED, "artifacts": blob, "output": {"r": "y"}, **fields}
    return [Task.objects.create(skill=task.skill, agent=task.agent, **fields) for _ in range(count)]


def act(client: Any, action: str, tasks: list[Task]) -> tuple[list[str], Any]:
    """Run a list action on ``tasks``: what it said, and the queries it ran."""
    from django.contrib.messages import get_messages
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    selected = [str(t.pk) for t in tasks]
    with CaptureQueriesContext(connection) as queries:
        response = client.post(
            reverse("admin:a2a_task_changelist"), {"action": action, "_selected_action": selected}
        )
    assert response.status_code == 302
    return [str(m) for m in get_messages(response.wsgi_request)], queries


def test_a_list_action_reads_no_task_whole(admin_client: Any, task: Task) -> None:
    """The actions read every selected task whole, at once: a cancel over 60 ended tasks
    with a megabyte of artifacts each held hundreds of MB. The refused are counted, the
    first few worded by the verb; the others are read without the JSON the verbs skip."""
    ended = ended_like(task, 5)
    said, queries = act(admin_client, "cancel_selected", [task, *ended])
    assert selected_columns(queries) & {"artifacts", "output"} == set()
    assert said[0] == "Canceled 1 task(s)."
    assert said[1].startswith("5 task(s) not canceled: Task ")
    assert said[1].count(" is TASK_STATE_COMPLETED, a final state; it cannot be canceled.") == 3
    assert said[1].endswith("cannot be canceled. And 2 more.")
    assert len(said) == 2
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED
    assert {t.state for t in Task.objects.exclude(pk=task.pk)} == {TaskState.COMPLETED}


def test_a_list_retry_words_its_refusals_as_the_task_page_does(
    admin_client: Any, task: Task
) -> None:
    (failed,) = ended_like(task, 1, state=TaskState.FAILED)
    (done,) = ended_like(task, 1)
    said, queries = act(admin_client, "retry_selected", [done, failed])
    assert selected_columns(queries) & {"artifacts", "output"} == set()
    assert said == [
        "Retried 1 task(s).",
        "1 task(s) not retried: Only failed or rejected tasks can be retried; "
        f"task {done.pk} is TASK_STATE_COMPLETED.",
    ]
    failed.refresh_from_db()
    assert (failed.state, failed.artifacts) == (TaskState.SUBMITTED, [])


def test_a_list_action_reads_the_selection_a_chunk_at_a_time(
    admin_client: Any, task: Task, monkeypatch: Any
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from a2a import admin_actions

    monkeypatch.setattr(admin_actions, "ACTION_CHUNK", 2)
    waiting = ended_like(task, 4, state=TaskState.WORKING, artifacts=[], output=None)
    with CaptureQueriesContext(connection) as queries:
        said, _ = act(admin_client, "cancel_selected", [task, *waiting])
    assert said == ["Canceled 5 task(s)."]
    assert set(Task.objects.values_list("state", flat=True)) == {TaskState.CANCELED}
    # in_bulk of 2, 2 and 1 ids (with their skill and agent): three reads of tasks for the
    # verb, none of all five at once.
    loads = [
        re.search(r'"a2a_task"\."id" IN \(([^)]*)\)', q["sql"])
        for q in queries.captured_queries
        if "agent_profiles_skill" in q["sql"]
    ]
    assert [len(m.group(1).split(",")) for m in loads if m] == [2, 2, 1], loads


@pytest.mark.parametrize(
    ("before", "change"), [(TaskState.WORKING, "completed"), (TaskState.FAILED, "retried")]
)
def test_a_task_changing_state_while_the_action_reads_is_told_once(
    admin_client: Any, task: Task, monkeypatch: Any, before: str, change: str
) -> None:
    """The action read its selection in three queries (the refusals it names, their count,
    the tasks it may act on): a task that changed state between them fell in neither group
    (left out of the report) or in both (the verb run on it twice). Here it changes right
    after the action's second read of tasks; every selected task is told once."""
    import re as re_

    from django.db import connection

    from a2a import admin_actions

    ended = ended_like(task, 1, state=TaskState.COMPLETED, artifacts=[], output=None)[0]
    racing = ended_like(task, 1, state=before, artifacts=[], output=None)[0]
    reads = {"n": 0, "on": False}

    def then_it_changes(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)
        if reads["on"] and sql.lstrip().startswith("SELECT") and '"a2a_task"' in sql:
            reads["n"] += 1
            if reads["n"] == 2:
                reads["on"] = False
                if change == "completed":
                    Task.objects.filter(pk=racing.pk).update(state=TaskState.COMPLETED)
                else:
                    Task.objects.filter(pk=racing.pk).update(state=TaskState.WORKING)
        return result

    real = admin_actions.act_on_each

    def reading(*args: Any, **kwargs: Any) -> Any:
        reads["on"] = True
        with connection.execute_wrapper(then_it_changes):
            return real(*args, **kwargs)

    monkeypatch.setattr("a2a.admin.act_on_each", reading)
    selection = [task, ended, racing]
    told, _ = act(admin_client, "cancel_selected", selection)
    counts = [int(n) for n in re_.findall(r"(\d+) task\(s\)", " ".join(told))]
    assert sum(counts) == len(selection), told
