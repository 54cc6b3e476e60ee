"""loadskills: the values a hand-written or foreign file carries (YAML nulls, numeric ids,
other encodings) get a clear error naming the skill or the file, never a traceback, and
nothing is written."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from agent_profiles.models import Skill

pytestmark = pytest.mark.django_db


def load(path: str) -> str:
    out = io.StringIO()
    call_command("loadskills", path, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize(
    "key", ["domain", "subdomain", "description", "version", "name", "tags", "inputModes"]
)
def test_a_key_with_no_yaml_value_names_the_skill_and_the_key(tmp_path: Path, key: str) -> None:
    """``domain:`` with nothing after it is YAML null: full_clean skips blank fields, so
    it used to reach the database as a NOT NULL IntegrityError traceback."""
    path = tmp_path / "skills.yaml"
    path.write_text(f"- id: good-one\n- id: s-one\n  name: One\n  {key}:\n")
    with pytest.raises(CommandError) as info:
        load(str(path))
    message = str(info.value)
    assert "skill 's-one' (#2)" in message
    assert f"'{key}' has no value" in message
    assert "Nothing was loaded" in message
    assert not Skill.objects.exists()


def test_null_is_accepted_only_where_it_means_something(tmp_path: Path) -> None:
    """``max_attempts: null`` means the platform's setting and loads; ``domain: null``
    next to it is refused (the null check goes by the model field, not a list)."""
    path = tmp_path / "skills.yaml"
    path.write_text("- id: s-one\n  max_attempts:\n")
    assert "1 created" in load(str(path))
    assert Skill.objects.get().max_attempts is None
    path.write_text("- id: s-two\n  max_attempts:\n  domain:\n")
    with pytest.raises(CommandError, match=r"s-two.*'domain' has no value"):
        load(str(path))


@pytest.mark.parametrize(
    "items",
    [
        [{"id": "1", "name": "first"}, {"id": 1, "name": "second"}],
        [{"id": 7}],
        [{"skill_id": 7.5}],
    ],
)
def test_a_skill_id_must_be_a_string(tmp_path: Path, items: Any) -> None:
    """A number passed the slug check as its text, so ``"1"`` and ``1`` were not seen as
    duplicates: one row was written and "Loaded 2 skills (2 created)" printed."""
    path = tmp_path / "skills.json"
    path.write_text(json.dumps(items))
    with pytest.raises(CommandError, match=r"skill #\d: 'id' must be a string"):
        load(str(path))
    assert not Skill.objects.exists()


@pytest.mark.parametrize("encoding", ["utf-16", "latin-1"])
def test_a_file_that_is_not_utf8_is_named(tmp_path: Path, encoding: str) -> None:
    """Windows editors save UTF-16 or Latin-1; decoding raised UnicodeDecodeError, of
    which only OSError was caught."""
    path = tmp_path / "skills.json"
    path.write_bytes('[{"id": "s-one", "name": "Caf\u00e9"}]'.encode(encoding))
    with pytest.raises(CommandError, match=r"skills\.json: it is not UTF-8.*save it as UTF-8"):
        load(str(path))
    assert not Skill.objects.exists()


def test_a_utf8_file_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    """The BOM some editors write in front of UTF-8 is not part of the JSON."""
    path = tmp_path / "skills.json"
    path.write_bytes('[{"id": "s-one", "name": "Caf\u00e9"}]'.encode("utf-8-sig"))
    load(str(path))
    assert Skill.objects.get().name == "Caf\u00e9"


def test_stdin_is_read_as_utf8_whatever_the_locale(monkeypatch: Any) -> None:
    """``-`` reads the bytes of stdin as UTF-8: the locale's encoding (here Latin-1)
    would turn "Café" into mojibake."""
    data = '[{"id": "s-one", "name": "Caf\u00e9"}]'.encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="latin-1"))
    load("-")
    assert Skill.objects.get().name == "Caf\u00e9"


def test_stdin_that_is_not_utf8_is_a_clear_error(monkeypatch: Any) -> None:
    """Bytes that are not UTF-8 on stdin are a CommandError, not a traceback."""
    data = '[{"id": "s-one", "name": "Caf\u00e9"}]'.encode("latin-1")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    with pytest.raises(CommandError, match="Cannot read -: it is not UTF-8"):
        load("-")
    assert not Skill.objects.exists()
