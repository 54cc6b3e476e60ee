"""Operator console defects found with a browser (hunt 16): a stale reply form, deletes
that strand a task, a re-enabled webhook one failure from off, the inbox's order, and a
list action's one message per refused task."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.messages import get_messages
from django.db.models import Model
from django.test import Client, RequestFactory
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from a2a import agent_updates, creation, services
from a2a.face import push, push_configs
from a2a.models import Direction, Task, TaskMessage
from a2a.push_models import PushNotificationConfig
from a2a.services import QuestionChanged
from a2a.states import TaskState, Transport
from agent_profiles.models import AgentProfile
from gateway import offline
from gateway import services as gateway_services
from gateway.models import Delivery, OfflineTask, Presence

pytestmark = pytest.mark.django_db

Q2 = "Rated voltage in volts?"
STALE = "The agent asked something else meanwhile: read its new question."


def asked_on(page: str) -> str:
    """The hidden ``asked`` value of the reply form on ``page``."""
    found = re.search(r'name="asked" value="([^"]*)"', page)
    assert found, "the reply form carries no asked field"
    return found.group(1)


def ask(task: Task, text: str, message_id: str) -> None:
    """The agent asks ``text`` (the task must be working: answered)."""
    task.refresh_from_db()
    question = {"messageId": message_id, "role": "ROLE_AGENT", "parts": [{"text": text}]}
    agent_updates.apply_agent_update(
        task,
        status={"state": "TASK_STATE_INPUT_REQUIRED", "message": question},
        remote={"id": "r-1", "contextId": "c-1"},
        via="a2a",
    )


def sent_answers(task: Task) -> list[Any]:
    """The texts of the messages sent to the agent after its first question."""
    rows = TaskMessage.objects.filter(task=task, direction=Direction.TO_AGENT)
    return [m["parts"] for m in rows.order_by("created_at", "id").values_list("message", flat=True)]


# --- 1. a reply form opened on one question is not sent as the answer to the next --------


def test_a_reply_form_left_open_is_refused_after_the_agent_asked_again_and_keeps_the_text(
    admin_client: Client, asked_task: Task
) -> None:
    """Tab 1 opens the waiting task; tab 2 answers "EU"; the agent asks Q2; tab 1 sends
    "UK". That "UK" used to reach the agent as the answer to Q2, the console saying
    "Reply sent". Now nothing is sent, the page shows Q2 with "UK" still typed, and its
    form answers Q2."""
    page_url = reverse("admin:a2a_task_change", args=[asked_task.pk])
    reply_url = reverse("admin:a2a_task_reply", args=[asked_task.pk])
    first_tab = asked_on(admin_client.get(page_url).content.decode())
    second_tab = asked_on(admin_client.get(page_url).content.decode())
    answered = admin_client.post(
        reply_url, {"text": "EU", "data": "", "asked": second_tab}, follow=True
    )
    assert "Reply sent to the agent." in answered.content.decode()
    ask(asked_task, Q2, "q2")
    before = sent_answers(asked_task)

    stale = admin_client.post(reply_url, {"text": "UK", "data": "", "asked": first_tab})

    assert stale.status_code == 200
    body = stale.content.decode()
    assert escape(STALE) in body
    assert Q2 in body  # the new question
    assert "UK</textarea>" in body  # the answer as typed
    asked_task.refresh_from_db()
    assert asked_task.state == TaskState.INPUT_REQUIRED
    assert sent_answers(asked_task) == before  # nothing went to the agent
    assert "Reply sent" not in body
    # The page's form now answers Q2: sent, it goes.
    again = asked_on(body)
    assert again != first_tab
    sent = admin_client.post(reply_url, {"text": "230", "data": "", "asked": again})
    assert sent.status_code == 302
    asked_task.refresh_from_db()
    assert asked_task.state == TaskState.WORKING
    assert asked_task.outbound_message["parts"] == [{"text": "230"}]


def test_a_reply_checks_the_question_on_the_row_not_on_the_task_as_read(
    asked_task: Task,
) -> None:
    """The race behind the form: a task read while it asked Q1, answered elsewhere and
    asked Q2 before this reply's write, is in the same state, so the transition's
    compare-and-set on the state alone would take the reply. The check on the locked row
    refuses it."""
    stale = Task.objects.get(pk=asked_task.pk)  # read while Q1 is asked
    services.reply_to_task(asked_task, text="EU", asked_at=asked_task.state_changed_at)
    ask(asked_task, Q2, "q2")
    before = sent_answers(asked_task)

    with pytest.raises(QuestionChanged) as refused:
        services.reply_to_task(stale, text="UK", asked_at=stale.state_changed_at)

    assert refused.value.message == STALE
    assert refused.value.status_code == 409
    asked_task.refresh_from_db()
    assert asked_task.state == TaskState.INPUT_REQUIRED
    assert sent_answers(asked_task) == before


def test_the_reply_pages_carry_the_question_they_answer(
    admin_client: Client, asked_task: Task
) -> None:
    """The task page's form and the reply page alone both say which question they answer
    (else a form could not be told from a stale one)."""
    token = asked_task.state_changed_at.isoformat()
    page = admin_client.get(reverse("admin:a2a_task_change", args=[asked_task.pk]))
    alone = admin_client.get(reverse("admin:a2a_task_reply", args=[asked_task.pk]))
    assert asked_on(page.content.decode()) == token
    assert asked_on(alone.content.decode()) == token


def test_a_reply_form_with_an_unreadable_question_time_sends_nothing(
    admin_client: Client, asked_task: Task
) -> None:
    """A tampered or truncated ``asked`` is a form error, not a 500 nor an unchecked
    answer."""
    before = sent_answers(asked_task)
    url = reverse("admin:a2a_task_reply", args=[asked_task.pk])
    response = admin_client.post(url, {"text": "UK", "data": "", "asked": "yesterday"})
    assert response.status_code == 200
    assert "does not say which question it answers" in response.content.decode()
    asked_task.refresh_from_db()
    assert asked_task.state == TaskState.INPUT_REQUIRED
    assert sent_answers(asked_task) == before


# --- 2. no delete of gateway rows: it strands the task ----------------------------------


@pytest.mark.parametrize("model", [OfflineTask, Delivery, Presence])
def test_the_gateway_lists_offer_no_delete(
    rf: RequestFactory, admin_user: Any, model: type[Model]
) -> None:
    """Deleting an offline task (a delivery) left its task waiting on the offline
    transport forever: the deadline sweep leaves such tasks to the delivery's expiry,
    which was on the deleted row. Requeue and Cancel are the ways out."""
    request = rf.get("/admin/")
    request.user = admin_user
    assert "delete_selected" not in admin.site._registry[model].get_actions(request)


def offline_task(make_skill: Any, make_agent: Any, make_user: Any) -> tuple[Task, OfflineTask]:
    """A task waiting offline for its agent (one that connected before), and its row."""
    skill = make_skill()
    agent = make_agent(skills=[skill], a2a_endpoint="")
    AgentProfile.objects.filter(pk=agent.pk).update(gateway_seen_at=timezone.now())
    task = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=make_user())
    gateway_services.push_task(task, reason="agent_unreachable: connection refused")
    task.refresh_from_db()
    assert task.transport == Transport.OFFLINE
    return task, OfflineTask.objects.get(task=task)


@pytest.mark.parametrize("model", ["offlinetask", "delivery"])
def test_an_offline_tasks_page_has_no_delete_and_its_delete_url_is_refused(
    admin_client: Client, make_skill: Any, make_agent: Any, make_user: Any, model: str
) -> None:
    """The row's page offers no Delete link, and its delete page answers 403."""
    _, row = offline_task(make_skill, make_agent, make_user)
    page = admin_client.get(f"/admin/gateway/{model}/{row.pk}/change/")
    assert page.status_code == 200
    assert f"/admin/gateway/{model}/{row.pk}/delete/" not in page.content.decode()
    url = f"/admin/gateway/{model}/{row.pk}/delete/"
    assert admin_client.get(url).status_code == 403
    assert admin_client.post(url, {"post": "yes"}).status_code == 403
    assert Delivery.objects.filter(pk=row.pk).exists()


