"""Reading agents' answers and writing 0.3 requests: the parsing every binding shares.

Answers are checked for shape, not trusted: unknown fields are ignored, and anything that
is not A2A raises :class:`~a2a.exceptions.A2AProtocolError` instead of leaking a parser
exception. A2A 0.3 objects are turned into 1.0 shapes here, once, so nothing past the
transports sees a 0.3 spelling:

* JSON-RPC 0.3 (the pydantic types): ``kind`` fields, lowercase roles and states,
  ``{"kind": "data", "data": ...}`` parts, ``{"kind": "file", "file": {...}}``;
* HTTP+JSON 0.3 (protobuf JSON of the 0.3 proto): ``content`` instead of ``parts``,
  ``{"data": {"data": ...}}`` data parts, ``TASK_STATE_CANCELLED``.
"""

from __future__ import annotations

from typing import Any

from a2a.exceptions import A2AProtocolError
from a2a.states import normalize_state
from a2a.transports.quoting import quoted

ROLES_03 = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}
ROLES_TO_03 = {"ROLE_USER": "user", "ROLE_AGENT": "agent"}


def is_task(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("id"), str)
        and bool(obj["id"])
        and isinstance(obj.get("status"), dict)
    )


def is_message(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("parts"), list)


def check_task(task: dict[str, Any], what: str) -> dict[str, Any]:
    """Raise :class:`A2AProtocolError` unless ``task`` has an id and a known state."""
    if not is_task(task):
        raise A2AProtocolError(f"The agent's {what} is not an A2A Task (no id or status).")
    raw = task["status"].get("state")
    state = normalize_state(raw)
    if state is None:
        raise A2AProtocolError(f"The agent's {what} has an unknown task state {quoted(raw)}.")
    for key in ("artifacts", "history"):
        if key in task and not isinstance(task[key], list):
            raise A2AProtocolError(f"The agent's {what} has a {key} that is not a list.")
    if state != raw:
        task = {**task, "status": {**task["status"], "state": state}}
    return task


# --- A2A 0.3 → 1.0 ----------------------------------------------------------------------


def part_from_03(part: Any, *, rest: bool) -> Any:
    """One 0.3 part as a 1.0 part (``rest``: the HTTP+JSON binding's protobuf JSON). A
    file's content is told by presence: ``bytes: ""`` is an empty file, not no content. A
    ``{"value": ...}`` data part stays as it is (the face does not unwrap it either)."""
    if not isinstance(part, dict):
        return part
    out = {k: v for k, v in part.items() if k not in ("kind", "file", "data")}
    if "data" in part:
        data = part["data"]
        if rest and isinstance(data, dict) and set(data) == {"data"}:
            data = data["data"]  # the 0.3 proto's DataPart{data: Struct}
        out["data"] = data
    if isinstance(part.get("file"), dict):
        file = part["file"]
        uri = file.get("uri", file.get("fileWithUri"))
        raw = file.get("bytes", file.get("fileWithBytes"))
        if uri is not None and (uri or raw is None):
            out["url"] = uri
        elif raw is not None:
            out["raw"] = raw
        if file.get("mimeType"):
            out["mediaType"] = file["mimeType"]
        if file.get("name"):
            out["filename"] = file["name"]
    return out


def message_from_03(message: Any, *, rest: bool) -> Any:
    if not isinstance(message, dict):
        return message
    out = {k: v for k, v in message.items() if k not in ("kind", "content")}
    parts = message.get("parts", message.get("content"))
    if isinstance(parts, list):
        out["parts"] = [part_from_03(p, rest=rest) for p in parts]
    role = message.get("role")
    if isinstance(role, str) and role in ROLES_03:
        out["role"] = ROLES_03[role]
    return out


def status_from_03(status: Any, *, rest: bool) -> Any:
    if not isinstance(status, dict):
        return status
    out = dict(status)
    state = normalize_state(status.get("state"))
    if state is not None:
        out["state"] = state
    if isinstance(status.get("message"), dict):
        out["message"] = message_from_03(status["message"], rest=rest)
    return out


def artifact_from_03(artifact: Any, *, rest: bool) -> Any:
    if not isinstance(artifact, dict):
        return artifact
    out = {k: v for k, v in artifact.items() if k != "kind"}
    if isinstance(artifact.get("parts"), list):
        out["parts"] = [part_from_03(p, rest=rest) for p in artifact["parts"]]
    return out


