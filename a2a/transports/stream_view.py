"""The agent's task as a stream reveals it: status and artifact events folded into one Task
snapshot (:class:`StreamView`), and the copies of it that are applied (:func:`task_copy`).
Used by the streaming bindings (:mod:`a2a.transports.rest`, :mod:`a2a.transports.jsonrpc`)
once :func:`a2a.transports.shapes.read_stream_event` has read each event into 1.0 shapes.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from a2a.exceptions import A2AProtocolError
from a2a.states import normalize_state
from a2a.transports.quoting import excerpt
from a2a.wire import artifacts_bytes


class StreamView:
    """The agent's task as a stream reveals it, event by event (a Task snapshot).

    Appended artifact chunks are added in place, to a list the view owns: rebuilding the
    parts at every chunk cost their square (80,000 one-character chunks: 17 s of CPU).
    So the snapshot :meth:`apply` returns is the view's own, and changes with the next
    event: whoever keeps it past that takes a :func:`task_copy`.
    """

    def __init__(self) -> None:
        self.task: dict[str, Any] | None = None
        self._where: dict[Any, int] = {}  # artifactId → its index in the artifacts
        self._sizes: list[int] = []  # each artifact's JSON size, while no status came

    def apply(self, kind: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        """Fold one event in; the task snapshot after it (None before the task is known).

        An event about another task than the one the stream named is refused
        (:class:`A2AProtocolError`), as a whole Task for another id is: applied, it
        would end or complete this task with someone else's work."""
        if kind == "task":
            self._check_id(payload.get("id"))
            self._own(payload)
            return self.task
        if self.task is None:
            task_id = payload.get("taskId")
            if not isinstance(task_id, str) or not task_id:
                raise A2AProtocolError("A stream event from the agent names no task.")
            self.task = {"id": task_id, "contextId": payload.get("contextId") or ""}
        self._check_id(payload.get("taskId"))
        if kind == "status":
            status = payload.get("status")
            if not isinstance(status, dict) or normalize_state(status.get("state")) is None:
                raise A2AProtocolError("A status event from the agent has no known state.")
            self.task["status"] = {**status, "state": normalize_state(status["state"])}
        elif kind == "artifact":
            self._artifact(payload)
        return self.task if "status" in self.task else None

    def _check_id(self, task_id: Any) -> None:
        """Refuse an event that names another task than the stream's."""
        known = (self.task or {}).get("id")
        if known and isinstance(task_id, str) and task_id and task_id != known:
            # Both ids are the agent's, of any length: named by excerpts, in the message
            # and its details alike (both are stored in the task's error, and logged).
            said, ours = excerpt(task_id), excerpt(known)
            raise A2AProtocolError(
                f"A stream event from the agent is about its task '{said}', but the "
                f"stream is about its task '{ours}'; the event was not applied.",
                {"streamTaskId": ours, "eventTaskId": said},
            )

    def _own(self, task: dict[str, Any]) -> None:
        """Take a whole Task as the view's own (its artifacts' parts copied once)."""
        self.task = task_copy(task)
        self._where, self._sizes = {}, []
        for i, artifact in enumerate(self.task.get("artifacts") or []):
            if isinstance(artifact, dict) and _key(artifact):
                self._where.setdefault(_key(artifact), i)
            self._sizes.append(artifacts_bytes([artifact]) - 2)

    def _artifact(self, payload: dict[str, Any]) -> None:
        artifact = payload.get("artifact")
        if not isinstance(artifact, dict):
            raise A2AProtocolError("An artifact event from the agent has no artifact.")
        assert self.task is not None
        artifacts = self.task.setdefault("artifacts", [])
        key = _key(artifact)
        i = self._where.get(key) if key else None
        if i is None:
            if key:
                self._where[key] = len(artifacts)
            artifacts.append(_artifact_copy(artifact))
            self._sizes.append(artifacts_bytes([artifact]) - 2)
        elif payload.get("append"):
            known, more = artifacts[i], artifact.get("parts") or []
            parts = known.get("parts")
            if isinstance(parts, list) and isinstance(more, list):
                if more:  # the parts and their commas, one more comma if some came before
                    self._sizes[i] += artifacts_bytes(more) - 2 + (1 if parts else 0)
                parts.extend(more)
            else:
                known["parts"] = [*(parts if isinstance(parts, list) else []), *more]
                self._sizes[i] = artifacts_bytes([known]) - 2
        else:
            artifacts[i] = _artifact_copy(artifact)
            self._sizes[i] = artifacts_bytes([artifact]) - 2
        if "status" not in self.task:
            # Not applied (and so not capped) until a status comes: held here meanwhile,
            # up to the cap the task's artifacts have anyway (sized as they come: the
            # brackets of the list and the commas between its items, and each item).
            size = 2 + sum(self._sizes) + len(self._sizes) - 1
            limit = settings.TASK_ARTIFACTS_MAX_BYTES
            if size > limit:
                raise A2AProtocolError(
                    f"The agent streamed artifacts of {size} bytes before any status, more "
                    f"than the platform keeps ({limit} bytes, TASK_ARTIFACTS_MAX_BYTES).",
                    {"maxBytes": limit, "bytes": size},
                    code="artifacts_too_large",
                )


def _key(artifact: dict[str, Any]) -> str:
    """The artifact's id to fold its chunks by; "" when it has none, or one that is no
    string (an object cannot key a dict: such an artifact is held as it came, and refused
    with the answer, :mod:`a2a.answer_parts`)."""
    key = artifact.get("artifactId")
    return key if isinstance(key, str) else ""


def _artifact_copy(artifact: Any) -> Any:
    """An artifact whose parts list may be appended to without changing the original."""
    if isinstance(artifact, dict) and isinstance(artifact.get("parts"), list):
        return {**artifact, "parts": list(artifact["parts"])}
    return artifact


def task_copy(task: dict[str, Any]) -> dict[str, Any]:
    """A Task that a :class:`StreamView`'s later events leave alone: its artifacts list,
    each artifact and its parts list copied (the parts themselves are never changed)."""
    out = dict(task)
    if isinstance(task.get("artifacts"), list):
        out["artifacts"] = [_artifact_copy(artifact) for artifact in task["artifacts"]]
    return out
