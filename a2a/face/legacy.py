"""A2A 0.3 on the JSON-RPC binding: 0.3 params in, 1.0 params to the handler, 0.3 shapes out.

Served on the same JSON-RPC URL as 1.0 (``/v1/a2a/jsonrpc``), told apart by the method
names, which the two versions do not share (``message/send`` vs ``SendMessage``). The
card lists the URL twice: protocol version 1.0 and 0.3. Requests are validated with the
0.3 models of the official SDK (``a2a.compat.v0_3.types``); values (data parts, metadata)
pass through unchanged. Answers use the 0.3 shapes: ``kind`` on every object, lowercase
roles and states, ``final`` on status updates, a push config wrapped in
``pushNotificationConfig`` with ``authentication.schemes``.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from a2a.compat.v0_3 import types as v03
from a2a.face.context import LEGACY_VERSION
from a2a.face.errors import InvalidParams
from a2a.states import INTERRUPTED_STATES, TERMINAL_STATES
from a2a.transports.shapes import data_to_03

# 0.3 method → (handler operation, streams?, the 0.3 params model).
METHODS: dict[str, tuple[str, bool, type[Any]]] = {
    "message/send": ("send_message", False, v03.MessageSendParams),
    "message/stream": ("stream_message", True, v03.MessageSendParams),
    "tasks/get": ("get_task", False, v03.TaskQueryParams),
    "tasks/cancel": ("cancel_task", False, v03.TaskIdParams),
    "tasks/resubscribe": ("subscribe", True, v03.TaskIdParams),
    "tasks/pushNotificationConfig/set": (
        "create_push_config",
        False,
        v03.TaskPushNotificationConfig,
    ),
    "tasks/pushNotificationConfig/get": (
        "get_push_config",
        False,
        v03.GetTaskPushNotificationConfigParams,
    ),
    "tasks/pushNotificationConfig/list": (
        "list_push_configs",
        False,
        v03.ListTaskPushNotificationConfigParams,
    ),
    "tasks/pushNotificationConfig/delete": (
        "delete_push_config",
        False,
        v03.DeleteTaskPushNotificationConfigParams,
    ),
    "agent/getAuthenticatedExtendedCard": ("get_extended_card", False, type(None)),
}

_ROLES_IN = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}
_ROLES_OUT = {"ROLE_USER": "user", "ROLE_AGENT": "agent"}


def state_out(state: str) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` → ``input-required``."""
    return state.removeprefix("TASK_STATE_").lower().replace("_", "-")


# --- requests: 0.3 → 1.0 --------------------------------------------------------------


def _part_in(part: dict[str, Any]) -> dict[str, Any]:
    kind = part.get("kind")
    out: dict[str, Any] = {}
    if kind == "text":
        out["text"] = part.get("text", "")
    elif kind == "data":
        out["data"] = part.get("data")
    elif kind == "file":
        file = part.get("file") or {}
        if "uri" in file:
            out["url"] = file["uri"]
        if "bytes" in file:
            out["raw"] = file["bytes"]
        if file.get("mimeType"):
            out["mediaType"] = file["mimeType"]
        if file.get("name"):
            out["filename"] = file["name"]
    if part.get("metadata") is not None:
        out["metadata"] = part["metadata"]
    return out


def message_in(message: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in message.items() if k not in ("kind", "role", "parts")}
    out["role"] = _ROLES_IN.get(str(message.get("role")), str(message.get("role")))
    out["parts"] = [_part_in(p) for p in message.get("parts") or []]
    return out


def _push_config_in(config: dict[str, Any]) -> dict[str, Any]:
    """A 0.3 ``PushNotificationConfig`` as 1.0's: its first scheme is the one the POSTs
    use. ``{"schemes": []}`` without credentials asks for nothing (no authentication);
    with credentials it becomes a 1.0 authentication without a scheme, which
    :func:`a2a.face.push_configs.clean_config` refuses (its POSTs would go without them)."""
    out = {k: config[k] for k in ("id", "url", "token") if config.get(k) is not None}
    auth = config.get("authentication")
    if auth and (auth.get("schemes") or auth.get("credentials")):
        schemes = auth.get("schemes") or [""]
        out["authentication"] = {"scheme": schemes[0]}
        if auth.get("credentials"):
            out["authentication"]["credentials"] = auth["credentials"]
    return out


