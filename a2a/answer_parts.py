"""The parts of an agent's answer, checked against A2A 1.0 ``Part`` before anything of the
answer is kept.

What an agent answers is stored and served again by the platform's A2A face, where every
a2a-sdk 1.x client parses the whole Task (and the whole page of a ``ListTasks``) at once:
one part that is not a Part (``raw`` that is not base64, as a 0.3 agent's ``file.bytes``
may hold; a part with both ``text`` and ``data``) would make every task list of the
caller holding it unreadable. So an answer holding one is a bad answer (``not_a2a``),
refused whole as any answer that is not A2A is on the path it came by:
:func:`a2a.agent_updates.apply_agent_update` (polls, streams, sends, gateway frames,
pushed Tasks and statuses) and :func:`a2a.agent_push_body.parse` (every push).

A Part holds exactly one of ``text``, ``raw``, ``url``, ``data``; ``raw`` is base64 as
ProtoJSON reads bytes (what a2a-sdk 1.x clients and agents parse): the standard or the
URL-safe alphabet, with or without padding; ``text``, ``url``, ``filename`` and
``mediaType`` are strings, ``metadata`` an object. A 0.3 file part (``file`` with ``uri``
or ``bytes``, which the face serves as ``url`` / ``raw``) is checked as it is served.
Fields the Part does not name are left to the face. An answer holding text that cannot
be stored (a NUL, a lone surrogate) fails its task instead (:func:`refuse_bad_text`;
:func:`refuse_bad_message` for an answer that is a bare Message).

The Artifact or Message holding the parts is checked as well, for the same reason (an
``artifactId`` that is a number failed every ``ListTasks`` page as a bad part did): an
Artifact's ``artifactId``, ``name``, ``description`` and a Message's ``messageId``,
``taskId``, ``contextId`` are strings, ``role`` one of Role's, ``metadata`` an object,
``extensions`` (and ``referenceTaskIds``) lists of strings. None is required (the JSON
schema has defaults for all); null is unset, as in protobuf JSON.

What is kept of a valid answer has its bytes in standard, padded base64
(:func:`canonical_answer` and the others below): the face serves ``raw`` as stored, and
the specification's JSON schema for it is ``^[A-Za-z0-9+/]*={0,2}$`` (no URL-safe
alphabet); padded, it is the one spelling every base64 decoder reads.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from a2a.exceptions import A2AProtocolError
from a2a.models import Task
from platform_site.text import BadText, find_bad_text

# The members of Part's ``content`` oneof.
CONTENT = ("text", "raw", "url", "data")
# A 0.3 file's content (JSON-RPC names, then the REST binding's), as the 1.0 member it
# is served as.
FILE_CONTENT = (("uri", "url"), ("bytes", "raw"), ("fileWithUri", "url"), ("fileWithBytes", "raw"))
# String fields of a Part (``raw`` too: base64 in JSON), and of a 0.3 file.
STRINGS = ("text", "raw", "url", "filename", "mediaType")
FILE_STRINGS = ("uri", "bytes", "fileWithUri", "fileWithBytes", "mimeType", "name")


@dataclass(frozen=True)
class BadPart:
    """Where an answer holds a part that is not a Part (``artifact 0 part 1``), or an
    Artifact or Message that is not one (``artifact 0``, ``status message``), and why."""

    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


def part_problem(part: Any) -> str | None:
    """What makes ``part`` no A2A 1.0 Part; None when it is one."""
    if not isinstance(part, dict):
        return "is not an object"
    file = part.get("file")
    if file is not None and not isinstance(file, dict):
        return "file is not an object"
    file = file or {}
    # null is a JSON value for data (google.protobuf.Value); for the strings it is unset.
    members = [(k, k, part[k]) for k in CONTENT if k in part]
    members = [m for m in members if m[0] == "data" or m[2] is not None]
    members += [(f"file.{k}", as_, file[k]) for k, as_ in FILE_CONTENT if file.get(k) is not None]
    if not members:
        return "has none of text, raw, url, data"
    if len(members) > 1:
        return f"has both {members[0][0]} and {members[1][0]} (a Part holds exactly one)"
    strings = [(k, part.get(k)) for k in STRINGS]
    for name, value in strings + [(f"file.{k}", file.get(k)) for k in FILE_STRINGS]:
        if value is not None and not isinstance(value, str):
            return f"{name} is not a string"
    name, member, value = members[0]
    if member == "raw" and not _is_base64(value):
        return f"{name} is not base64"
    metadata = part.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        return "metadata is not an object"
    return None


def _is_base64(value: str) -> bool:
    """Whether ``value`` is base64 as ProtoJSON reads bytes (see :func:`canonical_base64`)."""
    return canonical_base64(value) is not None


def canonical_base64(value: str) -> str | None:
    """``value`` in standard, padded base64 when it is base64 as ProtoJSON reads bytes
    (the standard or the URL-safe alphabet, padded or not: what a2a-sdk 1.x parses);
    None when it is not (other characters, line breaks, a length no base64 has)."""
    text = value.replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):  # not the alphabet, bad padding, not ASCII
        return None
    return text


# Where a part holds bytes: ``raw``, and a 0.3 file's (JSON-RPC, then REST binding names).
_FILE_BYTES = ("bytes", "fileWithBytes")


def _canonical_part(part: Any) -> Any:
    """``part`` with its bytes in standard, padded base64: a copy when that changes it,
    else ``part`` itself. A value that is not base64 is left (it is refused, not kept)."""
    if not isinstance(part, dict):
        return part
    raw = part.get("raw")
    if isinstance(raw, str) and (fixed := canonical_base64(raw)) not in (None, raw):
        part = {**part, "raw": fixed}
    file = part.get("file")
    if isinstance(file, dict):
        changed = {
            key: fixed
            for key in _FILE_BYTES
            if isinstance(file.get(key), str)
            and (fixed := canonical_base64(file[key])) not in (None, file[key])
        }
        if changed:
            part = {**part, "file": {**file, **changed}}
    return part


def _canonical_parts(holder: Any) -> Any:
    """A Message or an Artifact with its parts' bytes in standard, padded base64 (a copy
    when one changes, else ``holder`` itself)."""
    parts = holder.get("parts") if isinstance(holder, dict) else None
    if not isinstance(parts, list):
        return holder
    fixed = [_canonical_part(part) for part in parts]
    if all(new is old for new, old in zip(fixed, parts, strict=True)):
        return holder
    return {**holder, "parts": fixed}


def canonical_message(message: Any) -> Any:
    """``message`` as it is kept: its parts' bytes in standard, padded base64."""
    return _canonical_parts(message)


