"""A person's answer in the shape the asking agent's framework resumes on (Strands'
interrupt responses, ADK's function responses), and as written otherwise; shapes the
question gets wrong leave the answer as it is. The live agents: test_strands_agent.py,
test_adk_agent.py."""

from __future__ import annotations

from typing import Any

import pytest

from a2a.answer_shapes import shaped_parts
from a2a.models import Task
from a2a.services import reply_to_task
from a2a.states import TaskState
from a2a.wire import said_text

TEXT = [{"text": "EU"}]


def strands(*ids: str) -> dict[str, Any]:
    interrupts = [{"interruptId": i, "name": "market", "reason": "Which?"} for i in ids]
    return {"parts": [{"text": "Agent requires input"}, {"data": {"interrupts": interrupts}}]}


def adk(*ids: str) -> dict[str, Any]:
    meta = {"adk_type": "function_call", "adk_is_long_running": True}
    calls = [{"data": {"id": i, "name": "ask", "args": {}}, "metadata": meta} for i in ids]
    return {"parts": calls}


def interrupt_response(interrupt_id: str, response: Any) -> dict[str, Any]:
    return {"data": {"interruptResponse": {"interruptId": interrupt_id, "response": response}}}


def function_response(call_id: str, response: Any) -> dict[str, Any]:
    data = {"id": call_id, "name": "ask", "response": response}
    return {"data": data, "metadata": {"adk_type": "function_response"}}


@pytest.mark.parametrize(
    ("question", "answer", "sent"),
    [
        (None, TEXT, TEXT),
        ({"parts": [{"text": "Which market?"}]}, TEXT, TEXT),
        (strands("i-1"), TEXT, [interrupt_response("i-1", "EU")]),
        (
            strands("i-1"),
            [{"data": {"market": "EU"}}],
            [interrupt_response("i-1", {"market": "EU"})],
        ),
        # Two interrupts: an answer keyed by their ids answers each; else each gets it all.
        (
            strands("i-1", "i-2"),
            [{"data": {"i-1": "EU", "i-2": 3}}],
            [interrupt_response("i-1", "EU"), interrupt_response("i-2", 3)],
        ),
        (
            strands("i-1", "i-2"),
            TEXT,
            [interrupt_response("i-1", "EU"), interrupt_response("i-2", "EU")],
        ),
        # Already in the framework's shape: as written.
        (strands("i-1"), [interrupt_response("i-1", "UK")], [interrupt_response("i-1", "UK")]),
        (adk("c-1"), TEXT, [function_response("c-1", {"answer": "EU"})]),
        (adk("c-1"), [{"data": {"market": "EU"}}], [function_response("c-1", {"market": "EU"})]),
        (
            adk("c-1"),
            [function_response("c-1", {"ok": True})],
            [function_response("c-1", {"ok": True})],
        ),
        # Nothing to answer with, or a question of the wrong shape: as written.
        (strands("i-1"), [{"text": "  "}], [{"text": "  "}]),
        ({"parts": [{"data": {"interrupts": "all"}}]}, TEXT, TEXT),
        ({"parts": [{"data": {"interrupts": [{"interruptId": 7}]}}]}, TEXT, TEXT),
        ({"parts": [{"data": {"id": "c", "name": "n"}, "metadata": "adk"}]}, TEXT, TEXT),
        (
            {"parts": [{"data": {"id": "c"}, "metadata": adk("c")["parts"][0]["metadata"]}]},
            TEXT,
            TEXT,
        ),
        ({"parts": "junk"}, TEXT, TEXT),
        ("junk", TEXT, TEXT),
    ],
)
def test_an_answer_is_shaped_as_the_question_asks(question: Any, answer: Any, sent: Any) -> None:
    assert shaped_parts(question, answer) == sent


@pytest.mark.django_db
def test_a_persons_reply_to_a_strands_question_goes_as_an_interrupt_response(
    make_skill: Any, make_agent: Any
) -> None:
    skill = make_skill()
    agent = make_agent(skills=[skill], a2a_endpoint="http://agent.example")
    task = Task.objects.create(skill=skill, agent=agent, input={"product": "lamp"})
    task.start_work()
    task.require_input(strands("i-1"))
    reply_to_task(task, text="EU")
    task.refresh_from_db()
    assert task.state == TaskState.WORKING
    assert task.outbound_message["parts"] == [interrupt_response("i-1", "EU")]


@pytest.mark.parametrize(
    ("question", "line"),
    [
        ({"parts": [{"text": "Which market?"}, {"data": {"x": "y"}}]}, "Which market?"),
        ({"parts": [{"data": {"id": "c-1", "name": "ask", "args": {"q": "EU?"}}}]}, "EU?"),
        ({"parts": [{"data": {"value": "EU or UK?", "id": "i-1"}}]}, "EU or UK?"),
        ({"parts": [{"data": [1, {"a": ["b", " "]}]}]}, "b"),
        ({"parts": [{"data": 3}]}, ""),
        (None, ""),
    ],
)
def test_a_question_on_one_line(question: Any, line: str) -> None:
    """What the admin's list and reply page show of a question (``said_text``)."""
    assert said_text(question) == line
