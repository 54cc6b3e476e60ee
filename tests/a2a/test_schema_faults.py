"""Checking input and output against a skill's schema never fetches a ``$ref`` and never
raises: a schema that cannot be applied (stored before saving refused it) refuses the
caller's input with a 400 and fails the agent's output, naming the reference. An output
escaping a NUL or a lone surrogate in a text part's JSON fails ``output_invalid`` naming
the field (PostgreSQL refused it, leaving the task WORKING), and JSON text nested deeper
than the platform's limit is prose. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema.validators import validator_for
from rest_framework.test import APIClient

from a2a import agent_updates, creation
from a2a.models import Task
from a2a.states import TaskState, Transport
from a2a.wire import schema_errors
from agent_profiles.models import Skill

pytestmark = pytest.mark.django_db

DONE = {"state": "TASK_STATE_COMPLETED"}


class _Recorder(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        _Recorder.hits.append(self.path)
        body = json.dumps({"type": "string"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def schema_url() -> Iterator[str]:
    """The URL of a schema a loopback server would serve (recording each fetch)."""
    _Recorder.hits = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/secret.json"
    server.shutdown()
    server.server_close()


def _with_x(ref: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": {"$ref": ref}}}


def _stored(make_skill: Any, make_agent: Any, **schemas: Any) -> Skill:
    """A skill whose schemas were stored without the save check, as before it existed."""
    skill = make_skill(input_schema={"type": "object"}, output_schema={"type": "object"})
    Skill.objects.filter(pk=skill.pk).update(**schemas)
    skill.refresh_from_db()
    make_agent(skills=[skill])
    return skill


def _post(user: Any, body: dict[str, Any]) -> Any:
    client = APIClient()
    client.raise_request_exception = False
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {user.raw_token}")
    return client.post("/api/tasks", body, format="json")


def test_validation_never_fetches_a_ref(schema_url: str, tmp_path: Path) -> None:
    """jsonschema without a registry fetched both (urlopen, no timeout)."""
    local = tmp_path / "s.json"
    local.write_text('{"type": "string"}')
    for ref in (schema_url, f"file://{local}"):
        errors = schema_errors(_with_x(ref), {"x": 5})
        assert errors == [
            {
                "path": "(schema)",
                "message": f"the schema's $ref '{ref}' does not resolve within the schema, "
                "so nothing can be checked",
            }
        ]
    assert _Recorder.hits == []


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        (_with_x("#/$defs/nope"), "$ref '#/$defs/nope' does not resolve"),
        ({"$ref": "#"}, "$refs loop without end"),
        (
            {
                "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                "$ref": "#/$defs/a",
            },
            "$refs loop without end",
        ),
    ],
)
def test_input_against_a_schema_that_cannot_apply_is_a_400(
    make_skill: Any, make_agent: Any, make_user: Any, schema: Any, says: str
) -> None:
    """It answered 500 (PointerToNowhere, RecursionError)."""
    skill = _stored(make_skill, make_agent, input_schema=schema)
    response = _post(make_user(), {"skillId": skill.id, "input": {"x": 5}})
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"]["code"] == "input_invalid"
    assert says in body["error"]["message"]
    assert not Task.objects.exists()


def test_input_with_a_remote_ref_is_refused_unfetched(
    make_skill: Any, make_agent: Any, make_user: Any, schema_url: str
) -> None:
    skill = _stored(make_skill, make_agent, input_schema=_with_x(schema_url))
    response = _post(make_user(), {"skillId": skill.id, "input": {"x": 5}})
    assert response.status_code == 400
    assert schema_url in response.json()["error"]["message"]
    assert _Recorder.hits == []


def _working(skill: Skill, make_user: Any) -> Task:
    task = creation.create_task(skill_id=skill.id, input={}, user=make_user())
    Task.objects.filter(pk=task.pk).update(
        transport=Transport.WEBSOCKET, state=TaskState.WORKING.value
    )
    return Task.objects.get(pk=task.pk)


def _complete(task: Task, *parts: dict[str, Any]) -> Task:
    artifacts = [{"artifactId": "a", "parts": list(parts)}]
    agent_updates.apply_agent_update(task, status=DONE, artifacts=artifacts, via="websocket")
    return Task.objects.get(pk=task.pk)


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        (_with_x("#/$defs/nope"), "$ref '#/$defs/nope' does not resolve"),
        ({"$ref": "#"}, "$refs loop without end"),
    ],
)
def test_output_against_a_schema_that_cannot_apply_fails_the_task(
    make_skill: Any, make_agent: Any, make_user: Any, schema: Any, says: str
) -> None:
    """The check raised: the agent's COMPLETED was answered internal_error and the task
    stayed WORKING."""
    skill = _stored(make_skill, make_agent, output_schema=schema)
    task = _complete(_working(skill, make_user), {"data": {"x": 5}})
    assert task.state == TaskState.FAILED.value
    assert task.error["code"] == "output_invalid"
    assert says in task.error["message"]


@pytest.mark.parametrize("escaped", ["\\u0000", "\\ud800"], ids=["nul", "lone-surrogate"])
@pytest.mark.parametrize("schema", [{"type": "object"}, {"type": "array"}], ids=["fits", "not"])
def test_output_escaping_bad_text_fails_naming_the_field(
    make_skill: Any, make_agent: Any, make_user: Any, escaped: str, schema: Any
) -> None:
    """PostgreSQL raised DataError (the task stayed WORKING); SQLite stored it."""
    skill = _stored(make_skill, make_agent, output_schema=schema)
    text = '{"fine": 1, "a": "x' + escaped + 'y"}'
    task = _complete(_working(skill, make_user), {"text": text})
    assert task.state == TaskState.FAILED.value
    assert task.error["code"] == "output_invalid"
    what = "a NUL character" if escaped == "\\u0000" else "a lone surrogate"
    assert f"output.a contains {what}" in task.error["message"]
    assert task.error["details"] == {
        "errors": [{"path": "output.a", "message": f"contains {what}"}]
    }
    assert task.output is None


@pytest.mark.parametrize("depth", [65, 5000])
def test_json_text_nested_too_deep_is_prose(
    make_skill: Any, make_agent: Any, make_user: Any, depth: int
) -> None:
    """5000 levels raised RecursionError; 65 passed the platform's limit of 64."""
    skill = _stored(make_skill, make_agent, output_schema={"type": "array"})
    task = _complete(_working(skill, make_user), {"text": "[" * depth + "]" * depth})
    assert task.state == TaskState.FAILED.value
    assert task.error["code"] == "output_invalid"
    assert "is not of type 'array'" in task.error["message"]


