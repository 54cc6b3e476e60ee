"""A2A 1.0 objects under 0.3's method names and lowercase enums: the JSON-RPC that FastA2A
(the A2A library behind Pydantic AI's ``agent.to_a2a()``) speaks as a client.

Its ``A2AClient`` posts ``message/send`` and ``message/stream`` (0.3's names) with a 1.0
Message (no ``kind``; parts as ``text``, ``data``, ``raw``/``url``), its configuration
with 0.3's ``blocking`` and 1.0's ``taskPushNotificationConfig``, and reads 1.0 answers
(``{"task": ...}`` or ``{"message": ...}``; stream events ``statusUpdate``,
``artifactUpdate``) whose states and roles are 0.3's lowercase words. Answered in 0.3
shapes, it read a send's answer as empty (a bare Task is neither key) and could not go
on; its file parts were refused as no 0.3 Part.

A 0.3 Message always says ``"kind": "message"``, so a send whose message does not is
read as this dialect (:func:`speaks`): its params go to the handler as 1.0 ones
(:func:`params_in`), and its answers are the 1.0 answers with lowercase states and roles
(:func:`out`). Its other calls (``tasks/get``, ``tasks/cancel``) name no message: the task
such a send created says so (:data:`DIALECT` in its metadata), and they answer it in the
mix too; 0.3's Task lost its file parts for FastA2A (0.3's ``file``) and changed data that
is no object (0.3 wraps it in ``value``). An unknown task there is 0.3's ``"Task not
found"``, the one message FastA2A reads.
"""

from __future__ import annotations

from typing import Any

from a2a.face.errors import InvalidParams
from a2a.face.legacy import state_out

SENDS = ("message/send", "message/stream")
READS = ("tasks/get", "tasks/cancel")  # 0.3 calls that answer a task, whose maker says
DIALECT = "faceDialect"  # a task's metadata: the mix its first send came in
MIX = "fasta2a"
# Under this key a call's (read) params carry the mix to the handler: a send's, for the
# task it creates; a read's, asking for the mark on the answer of a task made so. No
# ProtoJSON name starts with "@": no client can send it.
KEY = "@dialect"
_ROLES_IN = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}
_ROLES_OUT = {"ROLE_USER": "user", "ROLE_AGENT": "agent"}


def speaks(method: str, raw_params: Any) -> bool:
    """Whether a 0.3-named send carries a 1.0 Message (no ``kind``): this dialect."""
    if method not in SENDS or not isinstance(raw_params, dict):
        return False
    message = raw_params.get("message")
    return isinstance(message, dict) and "kind" not in message


def params_in(raw: dict[str, Any]) -> dict[str, Any]:
    """The 1.0 params of such a send (checked by the handler's reading, as any 1.0 call's)."""
    message = dict(raw["message"])
    role = message.get("role")
    message["role"] = _ROLES_IN.get(role, role) if isinstance(role, str) else role
    config = raw.get("configuration")
    if config is not None and not isinstance(config, dict):
        raise InvalidParams("'configuration' must be an object.")
    config = config or {}
    out_config = {
        name: config[name]
        for name in ("acceptedOutputModes", "historyLength", "taskPushNotificationConfig")
        if name in config
    }
    blocking = config.get("blocking")
    if blocking is not None and not isinstance(blocking, bool):
        raise InvalidParams("configuration.blocking must be true or false.")
    if blocking is False:
        out_config["returnImmediately"] = True
    params: dict[str, Any] = {"message": message, "configuration": out_config}
    for name in ("metadata", "tenant"):
        if name in raw:
            params[name] = raw[name]
    return params


def mark(params: dict[str, Any], task: Any, payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` (a task's answer) marked for :func:`marked` when a 0.3 read asks
    (``params``) about a task made in the mix."""
    if params.get(KEY) and (task.metadata or {}).get(DIALECT) == MIX:
        payload[KEY] = True
    return payload


def marked(result: Any) -> bool:
    """Whether a 0.3 read's answer is a task made in the mix (the mark removed)."""
    return isinstance(result, dict) and bool(result.pop(KEY, False))


def out(value: Any) -> Any:
    """A 1.0 answer or event with its states and roles in 0.3's words."""
    if isinstance(value, list):
        return [out(item) for item in value]
    if not isinstance(value, dict):
        return value
    shown: dict[str, Any] = {}
    for key, item in value.items():
        if key == "state" and isinstance(item, str) and item.startswith("TASK_STATE_"):
            shown[key] = state_out(item)
        elif key == "role" and isinstance(item, str):
            shown[key] = _ROLES_OUT.get(item, item)
        elif key in ("data", "metadata"):
            shown[key] = item  # values of the caller's or the agent's: as they are
        else:
            shown[key] = out(item)
    return shown