def canonical_artifacts(artifacts: Any) -> Any:
    """``artifacts`` as they are kept: their parts' bytes in standard, padded base64."""
    if not isinstance(artifacts, list):
        return artifacts
    fixed = [_canonical_parts(artifact) for artifact in artifacts]
    return artifacts if all(n is o for n, o in zip(fixed, artifacts, strict=True)) else fixed


def canonical_answer(status: Any, artifacts: Any) -> tuple[Any, Any]:
    """An answer's status (its message) and artifacts as they are kept."""
    if isinstance(status, dict) and isinstance(status.get("message"), dict):
        message = canonical_message(status["message"])
        if message is not status["message"]:
            status = {**status, "message": message}
    return status, canonical_artifacts(artifacts)


def parts_problem(parts: Any, where: str) -> BadPart | None:
    """The first bad part of ``parts`` (a Message's or an Artifact's), named from
    ``where``; None when all are Parts (or there are none)."""
    if parts is None:
        return None
    if not isinstance(parts, list):
        return BadPart(where, "parts is not a list")
    for index, part in enumerate(parts):
        what = part_problem(part)
        if what is not None:
            return BadPart(f"{where} part {index}", what)
    return None


# An Artifact's and a Message's fields besides their parts: strings, and lists of strings.
ARTIFACT_STRINGS = ("artifactId", "name", "description")
ARTIFACT_LISTS = ("extensions",)
MESSAGE_STRINGS = ("messageId", "taskId", "contextId")
MESSAGE_LISTS = ("extensions", "referenceTaskIds")
# Role as ProtoJSON reads it (its names, or its numbers), and 0.3's lowercase roles, which
# the face serves as ``ROLE_USER`` / ``ROLE_AGENT``; empty or null is unset.
ROLES = ("ROLE_UNSPECIFIED", "ROLE_USER", "ROLE_AGENT", "user", "agent")
ROLE_NUMBERS = (0, 1, 2)


