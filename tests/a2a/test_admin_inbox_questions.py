"""The admin's inbox (the task list, ``?waiting=yes``) shows each waiting task's question
cut short, read cut short in the database: a page listing three tasks whose agents asked
1 MB questions (within ``AGENT_ANSWER_MAX_BYTES``) carried all 3 MB, in the column's
``title``. Text parts, a LangGraph interrupt's data, an ADK tool call's arguments."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from a2a import agent_updates, creation
from a2a.models import Task
from a2a.question_excerpts import DATA_CHARS, NOTHING_SAID, TITLE_CHARS

pytestmark = pytest.mark.django_db

INBOX = reverse("admin:a2a_task_changelist") + "?waiting=yes"


@pytest.fixture
def ask(make_skill: Any, make_agent: Any, make_user: Any) -> Any:
    """A task of a new user's whose agent asks ``parts`` (the whole question message)."""
    skill = make_skill()
    make_agent(skills=[skill])
    user = make_user()

    def asking(*parts: dict[str, Any]) -> Task:
        task = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=user)
        question = {"messageId": f"q-{task.pk}", "role": "ROLE_AGENT", "parts": list(parts)}
        agent_updates.apply_agent_update(
            task,
            status={"state": "TASK_STATE_INPUT_REQUIRED", "message": question},
            remote={"id": f"r-{task.pk}", "contextId": "c-1"},
            via="a2a",
        )
        return task

    return asking


def titles(page: str) -> list[str]:
    return re.findall(r'<span title="([^"]*)">', page)


def test_long_questions_are_cut_short_in_the_page_and_the_query(
    admin_client: Any, ask: Any
) -> None:
    """Three 1 MB questions: a small page, each title a few hundred characters at most,
    and no query reads the question whole."""
    for _ in range(3):
        ask({"text": "Which market? " + "x" * 1_000_000})
    response = admin_client.get(INBOX)
    page = response.content.decode()
    assert len(page) < 100_000, len(page)
    shown = titles(page)
    assert len(shown) == 3
    assert all(t.startswith("Which market? xxx") and len(t) <= TITLE_CHARS for t in shown)
    # The rows were read without their question (nor read again for the column).
    rows = list(response.context["cl"].result_list)
    assert len(rows) == 3
    assert all("question" in t.get_deferred_fields() for t in rows)


def test_the_texts_of_several_parts_are_joined(admin_client: Any, ask: Any) -> None:
    ask({"text": "Which market?"}, {"text": "EU or UK."})
    assert titles(admin_client.get(INBOX).content.decode()) == ["Which market? EU or UK."]


@pytest.mark.parametrize(
    ("data", "shown"),
    [
        ({"value": "Which market, EU or UK?"}, "Which market, EU or UK?"),  # LangGraph
        (
            {"id": "c1", "name": "ask_market", "args": {"question": "EU or UK?"}},  # ADK
            "EU or UK?",
        ),
        ({"flag": True}, NOTHING_SAID),  # no strings: said in data only
    ],
    ids=["interrupt", "tool-call", "no-strings"],
)
def test_a_data_question_shows_its_strings(
    admin_client: Any, ask: Any, data: Any, shown: str
) -> None:
    ask({"data": data})
    assert titles(admin_client.get(INBOX).content.decode()) == [shown]


def test_a_long_data_question_is_cut_short(admin_client: Any, ask: Any) -> None:
    """Data read cut short does not parse: its start is shown, no error."""
    ask({"data": {"value": "Which market? " + "y" * 100_000}})
    page = admin_client.get(INBOX)
    assert page.status_code == 200
    (title,) = titles(page.content.decode())
    assert "Which market? yyy" in title
    assert len(title) <= TITLE_CHARS


def test_a_data_question_cut_inside_an_emoji_renders(admin_client: Any, ask: Any) -> None:
    """SQLite keeps JSON ASCII-escaped (an emoji is two 6-character escapes): the cut fell
    between the two at some offset, the half decoded alone, and the page was a 500."""
    emoji = "\N{GRINNING FACE}"
    for pad in range(12):  # '{"q":"' then 12-character emoji: every offset of the cut
        ask({"data": {"q": "a" * pad + emoji * (DATA_CHARS // 12 + 5)}})
    response = admin_client.get(INBOX)
    assert response.status_code == 200
    assert emoji in response.content.decode()


CONTRACT = {"url": "https://files.example/c.pdf", "filename": "contract.pdf"}


@pytest.mark.parametrize(
    ("parts", "shown"),
    [
        ([CONTRACT], "file: contract.pdf"),
        (
            [{"kind": "file", "file": {"name": "c.pdf", "uri": "https://f.example/c"}}],
            "file: c.pdf",
        ),
        ([{"raw": "aGVsbG8=", "mediaType": "text/plain"}], "file: text/plain"),
        (
            [CONTRACT, {"data": {"question": "Approve this contract?"}}],
            "Approve this contract? · file: contract.pdf",
        ),
        ([CONTRACT, {"text": "Approve it?"}], "Approve it? · file: contract.pdf"),
        # ADK sends every field of a part, blank when unset: a blank name is no name
        (
            [{"url": "https://f.example/c.pdf", "filename": "", "mediaType": ""}],
            "file: https://f.example/c.pdf",
        ),
        ([{"raw": "aGVsbG8=", "filename": "", "mediaType": "text/plain"}], "file: text/plain"),
    ],
    ids=[
        "file",
        "file-0.3",
        "nameless-bytes",
        "data-after-a-file",
        "text-after-a-file",
        "blank-name",
        "blank-name-bytes",
    ],
)
def test_a_question_with_files_names_them(
    admin_client: Any, ask: Any, parts: list[Any], shown: str
) -> None:
    """A question made of files, or saying its words after one, showed "(data)"."""
    task = ask(*parts)
    assert titles(admin_client.get(INBOX).content.decode()) == [shown]
    reply_page = admin_client.get(reverse("admin:a2a_task_reply", args=[task.pk]))
    assert shown in reply_page.content.decode()