def test_deleting_the_task_itself_still_takes_its_deliveries(
    admin_client: Client, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """The task's own admin deletes the task whole, its deliveries with it: Django would
    refuse that delete if the deliveries' admin denied the delete permission."""
    task, row = offline_task(make_skill, make_agent, make_user)
    response = admin_client.post(
        reverse("admin:a2a_task_changelist"),
        {"action": "delete_selected", "_selected_action": [str(task.pk)], "post": "yes"},
    )
    assert response.status_code == 302
    assert not Task.objects.filter(pk=task.pk).exists()
    assert not Delivery.objects.filter(pk=row.pk).exists()


@pytest.mark.parametrize("changelist", ["/admin/gateway/offlinetask/", "/admin/gateway/delivery/"])
def test_a_delete_posted_by_hand_leaves_the_offline_task_to_expire(
    admin_client: Client,
    make_skill: Any,
    make_agent: Any,
    make_user: Any,
    changelist: str,
) -> None:
    """The delete action posted anyway is refused: the delivery stays and its expiry
    still ends the task."""
    task, row = offline_task(make_skill, make_agent, make_user)

    admin_client.post(
        changelist, {"action": "delete_selected", "_selected_action": [str(row.pk)], "post": "yes"}
    )

    assert Delivery.objects.filter(pk=row.pk).exists()
    Task.objects.filter(pk=task.pk).update(deadline_at=timezone.now() - timedelta(days=30))
    Delivery.objects.filter(task=task).update(expires_at=timezone.now() - timedelta(days=29))
    offline.expire_offline_tasks()
    task.refresh_from_db()
    assert task.is_terminal, f"the task is {task.state} over {task.transport}"


# --- 4. enabling a webhook on its page resets its failures --------------------------------


def page_inputs(client: Client, url: str) -> dict[str, str]:
    """The page's form as the browser posts it: its hidden inputs (the inline's
    management form), and Save."""
    page = client.get(url).content.decode()
    return {
        **dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page)),
        "_save": "Save",
    }


