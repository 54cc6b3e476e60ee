"""A waiting task's question, cut short in the database, for lists (the admin's inbox).

A question is the agent's message, up to ``AGENT_ANSWER_MAX_BYTES``: the inbox read each
waiting task's whole question and put all of its text in the column's ``title`` (three
tasks asking 1 MB each made a 3 MB page, each row loading its question whole). The list
reads only the start of the first parts' texts, data and file names (:func:`with_excerpts`,
JSON paths PostgreSQL and SQLite both read) and shows those (:func:`excerpt_of`);
:func:`said_of` says the same of a question read whole (the reply page).
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.db.models import Case, CharField, QuerySet, Value, When
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce, NullIf, Substr

from a2a.models import Task
from a2a.wire import said_text

# What the column's title shows at most: a few lines, the task page has the rest.
TITLE_CHARS = 300
# Parts read (text, data, a file's name): a question of more parts is rare, and the first
# ones say enough for a list. A question may put its text or data after a file (the
# contract to approve, then "Approve it?"), so each of them is read, not the first alone.
TEXT_PARTS = 3
# Each part's data read, in JSON: enough for a LangGraph interrupt's value or an ADK
# tool call's arguments to parse whole, most of the time.
DATA_CHARS = 2000
# What a list or the reply page shows for a question that says nothing they can show (no
# text, no string in its data, no file): the task page shows it whole.
NOTHING_SAID = "(a question without text: see the task)"
# A file's name (or, without one, its address or media type) read.
NAME_CHARS = 200


def with_excerpts(tasks: QuerySet[Task]) -> QuerySet[Task]:
    """``tasks`` with the start of their question's first parts read (``q_text0``...,
    ``q_data0``..., ``q_file0``...), for :func:`excerpt_of`; the question itself is left
    unread (a file's bytes above all)."""
    fields: dict[str, Any] = {}
    for i in range(TEXT_PARTS):
        part = f"question__parts__{i}"
        fields[f"q_text{i}"] = Substr(KT(f"{part}__text"), 1, TITLE_CHARS)
        fields[f"q_data{i}"] = Substr(KT(f"{part}__data"), 1, DATA_CHARS)
        # A2A 1.0's file part names itself; 0.3's holds a file object with a name. Not
        # a part's mediaType: text and data parts may carry one too.
        fields[f"q_file{i}"] = Substr(
            Coalesce(
                _named(f"{part}__filename"),
                _named(f"{part}__file__name"),
                _named(f"{part}__url"),
                _named(f"{part}__file__uri"),
                _named(f"{part}__file__mimeType"),
                Case(
                    When(**{f"{part}__has_key": "raw"}, then=_named(f"{part}__mediaType")),
                    default=None,
                    output_field=CharField(),
                ),
                Case(
                    When(**{f"{part}__has_key": "raw"}, then=Value("a file")),
                    When(**{f"{part}__has_key": "file"}, then=Value("a file")),
                    default=None,
                    output_field=CharField(),
                ),
            ),
            1,
            NAME_CHARS,
        )
    return tasks.annotate(**fields)


def _named(path: str) -> NullIf:
    """The string at ``path``, NULL when blank: ADK sends every field of a part, blank
    when unset ("filename": ""), and Coalesce takes the first that is not NULL
    (:func:`_file_name` skips blank ones alike)."""
    return NullIf(KT(path), Value(""))


def excerpt_of(task: Task) -> str:
    """What the task's question says, at most :data:`TITLE_CHARS` characters: from the
    excerpts :func:`with_excerpts` read, else (a task read whole) from its question; ""
    when it says nothing a list can show."""
    if not hasattr(task, "q_text0"):
        return said_of(task.question)[:TITLE_CHARS]
    texts = [getattr(task, f"q_text{i}", None) for i in range(TEXT_PARTS)]
    said = " ".join(t for t in texts if isinstance(t, str)).strip()
    if not said:
        datas = (_data_said(getattr(task, f"q_data{i}", None)) for i in range(TEXT_PARTS))
        said = next((d for d in datas if d), "")
    files = [getattr(task, f"q_file{i}", None) for i in range(TEXT_PARTS)]
    return _with_files(said, [f for f in files if isinstance(f, str) and f.strip()])


def said_of(question: Any) -> str:
    """What a question read whole says, on one line: its text (else its data's strings,
    :func:`~a2a.wire.said_text`) and the names of the files its first parts carry; ""
    when nothing (the caller says so in its own words)."""
    parts = question.get("parts") if isinstance(question, dict) else None
    files = []
    for part in (parts if isinstance(parts, list) else [])[:TEXT_PARTS]:
        name = _file_name(part)
        if name:
            files.append(name[:NAME_CHARS])
    return _with_files(said_text(question).strip(), files)


def _file_name(part: Any) -> str | None:
    """A file part's name (else its address or media type), in A2A 1.0's shape or 0.3's;
    as :func:`with_excerpts` reads it, and "a file" for bytes without either."""
    if not isinstance(part, dict):
        return None
    file = part.get("file") if isinstance(part.get("file"), dict) else None
    if file is None and "url" not in part and "raw" not in part:
        return None  # text or data
    file = file or {}
    names = (part.get("filename"), file.get("name"), part.get("url"), file.get("uri"))
    for value in (*names, file.get("mimeType"), part.get("mediaType")):
        if isinstance(value, str) and value.strip():
            return value
    return "a file"


def _with_files(said: str, files: list[str]) -> str:
    """``said`` and the files asked with ("file: contract.pdf"), cut to the title's length."""
    shown = [said] if said else []
    shown += [f"file: {name.strip()}" for name in files]
    return " · ".join(shown)[:TITLE_CHARS]


def _data_said(data: Any) -> str:
    """The strings of a part's data as :func:`with_excerpts` read it (JSON, maybe cut)."""
    if not isinstance(data, str) or not data:
        return ""
    try:
        value = json.loads(data)
    except ValueError:  # cut short, or a bare string (->> reads those unquoted)
        return (_cut_strings(data) if data.startswith(("{", "[")) else data)[:TITLE_CHARS]
    if not isinstance(value, (dict, list)):
        return data[:TITLE_CHARS]
    return said_text({"parts": [{"data": value}]})[:TITLE_CHARS]


# A JSON string, closed or cut short at the end, and whether it is a key (a colon after).
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)("?)(\s*:)?')
_CUT_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{0,3})?$")
# SQLite keeps JSON ASCII-escaped: a cut between an emoji's two escapes ("\ud83d" of
# "\ud83d\ude00") decodes to half a pair, which no page can be encoded with (a 500).
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# Values said_text leaves out (a tool call's id and name, an interrupt's id).
_NOT_SAID = ("id", "name", "interruptId")


def _cut_strings(data: str) -> str:
    """The strings in JSON cut short (keys and ids left out, as :func:`said_text` does)."""
    found: list[str] = []
    key = None
    for match in _STRING.finditer(data):
        raw, closed, colon = match.groups()
        if colon:
            key = raw
            continue
        if not closed:  # the string the cut ends in: an escape may be cut in two
            raw = _CUT_ESCAPE.sub("", raw)
        try:
            text = _LONE_SURROGATE.sub("", json.loads(f'"{raw}"'))
        except ValueError:
            text = raw
        if key not in _NOT_SAID and text.strip():
            found.append(text.strip())
        key = None
    return " ".join(found)
