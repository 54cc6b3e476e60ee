"""A2A JSON shapes the dispatcher builds and reads (camelCase, A2A 1.0).

Readers are tolerant: 0.3-style parts (``{"kind": "data", "data": ...}``), text parts that
hold JSON, and unknown fields are all accepted.
"""

from __future__ import annotations

import functools
import json
import re
import uuid
from typing import Any

from referencing.exceptions import Unresolvable

from agent_profiles.json_schemas import build_validator
from platform_site.text import loads_bounded


def new_message_id() -> str:
    return str(uuid.uuid4())


def user_message(
    *,
    skill_id: str,
    data: dict[str, Any] | None = None,
    text: str | None = None,
    task_id: str = "",
    context_id: str = "",
) -> dict[str, Any]:
    """A ``ROLE_USER`` Message with a data part (and/or a text part) and ``metadata.skillId``."""
    parts: list[dict[str, Any]] = []
    if text:
        parts.append({"text": text})
    if data is not None:
        parts.append({"data": data})
    message: dict[str, Any] = {
        "messageId": new_message_id(),
        "role": "ROLE_USER",
        "parts": parts,
        "metadata": {"skillId": skill_id},
    }
    if task_id:
        message["taskId"] = task_id
    if context_id:
        message["contextId"] = context_id
    return message