def task_from_03(task: Any, *, rest: bool) -> Any:
    if not isinstance(task, dict):
        return task
    out = {k: v for k, v in task.items() if k != "kind"}
    if "status" in task:
        out["status"] = status_from_03(task["status"], rest=rest)
    if isinstance(task.get("artifacts"), list):
        out["artifacts"] = [artifact_from_03(a, rest=rest) for a in task["artifacts"]]
    if isinstance(task.get("history"), list):
        out["history"] = [message_from_03(m, rest=rest) for m in task["history"]]
    return out


# --- A2A 1.0 → 0.3 (what we send) ----------------------------------------------------


def data_to_03(data: Any) -> dict[str, Any]:
    """A 1.0 data part's value (any JSON) as 0.3's DataPart holds it: an object (a 0.3
    peer refuses anything else, and the whole message with it), so a non-object goes as
    ``{"value": ...}``, to 0.3 agents and to the face's 0.3 clients alike."""
    return data if isinstance(data, dict) else {"value": data}


def part_to_03(part: dict[str, Any], *, rest: bool) -> dict[str, Any]:
    """One 1.0 part in 0.3 spelling: the JSON-RPC pydantic shape, or (``rest``) the 0.3
    proto's JSON (``text``, ``file``, ``data``, ``metadata`` and nothing else). Both carry
    every part's ``metadata`` and every file's ``name``."""
    meta = {"metadata": part["metadata"]} if isinstance(part.get("metadata"), dict) else {}
    if "text" in part:
        if rest:
            return {"text": part["text"], **meta}
        return {"kind": "text", "text": part["text"], **meta}
    if "data" in part:
        data = data_to_03(part["data"])
        if rest:
            return {"data": {"data": data}, **meta}
        return {"kind": "data", "data": data, **meta}
    file: dict[str, Any] = {}
    if "url" in part:
        file["fileWithUri" if rest else "uri"] = part["url"]
    if "raw" in part:
        file["fileWithBytes" if rest else "bytes"] = part["raw"]
    if "mediaType" in part:
        file["mimeType"] = part["mediaType"]
    if "filename" in part:
        file["name"] = part["filename"]
    return {"file": file, **meta} if rest else {"kind": "file", "file": file, **meta}


# The 0.3 proto's Message fields besides ``role`` and ``content``: a 1.0 Message's others
# (``referenceTaskIds``) have none there, and a2a-sdk 0.3's HTTP+JSON server (a strict
# protobuf parse) answers a message holding one with HTTP 500.
MESSAGE_FIELDS_03_REST = ("messageId", "contextId", "taskId", "metadata", "extensions")


def message_to_03(message: dict[str, Any], *, rest: bool) -> dict[str, Any]:
    """Our 1.0 Message in 0.3 spelling (JSON-RPC pydantic shape, or the REST proto JSON:
    only the proto's fields, see :data:`MESSAGE_FIELDS_03_REST`)."""
    parts = [part_to_03(p, rest=rest) for p in message.get("parts") or [] if isinstance(p, dict)]
    role = str(message.get("role") or "ROLE_USER")
    if rest:
        out = {k: message[k] for k in MESSAGE_FIELDS_03_REST if message.get(k) is not None}
        out["role"] = role if role.startswith("ROLE_") else ROLES_03.get(role, "ROLE_USER")
        out["content"] = parts
    else:
        out = {k: v for k, v in message.items() if k not in ("parts", "role")}
        out["kind"] = "message"
        out["role"] = ROLES_TO_03.get(role, role if role in ROLES_03 else "user")
        out["parts"] = parts
    return out


# --- answers ------------------------------------------------------------------------


def read_send_answer(data: Any, *, v03: bool, rest: bool, what: str) -> tuple[Any, Any]:
    """``(task, message)`` from a send answer: wrapped or bare, 1.0 or 0.3."""
    if v03:
        if isinstance(data, dict) and isinstance(data.get("task"), dict):
            data = {"task": task_from_03(data["task"], rest=rest)}
        elif isinstance(data, dict) and isinstance(data.get("message"), dict):
            data = {"message": message_from_03(data["message"], rest=rest)}
        elif isinstance(data, dict) and data.get("kind") == "message":
            data = message_from_03(data, rest=rest)
        else:
            data = task_from_03(data, rest=rest)
    if isinstance(data, dict) and "task" in data and is_task(data["task"]):
        return check_task(data["task"], what), None
    if isinstance(data, dict) and "message" in data and is_message(data["message"]):
        return None, data["message"]
    if is_task(data):  # some agents answer the Task without the wrapper
        return check_task(data, what), None
    if isinstance(data, dict) and is_message(data) and "messageId" in data:
        return None, data
    raise A2AProtocolError(f"The agent's {what} is neither a Task nor a Message.")


