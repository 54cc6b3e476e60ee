"""Answers in the shape the asking agent's framework resumes on.

A person's answer is text and/or data, and most agents take it as written. Some
frameworks ask in a shape of their own and resume only on the matching answer; their
question says so, and the answer is wrapped to match:

* **Strands Agents** (its ``A2AServer``): a question is an *interrupt*, asked with a data
  part ``{"interrupts": [{"interruptId", "name", "reason"}]}``; the agent refuses any
  message but one ``{"interruptResponse": {"interruptId", "response"}}`` data part per
  interrupt (JSON-RPC ``-32602`` otherwise).
* **Google ADK** (``to_a2a``): a question is a long-running tool call, a data part
  ``{"id", "name", "args"}`` with metadata ``adk_type: function_call`` and
  ``adk_is_long_running: true``; the answer that completes the call is a function
  response, a data part ``{"id", "name", "response"}`` with metadata
  ``adk_type: function_response`` (``response`` an object). Text reaches a model too,
  but leaves the call open.

An answer already in the framework's shape (a client of the A2A face that knows it) goes
as written.
"""

from __future__ import annotations

from typing import Any


def _data_parts(parts: list[Any]) -> list[tuple[dict[str, Any], Any]]:
    """Each data part with its value: (the part, its data)."""
    return [(p, p["data"]) for p in parts if isinstance(p, dict) and "data" in p]


def _answer(parts: list[Any]) -> Any:
    """What a person answered: the first data part's value, else the text; None for
    neither."""
    for _part, data in _data_parts(parts):
        return data
    texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
    text = "\n".join(texts).strip()
    return text or None


def _strands_interrupts(question: list[Any]) -> list[str]:
    ids: list[str] = []
    for _part, data in _data_parts(question):
        interrupts = data.get("interrupts") if isinstance(data, dict) else None
        for interrupt in interrupts if isinstance(interrupts, list) else []:
            if isinstance(interrupt, dict) and isinstance(interrupt.get("interruptId"), str):
                ids.append(interrupt["interruptId"])
    return ids


def _adk_calls(question: list[Any]) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []
    for part, data in _data_parts(question):
        meta = part.get("metadata")
        if not (isinstance(meta, dict) and isinstance(data, dict)):
            continue
        if meta.get("adk_type") != "function_call" or meta.get("adk_is_long_running") is not True:
            continue
        if isinstance(data.get("id"), str) and isinstance(data.get("name"), str):
            calls.append((data["id"], data["name"]))
    return calls


def _for(answer: Any, key: str) -> Any:
    """One interrupt's or call's answer: the answer's value under its id when the answer
    is an object keyed by the ids, else the whole answer."""
    return answer[key] if isinstance(answer, dict) and key in answer else answer


def asks_in_shape(question: Any) -> bool:
    """Whether ``question`` is one a framework resumes on only in its own shape (Strands'
    interrupts, ADK's long-running calls): its answer goes in that shape, as data, even
    to an agent whose card names text input only."""
    asked = question.get("parts") if isinstance(question, dict) else None
    return isinstance(asked, list) and bool(_strands_interrupts(asked) or _adk_calls(asked))


def shaped_parts(question: Any, parts: list[Any]) -> list[Any]:
    """The parts of an answer to ``question`` as the agent's framework takes them; the
    parts unchanged when the question names no such shape, or the answer is in it."""
    asked = question.get("parts") if isinstance(question, dict) else None
    answer = _answer(parts)
    if not isinstance(asked, list) or answer is None:
        return parts
    answered = [data for _part, data in _data_parts(parts) if isinstance(data, dict)]
    interrupts = _strands_interrupts(asked)
    if interrupts and not any("interruptResponse" in data for data in answered):
        return [
            {"data": {"interruptResponse": {"interruptId": i, "response": _for(answer, i)}}}
            for i in interrupts
        ]
    calls = _adk_calls(asked)
    responded = any(
        isinstance(p, dict) and (p.get("metadata") or {}).get("adk_type") == "function_response"
        for p in parts
    )
    if calls and not responded:
        shaped = []
        for call_id, name in calls:
            value = _for(answer, call_id)
            response = value if isinstance(value, dict) else {"answer": value}
            data = {"id": call_id, "name": name, "response": response}
            shaped.append({"data": data, "metadata": {"adk_type": "function_response"}})
        return shaped
    return parts