def test_json_text_within_the_limit_is_still_a_value(
    make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    skill = _stored(make_skill, make_agent, output_schema={"type": "array"})
    task = _complete(_working(skill, make_user), {"text": "[" * 64 + "]" * 64})
    assert task.state == TaskState.COMPLETED.value


BACKTRACKING = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}


def test_a_backtracking_pattern_judges_an_output_at_once(
    make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """On Python's re this took 3.4 s at 26 characters, doubling with each one more: at
    60 it would not finish. RE2 matches in linear time."""
    skill = _stored(make_skill, make_agent, output_schema=BACKTRACKING)
    task = _complete(_working(skill, make_user), {"data": {"s": "a" * 59 + "!"}})
    assert task.state == TaskState.FAILED.value
    assert task.error["code"] == "output_invalid"
    assert "does not match '^(a+)+$'" in task.error["message"]


def test_a_backtracking_pattern_judges_an_input_at_once(
    make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    skill = _stored(make_skill, make_agent, input_schema=BACKTRACKING)
    response = _post(make_user(), {"skillId": skill.id, "input": {"s": "a" * 59 + "!"}})
    assert response.status_code == 400
    assert "does not match '^(a+)+$'" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("schema", "value", "errors"),
    [
        # RE2 cannot compile lookaround or backreferences: Python's re matches those.
        ({"type": "string", "pattern": "^(?!x)"}, "xy", ["'xy' does not match '^(?!x)'"]),
        ({"type": "string", "pattern": r"^(a)\1$"}, "aa", []),
        (
            {"patternProperties": {"^(a+)+$": {"type": "integer"}}},
            {"a" * 59 + "!": "not checked", "aaa": "x"},
            ["'x' is not of type 'integer'"],
        ),
        (
            {"additionalProperties": False, "patternProperties": {"^(a+)+$": {}}},
            {"a" * 59 + "!": 1},
            [f"'{'a' * 59}!' does not match any of the regexes: '^(a+)+$'"],
        ),
        (
            {"additionalProperties": False, "properties": {"a": {}}},
            {"a": 1, "b": 2, "c": 3},
            ["Additional properties are not allowed ('b', 'c' were unexpected)"],
        ),
    ],
)
def test_pattern_keywords(schema: Any, value: Any, errors: list[str]) -> None:
    assert [e["message"] for e in schema_errors(schema, value)] == errors


UNEVALUATED = {
    "type": "object",
    "patternProperties": {"^(a+)+$": {}},
    "unevaluatedProperties": False,
}


@pytest.mark.parametrize("dialect", ["2020-12", "2019-09"])
def test_unevaluated_properties_match_patterns_at_once(dialect: str) -> None:
    """jsonschema's unevaluatedProperties found the keys patternProperties evaluated with
    Python's re: this took seconds on a 26-character key, doubling with each one more."""
    schema = {"$schema": f"https://json-schema.org/draft/{dialect}/schema", **UNEVALUATED}
    began = time.monotonic()
    errors = schema_errors(schema, {"a" * 26 + "!": 1, "aaa": 2})
    assert time.monotonic() - began < 1.0
    assert [e["message"] for e in errors] == [
        f"Unevaluated properties are not allowed ('{'a' * 26}!' was unexpected)"
    ]


EVALUATED_CASES = [
    {"properties": {"a": {}}, "patternProperties": {"^b": {}}, "unevaluatedProperties": False},
    {"allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": {"type": "integer"}},
    {
        "anyOf": [{"patternProperties": {"^c": {}}}, {"required": ["zz"]}],
        "unevaluatedProperties": False,
    },
    {
        "if": {"required": ["a"]},
        "then": {"properties": {"b": {}}},
        "else": {"properties": {"c": {}}},
        "unevaluatedProperties": False,
    },
    {
        "$defs": {"d": {"properties": {"d": {}}}},
        "$ref": "#/$defs/d",
        "dependentSchemas": {"a": {"properties": {"b": {}}}},
        "unevaluatedProperties": False,
    },
    {"additionalProperties": {"type": "string"}, "unevaluatedProperties": False},
]


@pytest.mark.parametrize("dialect", ["2020-12", "2019-09"])
@pytest.mark.parametrize("case", range(len(EVALUATED_CASES)))
def test_unevaluated_properties_judge_as_jsonschema_does(dialect: str, case: int) -> None:
    """Only the matching engine changed: the keys found evaluated, and the messages, are
    jsonschema's own."""
    schema = {"$schema": f"https://json-schema.org/draft/{dialect}/schema", **EVALUATED_CASES[case]}
    for value in ({"a": 1, "b": "x", "c": 2, "d": 3}, {"b": 1, "c": "y", "e": 4}, {}):
        ours = [e["message"] for e in schema_errors(schema, value)]
        theirs = [e.message for e in validator_for(schema)(schema).iter_errors(value)]
        assert sorted(ours) == sorted(theirs)