def read_task_answer(data: Any, *, v03: bool, rest: bool, what: str) -> dict[str, Any]:
    """The Task of a get/cancel answer (the send-style wrapper is tolerated)."""
    if isinstance(data, dict) and "task" in data and not is_task(data) and is_task(data["task"]):
        data = data["task"]
    if v03:
        data = task_from_03(data, rest=rest)
    if not is_task(data):
        raise A2AProtocolError(f"The agent's {what} is not an A2A Task.")
    return check_task(data, what)


def read_task_page(data: Any, *, what: str) -> tuple[list[dict[str, Any]], str]:
    """The tasks and next page token of a 1.0 ``ListTasks`` answer; one item that is not
    an A2A Task makes the whole page a protocol error (the agent is not listing A2A).

    ``tasks`` may be left out when empty (protobuf JSON omits empty lists), but then the
    answer must still be a ListTasksResponse: one Task, or any other object, is not."""
    page_fields = ("tasks", "nextPageToken", "pageSize", "totalSize")
    if not isinstance(data, dict) or not any(key in data for key in page_fields):
        raise A2AProtocolError(f"The agent's {what} is not a ListTasksResponse.")
    tasks = data.get("tasks") or []
    if not isinstance(tasks, list) or is_task(data):
        raise A2AProtocolError(f"The agent's {what} is not a ListTasksResponse.")
    token = data.get("nextPageToken") or ""
    if not isinstance(token, str):
        raise A2AProtocolError(f"The agent's {what} has a nextPageToken that is not a string.")
    return [check_task(task, what) for task in tasks], token


def read_stream_event(data: Any, *, v03: bool, rest: bool) -> tuple[str, Any]:
    """One stream event as ``(kind, payload)``: task, message, status or artifact.

    ``status`` payloads are ``{taskId, contextId, status, final}``; ``artifact`` payloads
    ``{taskId, contextId, artifact, append, lastChunk}`` (1.0 shapes).
    """
    if not isinstance(data, dict):
        raise A2AProtocolError("A stream event from the agent is not a JSON object.")
    kind = data.get("kind")
    if v03 and kind:  # JSON-RPC 0.3: the event itself, told apart by ``kind``
        return _event_03(data, kind)
    if isinstance(data.get("task"), dict):
        task = task_from_03(data["task"], rest=rest) if v03 else data["task"]
        return "task", check_task(task, "stream event")
    if isinstance(data.get("message"), dict):
        message = data["message"]
        return "message", message_from_03(message, rest=rest) if v03 else message
    if isinstance(data.get("statusUpdate"), dict):
        event = data["statusUpdate"]
        status = status_from_03(event.get("status"), rest=rest) if v03 else event.get("status")
        return "status", {**event, "status": status}
    if isinstance(data.get("artifactUpdate"), dict):
        event = data["artifactUpdate"]
        artifact = event.get("artifact")
        if v03:
            artifact = artifact_from_03(artifact, rest=rest)
        return "artifact", {**event, "artifact": artifact}
    if is_task(data):
        return "task", check_task(data, "stream event")
    if kind in ("status-update", "artifact-update", "message"):
        # A 1.0 server still sending 0.3's events as they are (LangGraph's: its first
        # event is a 1.0 ``task``, the updates after it 0.3's ``kind``-tagged objects).
        return _event_03(data, kind)
    raise A2AProtocolError("A stream event from the agent is not an A2A StreamResponse.")


def _event_03(data: dict[str, Any], kind: Any) -> tuple[str, Any]:
    """A 0.3 stream event (JSON-RPC: the object itself, told apart by ``kind``)."""
    if kind == "task":
        return "task", check_task(task_from_03(data, rest=False), "stream event")
    if kind == "message":
        return "message", message_from_03(data, rest=False)
    if kind == "status-update":
        return "status", {**data, "status": status_from_03(data.get("status"), rest=False)}
    if kind == "artifact-update":
        artifact = artifact_from_03(data.get("artifact"), rest=False)
        return "artifact", {**data, "artifact": artifact}
    raise A2AProtocolError(f"Unknown stream event kind {quoted(kind)} from the agent.")
