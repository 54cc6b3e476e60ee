"""Schema-based fuzzing of the platform REST API (schemathesis, pinned): every answer to
generated requests, valid and invalid, is documented in the OpenAPI schema (status code,
content type, body shape, headers) and none is a 5xx. Bounded and seeded, so a run is
repeatable and quick; runs on SQLite and on PostgreSQL (where NUL in text fails)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, settings

from platform_site.wsgi import application

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)

CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_schema_conformance,
    schemathesis.checks.response_headers_conformance,
    # What the schema calls invalid (wrong types, missing fields, out-of-range paging) is
    # refused with a 4xx.
    schemathesis.checks.negative_data_rejection,
]


@pytest.fixture
def token(db: None, make_skill: Any, make_agent: Any, make_user: Any) -> Iterator[str]:
    skill = make_skill()
    make_agent(skills=[skill])
    # The WSGI app signals request_finished, which would close the test's connection
    # mid-transaction; Django's own test client unhooks the same receiver.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield str(make_user(is_staff=True).raw_token)
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(
    max_examples=10,
    derandomize=True,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_every_answer_is_documented(case: Any, token: str) -> None:
    checks = CHECKS
    if case.path == "/api/tasks:batch":
        # A batch answers 200 with a result per item; an invalid item is refused in its
        # own result (DESIGN.md), so "the request is refused" does not apply to items.
        checks = [c for c in CHECKS if c is not schemathesis.checks.negative_data_rejection]
    case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=checks)
