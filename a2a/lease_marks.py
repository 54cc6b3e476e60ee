"""Long calls marked alive in Redis, for the other worker processes (distributed mode).

A long call's claim is renewed in the database (:mod:`a2a.lease_keeper`). While the
database is away, renewals fail, and one away longer than what is left of the claim lets
it lapse: when the database returns, another worker process's sweep could claim the task
and act on it while the call still runs (a held message sent again, the agent running it
twice). So the keeper also marks its calls alive in Redis, which an outage of the
database does not stop (:func:`mark`). A sweep that claimed a task marked by another
process (:func:`held_elsewhere`) does nothing with it and leaves its claim for that
process to take back (a hand-back key the keeper reads, :func:`handbacks`); the call's
next renewal goes from it. A process that died leaves no mark past ``A2A_LONG_CALL_LEASE``,
and its tasks are taken over as before. Without Redis (the embedded mode: one process,
whose own claims go back through :func:`a2a.lease_keeper.adopt`) this does nothing; a Redis
error makes it do nothing for that call.
"""

from __future__ import annotations

import logging
import math
import os
import socket
from datetime import datetime
from typing import Any

import redis
from django.conf import settings

from a2a.models import Task
from platform_site import redis_clients

log = logging.getLogger(__name__)


def enabled() -> bool:
    return bool(settings.DISTRIBUTED and settings.REDIS_URL)


def _client() -> redis.Redis:
    return redis_clients.shared(socket_timeout=2.0)


def _owner() -> str:
    """This process (worth knowing after a fork: Celery's prefork children)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _mark_key(pk: Any) -> str:
    return f"a2a:long-call:{settings.CELERY_TASK_DEFAULT_QUEUE}:{pk}"


def _handback_key(pk: Any) -> str:
    return f"a2a:long-call-back:{settings.CELERY_TASK_DEFAULT_QUEUE}:{pk}"


def _what(task: Task) -> str:
    """What the call works on, as the row would show it untouched but for its claim: a
    person's cancel, a reply, a reassignment change one of these."""
    return f"{task.next_action}|{task.state}|{task.agent_id}"


def mark(task: Task, seconds: float) -> None:
    """Mark the call on ``task`` alive for ``seconds`` (the keeper does, each step)."""
    if not enabled():
        return
    try:
        value = f"{_owner()}|{_what(task)}"
        _client().set(_mark_key(task.pk), value, ex=max(1, math.ceil(seconds)))
    except redis.RedisError as exc:
        log.warning(
            "could not mark task %s's long call alive in Redis: %s",
            task.pk,
            exc,
            extra=_ids(task),
        )


def unmark(pk: Any) -> None:
    """The call ended: no mark holds its task back any more."""
    if not enabled():
        return
    try:
        _client().delete(_mark_key(pk), _handback_key(pk))
    except redis.RedisError as exc:
        log.warning(
            "could not unmark task %s's long call in Redis: %s",
            pk,
            exc,
            extra={"task_id": str(pk)},
        )


def held_elsewhere(task: Task) -> bool:
    """Whether ``task``, just claimed by a sweep, runs as a long call in another process
    (its claim lapsed while the database was away) and nothing else changed since (its
    action, state and agent are as the call marked them). Then its claim (this one) is
    left for that process to take back, and nothing is to be done with it here."""
    if not enabled() or task.lease_until is None:
        return False
    try:
        client = _client()
        raw = client.get(_mark_key(task.pk))
        owner, _, what = raw.decode().partition("|") if raw is not None else ("", "", "")
        if not owner or owner == _owner() or what != _what(task):
            return False
        ttl = max(1, math.ceil((task.lease_until - _now(task)).total_seconds()))
        client.set(_handback_key(task.pk), task.lease_until.isoformat(), ex=ttl)
    except redis.RedisError as exc:
        log.warning(
            "could not tell whether task %s runs elsewhere: %s", task.pk, exc, extra=_ids(task)
        )
        return False
    log.info(
        "task %s: claimed while its long call runs in %s; left to it",
        task.pk,
        owner,
        extra=_ids(task),
    )
    return True


def _ids(task: Task) -> dict[str, Any]:
    """The ``extra`` of a line about ``task`` (JSON logs carry them as keys)."""
    return {"task_id": str(task.pk), "agent_id": task.agent_id}


def _now(task: Task) -> datetime:
    return datetime.now(tz=task.lease_until.tzinfo)


def handbacks(pks: list[Any]) -> dict[Any, datetime]:
    """The claims other processes left for these calls of this one (taken: removed)."""
    if not enabled() or not pks:
        return {}
    try:
        client = _client()
        keys = [_handback_key(pk) for pk in pks]
        found = {pk: raw for pk, raw in zip(pks, client.mget(keys), strict=True) if raw}
        if found:
            client.delete(*[_handback_key(pk) for pk in found])
    except redis.RedisError as exc:
        log.warning("could not read long calls' claims handed back: %s", exc)
        return {}
    out: dict[Any, datetime] = {}
    for pk, raw in found.items():
        try:
            out[pk] = datetime.fromisoformat(raw.decode())
        except ValueError:
            continue
    return out
