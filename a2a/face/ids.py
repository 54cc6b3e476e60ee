"""Callers' ``contextId`` and ``messageId`` toward agents: the platform's own.

Agents deduplicate on ``messageId`` and keep conversation state per ``contextId``. Two
callers who pick the same ids (``"session-1"``) must never meet at an agent, while one
caller's multi-turn conversation must stay one context. So every context id a caller gives
is put in that caller's namespace before it goes to the agent::

    toward the agent:  <caller tag>:<caller's id>      e.g. 3f9c0a2b7d1e4c65:session-1
    toward the caller: the caller's id                 (the prefix taken off again)

The tag is an HMAC of the caller's identity (user, agent key or anonymous) under
``SECRET_KEY``: stable, so the same caller and id always give the same agent-side id;
opaque, so an agent learns nothing about who the caller is. An agent's identity is its
id and its ``caller_salt``, as ids are reused (see :func:`tag_for`).

A ``messageId`` is not: clients reuse them (``"1"`` for every message), and a
deduplicating agent answered a new task with the earlier task that had the same id (the
second input was never worked on). Each message a caller sends gets a random prefix of the
tag's shape instead (:func:`message_toward_agent`), stored with the message, so its
re-sends keep it and no two messages share it.

The task row stores the agent-side context (``Task.context_id``, what dispatch and the
WebSocket gateway send); everything the face renders goes through :func:`for_caller`: the
caller's context, and the ``messageId`` of the messages that went to the agent (never an
agent's own ids).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import uuid
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from django.conf import settings

from a2a.states import Transport

TAG_LENGTH = 16
# Client ids longer than this are refused (the agent-side id must fit the 200-character
# columns with its tag).
MAX_CLIENT_ID = 180


def tag_for(user_id: Any, agent_id: Any, agent_salt: Any = None) -> str:
    """The namespace tag of a caller: a user, an agent calling with its key, or anonymous.

    An agent is named by its id and its ``caller_salt``: an id is free again once its agent
    is deleted, and whoever registers it next must not continue the deleted agent's
    conversations. Agents registered before the salt existed have none (NULL): their
    tag is the id's alone, as it was, so their conversations go on. A user's pk is never
    reused, so it is enough."""
    if agent_id is not None:
        identity = f"agent:{agent_id}" if agent_salt is None else f"agent:{agent_id}:{agent_salt}"
    elif user_id is not None:
        identity = f"user:{user_id}"
    else:
        identity = "anonymous"
    return _tag(settings.SECRET_KEY, identity)


@lru_cache(maxsize=4096)
def _tag(secret: str, identity: str) -> str:
    digest = hmac.new(secret.encode(), identity.encode(), hashlib.sha256)
    return digest.hexdigest()[:TAG_LENGTH]


def caller_tag(ctx: Any) -> str:
    """The tag of the caller of a :class:`~a2a.face.context.CallContext`."""
    user = ctx.user
    agent = ctx.agent_caller
    return tag_for(
        getattr(user, "pk", None), getattr(agent, "pk", None), getattr(agent, "caller_salt", None)
    )


def toward_agent(tag: str, client_id: str) -> str:
    """The agent-side id of a caller's context id."""
    return f"{tag}:{client_id}"


def message_toward_agent(client_id: str) -> str:
    """The agent-side id of a message a caller sends: its own, whatever id the caller
    reused (see the module docstring); shaped like a tagged id, so :func:`for_caller`
    gives the caller's id back."""
    return f"{secrets.token_hex(TAG_LENGTH // 2)}:{client_id}"


_NAMESPACED = re.compile(rf"^[0-9a-f]{{{TAG_LENGTH}}}:")


def namespaced(value: str) -> bool:
    """Whether ``value`` has the shape of a stored id (``<tag>:<caller's id>``)."""
    return _NAMESPACED.match(value) is not None


def for_caller(value: Any) -> Any:
    """A stored id as its caller sees it: without its namespace. Recognised by its shape,
    not by recomputing the tag, so ids stored before a ``SECRET_KEY`` change still read
    right; the platform's own ids (UUIDs) never have that shape."""
    if isinstance(value, str) and _NAMESPACED.match(value):
        return value[TAG_LENGTH + 1 :]
    return value


