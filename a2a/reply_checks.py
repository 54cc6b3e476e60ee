"""Whether a person's reply still fits its task (part of :func:`a2a.services.reply_to_task`):
the task waits for input, on the question the person read."""

from __future__ import annotations

from datetime import datetime

from a2a.models import InvalidTransition, Task
from a2a.states import INTERRUPTED_STATES


def refuse_unless_waiting(task: Task) -> None:
    """A task not waiting for input takes no reply (409), whether it never asked, went on
    or ended: the one wording, before the row is locked and after."""
    if task.state not in INTERRUPTED_STATES:
        raise InvalidTransition(
            f"Task {task.id} is {task.state}; only a task waiting for input "
            "(TASK_STATE_INPUT_REQUIRED or TASK_STATE_AUTH_REQUIRED) takes a reply."
        )


def still_asking(task: Task, asked_at: datetime | None, question_id: str | None) -> bool:
    """Whether the task still waits on the question asked at ``asked_at`` and whose
    ``messageId`` is ``question_id`` (either unchecked when None). The row stays
    locked until the caller's transaction ends (on SQLite its ``IMMEDIATE`` transaction
    holds the write lock), so no reply and new question slip in before the reply's
    transition: the transition's compare-and-set on the state alone would not see a task
    that was answered and asked again (the same state).

    ``task`` takes the row's state, question, metadata and artifacts as they are now: for
    the refusal, a task that went on or ended meanwhile is told so
    (:func:`refuse_unless_waiting`), not taken for one that asked something else. Read and
    locked also with nothing to check (an A2A client's reply through the face): such a reply
    answers what the task asks when it arrives, and the reply's record (the question
    answered, the answer's shape) must be that question's, not the one read before the agent
    asked anew."""
    row = (
        Task.objects.select_for_update()
        .filter(pk=task.pk)
        .values_list("state", "state_changed_at", "question", "metadata", "artifacts")
        .first()
    )
    if row is None:
        return False
    state, changed_at, question, task.metadata, task.artifacts = row
    # The question asked now (none: answered), and what the reply's transition writes
    # over: the metadata and artifacts read before the lock may miss another answer's
    # record of its question, or a face reply's ids, written meanwhile.
    task.state, task.question = state, question
    if state not in INTERRUPTED_STATES:
        return False
    if asked_at is not None and changed_at != asked_at:
        return False
    # A question asked again after an answer (the same messageId) is a new transition:
    # with only its id, a repeat is taken for the one read (what it asks is the same).
    asked_id = question.get("messageId") if isinstance(question, dict) else None
    return question_id is None or asked_id == question_id
