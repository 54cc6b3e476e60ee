"""The tasks admin: list, detail with conversation and history, reply form, actions."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from a2a import agent_updates, creation, services
from a2a.models import Task
from a2a.pause_models import AgentPause
from a2a.states import NextAction, TaskState
from tests.support.queries import selected_columns

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(asked_task: Task) -> Task:
    return asked_task


def test_the_list_shows_tasks(admin_client: Any, task: Task) -> None:
    response = admin_client.get(reverse("admin:a2a_task_changelist"))
    assert response.status_code == 200
    assert str(task.pk)[:8] in response.content.decode()


def test_the_detail_reads_top_down_with_the_question_and_reply_form_first(
    admin_client: Any, task: Task
) -> None:
    page = admin_client.get(reverse("admin:a2a_task_change", args=[task.pk])).content.decode()
    assert "input required" in page  # the state badge
    question, thread = page.index('id="question"'), page.index('id="task-thread"')
    history, raw = page.index("Transition history"), page.index('id="task-raw"')
    assert question < thread < history < raw
    assert "EU or UK?" in page[question:thread]
    assert "Send the answer" in page[question:thread]
    assert page.count("TASK_STATE_INPUT_REQUIRED") >= 1
    # read-only: no Save buttons; the raw JSON only collapsed at the end
    assert 'name="_save"' not in page
    assert "<details><summary>The task as the API returns it" in page[raw:]
    assert '"remoteTaskId"' not in page[:raw]


def test_the_detail_shows_times_with_seconds(admin_client: Any, task: Task) -> None:
    page = admin_client.get(reverse("admin:a2a_task_change", args=[task.pk])).content.decode()
    assert f"{task.created_at:%Y-%m-%d %H:%M:%S}" in page


def test_a_completed_task_shows_its_output_once_and_no_actions_but_none(
    admin_client: Any, task: Task
) -> None:
    services.reply_to_task(task, text="EU")
    artifacts = [{"parts": [{"data": {"verdict": "pass", "note": "unique-note-42"}}]}]
    agent_updates.apply_agent_update(
        task, status={"state": "completed"}, artifacts=artifacts, via="x"
    )
    page = admin_client.get(reverse("admin:a2a_task_change", args=[task.pk])).content.decode()
    raw = page.index('id="task-raw"')
    # the output once (the artifact is not repeated; data parts stay collapsed)
    assert page[:raw].count("unique-note-42") == 1
    assert "completed" in page
    assert "took" in page
    assert 'id="cancel-task"' not in page
    assert 'id="retry-task"' not in page
    assert 'id="question"' not in page


def test_the_detail_shows_output_validation_errors(admin_client: Any, task: Task) -> None:
    services.reply_to_task(task, text="EU")
    artifacts = [{"parts": [{"data": {"verdict": "maybe"}}]}]
    agent_updates.apply_agent_update(
        task, status={"state": "completed"}, artifacts=artifacts, via="x"
    )
    page = admin_client.get(reverse("admin:a2a_task_change", args=[task.pk])).content.decode()
    assert "is not one of" in page


def test_the_reply_form_answers_the_agent(admin_client: Any, task: Task) -> None:
    url = reverse("admin:a2a_task_reply", args=[task.pk])
    assert "EU or UK?" in admin_client.get(url).content.decode()
    response = admin_client.post(url, {"text": "EU", "data": '{"market": "EU"}'})
    assert response.status_code == 302
    task.refresh_from_db()
    assert task.state == TaskState.WORKING
    assert task.outbound_message["taskId"] == "r-1"
    assert task.outbound_message["parts"] == [{"text": "EU"}, {"data": {"market": "EU"}}]


def test_the_reply_form_refuses_empty_answers(admin_client: Any, task: Task) -> None:
    url = reverse("admin:a2a_task_reply", args=[task.pk])
    response = admin_client.post(url, {"text": "", "data": ""})
    assert response.status_code == 200
    task.refresh_from_db()
    assert task.state == TaskState.INPUT_REQUIRED


def test_a_reply_to_a_task_not_waiting_changes_nothing(admin_client: Any, task: Task) -> None:
    services.cancel_task(task)
    url = reverse("admin:a2a_task_reply", args=[task.pk])
    admin_client.post(url, {"text": "EU"})
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED


def test_cancel_and_retry_actions(admin_client: Any, task: Task) -> None:
    changelist = reverse("admin:a2a_task_changelist")
    admin_client.post(changelist, {"action": "cancel_selected", "_selected_action": [task.pk]})
    task.refresh_from_db()
    assert (task.state, task.next_action) == (TaskState.CANCELED, NextAction.CANCEL)
    # a canceled task cannot be retried: a warning, nothing changes
    admin_client.post(changelist, {"action": "retry_selected", "_selected_action": [task.pk]})
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED
    Task.objects.filter(pk=task.pk).update(state=TaskState.FAILED)
    admin_client.post(changelist, {"action": "retry_selected", "_selected_action": [task.pk]})
    task.refresh_from_db()
    assert task.state == TaskState.SUBMITTED


def test_the_page_buttons_cancel_and_retry(admin_client: Any, task: Task) -> None:
    page = admin_client.get(reverse("admin:a2a_task_change", args=[task.pk])).content.decode()
    assert 'id="cancel-task"' in page
    assert 'id="retry-task"' not in page
    assert admin_client.get(reverse("admin:a2a_task_cancel", args=[task.pk])).status_code == 405
    response = admin_client.post(reverse("admin:a2a_task_cancel", args=[task.pk]))
    assert response.status_code == 302
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED
    # retry of a canceled task: refused with the platform's message, nothing changes
    page = admin_client.post(reverse("admin:a2a_task_retry", args=[task.pk]), follow=True)
    assert "retried" in page.content.decode().lower()
    task.refresh_from_db()
    assert task.state == TaskState.CANCELED
    Task.objects.filter(pk=task.pk).update(state=TaskState.FAILED)
    page = admin_client.get(reverse("admin:a2a_task_change", args=[task.pk])).content.decode()
    assert 'id="retry-task"' in page
    admin_client.post(reverse("admin:a2a_task_retry", args=[task.pk]))
    task.refresh_from_db()
    assert task.state == TaskState.SUBMITTED


def test_the_waiting_filter_is_the_inbox(admin_client: Any, task: Task, make_user: Any) -> None:
    other = creation.create_task(
        skill_id=task.skill_id, input={"product": "x"}, user=task.created_by
    )
    url = reverse("admin:a2a_task_changelist") + "?waiting=yes"
    page = admin_client.get(url).content.decode()
    assert str(task.pk)[:8] in page
    assert str(other.pk)[:8] not in page
    assert "EU or UK?" in page  # the question column


def test_the_dashboard_counts_states_waiting_tasks_failures_and_agents(
    admin_client: Any, task: Task
) -> None:
    failed = creation.create_task(
        skill_id=task.skill_id, input={"product": "x"}, user=task.created_by
    )
    failed.fail("agent_unreachable", "Could not reach the agent")
    page = admin_client.get(reverse("admin:index")).content.decode()
    waiting = page[page.index('id="waiting-card"') : page.index('id="tasks-card"')]
    assert "1 task<" in waiting
    assert "?waiting=yes" in waiting
    assert reverse("admin:a2a_task_change", args=[task.pk]) in waiting  # the oldest
    failures = page[page.index('id="failures-card"') :]
    assert "agent_unreachable" in failures
    assert 'id="agents-card"' in page
    assert 'id="offline-card"' in page


def test_the_dashboard_says_how_long_ended_tasks_are_kept(admin_client: Any, settings: Any) -> None:
    def tasks_card() -> str:
        page = admin_client.get(reverse("admin:index")).content.decode()
        return page[page.index('id="tasks-card"') : page.index('id="failures-card"')]

    settings.TASK_RETENTION_DAYS = 0
    assert "Ended tasks are kept forever" in tasks_card()
    settings.TASK_RETENTION_DAYS = 90
    assert "Ended tasks are kept 90 days after they end" in tasks_card()
    settings.TASK_RETENTION_DAYS = 0.5
    assert "Ended tasks are kept 0.5 days after they end" in tasks_card()


def test_the_page_reassigns_a_waiting_task_to_another_agent(
    admin_client: Any, task: Task, make_agent: Any
) -> None:
    make_agent(id="agent-two", skills=[task.skill])
    page = admin_client.get(reverse("admin:a2a_task_change", args=[task.pk])).content.decode()
    assert '<option value="agent-two">agent-two</option>' in page
    assert '<option value="agent-one">' not in page  # not the current one
    url = reverse("admin:a2a_task_reassign", args=[task.pk])
    assert admin_client.get(url).status_code == 405
    response = admin_client.post(url, {"agent_id": "agent-two"}, follow=True)
    assert "Task reassigned." in response.content.decode()
    task.refresh_from_db()
    assert (task.agent_id, task.state) == ("agent-two", TaskState.SUBMITTED)
    page = admin_client.get(reverse("admin:a2a_task_change", args=[task.pk])).content.decode()
    assert "from agent-one to agent-two by admin (was input_required)" in page


def test_no_reassign_form_without_another_agent(admin_client: Any, task: Task) -> None:
    page = admin_client.get(reverse("admin:a2a_task_change", args=[task.pk])).content.decode()
    assert 'id="reassign-task"' not in page


def test_the_listing_cursors_are_shown_and_cannot_be_edited(admin_client: Any, agent: Any) -> None:
    from a2a.listing_models import AgentListing

    AgentListing.follow(agent.pk)
    AgentListing.objects.filter(pk=agent.pk).update(misses=2)
    page = admin_client.get("/admin/a2a/agentlisting/").content.decode()
    assert agent.pk in page
    assert "misses" in page.lower()
    detail = admin_client.get(f"/admin/a2a/agentlisting/{agent.pk}/change/")
    assert detail.status_code == 200
    assert admin_client.get("/admin/a2a/agentlisting/add/").status_code == 403


def test_the_list_reads_none_of_the_json_it_does_not_show(admin_client: Any, task: Task) -> None:
    """25 tasks with 4 MB of artifacts each made one page of the list hold 200 MB."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        response = admin_client.get(reverse("admin:a2a_task_changelist"))
    assert response.status_code == 200
    assert "EU or UK?" in response.content.decode()  # the question column still shows
    assert selected_columns(queries) == set()


