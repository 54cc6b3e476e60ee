"""A waiting task's question, cut short in the database, for lists (the admin's inbox).

A question is the agent's message, up to ``AGENT_ANSWER_MAX_BYTES``: the inbox read each
waiting task's whole question and put all of its text in the column's ``title`` (three
tasks asking 1 MB each made a 3 MB page, each row loading its question whole). The list
reads only the start of the first parts' texts and of the first part's data
(:func:`with_excerpts`, JSON paths PostgreSQL and SQLite both read) and shows those
(:func:`excerpt_of`).
"""

from __future__ import annotations

import json
import re

from django.db.models import QuerySet
from django.db.models.fields.json import KT
from django.db.models.functions import Substr

from a2a.models import Task
from a2a.wire import said_text

# What the column's title shows at most: a few lines, the task page has the rest.
TITLE_CHARS = 300
# Text parts read (message_text joins them): a question of more parts is rare, and the
# first ones say enough for a list.
TEXT_PARTS = 3
# The first part's data read, in JSON: enough for a LangGraph interrupt's value or an ADK
# tool call's arguments to parse whole, most of the time.
DATA_CHARS = 2000


def with_excerpts(tasks: QuerySet[Task]) -> QuerySet[Task]:
    """``tasks`` with the start of their question's texts and first data (``q_text0``...,
    ``q_data``) read, for :func:`excerpt_of`; the question itself is left unread."""
    texts = {
        f"q_text{i}": Substr(KT(f"question__parts__{i}__text"), 1, TITLE_CHARS)
        for i in range(TEXT_PARTS)
    }
    return tasks.annotate(**texts, q_data=Substr(KT("question__parts__0__data"), 1, DATA_CHARS))


def excerpt_of(task: Task) -> str:
    """What the task's question says, at most :data:`TITLE_CHARS` characters: from the
    excerpts :func:`with_excerpts` read, else (a task read whole) from its question."""
    if not hasattr(task, "q_data"):
        return said_text(task.question)[:TITLE_CHARS]
    texts = [getattr(task, f"q_text{i}", None) for i in range(TEXT_PARTS)]
    text = " ".join(t for t in texts if isinstance(t, str)).strip()
    if text:
        return text[:TITLE_CHARS]
    data = task.q_data
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