def fields_problem(
    holder: dict[str, Any], strings: tuple[str, ...], lists: tuple[str, ...]
) -> str | None:
    """What makes the fields of an Artifact or a Message besides ``parts`` (``strings``,
    ``lists`` of strings, ``metadata``) no A2A 1.0 fields; None when they are."""
    for name in strings:
        if holder.get(name) is not None and not isinstance(holder[name], str):
            return f"{name} is not a string"
    metadata = holder.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        return "metadata is not an object"
    for name in lists:
        value = holder.get(name)
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(item, str) for item in value)
        ):
            return f"{name} is not a list of strings"
    return None


def _role_problem(role: Any) -> str | None:
    """What makes ``role`` no Role; None when it is one (or unset)."""
    if role is None or role == "":
        return None
    if isinstance(role, str) and role in ROLES:
        return None
    # bool is an int to Python, not to ProtoJSON.
    if isinstance(role, int) and not isinstance(role, bool) and role in ROLE_NUMBERS:
        return None
    return "role is not an A2A Role"


def message_problem(message: Any, where: str = "message") -> BadPart | None:
    """What first makes a Message no A2A 1.0 Message: one of its fields, else one of its
    parts; None when it is one, or it is no object (nothing of it is kept then: the
    callers read a message only from an object)."""
    if not isinstance(message, dict):
        return None
    what = fields_problem(message, MESSAGE_STRINGS, MESSAGE_LISTS)
    what = what or _role_problem(message.get("role"))
    if what is not None:
        return BadPart(where, what)
    return parts_problem(message.get("parts"), where)


def artifact_problem(artifact: Any, where: str = "artifact") -> BadPart | None:
    """What first makes ``artifact`` no A2A 1.0 Artifact: it is no object, one of its
    fields, else one of its parts; None when it is one."""
    if not isinstance(artifact, dict):
        return BadPart(where, "is not an object")
    what = fields_problem(artifact, ARTIFACT_STRINGS, ARTIFACT_LISTS)
    if what is not None:
        return BadPart(where, what)
    return parts_problem(artifact.get("parts"), where)


def artifacts_problem(artifacts: Any) -> BadPart | None:
    """The first bad Artifact of a list of them (a non-list is the caller's to refuse)."""
    for index, artifact in enumerate(artifacts if isinstance(artifacts, list) else []):
        bad = artifact_problem(artifact, f"artifact {index}")
        if bad is not None:
            return bad
    return None


def answer_problem(status: Any, artifacts: Any) -> BadPart | None:
    """What first makes an answer no A2A 1.0 answer: its artifacts, then its status
    message (their fields, their parts)."""
    message = status.get("message") if isinstance(status, dict) else None
    return artifacts_problem(artifacts) or message_problem(message, "status message")


def refuse(task: Task, bad: BadPart | None) -> None:
    """Raise :class:`A2AProtocolError` (``not_a2a``) naming ``bad``; nothing when None.
    Only the place and the problem are named, never the agent's value (which may be of
    any length)."""
    if bad is None:
        return
    raise A2AProtocolError(
        f"Agent '{task.agent_id}' answered with an artifact or message that is not A2A 1.0 "
        f"({bad}); the answer was not applied.",
        {"part": bad.where, "problem": bad.what},
    )


def refuse_bad_text(
    task: Task, status: dict[str, Any], artifacts: Any, remote: dict[str, Any] | None
) -> bool:
    """Fail the task (``output_invalid``, once) if the agent's answer holds a NUL or a lone
    surrogate, which cannot be stored (PostgreSQL) or passed on. Nothing of the answer is
    stored; a re-send would only bring the same answer back. True when it was refused."""
    bad = find_bad_text({"status": status, "artifacts": artifacts or [], "task": remote or {}})
    return _refuse_text(task, bad)


def refuse_bad_message(task: Task, message: dict[str, Any]) -> bool:
    """:func:`refuse_bad_text` for an answer that is a bare Message: the whole message is
    checked (its ids and metadata as well as its parts), for it is kept in the
    conversation before its parts are judged as the output. True when it was refused."""
    return _refuse_text(task, find_bad_text(message, "message"))


def _refuse_text(task: Task, bad: BadText | None) -> bool:
    """Fail the task once as ``output_invalid`` naming where ``bad`` is, never its value
    (which PostgreSQL would refuse in the error as well); True when ``bad`` is set."""
    if bad is None:
        return False
    if not task.is_terminal:
        task.fail(
            "output_invalid",
            f"Agent '{task.agent_id}' answered with {bad.what} in {bad.where}, which the "
            "platform cannot store or pass on; the answer was discarded.",
            {"field": bad.where, "problem": bad.what},
        )
    return True
