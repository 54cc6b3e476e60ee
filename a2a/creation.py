"""Creating platform tasks: validation, choosing the agent, idempotency keys and queueing.

One of the app's business rules (map in :mod:`a2a.services`): :func:`create_task` stores a
task in SUBMITTED with next action SEND, and :mod:`a2a.hints` asks a worker to act on it.
:mod:`a2a.batch` creates many at once on the same building blocks.

Creation is on the hot path of ``POST /api/tasks`` and of the A2A face's ``message:send``,
so it reads little: the skill and its candidate agents come from :mod:`a2a.lookups`
(cached), the rows go in with one INSERT per kind (task, event, message), and no
``task_changed`` signal is sent for a new task (nobody can be listening to a task that
did not exist; the face attaches push configs after creation). A task for an agent without
an HTTP endpoint goes to the gateway in the same transaction (see
:func:`register_gateway_hand_off`), so its ``task.assign`` frame leaves on commit instead
of after a worker round trip.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from a2a import lookups, observe
from a2a.agent_choice import choose_agent
from a2a.exceptions import InputInvalid, UnknownSkill
from a2a.hints import claim_at_birth, queue_processing_many, start_born
from a2a.idempotency import existing_task, same_request, signed_in
from a2a.models import Direction, Task, TaskEvent, TaskMessage
from a2a.scheduling import task_seconds
from a2a.states import NextAction, Transport
from a2a.wire import relay_message, schema_errors, user_message
from agent_profiles.models import AgentProfile, Skill
from platform_site import combined
from platform_site.compiled_writes import insert_rows
from platform_site.errors import PlatformError

log = logging.getLogger(__name__)


# --- helpers ------------------------------------------------------------------------


def _deadline(agent: AgentProfile | None = None) -> Any:
    """A fresh deadline for a task of ``agent``: its ``timeoutMs`` when set, else
    ``A2A_TASK_TIMEOUT`` (:func:`a2a.scheduling.task_seconds`). For a socket-only agent
    nothing else sets it (an HTTP send moves it to ``timeoutMs`` too: ``agent_calls``)."""
    return timezone.now() + timedelta(seconds=task_seconds(agent.timeout if agent else None))


# Hands new tasks of agents without an HTTP endpoint to the gateway, inside the creation
# transaction after their rows were inserted. The gateway registers it at app start
# (``a2a`` does not import ``gateway``); without it such tasks go through the worker.
GatewayHandOff = Callable[[list[Task]], None]
_gateway_hand_off: GatewayHandOff | None = None


def register_gateway_hand_off(func: GatewayHandOff | None) -> None:
    """Set the function that assigns new socket-only tasks over the gateway.

    It receives the just-inserted tasks (transport OFFLINE, no next action), must store
    what it owes each agent in the same transaction, set ``task.transport`` to what it
    used, and push to the agents' connections only after commit.
    """
    global _gateway_hand_off
    _gateway_hand_off = func


# A caller's message made fit for the agent once it is chosen (the A2A face maps its
# ``referenceTaskIds`` to that agent's own task ids): given the agent's id and the message,
# the message to store and send, and more task metadata.
ForAgent = Callable[[str, dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]]


# --- creation -----------------------------------------------------------------------


def active_skill(skill_id: str) -> Skill:
    """The active skill with this id (cached); 400 ``unknown_skill`` otherwise."""
    skill = lookups.skill(skill_id)
    if skill is None or not skill.is_active:
        skill = lookups.skill(skill_id, fresh=True)  # never refuse from the cache
    if skill is None or not skill.is_active:
        state = "inactive" if skill is not None else "unknown"
        raise UnknownSkill(f"Skill '{skill_id}' is {state}.", {"skillId": skill_id})
    return skill


def check_input(skill: Skill, data: Any) -> None:
    """400 ``input_invalid`` unless ``data`` is an object matching the skill's input_schema."""
    if not isinstance(data, dict):
        raise InputInvalid(
            "input must be a JSON object.",
            {"errors": [{"path": "(root)", "message": "input must be a JSON object"}]},
        )
    errors = schema_errors(skill.input_schema or {}, data)
    if errors:
        first = errors[0]
        raise InputInvalid(
            f"input does not match the input_schema of skill '{skill.id}': "
            f"{first['path']}: {first['message']}",
            {"errors": errors},
        )


@dataclass
class NewTask:
    """The rows of one task about to be created: the task, its first event and message."""

    task: Task
    event: TaskEvent
    message: TaskMessage


