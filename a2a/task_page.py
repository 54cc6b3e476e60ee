"""What the admin's task page shows, read top-down: a summary, the question while the
agent waits, the error, the output once, the conversation as a thread, the history, and
the raw JSON last. Built here so ``a2a/admin.py`` stays thin."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from a2a.api.serializers import task_json
from a2a.models import Direction, Task
from a2a.states import INTERRUPTED_STATES, RETRYABLE_STATES, TERMINAL_STATES, Transport
from a2a.wire import message_text


def render_parts(message: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A message's parts for the template: text as text, data as pretty JSON (collapsible),
    files by name. Both the 1.0 shape and the 0.3 one (``kind``)."""
    parts = []
    for part in (message or {}).get("parts") or []:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            parts.append({"kind": "text", "text": part["text"]})
        elif "data" in part:
            data = part["data"]
            parts.append(
                {
                    "kind": "data",
                    "json": json.dumps(data, indent=2, ensure_ascii=False, default=str),
                    "summary": _data_summary(data),
                }
            )
        else:
            file = part.get("file") if isinstance(part.get("file"), dict) else part
            name = file.get("name") or file.get("filename") or file.get("uri") or file.get("url")
            parts.append({"kind": "file", "name": str(name or "a file part")})
    return parts


def _data_summary(data: Any) -> str:
    if isinstance(data, dict):
        keys = list(data)
        more = f" +{len(keys) - 4}" if len(keys) > 4 else ""
        return "data: " + ", ".join(map(str, keys[:4])) + more
    return f"data ({type(data).__name__})"


def thread(task: Task) -> list[dict[str, Any]]:
    """The conversation: the platform's messages (the input, then a person's answers) and
    the agent's, in order, with the time after creation."""
    rows = []
    sent = 0
    for message in task.messages.all():
        to_agent = message.direction == Direction.TO_AGENT
        if to_agent:
            sent += 1
            who = "Platform → agent: the task" if sent == 1 else "Platform → agent: answer"
        else:
            who = f"{task.agent_id} → platform"
        rows.append(
            {
                "direction": message.direction,
                "who": who,
                "at": message.created_at,
                "parts": render_parts(message.message),
            }
        )
    return rows


def _when(raw: Any) -> datetime | None:
    return parse_datetime(raw) if isinstance(raw, str) else None


def transport_line(task: Task) -> str:
    """``A2A over HTTP``, or the path the task took: ``a2a → websocket at 10:01:02
    (agent_unreachable: Could not reach agent 'reference-agent' at ...)``."""
    fallbacks = (task.metadata or {}).get("fallbacks") or []
    if not fallbacks:
        return (
            Transport(task.transport).label
            if task.transport in Transport.values
            else task.transport
        )
    steps = []
    for item in fallbacks:
        at = _when(item.get("at"))
        when = f" at {timezone.localtime(at):%H:%M:%S}" if at else ""
        steps.append(f"{item.get('from')} → {item.get('to')}{when} ({item.get('reason', '')})")
    return "; then ".join(steps)


def reassign_lines(task: Task) -> list[str]:
    """``10:01:02 from agent-a by alice (was TASK_STATE_FAILED)`` per reassignment."""
    lines = []
    for item in (task.metadata or {}).get("reassignments") or []:
        at = _when(item.get("at"))
        when = f"{timezone.localtime(at):%Y-%m-%d %H:%M:%S} " if at else ""
        lines.append(
            f"{when}from {item.get('from')} to {item.get('to')} by {item.get('by')} "
            f"(was {str(item.get('previousState', '')).removeprefix('TASK_STATE_').lower()})"
        )
    return lines


def match_line(task: Task) -> str:
    match = (task.metadata or {}).get("match") or {}
    if not match:
        return "chosen by the caller"
    others = [c for c in match.get("candidates") or [] if c.get("agentId") != match.get("agentId")]
    score = match.get("score")
    text = f"matched, score {score:.2f}" if isinstance(score, int | float) else "matched"
    if others:
        text += " over " + ", ".join(f"{c['agentId']} ({c['score']:.2f})" for c in others[:3])
    return text


def history(task: Task) -> list[dict[str, Any]]:
    return [
        {
            "at": e.at,
            "after": e.at - task.created_at,
            "from": e.from_state,
            "to": e.to_state,
            "reason": e.reason,
        }
        for e in task.events.all()
    ]


def page_context(task: Task) -> dict[str, Any]:
    """Everything the task page template needs."""
    ended = task.state in TERMINAL_STATES
    now = timezone.now()
    error = task.error or {}
    return {
        "task": task,
        "ended": ended,
        "waiting": task.state in INTERRUPTED_STATES,
        "question_parts": render_parts(task.question),
        "question_text": message_text(task.question),
        "took": (task.state_changed_at - task.created_at) if ended else None,
        "running_for": None if ended else now - task.created_at,
        "in_state_for": now - task.state_changed_at,
        "transport_line": transport_line(task),
        "match_line": match_line(task),
        "reassignments": reassign_lines(task),
        "error": error,
        "validation_errors": (error.get("details") or {}).get("errors")
        if error.get("code") == "output_invalid" and isinstance(error.get("details"), dict)
        else None,
        "thread": thread(task),
        "history": history(task),
        "raw_json": json.dumps(task_json(task), indent=2, ensure_ascii=False, default=str),
        "can_cancel": not ended,
        "can_retry": task.state in RETRYABLE_STATES,
        "can_reassign": not ended or task.state in RETRYABLE_STATES,
    }