def params_in(method: str, raw: Any) -> dict[str, Any]:
    """The 1.0 params of a 0.3 request (validated by the SDK's 0.3 model)."""
    model = METHODS[method][2]
    if model is type(None):
        return {}
    try:
        p = model.model_validate(raw or {}).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise InvalidParams(f"Invalid params for {method}: {problems}"[:500]) from None
    operation = METHODS[method][0]
    if operation in ("send_message", "stream_message"):
        out: dict[str, Any] = {"message": message_in(p["message"])}
        if p.get("metadata") is not None:
            out["metadata"] = p["metadata"]
        config = p.get("configuration") or {}
        new_config: dict[str, Any] = {}
        if config.get("acceptedOutputModes") is not None:
            new_config["acceptedOutputModes"] = config["acceptedOutputModes"]
        if config.get("historyLength") is not None:
            new_config["historyLength"] = config["historyLength"]
        if config.get("blocking") is False:
            new_config["returnImmediately"] = True
        if config.get("pushNotificationConfig"):
            push = _push_config_in(config["pushNotificationConfig"])
            new_config["taskPushNotificationConfig"] = push
        out["configuration"] = new_config
        return out
    if operation == "create_push_config":
        return {"taskId": p["taskId"], **_push_config_in(p["pushNotificationConfig"])}
    if operation in ("get_push_config", "delete_push_config"):
        out = {"taskId": p["id"]}
        if p.get("pushNotificationConfigId"):
            out["id"] = p["pushNotificationConfigId"]
        return out
    if operation == "list_push_configs":
        return {"taskId": p["id"]}
    out = {"id": p["id"]}
    if p.get("historyLength") is not None:
        out["historyLength"] = p["historyLength"]
    return out


# Under this key the params of a 0.3 call say that its push config is 0.3's (its webhook
# gets 0.3 notifications: :mod:`a2a.face.push`). Set after the params are read, which drops
# every field the request message does not have; no ProtoJSON name starts with ``@``, so
# no client, of either version, can send it.
PUSH_VERSION_KEY = "@protocolVersion"


def mark_push_config(operation: str, params: dict[str, Any]) -> None:
    """Mark the push config in a 0.3 call's (read) params, if any, as set over 0.3: the
    ``tasks/pushNotificationConfig/set`` config, or a send's
    ``configuration.pushNotificationConfig``; and a ``tasks/pushNotificationConfig/get``
    as 0.3's, whose config id is optional (1.0's is required)."""
    if operation in ("create_push_config", "get_push_config"):
        params[PUSH_VERSION_KEY] = LEGACY_VERSION
    elif operation in ("send_message", "stream_message"):
        configuration = params.get("configuration")
        push = configuration.get("taskPushNotificationConfig") if configuration else None
        if isinstance(push, dict):
            push[PUSH_VERSION_KEY] = LEGACY_VERSION


# --- answers: 1.0 → 0.3 ---------------------------------------------------------------


def _part_out(part: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any]
    if "text" in part:
        out = {"kind": "text", "text": part["text"]}
    elif "data" in part:
        out = {"kind": "data", "data": data_to_03(part["data"])}
    elif "url" in part or "raw" in part:
        file: dict[str, Any] = {"uri": part["url"]} if "url" in part else {"bytes": part["raw"]}
        if part.get("mediaType"):
            file["mimeType"] = part["mediaType"]
        if part.get("filename"):
            file["name"] = part["filename"]
        out = {"kind": "file", "file": file}
    else:
        out = {"kind": "text", "text": ""}
    if part.get("metadata") is not None:
        out["metadata"] = part["metadata"]
    return out


