"""A skill's JSON Schemas are refused when saved if the platform could not apply them:
a ``$ref`` outside the schema (a URL, a file: never fetched), one that resolves nowhere,
references that loop without descending into the value, a schema nested too deep.
loadskills names the skill and the reference and writes nothing; the model refuses the
same on every save (the admin, registration)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from agent_profiles.models import Skill, check_json_schema
from agent_profiles.skills import load_skills
from platform_site.errors import ValidationFailed

pytestmark = pytest.mark.django_db


def _with_x(ref: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": {"$ref": ref}}}


REFUSED = {
    "http": (_with_x("http://127.0.0.1:9/secret.json"), "not fetched"),
    "file": (_with_x("file:///etc/passwd"), "not fetched"),
    "relative": (_with_x("other.json"), "not fetched"),
    "nowhere": (_with_x("#/$defs/nope"), "'#/$defs/nope' at /properties/x does not resolve"),
    "anchor": (_with_x("#nope"), "does not resolve"),
    "self": ({"$ref": "#"}, "$ref loop at (root)"),
    "a-b-a": (
        {
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
            "$ref": "#/$defs/a",
        },
        "$ref loop",
    ),
    "through-anyOf": (
        {"$defs": {"t": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/t"}]}}},
        "$ref loop at /$defs/t",
    ),
    "dynamic": (
        {"properties": {"x": {"$dynamicRef": "#nothing"}}},
        "$dynamicRef '#nothing'",
    ),
    "draft-07": (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "properties": {"x": {"$ref": "#/definitions/nope"}},
        },
        "does not resolve",
    ),
    # Under a word that is no keyword, reached only by the pointer: walked from the $ref.
    "url-under-x-lib": (
        {
            "x-lib": {"a": {"$ref": "https://example.com/x.json"}},
            "properties": {"x": {"$ref": "#/x-lib/a"}},
        },
        "'https://example.com/x.json' at /properties/x/$ref does not resolve",
    ),
    "loop-under-x-lib": (
        {"x-lib": {"a": {"$ref": "#/x-lib/a"}}, "$ref": "#/x-lib/a"},
        "$ref loop at /$ref",
    ),
    "deeper-under-x-lib": (
        {
            "x-lib": {"a": {"items": {"$ref": "#/x-lib/b"}}, "b": {"$ref": "#/nope"}},
            "properties": {"x": {"$ref": "#/x-lib/a"}},
        },
        "'#/nope' at /properties/x/$ref/items/$ref does not resolve",
    ),
}

ACCEPTED = {
    "defs": _with_x("#/$defs/s") | {"$defs": {"s": {"type": "string"}}},
    "anchor": _with_x("#s") | {"$defs": {"s": {"$anchor": "s", "type": "string"}}},
    "tree": {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            }
        },
        "$ref": "#/$defs/node",
    },
    "dynamic": {"$dynamicAnchor": "meta", "properties": {"x": {"$dynamicRef": "#meta"}}},
    "by-id": {
        "$id": "https://example.com/root.json",
        "$defs": {"item": {"$id": "item.json", "type": "string"}},
        "properties": {"x": {"$ref": "item.json"}},
    },
    "x-lib": {
        "x-lib": {"node": {"type": "object", "properties": {"up": {"$ref": "#/x-lib/node"}}}},
        "properties": {"x": {"$ref": "#/x-lib/node"}},
    },
    # A property named "$ref" is a property, not a reference.
    "property-named-ref": {"properties": {"$ref": {"type": "string"}}},
    "draft-07": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"s": {"type": "string"}},
        "properties": {"x": {"$ref": "#/definitions/s"}},
    },
}


def load(tmp_path: Path, items: Any) -> str:
    path = tmp_path / "skills.json"
    path.write_text(items if isinstance(items, str) else json.dumps(items))
    out = io.StringIO()
    call_command("loadskills", str(path), stdout=out)
    return out.getvalue()


@pytest.mark.parametrize("case", list(REFUSED))
@pytest.mark.parametrize("field", ["inputSchema", "outputSchema"])
def test_loadskills_refuses_a_ref_it_could_not_apply(tmp_path: Path, case: str, field: str) -> None:
    schema, says = REFUSED[case]
    with pytest.raises(CommandError) as info:
        load(tmp_path, [{"id": "fine"}, {"id": "bad-ref", field: schema}])
    message = str(info.value)
    assert "skill 'bad-ref' (#2)" in message
    assert says in message
    assert "Nothing was loaded" in message
    assert not Skill.objects.exists()


@pytest.mark.parametrize("case", list(ACCEPTED))
def test_local_references_load(case: str) -> None:
    load_skills([{"id": "good-ref", "input_schema": ACCEPTED[case]}])
    assert Skill.objects.get().input_schema == ACCEPTED[case]


def test_the_model_refuses_a_remote_ref_on_save() -> None:
    """The admin and registration save through the model: same check."""
    with pytest.raises(ValidationError) as info:
        Skill.objects.create(id="s", name="S", output_schema=REFUSED["http"][0])
    assert "not fetched" in str(info.value.message_dict["output_schema"])
    assert not Skill.objects.exists()


def test_a_malformed_reference_is_refused_not_raised() -> None:
    """referencing fails on some malformed references with a plain Python error."""
    for schema in (
        {"items": [{}], "properties": {"x": {"$ref": "#/items/word"}}},
        {"$id": "http://[x", "properties": {"x": {"$ref": "#/a"}}},
    ):
        with pytest.raises(ValidationError):
            check_json_schema(schema, "input_schema")


def _nested(levels: int) -> str:
    return '{"properties": {"a": ' * levels + '{"type": "object"}' + "}}" * levels


@pytest.mark.parametrize("levels", [100, 200])
def test_loadskills_refuses_a_schema_nested_too_deep(tmp_path: Path, levels: int) -> None:
    """It crashed with a RecursionError traceback at ~200 levels."""
    text = f'[{{"id": "deep", "inputSchema": {_nested(levels)}}}]'
    with pytest.raises(CommandError) as info:
        load(tmp_path, text)
    assert "skill 'deep' (#1): 'input_schema' is nested deeper than 64 levels" in str(info.value)
    assert "Nothing was loaded" in str(info.value)
    assert not Skill.objects.exists()


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_file_nested_thousands_deep_is_refused_not_a_traceback(
    tmp_path: Path, suffix: str
) -> None:
    """The parsers' own recursion ran out first (a RecursionError traceback)."""
    path = tmp_path / f"skills{suffix}"
    path.write_text(f'[{{"id": "deep", "inputSchema": {_nested(3000)}}}]')
    with pytest.raises(CommandError, match="nested"):
        call_command("loadskills", str(path), stdout=io.StringIO())
    assert not Skill.objects.exists()


def test_a_schema_at_the_depth_limit_loads() -> None:
    schema = json.loads(_nested(31))  # 63 levels of objects
    load_skills([{"id": "deep-enough", "output_schema": schema}])
    assert Skill.objects.filter(pk="deep-enough").exists()


def test_check_json_schema_turns_deep_recursion_into_a_refusal() -> None:
    """Ways in other than loadskills (a Python caller) get a ValidationError too."""
    schema = json.loads(_nested(400))
    with pytest.raises(ValidationError, match="nested too deep"):
        check_json_schema(schema, "input_schema")
    with pytest.raises(ValidationFailed, match="nested deeper than 64"):
        load_skills([{"id": "deep", "input_schema": schema}])
