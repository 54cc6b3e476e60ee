"""The tasks admin under input the REST API refuses: the reply form holds text and data to
the API's text and depth rule (a form error, nothing sent), and the task page takes the
8-character ids the list shows without a 500."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.urls import reverse
from django.utils.html import escape
from rest_framework.test import APIClient

from a2a.models import Task
from a2a.reply_form import REPLY_TEXT_MAX_CHARS, ReplyForm
from a2a.states import TaskState

pytestmark = pytest.mark.django_db

DEEP = 100_000


@pytest.fixture
def task(asked_task: Task) -> Task:
    return asked_task


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ('{"market": "E\\u0000U"}', "market contains a NUL character"),
        ('{"market": "\\ud800"}', "market contains a lone surrogate"),
        ('{"m\\u0000": "EU"}', "a key contains a NUL character"),
        ('{"a": ' + "[" * DEEP + "]" * DEEP + "}", "nested deeper than 64 levels"),
        ('{"n": NaN}', "Enter a valid JSON"),
    ],
    ids=["nul", "lone-surrogate", "nul-key", "deep", "nan"],
)
def test_the_reply_form_refuses_data_the_api_refuses(
    admin_client: Any, task: Task, data: str, said: str
) -> None:
    """``POST /api/tasks/{id}/reply`` answers these with 400 invalid_text / json_too_deep;
    the form used to send them (SQLite), or answer 500 (PostgreSQL's DataError, the
    parser's RecursionError)."""
    sent = task.outbound_message
    url = reverse("admin:a2a_task_reply", args=[task.pk])
    response = admin_client.post(url, {"text": "", "data": data})
    assert response.status_code == 200  # the form again, with the error under "data"
    assert said in response.context["form"].errors["data"][0]
    assert escape(data[:20]) in response.content.decode()  # shown as typed, not re-parsed
    task.refresh_from_db()
    assert task.state == TaskState.INPUT_REQUIRED
    assert task.outbound_message == sent  # no answer went out


def test_the_reply_forms_text_holds_to_the_same_rule() -> None:
    """A lone surrogate cannot arrive in a form post, but a form built in code takes it."""
    form = ReplyForm({"text": "E\ud800U"})
    assert not form.is_valid()
    assert form.errors["text"] == ["The value contains a lone surrogate, which is not allowed."]
    nul = ReplyForm({"text": "E\x00U"})
    assert nul.errors["text"] == ["The value contains a NUL character, which is not allowed."]


def test_the_reply_form_refuses_text_longer_than_the_api_takes(
    admin_client: Any, task: Task
) -> None:
    """``POST /api/tasks/{id}/reply`` refuses a text over 100,000 characters (400); the
    form sent it to the agent. Now an error under "text", the text kept in the box (no
    ``maxlength`` there: a browser would cut a longer paste short without a word); the
    longest text the API takes still goes out."""
    assert REPLY_TEXT_MAX_CHARS == 100_000
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {task.created_by.raw_token}")
    too_long = "x" * (REPLY_TEXT_MAX_CHARS + 1)
    assert (
        api.post(f"/api/tasks/{task.pk}/reply", {"text": too_long}, format="json").status_code
        == 400
    )
    sent = task.outbound_message
    url = reverse("admin:a2a_task_reply", args=[task.pk])
    response = admin_client.post(url, {"text": too_long, "data": ""})
    assert response.status_code == 200
    assert "at most 100000 characters" in response.context["form"].errors["text"][0]
    page = response.content.decode()
    assert too_long in page
    assert "maxlength" not in page
    task.refresh_from_db()
    assert task.state == TaskState.INPUT_REQUIRED
    assert task.outbound_message == sent
    admin_client.post(url, {"text": too_long[:-1], "data": ""})
    task.refresh_from_db()
    assert task.state == TaskState.WORKING
    assert task.outbound_message["parts"][0]["text"] == too_long[:-1]


@pytest.mark.parametrize("object_id", ["not-a-uuid", "e1872027", "1"])
def test_a_task_page_for_a_partial_id_lists_the_tasks_holding_it(
    admin_client: Any, task: Task, object_id: str
) -> None:
    """The list shows ids cut to 8 characters, and operators paste those into the URL: the
    page used to answer 500 (``ValidationError`` from the UUID field)."""
    response = admin_client.get(f"/admin/a2a/task/{object_id}/change/")
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('admin:a2a_task_changelist')}?q={object_id}"


def test_the_8_character_id_from_the_list_finds_its_task(admin_client: Any, task: Task) -> None:
    short = str(task.pk)[:8]
    response = admin_client.get(f"/admin/a2a/task/{short}/change/", follow=True)
    assert response.status_code == 200
    assert "is not a whole task id" in response.content.decode()
    assert list(response.context["cl"].result_list) == [task]
    # A whole id that names no task is still a plain 404.
    assert admin_client.get(f"/admin/a2a/task/{uuid.uuid4()}/change/").status_code == 404
