"""``read_create_body``: the body of ``POST /api/tasks`` (and of a batch item) reads as
``CreateTaskSerializer`` reads it, whether the short path or the serializer reads it."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.exceptions import ValidationError

from a2a.api.serializers import CreateTaskSerializer, read_create_body

BODIES: list[Any] = [
    {"skillId": "ce-review"},
    {"skillId": "ce-review", "input": {"product": "lamp"}},
    {"skillId": "ce-review", "input": {}, "agentId": "", "idempotencyKey": ""},
    {"skillId": "ce-review", "agentId": "agent-one", "idempotencyKey": "k" * 200},
    {"skillId": "ce-review", "unknown": 1},  # ignored, as DRF ignores it
    {"skillId": "s" * 100},
    # What the serializer converts or refuses:
    {"skillId": " ce-review "},  # trimmed
    {"skillId": 42},  # a number as text
    {"skillId": "ce-review", "agentId": " agent-one"},
    {"skillId": "ce-review", "idempotencyKey": 7},
    {"skillId": "ce-review", "idempotencyKey": " order-7 "},  # kept: the key is opaque
    {"skillId": "ce-review", "idempotencyKey": "  "},  # refused: only blanks
    {"skillId": "s" * 101},
    {"skillId": ""},
    {"skillId": "   "},
    {"skillId": None},
    {},
    {"input": {}},
    {"skillId": "ce-review", "input": None},
    {"skillId": "ce-review", "input": []},
    {"skillId": "ce-review", "input": "text"},
    {"skillId": "ce-review", "agentId": "a" * 101},
    {"skillId": "ce-review", "idempotencyKey": "k" * 201},
    {"skillId": "ce-review", "agentId": None},
    {"skillId": ["ce-review"]},
    [],
    "ce-review",
    None,
]


def _serializer(body: Any) -> tuple[str, Any]:
    serializer = CreateTaskSerializer(data=body)
    if serializer.is_valid():
        return "ok", dict(serializer.validated_data)
    return "refused", serializer.errors


def _short(body: Any) -> tuple[str, Any]:
    try:
        return "ok", read_create_body(body)
    except ValidationError as exc:
        return "refused", exc.detail


@pytest.mark.parametrize("body", BODIES, ids=[repr(b)[:40] for b in BODIES])
def test_a_body_reads_as_the_serializer_reads_it(body: Any) -> None:
    assert _short(body) == _serializer(body)


def test_the_usual_body_does_not_build_the_serializer(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the serializer was built")

    monkeypatch.setattr(CreateTaskSerializer, "__init__", refuse)
    body = {"skillId": "ce-review", "input": {"product": "lamp"}, "idempotencyKey": "k-1"}
    assert read_create_body(body) == body
