"""Input for agents that take text alone: the card's input modes decide whether a task's
data goes as a data part or as JSON text.

a2a-sdk's samples declare ``defaultInputModes: ["text"]`` and read the request with
``context.get_user_input()``, the text parts joined: a data part reaches them as an empty
string. Against a real agent in that shape (tests/support/sample_agent.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.utils import timezone

from a2a.creation import create_task
from a2a.models import Task
from a2a.services import reply_to_task
from a2a.states import TaskState
from a2a.wire import data_as_text
from a2a.worker import process_task
from agent_profiles.interfaces import takes_json
from agent_profiles.negotiation import admits_json, parse_card
from tests.support.sample_agent import SampleAgent, run_sample_agent


@pytest.mark.parametrize(
    ("modes", "admits"),
    [
        (["text"], False),
        (["text/plain"], False),
        (["TEXT/PLAIN; charset=utf-8", "image/png"], False),
        (["application/json"], True),
        (["text", "application/json"], True),
        (["application/vnd.acme.order+json"], True),
        (["json"], True),
        (["data"], True),
        (["*/*"], True),
        ([], None),
        (None, None),
        ("application/json", None),  # not a list: the card says nothing usable
        ([3, ""], None),
    ],
)
def test_input_modes_admit_json_or_not(modes: Any, admits: bool | None) -> None:
    assert admits_json(modes) is admits


def card(**fields: Any) -> dict[str, Any]:
    return {
        "name": "x",
        "supportedInterfaces": [
            {"url": "http://a.example", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        **fields,
    }


def test_a_card_says_what_takes_json_by_default_and_per_skill() -> None:
    parsed = parse_card(
        card(
            defaultInputModes=["text"],
            skills=[
                {"id": "ce-review", "inputModes": ["application/json"]},
                {"id": "same", "inputModes": ["text/plain"]},  # as the default: not kept
                {"id": "none"},
                "not a skill",
            ],
        ),
        "http://a.example/card",
    )
    assert parsed.json_input == {"": False, "ce-review": True}
    assert parse_card(card(), "http://a.example/card").json_input == {}


@pytest.mark.parametrize(
    ("json_input", "skill_id", "takes"),
    [
        ({}, "ce-review", True),
        ({"": False}, "ce-review", False),
        ({"": False, "ce-review": True}, "ce-review", True),
        ({"ce-review": False}, "ce-review", False),
        ({"ce-review": False}, "other", True),
    ],
)
def test_an_agent_takes_json_for_a_skill(json_input: Any, skill_id: str, takes: bool) -> None:
    from agent_profiles.models import AgentProfile

    assert takes_json(AgentProfile(json_input=json_input), skill_id) is takes


def test_data_parts_are_written_as_json_text() -> None:
    message = {
        "messageId": "m",
        "parts": [
            {"text": "Review this"},
            {"data": {"product": "lampe à pied"}},
            {"data": [1, 2], "metadata": {"k": "v"}},
        ],
    }
    assert data_as_text(message)["parts"] == [
        {"text": "Review this"},
        {"text": '{"product": "lampe à pied"}'},
        {"text": "[1, 2]", "metadata": {"k": "v"}},
    ]
    assert message["parts"][1] == {"data": {"product": "lampe à pied"}}  # not changed
    text_only = {"messageId": "m", "parts": [{"text": "hi"}]}
    assert data_as_text(text_only) is text_only


# --- against an agent in the samples' shape -------------------------------------------


@pytest.fixture
def sample(settings: Any) -> Iterator[SampleAgent]:
    settings.ALLOW_LOOPBACK_URLS = True
    with run_sample_agent() as agent:
        yield agent


@pytest.mark.django_db(transaction=True)
def test_an_agent_that_reads_text_gets_the_input_as_json_text(
    sample: SampleAgent, make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """Its card is read at the first call (not at registration here): the first send goes
    as text all the same."""
    agent = make_agent(skills=[make_skill()], a2a_endpoint=sample.url)
    task = create_task(skill_id="ce-review", input={"product": "lamp"}, user=make_user())
    process_task(task.pk)
    task.refresh_from_db()
    assert sample.inputs == ['{"product": "lamp"}']
    assert (task.state, task.output) == (
        TaskState.COMPLETED,
        {"verdict": "pass", "product": "lamp"},
    )
    agent.refresh_from_db()
    assert agent.json_input == {"": False}


@pytest.mark.django_db
def test_a_data_reply_to_an_agent_that_reads_text_goes_as_json_text(
    make_skill: Any, make_agent: Any
) -> None:
    skill = make_skill()
    agent = make_agent(skills=[skill], json_input={"": False}, card_read_at=timezone.now())
    task = Task.objects.create(skill=skill, agent=agent, input={"product": "lamp"})
    task.start_work()
    task.require_input({"parts": [{"text": "Which market?"}]})
    reply_to_task(task, data={"market": "EU"}, text="see data")
    task.refresh_from_db()
    assert task.outbound_message["parts"] == [{"text": "see data"}, {"text": '{"market": "EU"}'}]


@pytest.mark.django_db
def test_an_answer_in_a_frameworks_shape_stays_data_for_an_agent_that_reads_text(
    make_skill: Any, make_agent: Any
) -> None:
    """Strands' card names text input only, yet it resumes on an ``interruptResponse``
    data part alone (tests/a2a/test_answer_shapes.py)."""
    skill = make_skill()
    agent = make_agent(skills=[skill], json_input={"": False}, card_read_at=timezone.now())
    task = Task.objects.create(skill=skill, agent=agent, input={"product": "lamp"})
    task.start_work()
    interrupts = [{"interruptId": "i-1", "name": "market", "reason": "Which?"}]
    task.require_input({"parts": [{"data": {"interrupts": interrupts}}]})
    reply_to_task(task, data={"market": "EU"})
    task.refresh_from_db()
    response = {"interruptId": "i-1", "response": {"market": "EU"}}
    assert task.outbound_message["parts"] == [{"data": {"interruptResponse": response}}]
    assert json.dumps(task.outbound_message)  # stored as sent


@pytest.mark.django_db
def test_an_answer_already_in_a_frameworks_shape_stays_data_for_an_agent_that_reads_text(
    make_skill: Any, make_agent: Any
) -> None:
    """A face client that answers ADK's long-running call with the function response
    itself: ADK's card names text input only, and the response must stay a data part."""
    skill = make_skill()
    agent = make_agent(skills=[skill], json_input={"": False}, card_read_at=timezone.now())
    task = Task.objects.create(skill=skill, agent=agent, input={"product": "lamp"})
    task.start_work()
    call = {"id": "c-1", "name": "ask", "args": {}}
    meta = {"adk_type": "function_call", "adk_is_long_running": True}
    task.require_input({"parts": [{"data": call, "metadata": meta}]})
    response = {
        "data": {"id": "c-1", "name": "ask", "response": {"market": "EU"}},
        "metadata": {"adk_type": "function_response"},
    }
    reply_to_task(task, message={"messageId": "m-1", "role": "ROLE_USER", "parts": [response]})
    task.refresh_from_db()
    assert task.outbound_message["parts"] == [response]
