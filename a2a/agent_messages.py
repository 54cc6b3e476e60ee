"""The cap on an agent's messages in a task's conversation: ``TASK_AGENT_MESSAGES_MAX``.

One cap for every path an agent's message comes by (a stream's or a poll's status
messages, a bare Message answer, a push): an agent that keeps talking (a loop, a bug)
must not grow a task's rows, and every read of its history, without bound. Only pushes
were capped once: 3000 streamed status messages left 3000 rows. A push refuses a message
past it (``409 too_many_messages``, :mod:`a2a.agent_push`); the other paths drop it with
one log line per task (:func:`tell_over_the_cap`) and apply the status it came with.
Recording is :func:`a2a.agent_updates.keep_agent_message`'s.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.conf import settings

from a2a.models import Direction, Task, TaskMessage
from a2a.question_memory import message_key

log = logging.getLogger(__name__)


def over_the_cap(task: Task, message: dict[str, Any]) -> bool:
    """Whether ``message`` from the agent would take the task past
    ``TASK_AGENT_MESSAGES_MAX``: it is new and the task holds that many already. A repeat
    of a message kept is a harmless repeat, even at the cap."""
    kept = TaskMessage.objects.filter(task=task, direction=Direction.FROM_AGENT)
    limit: int = settings.TASK_AGENT_MESSAGES_MAX
    return kept.count() >= limit and not kept.filter(message_id=message_key(message)).exists()


# The tasks told about, the last few: a task's agent past the cap is logged once per task
# (and process), not once per message, which an agent in a loop goes on sending.
TOLD_KEPT = 1000
_told: dict[Any, None] = {}
_told_lock = threading.Lock()


def tell_over_the_cap(task: Task) -> None:
    """Log, once per task, that its agent's further messages are not kept."""
    with _told_lock:
        if task.pk in _told:
            return
        _told[task.pk] = None
        if len(_told) > TOLD_KEPT:
            del _told[next(iter(_told))]  # the oldest
    log.warning(
        "task %s holds %s messages from agent %s, the most the platform keeps "
        "(TASK_AGENT_MESSAGES_MAX); its further messages are not kept. The task goes on.",
        task.pk,
        settings.TASK_AGENT_MESSAGES_MAX,
        task.agent_id,
        extra={"agent_id": task.agent_id, "task_id": str(task.pk)},
    )
