from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from django.conf import settings
from django.core.management import CommandError, call_command

from agent_profiles.models import Skill

pytestmark = pytest.mark.django_db


def skill(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": "s-one",
        "name": "Skill one",
        "description": "First.",
        "tags": ["t"],
        "examples": ["do it"],
        "inputModes": ["application/json"],
        "outputModes": ["application/json"],
        "version": "1.2.0",
        "domain": "d",
        "subdomain": "sd",
        "input_schema": {"type": "object", "properties": {"a": {"type": "string"}}},
        "output_schema": {"type": "object"},
    }
    data.update(overrides)
    return data


def write(tmp_path: Path, items: Any, name: str = "skills.json") -> str:
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text(json.dumps(items))
    else:
        path.write_text(yaml.safe_dump(items))
    return str(path)


def load(path: str) -> str:
    from io import StringIO

    out = StringIO()
    call_command("loadskills", path, stdout=out)
    return out.getvalue()


def test_it_creates_skills_from_json(tmp_path: Path) -> None:
    out = load(write(tmp_path, [skill(), skill(id="s-two", name="Two")]))
    assert "2 created" in out
    one = Skill.objects.get(pk="s-one")
    assert one.input_modes == ["application/json"]
    assert one.input_schema["properties"]["a"] == {"type": "string"}
    assert one.version == "1.2.0"
    assert one.subdomain == "sd"


def test_it_updates_skills_by_id(tmp_path: Path) -> None:
    load(write(tmp_path, [skill()]))
    out = load(write(tmp_path, [skill(name="Renamed", tags=["new"])]))
    assert "1 updated" in out
    assert Skill.objects.get().name == "Renamed"
    assert Skill.objects.get().tags == ["new"]


def test_it_reads_yaml(tmp_path: Path) -> None:
    load(write(tmp_path, [skill(id="from-yaml")], name="skills.yaml"))
    assert Skill.objects.get().pk == "from-yaml"


def test_a_bad_schema_names_the_skill_and_writes_nothing(tmp_path: Path) -> None:
    Skill.objects.create(id="s-one", name="Before", input_schema={}, output_schema={})
    items = [
        skill(name="After"),
        skill(id="broken", input_schema={"type": "objekt"}),
        skill(id="s-three"),
    ]
    with pytest.raises(CommandError) as info:
        load(write(tmp_path, items))
    message = str(info.value)
    assert "broken" in message
    assert "input_schema" in message
    assert "Nothing was loaded" in message
    assert list(Skill.objects.values_list("pk", "name")) == [("s-one", "Before")]


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ({"id": "x"}, "array"),
        ([skill(), "text"], "skill #2"),
        ([skill(id="Bad Id")], "Bad Id"),
        ([skill(tags="t")], "tags"),
        ([skill(inputModes=[1])], "input_modes"),
        ([skill(examples="e")], "examples"),
        ([skill(extra=1)], "unknown fields extra"),
        ([{"name": "no id"}], "'id' is required"),
        ([skill(), skill()], "Duplicate skill ids: s-one"),
        ([skill(output_schema=[])], "output_schema"),
    ],
)
def test_it_rejects_bad_files_clearly(tmp_path: Path, items: Any, expected: str) -> None:
    with pytest.raises(CommandError, match=expected):
        load(write(tmp_path, items))
    assert not Skill.objects.exists()


def test_it_rejects_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("[{")
    with pytest.raises(CommandError, match="not valid JSON"):
        load(str(path))


def test_it_rejects_invalid_yaml(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("- id: [unclosed")
    with pytest.raises(CommandError, match="not valid YAML"):
        load(str(path))


def test_it_reports_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="Cannot read"):
        load(str(tmp_path / "nope.json"))


def test_the_example_file_loads_and_its_example_fits_the_schema() -> None:
    load(str(settings.EXAMPLE_SKILLS_FILE))
    ce = Skill.objects.get(pk="ce-certification-review-v1")
    assert ce.domain == "compliance"
    assert ce.subdomain == "ce_certification"
    for s in Skill.objects.all():
        for example in s.examples:
            jsonschema.validate(json.loads(example), s.input_schema)
    props = ce.input_schema["properties"]
    # The reference agent's demo controls (ask / fail / delaySeconds) are accepted.
    demo = {"ask": "Which market?", "fail": False, "delaySeconds": 0.5}
    jsonschema.validate({**json.loads(ce.examples[0]), "demo": demo}, ce.input_schema)
    assert "demo" not in ce.input_schema["required"]
    assert set(props["demo"]["properties"]) == {"ask", "fail", "delaySeconds"}
    assert {"verdict", "applicable_directives", "missing_documents"} <= set(
        ce.output_schema["required"]
    )


def test_it_accepts_the_empty_schema_which_allows_anything(tmp_path: Path) -> None:
    call_command("loadskills", write(tmp_path, [skill(input_schema={}, output_schema={})]))
    stored = Skill.objects.get(pk="s-one")
    assert stored.input_schema == {}
    assert stored.output_schema == {}


def test_it_still_refuses_a_schema_that_is_not_an_object(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="input_schema"):
        call_command("loadskills", write(tmp_path, [skill(input_schema=[])]))
    assert not Skill.objects.exists()


def test_it_refuses_a_nul_in_a_skill_naming_it(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"s-one.*description"):
        call_command("loadskills", write(tmp_path, [skill(description="a\x00b")]))
    assert not Skill.objects.exists()


def test_a_large_file_with_a_duplicate_is_refused_in_one_pass(monkeypatch: Any) -> None:
    """The duplicate check counted each id over the whole list: 11 s for 20,000 skills,
    on top of their checks, before anything was written. The checks are left out here
    (each skill's own is its schema's), to time the duplicate check alone."""
    import time

    from agent_profiles import skills
    from platform_site.errors import ValidationFailed

    monkeypatch.setattr(skills, "_parse_skill", lambda item, index: dict(item))
    items = [{"id": f"s-{i}"} for i in range(20_000)] + [{"id": "s-7"}, {"id": "s-3"}]
    started = time.monotonic()
    with pytest.raises(ValidationFailed, match=r"Duplicate skill ids: s-3, s-7\.$"):
        skills.load_skills(items)
    assert time.monotonic() - started < 2.0
    assert not Skill.objects.exists()
