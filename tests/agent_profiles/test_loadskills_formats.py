"""``loadskills`` reads JSON as JSON wherever it comes from, and refuses the YAML that is
no JSON: PyYAML follows YAML 1.1, which is no superset of JSON, and its aliases and
``.nan`` / ``.inf`` have no place in a skill."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from agent_profiles.management.commands.loadskills import read_skills_file
from agent_profiles.models import Skill
from tests.support.processes import BASE_DIR, PYTHON, platform_env

pytestmark = pytest.mark.django_db


def load(name: str) -> str:
    out = io.StringIO()
    call_command("loadskills", name, stdout=out)
    return out.getvalue()


@pytest.fixture
def stdin(monkeypatch: pytest.MonkeyPatch) -> Any:
    def give(data: bytes) -> None:
        monkeypatch.setattr(sys, "stdin", type("Stdin", (), {"buffer": io.BytesIO(data)})())

    return give


def test_json_from_stdin_reads_as_the_same_json_file_does(stdin: Any, tmp_path: Path) -> None:
    # What json.dumps writes by default: an escaped emoji (YAML 1.1 read two lone
    # surrogates) and a number with an exponent (YAML 1.1 read the string '1e5').
    data = (
        b'[{"id": "emo", "description": "smile \\ud83d\\ude00", "input_schema": {"type": '
        b'"object", "properties": {"n": {"type": "number", "maximum": 1e5}}}}]'
    )
    stdin(data)
    assert "1 created" in load("-")
    skill = Skill.objects.get(pk="emo")
    assert skill.description == "smile \U0001f600"
    assert skill.input_schema["properties"]["n"]["maximum"] == 1e5
    other = tmp_path / "skills.txt"  # another name: the same
    other.write_bytes(data)
    assert read_skills_file(str(other))[0]["description"] == "smile \U0001f600"


def test_yaml_flow_style_from_stdin_still_reads_as_yaml(stdin: Any) -> None:
    stdin(b"[{id: flow, name: Flow}]")
    assert "1 created" in load("-")
    assert Skill.objects.get(pk="flow").name == "Flow"


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "1" + "0" * 400])
def test_a_yaml_number_that_is_no_json_is_named(tmp_path: Path, value: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"- id: ok\n- id: nan1\n  examples: [a, {value}]\n")
    with pytest.raises(CommandError, match=r"skill 'nan1' \(#2\): examples\[1\] is not a JSON"):
        load(str(path))
    assert not Skill.objects.exists()


def test_a_yaml_key_that_is_no_string_is_named(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("- id: k1\n  1: x\n  null: y\n")
    with pytest.raises(CommandError, match=r"skill 'k1' \(#1\): unknown fields 1, None"):
        load(str(path))


def test_yaml_aliases_are_refused(tmp_path: Path) -> None:
    """Nested aliases: 500 bytes that stand for 9^9 values, every one then checked (the
    command hung)."""
    inner = "&a [" + ",".join(['"lol"'] * 9) + "]"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=False):
        inner = f"&{name} [{inner}," + ",".join([f"*{prev}"] * 8) + "]"
    path = tmp_path / "lol.yaml"
    path.write_text(f"- id: lol\n  examples: {inner}\n")
    assert path.stat().st_size < 1000
    with pytest.raises(CommandError, match=r"aliases \(\*name\) are not allowed"):
        read_skills_file(str(path))


def test_two_spellings_of_one_key_must_agree(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('[{"id": "alpha", "skill_id": "beta"}]')
    with pytest.raises(CommandError, match="'id' and 'skill_id' are the same field"):
        load(str(path))
    assert not Skill.objects.exists()
    path.write_text('[{"id": "alpha", "skill_id": "alpha", "inputModes": ["a/b"]}]')
    assert "1 created" in load(str(path))


def test_a_load_writes_in_bulk_and_tells_the_caches(
    django_capture_on_commit_callbacks: Any,
) -> None:
    """A row at a time (a read and a write each, both schemas checked again) held SQLite's
    write lock ~3.6 ms per skill: 12,000 skills kept a running platform's writers waiting
    past their busy timeout. Now a statement per batch of skills."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agent_profiles.signals import registry_changed
    from agent_profiles.skills import load_skills

    told: list[Any] = []
    registry_changed.connect(lambda sender, **kw: told.append(sender), weak=False, dispatch_uid="t")
    try:
        items = [{"id": f"bulk-{i}", "description": "new"} for i in range(1200)]
        with (
            CaptureQueriesContext(connection) as queries,
            django_capture_on_commit_callbacks(execute=True),
        ):
            result = load_skills(items)
        assert (len(result.created), len(result.updated)) == (1200, 0)
        # Row by row: two or three per skill. In bulk: a statement per batch (SQLite caps
        # a statement's parameters, so ~58 rows a batch there).
        assert len(queries) < 100, len(queries)
        assert told == [Skill]
        before = Skill.objects.get(pk="bulk-7")
        # Updated: only the fields given change (name and schemas default, as before), and
        # updated_at moves (the cards' Last-Modified).
        again = [{"id": f"bulk-{i}", "tags": ["t"]} for i in range(1200)]
        again[7] = {"id": "bulk-7", "tags": ["t"], "domain": "d"}
        with (
            CaptureQueriesContext(connection) as queries,
            django_capture_on_commit_callbacks(execute=True),
        ):
            result = load_skills(again)
        assert (len(result.created), len(result.updated)) == (0, 1200)
        assert len(queries) < 100, len(queries)
        after = Skill.objects.get(pk="bulk-7")
        assert (after.description, after.tags, after.domain) == ("new", ["t"], "d")
        assert Skill.objects.get(pk="bulk-8").domain == ""
        assert after.updated_at > before.updated_at
        assert after.created_at == before.created_at
        assert told == [Skill, Skill]
    finally:
        registry_changed.disconnect(dispatch_uid="t")


@pytest.mark.slow
def test_ctrl_c_during_a_load_says_nothing_was_loaded_in_one_line(
    transactional_db: None, tmp_path: Path
) -> None:
    """Ctrl-C while a large file was checked printed a 40-line traceback from inside the
    schema checks; the load is all or nothing, and one line says so."""
    schema = {"type": "object"}
    items = [
        {
            "id": f"s-{i}",
            "name": f"S {i}",
            "description": "d",
            "tags": ["t"],
            "domain": "x",
            "subdomain": "y",
            "input_schema": schema,
            "output_schema": schema,
        }
        for i in range(8000)
    ]
    path = tmp_path / "skills.json"
    path.write_text(json.dumps(items))
    command = [PYTHON, "manage.py", "loadskills", "-v", "2", str(path)]
    proc = subprocess.Popen(
        command, cwd=BASE_DIR, env=platform_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    read = proc.stdout.readline().decode()  # the file is read: the checks begin
    assert read.startswith("Read 8000 skills from"), read
    time.sleep(0.5)
    assert proc.poll() is None, "the load ended before the Ctrl-C: make the file bigger"
    proc.send_signal(signal.SIGINT)
    out, err = (stream.decode(errors="replace") for stream in proc.communicate(timeout=60))
    assert proc.returncode == 1
    assert "Traceback" not in out + err, err[-1500:]
    assert f"{path}: interrupted. Nothing was loaded." in err
    assert Skill.objects.count() == 0