def build(
    *,
    skill: Skill,
    agent: AgentProfile,
    match: dict[str, Any],
    data: dict[str, Any],
    user: Any = None,
    agent_caller: AgentProfile | None = None,
    idempotency_key: str = "",
    message: dict[str, Any] | None = None,
    context_id: str | None = None,
    origin: str = "api",
    watched: bool = False,
    metadata: dict[str, Any] | None = None,
    for_agent: ForAgent | None = None,
) -> NewTask:
    """The unsaved rows of a new task (SUBMITTED, next action SEND; for a socket-only
    agent with a gateway hand-off registered: no next action, see :func:`insert`).
    ``watched``: something will follow it besides its row (``Task.watched``);
    ``metadata``: more of the task's metadata (the face's caller's output modes);
    ``for_agent``: fits ``message`` to the chosen agent (see :data:`ForAgent`)."""
    context = context_id or (message or {}).get("contextId") or str(uuid.uuid4())
    if message is not None and for_agent is not None:
        message, more = for_agent(agent.id, message)
        metadata = {**(metadata or {}), **more}
    if message is not None:
        outbound = relay_message(message)
    else:
        outbound = user_message(skill_id=skill.id, data=data)
    now = timezone.now()
    task = Task(
        watched=watched,
        skill=skill,
        agent=agent,
        context_id=str(context)[:200],
        input=data,
        transport=Transport.A2A,
        outbound_message=outbound,
        metadata={**(metadata or {}), "match": match, "fallbacks": []},
        created_by=signed_in(user),
        created_by_agent=agent_caller,
        anonymous=signed_in(user) is None and agent_caller is None,
        origin=origin,
        idempotency_key=idempotency_key,
        next_action=NextAction.SEND,
        next_poll_at=now,
        deadline_at=_deadline(agent),
        created_at=now,
        state_changed_at=now,
        updated_at=now,
    )
    if _gateway_hand_off is not None and not agent.a2a_endpoint:
        task.transport, task.next_action, task.next_poll_at = Transport.OFFLINE, "", None
        task.watched = True  # its gateway delivery follows it (as in hand_to_gateway)
    event = TaskEvent(
        task=task, at=now, from_state="", to_state=task.state, reason=f"created ({origin})"
    )
    first = TaskMessage(
        task=task,
        direction=Direction.TO_AGENT,
        message_id=str(outbound.get("messageId", ""))[:200],
        message=outbound,
        created_at=now,
    )
    return NewTask(task, event, first)


def insert(new: list[NewTask]) -> None:
    """Store the rows (one INSERT per kind), hand socket-only tasks to the gateway and,
    after commit, ask a worker to start the others. Call inside a transaction, except for
    one task that :func:`in_one_statement` allows."""
    if not new:
        return
    tasks = [n.task for n in new]
    sends = [t for t in tasks if t.next_action == NextAction.SEND]
    # Where this process starts tasks on its own threads, they are claimed at birth.
    born = claim_at_birth(sends)
    observe.tasks_creating(tasks)  # each task's trace starts here (context in metadata)
    first = new[0]
    if not (
        in_one_statement(new) and combined.insert_together([first.task, first.event, first.message])
    ):
        # Sorted by idempotency key: concurrent batches sharing keys then take the unique
        # index's entries in the same order, and one waits for the other instead of both
        # deadlocking. The order given stays the order tasks are handed on and started.
        insert_rows(sorted(tasks, key=_by_key))  # below the ORM: see compiled_writes
        insert_rows([n.event for n in new])
        insert_rows([n.message for n in new])
    # Metrics and the log line once the rows are committed: a transaction rolled back
    # (a key taken meanwhile, a registry row deleted) created nothing. Registered before
    # the gateway's push and the start below, so a task's "created" is counted and logged
    # before anything is done with it; without a transaction (one statement) at once.
    transaction.on_commit(lambda: observe.tasks_created(tasks))
    gateway = [t for t in tasks if t.next_action == ""]
    if gateway and _gateway_hand_off is not None:
        _gateway_hand_off(gateway)
    for task in tasks:
        task.created = True  # type: ignore[attr-defined]
    if born:
        start_born(sends)
    else:
        queue_processing_many([t.pk for t in sends])


def _by_key(task: Task) -> str:
    return task.idempotency_key


def in_one_statement(new: list[NewTask]) -> bool:
    """Whether these new rows can go in as one statement needing no transaction around
    it (:mod:`platform_site.combined`): one task, not handed to the gateway (which writes
    its own rows in the creation's transaction), on PostgreSQL outside a transaction."""
    return len(new) == 1 and new[0].task.next_action == NextAction.SEND and combined.available()