def message_out(message: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in message.items() if k not in ("role", "parts")}
    out["kind"] = "message"
    out["role"] = _ROLES_OUT.get(str(message.get("role")), "agent")
    out["parts"] = [_part_out(p) for p in message.get("parts") or [] if isinstance(p, dict)]
    return out


def _status_out(status: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"state": state_out(status["state"])}
    if status.get("message"):
        out["message"] = message_out(status["message"])
    if status.get("timestamp"):
        out["timestamp"] = status["timestamp"]
    return out


def _artifact_out(artifact: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in artifact.items() if k != "parts"}
    out["parts"] = [_part_out(p) for p in artifact.get("parts") or [] if isinstance(p, dict)]
    return out


def task_out(task: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": "task",
        "id": task["id"],
        "contextId": task.get("contextId", ""),
        "status": _status_out(task["status"]),
    }
    if task.get("artifacts"):
        out["artifacts"] = [_artifact_out(a) for a in task["artifacts"]]
    if task.get("history"):
        out["history"] = [message_out(m) for m in task["history"]]
    if task.get("metadata"):
        out["metadata"] = task["metadata"]
    return out


def is_final(state: str) -> bool:
    """0.3 marks the last event of a stream ``final``: a final or interrupted state."""
    return state in TERMINAL_STATES or state in INTERRUPTED_STATES


def event_out(event: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 StreamResponse as the 0.3 event it stands for."""
    if "task" in event:
        return task_out(event["task"])
    if "message" in event:
        return message_out(event["message"])
    if "statusUpdate" in event:
        update = event["statusUpdate"]
        return {
            "kind": "status-update",
            "taskId": update["taskId"],
            "contextId": update.get("contextId", ""),
            "status": _status_out(update["status"]),
            "final": is_final(update["status"]["state"]),
        }
    update = event["artifactUpdate"]
    return {
        "kind": "artifact-update",
        "taskId": update["taskId"],
        "contextId": update.get("contextId", ""),
        "artifact": _artifact_out(update["artifact"]),
        "lastChunk": bool(update.get("lastChunk")),
        "append": bool(update.get("append")),
    }


def ends_stream(event: dict[str, Any]) -> bool:
    """A 0.3 stream ends after its ``final`` event (or a bare Message)."""
    return bool(event.get("final")) or event.get("kind") == "message"


def _push_config_out(config: dict[str, Any]) -> dict[str, Any]:
    inner: dict[str, Any] = {"id": config.get("id"), "url": config["url"]}
    if config.get("token"):
        inner["token"] = config["token"]
    auth = config.get("authentication")
    if auth:
        inner["authentication"] = {"schemes": [auth.get("scheme", "")]}
        if auth.get("credentials"):
            inner["authentication"]["credentials"] = auth["credentials"]
    return {"taskId": config["taskId"], "pushNotificationConfig": inner}


def result_out(operation: str, result: Any) -> Any:
    """The 0.3 result of a (non-streaming) operation's 1.0 answer."""
    if operation == "send_message":
        return message_out(result["message"]) if "message" in result else task_out(result["task"])
    if operation in ("get_task", "cancel_task"):
        return task_out(result)
    if operation in ("create_push_config", "get_push_config"):
        return _push_config_out(result)
    if operation == "list_push_configs":
        return [_push_config_out(c) for c in result["configs"]]
    if operation == "delete_push_config":
        return None
    if operation == "get_extended_card":
        return card_out(result)
    return result


def card_out(card: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 AgentCard as the 0.3 card (the official SDK's conversion)."""
    from google.protobuf.json_format import ParseDict

    from a2a.compat.v0_3.conversions import to_compat_agent_card
    from a2a.types import a2a_pb2 as pb

    core = ParseDict(card, pb.AgentCard(), ignore_unknown_fields=True)
    return to_compat_agent_card(core).model_dump(by_alias=True, exclude_none=True)