def test_enabling_a_webhook_on_its_page_starts_it_afresh_as_the_action_does(
    admin_client: Client, settings: Any, asked_task: Task
) -> None:
    """Ticking "enabled" kept the old failure count (read-only on the page): the next
    single failed POST disabled the webhook again. A save that leaves it off keeps its
    count and reason."""
    settings.ALLOW_LOOPBACK_URLS = True
    config = push_configs.create_config(asked_task, {"url": "http://127.0.0.1:9/hook"})
    PushNotificationConfig.objects.filter(pk=config.pk).update(
        enabled=False, consecutive_failures=10, disabled_reason="disabled after failures"
    )
    url = f"/admin/a2a/pushnotificationconfig/{config.pk}/change/"
    kept_off = {**page_inputs(admin_client, url), "disabled_reason": "disabled after failures"}
    assert admin_client.post(url, kept_off).status_code == 302
    config.refresh_from_db()
    assert (config.enabled, config.consecutive_failures) == (False, 10)

    data = {**page_inputs(admin_client, url), "enabled": "on", "disabled_reason": "x"}
    assert admin_client.post(url, data).status_code == 302
    config.refresh_from_db()
    assert (config.enabled, config.consecutive_failures, config.disabled_reason) == (True, 0, "")
    assert not push._fail_config(config, "connection refused")
    config.refresh_from_db()
    assert config.enabled


# --- 5. the inbox lists the longest waiting first ----------------------------------------


def waiting_since(asked_task: Task, minutes: int) -> Task:
    """Another waiting task of the same skill and agent, asked ``minutes`` ago."""
    now = timezone.now()
    return Task.objects.create(
        skill=asked_task.skill,
        agent=asked_task.agent,
        state=TaskState.INPUT_REQUIRED,
        question={"role": "ROLE_AGENT", "parts": [{"text": "waiting"}]},
        created_at=now - timedelta(minutes=minutes + 1),
        state_changed_at=now - timedelta(minutes=minutes),
    )


def test_the_inbox_lists_the_longest_waiting_task_first(
    admin_client: Client, asked_task: Task
) -> None:
    """The filter ordered by waiting time, but the list re-ordered by creation, newest
    first: the oldest question sank to the end. A task created earlier but asked later
    comes after, so the order is by waiting time, not creation; a clicked column still
    orders the list."""
    now = timezone.now()
    Task.objects.filter(pk=asked_task.pk).update(
        created_at=now - timedelta(minutes=61), state_changed_at=now - timedelta(minutes=60)
    )
    recent = waiting_since(asked_task, 1)
    created_first = waiting_since(asked_task, 5)
    Task.objects.filter(pk=created_first.pk).update(created_at=now - timedelta(days=1))
    changelist = reverse("admin:a2a_task_changelist")
    body = admin_client.get(changelist + "?waiting=yes").content.decode()
    at = [body.index(str(t.pk)[:8]) for t in (asked_task, created_first, recent)]
    assert at == sorted(at)
    # The default only: a clicked column (created, oldest first) still orders the list.
    body = admin_client.get(changelist + "?waiting=yes&o=5").content.decode()
    at = [body.index(str(t.pk)[:8]) for t in (created_first, asked_task, recent)]
    assert at == sorted(at)


# --- a list action's refusals: one message -----------------------------------------------


def test_canceling_many_ended_tasks_adds_one_warning_not_one_each(
    admin_client: Client, asked_task: Task
) -> None:
    """Cancel over 22,522 selected rows stored a warning per ended task in the session."""
    ended = [waiting_since(asked_task, n) for n in range(5)]
    Task.objects.filter(pk__in=[t.pk for t in ended]).update(state=TaskState.COMPLETED)
    selected = [str(t.pk) for t in [asked_task, *ended]]
    response = admin_client.post(
        reverse("admin:a2a_task_changelist"),
        {"action": "cancel_selected", "_selected_action": selected},
    )
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert said[0] == "Canceled 1 task(s)."
    assert len(said) == 2
    assert said[1].startswith("5 task(s) not canceled: Task ")
    assert said[1].endswith("And 2 more.")
    asked_task.refresh_from_db()
    assert asked_task.state == TaskState.CANCELED