def create_task(
    *,
    skill_id: str,
    input: dict[str, Any] | None,
    agent_id: str | None = None,
    user: Any = None,
    agent_caller: AgentProfile | None = None,
    idempotency_key: str = "",
    message: dict[str, Any] | None = None,
    context_id: str | None = None,
    origin: str = "api",
    validate_input: bool = True,
    watched: bool = False,
    metadata: dict[str, Any] | None = None,
    for_agent: ForAgent | None = None,
    prefer_agent: str | None = None,
) -> Task:
    """Validate, choose an agent, store the task (SUBMITTED, next action SEND) and queue it.

    Returns the task; ``task.created`` is False when ``idempotency_key`` matched an earlier
    task of the same caller (that task is returned unchanged). Raises a 400 error for an
    unknown/inactive skill or agent, input failing the skill's ``input_schema`` or no
    agent for the skill, and 409 when the key was used for a different request. An agent
    or skill deleted by another process while this one still had it cached breaks the
    INSERT's foreign key: the cache is dropped and the agent chosen once more from the
    database (or the 400 a request naming what is gone gets); the caller itself deleted
    meanwhile is :class:`CallerGone` (401).
    ``watched``: the caller will follow it too (a stream, a push config; see ``build``);
    ``metadata``: more of the task's metadata (see ``build``); ``for_agent``: fits the
    message to the chosen agent (see ``build``); ``prefer_agent``: the agent to choose
    unless ``agent_id`` names one, while it is active and offers the skill.
    """
    skill = active_skill(skill_id)
    data = {} if input is None else input
    if validate_input:
        check_input(skill, data)
    key = (idempotency_key or "")[:200]
    existing = existing_task(user, agent_caller, key)
    if existing is not None:
        return same_request(existing, skill.id, input, agent_id)
    for again in (False, True):
        caller = agent_caller.id if agent_caller is not None else None
        agent, match = choose_agent(skill, agent_id, prefer=prefer_agent, caller=caller)
        new = build(
            skill=skill,
            agent=agent,
            match=match,
            data=data,
            user=user,
            agent_caller=agent_caller,
            idempotency_key=key,
            message=message,
            context_id=context_id,
            origin=origin,
            watched=watched,
            metadata=metadata,
            for_agent=for_agent,
        )
        try:
            _store(new)
        except IntegrityError as exc:
            # A concurrent request with the same idempotency key won the race.
            existing = existing_task(user, agent_caller, key)
            if existing is not None:
                return same_request(existing, skill.id, input, agent_id)
            if not foreign_key_violation(exc):
                raise
            # The caller itself may be what is gone (deleted while a token cache held it).
            refuse_if_caller_gone(user, agent_caller)
            if again:
                raise
            # Not the key: the agent (or skill) the registry cache still held was deleted
            # by another process. Choose once more from the database, which refuses as
            # for any request naming what is gone (unknown_skill/unknown_agent/no_agent).
            log.info("task creation: %s was deleted elsewhere; choosing again", agent.id)
            lookups.clear()
            skill = active_skill(skill_id)
            if validate_input:
                check_input(skill, data)
            continue
        return new.task
    raise AssertionError("not reached: the second attempt returns or raises")


def _store(new: NewTask) -> None:
    """Insert one new task: as one statement where it can, else in a transaction."""
    if in_one_statement([new]):
        insert([new])  # one statement, atomic by itself: two round trips fewer
        return
    with transaction.atomic():
        insert([new])


class CallerGone(PlatformError):
    """The caller (a user, an agent) was deleted after its token was checked: another
    process deleted it while this one's token cache still held it (the A2A face's
    ``A2A_FACE_AUTH_CACHE_SECONDS``), or while its request ran. Its token no longer
    authenticates, and the new task's INSERT broke its creator's foreign key: 401, as the
    caller's next request gets, not a 500."""

    code = "authentication_failed"
    status_code = 401


def refuse_if_caller_gone(user: Any, agent_caller: AgentProfile | None) -> None:
    """Raise :class:`CallerGone` if the user or agent creating a task no longer exists
    (called after a broken foreign key only: two small reads on a rare path)."""
    person = signed_in(user)
    gone = (
        person is not None and not type(person)._default_manager.filter(pk=person.pk).exists()
    ) or (agent_caller is not None and not AgentProfile.objects.filter(pk=agent_caller.pk).exists())
    if gone:
        raise CallerGone("Invalid or revoked API token.")


def foreign_key_violation(exc: IntegrityError) -> bool:
    """Whether ``exc`` is a broken foreign key (a registry row deleted meanwhile), not a
    repeated unique key: PostgreSQL's SQLSTATE 23503, SQLite's message."""
    sqlstate = getattr(exc.__cause__, "sqlstate", None)
    return sqlstate == "23503" or "FOREIGN KEY constraint failed" in str(exc)