def test_the_agent_page_and_dashboard_read_none_of_the_tasks_json(
    admin_client: Any, task: Task
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for url in (
        reverse("admin:agent_profiles_agentprofile_change", args=[task.agent_id]),
        "/admin/",
    ):
        with CaptureQueriesContext(connection) as queries:
            response = admin_client.get(url)
        assert response.status_code == 200
        assert str(task.pk)[:8] in response.content.decode()  # recent / oldest waiting
        assert selected_columns(queries) == set(), url


def test_an_action_from_the_list_still_acts_on_whole_tasks(admin_client: Any, task: Task) -> None:
    response = admin_client.post(
        reverse("admin:a2a_task_changelist"),
        {"action": "cancel_selected", "_selected_action": [str(task.pk)]},
        follow=True,
    )
    assert response.status_code == 200
    assert "Canceled 1 task(s)." in [str(m) for m in response.context["messages"]]
    task.refresh_from_db()
    assert task.input == {"product": "lamp"}  # the verb saw (and kept) the whole task
    assert task.outbound_message


def test_a_reply_to_a_task_that_ended_after_the_page_read_it_says_so(
    admin_client: Any, task: Task, monkeypatch: Any
) -> None:
    """The task ended between the reply's read and its lock: it was told "The agent asked
    something else meanwhile", and shown a reply form, for a task that waits for nothing."""
    from a2a.admin import TaskAdmin
    from a2a.models import TaskMessage

    asked = task.state_changed_at.isoformat()
    real = TaskAdmin._task_for

    def read_then_the_agent_completes(self: Any, request: Any, pk: Any) -> Any:
        read = real(self, request, pk)
        assert Task.objects.get(pk=pk).complete({"verdict": "pass"}, [])
        return read

    monkeypatch.setattr(TaskAdmin, "_task_for", read_then_the_agent_completes)
    sent = TaskMessage.objects.filter(task=task, direction="to_agent").count()
    response = admin_client.post(
        reverse("admin:a2a_task_reply", args=[task.pk]), {"asked": asked, "text": "EU"}, follow=True
    )
    said = [str(m) for m in response.context["messages"]]
    assert said == [
        f"Task {task.pk} is TASK_STATE_COMPLETED; only a task waiting for input "
        "(TASK_STATE_INPUT_REQUIRED or TASK_STATE_AUTH_REQUIRED) takes a reply."
    ]
    assert 'name="text"' not in response.content.decode()  # no reply form
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED
    assert TaskMessage.objects.filter(task=task, direction="to_agent").count() == sent


def test_the_agents_pauses_are_listed_and_can_be_lifted(admin_client: Any, agent: Any) -> None:
    """An agent's pause (Retry-After on a poll) shows, read-only; deleting it lifts it."""
    until = timezone.now() + timedelta(minutes=5)
    AgentPause.ask(agent.pk, until)
    AgentPause.ask(agent.pk, until - timedelta(minutes=1))  # an earlier end: the later stays
    page = admin_client.get("/admin/a2a/agentpause/").content.decode()
    assert agent.pk in page
    assert admin_client.get("/admin/a2a/agentpause/add/").status_code == 403
    assert AgentPause.until_of(agent.pk, timezone.now()) == until
    lifted = admin_client.post(f"/admin/a2a/agentpause/{agent.pk}/delete/", {"post": "yes"})
    assert lifted.status_code == 302
    assert AgentPause.paused(timezone.now()) == []