def data_as_text(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with each data part written as JSON in a text part, for an agent whose
    card admits no JSON input (text only, as a2a-sdk's samples declare): such agents read
    the text parts alone (a2a-sdk's ``RequestContext.get_user_input()``), and a data
    part would reach them as nothing at all."""
    parts = message.get("parts")
    if not isinstance(parts, list) or not any(isinstance(p, dict) and "data" in p for p in parts):
        return message
    written: list[Any] = []
    for part in parts:
        if isinstance(part, dict) and "data" in part:
            text: dict[str, Any] = {"text": json.dumps(part["data"], ensure_ascii=False)}
            if part.get("metadata"):
                text["metadata"] = part["metadata"]
            part = text
        written.append(part)
    return {**message, "parts": written}


def relay_message(
    message: dict[str, Any], *, task_id: str = "", context_id: str = ""
) -> dict[str, Any]:
    """A caller's Message, unchanged except for the agent-side task and context ids.

    A caller's ``taskId``/``contextId`` name the platform's task, which the agent has never
    seen; a follow-up must name the agent's own ids instead.
    """
    relayed = dict(message)
    relayed.setdefault("messageId", new_message_id())
    relayed.setdefault("role", "ROLE_USER")
    relayed.pop("taskId", None)
    if task_id:
        relayed["taskId"] = task_id
    if context_id:
        relayed["contextId"] = context_id
    return relayed


# A Markdown code block that is the whole text, as language models often answer JSON.
_FENCED = re.compile(r"```[\w+.-]*[ \t]*\r?\n(.*?)\r?\n?[ \t]*```", re.DOTALL)


def _json_in_text(text: str) -> Any:
    """The JSON object or array a text holds: all of it, or a Markdown code block
    (```json ... ```) that is all of it; else None."""
    body = text.strip()
    fenced = _FENCED.fullmatch(body)
    if fenced is not None:
        body = fenced.group(1).strip()
    if body[:1] not in ("{", "["):
        return None
    try:
        # Bounded: text nested thousands deep would fail the parser's recursion. Deeper
        # than MAX_JSON_DEPTH, or not JSON, it is prose, which the schema then judges.
        return loads_bounded(body)
    except ValueError:
        return None


def _texts(parts: list[Any]) -> list[str]:
    return [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]


def _data_parts(parts: Any) -> list[Any]:
    """All structured values of a list of parts, in order: its data parts (0.3 wrapped
    them as ``{"kind": "data", "data": ...}``; 1.0 JSON is a Value). Only when none is a
    data part: the JSON its text parts hold, each, else all of them joined (a value an
    agent streamed in chunks, appended to one artifact as parts of text)."""
    if not isinstance(parts, list):
        return []
    values = [p["data"] for p in parts if isinstance(p, dict) and "data" in p]
    if values:
        return values
    texts = _texts(parts)
    values = [v for v in map(_json_in_text, texts) if v is not None]
    if values or len(texts) < 2:
        return values
    joined = _json_in_text("".join(texts))
    return [] if joined is None else [joined]


def _text_of(parts: Any) -> str:
    """The text of a list of parts: its text parts joined as the chunks they may be."""
    return "".join(_texts(parts)).strip() if isinstance(parts, list) else ""


def _collect_output(artifacts: list[Any] | None) -> Any:
    """The skill output carried by the artifacts.

    One structured value → that value. Several objects → merged in order (a later key
    wins), so an agent may stream its result as several artifacts. Nothing → ``None``.
    """
    values: list[Any] = []
    for artifact in artifacts or []:
        if isinstance(artifact, dict):
            values.extend(_data_parts(artifact.get("parts")))
    return _merge_values(values)


def _message_output(message: Any) -> Any:
    """The structured value a Message carries (as :func:`_collect_output` reads an
    artifact's parts), or None."""
    if not isinstance(message, dict):
        return None
    return _merge_values(_data_parts(message.get("parts")))


AGENT_ROLES = ("ROLE_AGENT", "agent")  # A2A 1.0, and 0.3 as some 1.0 servers still write


def _last_agent_message(history: Any) -> Any:
    for message in reversed(history if isinstance(history, list) else []):
        if isinstance(message, dict) and message.get("role") in AGENT_ROLES:
            return message
    return None


def task_output(artifacts: Any, status_message: Any = None, history: Any = None) -> Any:
    """The output of a completed task. A structured value first: the artifacts' (see
    :func:`_collect_output`), else the completing status message's, else the agent's last
    message's in ``history`` (LangGraph's server answers ``GetTask`` and ``ListTasks``
    with the result there and no artifact). When none holds one, the artifacts' text (one
    line per artifact; a bare Message answer is read as an artifact): an agent that
    answers in prose is validated as a string. Not a status message's text: agents say
    "Task completed" there (LangGraph's server does, with the result in the history).
    None when there is nothing."""
    artifacts = [a for a in artifacts if isinstance(a, dict)] if isinstance(artifacts, list) else []
    value = _collect_output(artifacts)
    for message in (status_message, _last_agent_message(history)):
        if value is None:
            value = _message_output(message)
    if value is not None:
        return value
    return "\n".join(text for a in artifacts if (text := _text_of(a.get("parts")))) or None


def says_something(message: Any) -> bool:
    """Whether a message has a part with content: text that is not blank, data, a file."""
    parts = message.get("parts") if isinstance(message, dict) else None
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        text = part.get("text")
        if (isinstance(text, str) and text.strip()) or any(
            key in part for key in ("data", "file", "raw", "url")
        ):
            return True
    return False


def question_of(message: Any, artifacts: Any) -> Any:
    """What the agent asks a person: its status message; when that says nothing and the
    answer carries artifacts, their parts as that message's (LangGraph's server asks with
    an empty message and an ``Interrupt`` artifact holding the value given to
    ``interrupt()``)."""
    if says_something(message) or not isinstance(artifacts, list):
        return message
    parts = [
        part
        for artifact in artifacts
        if isinstance(artifact, dict) and isinstance(artifact.get("parts"), list)
        for part in artifact["parts"]
        if isinstance(part, dict)
    ]
    if not parts:
        return message
    asked = dict(message) if isinstance(message, dict) else {"role": "ROLE_AGENT"}
    return {**asked, "parts": parts}


def _merge_values(values: list[Any]) -> Any:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    if all(isinstance(v, dict) for v in values):
        merged: dict[str, Any] = {}
        for value in values:
            merged.update(value)
        return merged
    return values[-1]


def message_text(message: Any) -> str:
    """The text parts of a Message joined, for error messages and the admin."""
    if not isinstance(message, dict):
        return ""
    texts = [p["text"] for p in message.get("parts") or [] if isinstance(p, dict) and "text" in p]
    return " ".join(t for t in texts if isinstance(t, str)).strip()


def _strings(value: Any, found: list[str]) -> None:
    """The strings in a data value, ids and a tool call's name left out."""
    if isinstance(value, str) and value.strip():
        found.append(value.strip())
    elif isinstance(value, dict):
        if isinstance(value.get("args"), dict):  # a tool call: its arguments say it
            value = value["args"]
        for key, item in value.items():
            if key not in ("id", "name", "interruptId"):
                _strings(item, found)
    elif isinstance(value, list):
        for item in value:
            _strings(item, found)


def said_text(message: Any) -> str:
    """What a message says to a person, on one line: its text, else the strings in its
    data parts (an ADK question is a tool call whose arguments hold the question; a
    LangGraph one, the value given to ``interrupt()``). For the admin's short views."""
    text = message_text(message)
    if text or not isinstance(message, dict):
        return text
    found: list[str] = []
    for part in message.get("parts") or []:
        if isinstance(part, dict) and "data" in part:
            _strings(part["data"], found)
    return " ".join(found)


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    # Never fetching a $ref, matching patterns in linear time: agent_profiles.json_schemas.
    return build_validator(schema)


def schema_errors(schema: dict[str, Any], value: Any) -> list[dict[str, str]]:
    """jsonschema errors of ``value`` as ``[{"path", "message"}]`` (empty when valid).

    Validators are built once per distinct schema (per process): building one costs more
    than most validations. A schema that cannot be applied (a ``$ref`` that does not
    resolve, or loops: saving one is refused, but one stored before may remain) is one
    error at ``(schema)``: the caller's input is refused, an agent's output fails, where
    an exception would answer 500 or leave the task running.
    """
    validator = _validator(json.dumps(schema, sort_keys=True))
    try:
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    except Unresolvable as exc:
        ref = getattr(exc, "ref", "") or str(exc)
        ref = f"#{ref}" if ref.startswith("/") else ref  # a JSON pointer's fragment
        fault = f"the schema's $ref '{ref}' does not resolve within the schema"
        return [{"path": "(schema)", "message": f"{fault}, so nothing can be checked"}]
    except RecursionError:
        fault = "the schema's $refs loop without end"
        return [{"path": "(schema)", "message": f"{fault}, so nothing can be checked"}]
    return [
        {"path": "/".join(str(p) for p in e.absolute_path) or "(root)", "message": e.message}
        for e in errors[:50]
    ]


def artifacts_bytes(artifacts: list[Any]) -> int:
    """The size of ``artifacts`` as the platform stores and serves them: compact JSON, in
    UTF-8 bytes (what ``TASK_ARTIFACTS_MAX_BYTES`` caps)."""
    text = json.dumps(artifacts, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-8", "surrogatepass"))
