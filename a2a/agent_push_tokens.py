"""The push webhook's addresses and tokens: the config a send carries, and its checks.

When an agent's card offers push notifications, the send carries
``configuration.taskPushNotificationConfig`` (:func:`push_config`): a webhook URL of its
own per task, agent and attempt, ``{PUBLIC_URL}/api/a2a/push/{taskId}/{agentId}/{serial}``,
and a token for it (in ``token`` and as ``authentication`` Bearer credentials, so an agent
sends it in ``X-A2A-Notification-Token`` or ``Authorization``). The token is an HMAC of the
three under the platform's key: nothing is stored, a forged one is refused before the
database is read, and the comparison takes constant time. The serial
(:attr:`~a2a.models.Task.push_serial`) goes up by one at every attempt sent and at every
retry or reassign, and never back: the webhook of an attempt before is refused from the
moment a new one starts (:mod:`a2a.agent_push` compares it with the task's), and no agent
ever holds a token that becomes valid again. The agent is part of the token too, so one
address is never valid for two agents. What arrives is applied by :mod:`a2a.agent_push`,
which refuses a push of an agent the task no longer has.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from a2a.models import Task
from agent_profiles.interfaces import CallTarget
from agent_profiles.urlguard import names_this_machine_only
from platform_site.errors import NotFound

log = logging.getLogger(__name__)

PATH_PREFIX = "/api/a2a/push/"
_SALT = "a2a.agent_push"


@functools.lru_cache(maxsize=4)
def _key(secret: str) -> bytes:
    # What salted_hmac derives from the salt and the secret at every call; kept per secret.
    return hashlib.sha256(_SALT.encode() + secret.encode()).digest()


def token_for(task_id: Any, agent_id: str, attempt: int) -> str:
    """The webhook token of one attempt of a task at one agent (an HMAC: nothing stored);
    ``attempt``: the task's push serial then (:attr:`~a2a.models.Task.push_serial`).

    The same value as Django's ``salted_hmac(_SALT, ..., algorithm="sha256")``, with the
    key derived once per ``SECRET_KEY`` instead of at every push.
    """
    message = f"{task_id}:{agent_id}:{attempt}".encode()
    return hmac.new(_key(settings.SECRET_KEY), message, hashlib.sha256).hexdigest()


def token_matches(hook: Hook, presented: str) -> bool:
    """Constant-time check of a presented token (of its address's form)."""
    if hook.legacy:
        message = f"{hook.task_id}:{hook.attempt}".encode()
        expected = hmac.new(_key(settings.SECRET_KEY), message, hashlib.sha256).hexdigest()
    else:
        expected = token_for(hook.task_id, hook.agent_id, hook.attempt)
    return hmac.compare_digest(expected.encode(), presented.encode())


def webhook_url(task_id: Any, agent_id: str, attempt: int) -> str:
    return f"{settings.PUBLIC_URL}{PATH_PREFIX}{task_id}/{agent_id}/{attempt}"


_warned: set[str] = set()  # agents told about in this process's log


def webhook_reachable(target: CallTarget) -> bool:
    """Whether the agent can reach the webhook: False when ``PUBLIC_URL`` names this
    machine only (its default, ``http://127.0.0.1:8000``) and the agent's URL does not.

    Such an agent's pushes could never arrive, and its tasks would wait for the safety-net
    polls (``AGENT_PUSH_POLL_INTERVAL``, a minute) to be seen ending; it is followed like
    an agent that does not push instead, and the log says why, once per agent and process.
    """
    public = urlsplit(settings.PUBLIC_URL).hostname or ""
    if not names_this_machine_only(public):
        return True
    agent_host = urlsplit(target.url).hostname or ""
    if not agent_host or names_this_machine_only(agent_host):
        return True
    if target.agent_id not in _warned:
        _warned.add(target.agent_id)
        log.warning(
            "agent %s offers push notifications, but PUBLIC_URL (%s) names this machine "
            "only, which the agent at %s cannot reach: its tasks are followed without "
            "pushes. Set PUBLIC_URL to the platform's address as agents see it.",
            target.agent_id,
            settings.PUBLIC_URL,
            agent_host,
        )
    return False


def push_config(task: Task) -> dict[str, Any]:
    """``configuration.taskPushNotificationConfig`` for the task's current attempt."""
    attempt = task.push_serial
    token = token_for(task.pk, task.agent_id, attempt)
    return {
        "id": f"platform-{task.pk}",
        "url": webhook_url(task.pk, task.agent_id, attempt),
        "token": token,
        "authentication": {"scheme": "Bearer", "credentials": token},
    }


def is_push_path(path: str) -> bool:
    return path.startswith(PATH_PREFIX)


@dataclass(frozen=True)
class Hook:
    """One webhook: the task, the agent it was given to, and that agent's attempt (the
    task's push serial then; in a legacy address, its attempt).

    ``legacy``: an address of the form given out before the agent was part of it,
    ``/api/a2a/push/{taskId}/{attempt}`` (its token an HMAC of the task and attempt), which
    agents that took a task before an upgrade still push to. Such a push is not applied:
    its token would be valid for another agent's attempt of the same number after a
    reassignment. It only has the task polled at once (:func:`a2a.agent_push.legacy_push`).
    """

    task_id: uuid.UUID
    agent_id: str
    attempt: int
    legacy: bool = False


_AGENT_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")  # agent ids are slugs


def parse_path(path: str) -> Hook:
    """The :class:`Hook` of ``/api/a2a/push/{taskId}/{agentId}/{attempt}`` (or of a legacy
    ``/api/a2a/push/{taskId}/{attempt}``); 404 otherwise."""
    tail = path[len(PATH_PREFIX) :].strip("/")
    parts = tail.split("/")
    try:
        if len(parts) == 2:
            return Hook(uuid.UUID(parts[0]), "", int(parts[1]), legacy=True)
        if len(parts) != 3 or not _AGENT_ID.fullmatch(parts[1]):
            raise ValueError
        return Hook(uuid.UUID(parts[0]), parts[1], int(parts[2]))
    except ValueError:
        raise NotFound("No such webhook.", {"path": path[:200]}) from None