# --- referenceTaskIds ---------------------------------------------------------------------

# Where a task keeps how the ``referenceTaskIds`` of its caller's messages were sent: each
# agent-side id and the caller's (platform) task id it stands for, to show the caller its
# own ids again (:func:`references_for_caller`).
REFERENCES = "referenceTaskIds"
# And the caller's ids in a new task's first message that name its own tasks at any agent:
# sent again to another agent (a reassignment), they are mapped for that one.
REFERENCED = "referencedTasks"

# A caller's referenced task, as the lookup found it: its agent and the id that agent
# knows it by.
Referenced = tuple[str, str]


def task_ids(ids: Any) -> dict[uuid.UUID, list[str]]:
    """The ids in ``ids`` that can name a platform task, by the task's id (each with the
    strings that named it); anything else names no task of ours."""
    wanted: dict[uuid.UUID, list[str]] = {}
    for raw in ids if isinstance(ids, list) else []:
        try:
            wanted.setdefault(uuid.UUID(str(raw)), []).append(raw)
        except ValueError:
            continue
    return wanted


def referenced_rows(tasks: Any, wanted: dict[uuid.UUID, list[str]]) -> Any:
    """Of ``tasks`` (a queryset: those the ids may name), the rows :func:`agent_sides`
    reads for the ``wanted`` ones."""
    rows = tasks.filter(pk__in=list(wanted)).values_list(
        "pk", "agent_id", "remote_task_id", "transport"
    )
    return (
        (pk, agent, remote, transport != Transport.A2A) for pk, agent, remote, transport in rows
    )


def agent_sides(
    rows: Iterable[tuple[Any, str, str, bool]], wanted: dict[uuid.UUID, list[str]]
) -> dict[str, Referenced]:
    """The referenced tasks ``rows`` (id, agent id, the agent's task id, whether the
    gateway carries it) by the strings in ``wanted`` that named them, each as the agent
    knows it: its own task id, or ours for a task the gateway carries (its frames name
    tasks so). A task the agent never got (not sent yet, answered with a bare Message) is
    left out."""
    known: dict[str, Referenced] = {}
    for pk, agent_id, remote_id, by_gateway in rows:
        agent_side = remote_id or (str(pk) if by_gateway else "")
        if agent_side:
            known.update((raw, (agent_id, agent_side)) for raw in wanted.get(pk, []))
    return known


def references_toward(
    message: dict[str, Any], known: dict[str, Referenced], agent_id: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """``message`` with its ``referenceTaskIds`` as ``agent_id`` knows them, and what was
    mapped (agent-side id → the caller's id).

    A caller names the platform's tasks; an agent knows its own ids. Each id of a task in
    ``known`` (the caller's own, that it may see) on this agent becomes that agent's id;
    every other id is left out: the agent could not resolve it, and another caller's task
    must never be named to an agent by the id it knows it by (a socket-only agent knows
    tasks by the platform's ids)."""
    ids = message.get("referenceTaskIds")
    if not isinstance(ids, list):
        return message, {}
    mapped: dict[str, str] = {}
    for raw in ids:
        found = known.get(raw) if isinstance(raw, str) else None
        if found is not None and found[0] == agent_id and found[1] not in mapped:
            mapped[found[1]] = raw
    out = {k: v for k, v in message.items() if k != "referenceTaskIds"}
    if mapped:
        out["referenceTaskIds"] = list(mapped)
    return out, mapped


def references_for_caller(ids: Any, metadata: dict[str, Any] | None) -> Any:
    """A stored message's ``referenceTaskIds`` as its caller gave them (see
    :data:`REFERENCES`); an id not mapped (stored before) is shown as it is."""
    mapped = (metadata or {}).get(REFERENCES)
    if not isinstance(ids, list) or not isinstance(mapped, dict):
        return ids
    return [mapped.get(i, i) if isinstance(i, str) else i for i in ids]
