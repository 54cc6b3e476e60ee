"""Reading an agent's task back (``GetTask``): a poll's read, and the read after a
follow-up the agent refused (:func:`read_after_refusal`); for the worker's calls
(:mod:`a2a.agent_calls`) and the batched polls (:mod:`a2a.engine`)."""

from __future__ import annotations

import logging
from typing import Any

from a2a import agent_answers, answer_parts, overtaken_calls, transports
from a2a.agent_updates import apply_agent_reply
from a2a.exceptions import A2AAuthError, A2ACallError, A2APermanentError
from a2a.follow_policy import POLL
from a2a.hints import queue_processing
from a2a.models import Task
from a2a.question_memory import asked_again
from a2a.remote_ids import remote_fields
from a2a.send_failures import ask_again
from a2a.states import INTERRUPTED_STATES, TaskState, normalize_state
from a2a.transports.base import AgentReply
from a2a.wire import question_of, task_output
from agent_profiles.interfaces import CallTarget

log = logging.getLogger(__name__)


def read_task(target: CallTarget, remote_task_id: str) -> AgentReply:
    """A poll's ``GetTask`` (the worker's and the batched engine's): the task without its
    conversation, read once more with its last message when that may hold the output."""
    transport = transports.transport_for(target)
    reply = transport.get_task(remote_task_id)
    if _output_in_history(reply):
        reply = transport.get_task(remote_task_id, history=1)
    return reply


def _output_in_history(reply: AgentReply) -> bool:
    """Whether a poll found the task COMPLETED with no output (no value, no text) in its
    artifacts or status message: then its output may be the agent's last message, which
    a poll leaves out (LangGraph's server keeps a task's result there). Once per task, at
    its end, and only for agents that answer so."""
    remote = reply.task or {}
    status = remote.get("status") or {}
    if normalize_state(status.get("state")) != TaskState.COMPLETED or remote.get("history"):
        return False
    return task_output(remote.get("artifacts"), status.get("message")) is None


# Codes of a send the agent refused (HTTP 4xx, a JSON-RPC error): not its credentials
# (A2AAuthError), a task it does not know, a version it does not speak.
_REFUSALS = ("agent_refused", "unsupported_operation")


def read_after_refusal(task: Task, exc: A2ACallError) -> bool:
    """A follow-up (a reply, naming the agent's task) the agent refused: read the agent's
    task (``GetTask``) and go on from what it says. True when that was done; False when
    the task cannot be read (or the failure is no refusal), for
    :func:`~a2a.send_failures.handle_send_failure` to decide as for any failed send.

    Why: a reply sent again after the worker that sent it died (the agent took it and
    ended its task before the platform recorded the answer) is refused for the task's
    end (a2a-sdk: HTTP 400, reason UNSUPPORTED_OPERATION, "Task … is in terminal
    state"), not for what it says. Handed to the gateway as an agent that takes no sends,
    the task then failed at its deadline while the agent held its result. So:

    * the agent's task ended, works on, or asks a new question: applied as a poll's
      answer (a COMPLETED's output validated) and followed;
    * it still asks the question the reply answers (its repeat is stale news to
      :func:`~a2a.agent_updates.apply_agent_update`, so the task did not move): the reply
      was refused for what it says, and the person answers again
      (:func:`~a2a.send_failures.ask_again`), whatever the refusal's code. A question asked
      in artifacts alone (:func:`_asked_in_artifacts_again`) the same, asked from them.
    """
    metadata = task.metadata or {}
    if (
        not task.remote_task_id
        or not isinstance(exc, A2APermanentError)
        or isinstance(exc, A2AAuthError)  # GetTask would be refused the same way
        or exc.code not in _REFUSALS
        or not task.agent.polling
        or metadata.get("noPolling")  # no GetTask to ask
    ):
        return False
    state_before = task.state
    news: dict[str, Any] = {}
    try:
        target = agent_answers.target_of(task)
        reply = read_task(target, task.remote_task_id)
    except A2ACallError as unread:
        _unread(task, exc, unread)
        return False
    agent_answers.agent_answered(task)
    # Applied only to the agent task read: a person may have reassigned or retried the
    # task while the reply and the read were on the wire (a2a.overtaken_calls).
    with overtaken_calls.still_current(task) as still:
        if not still:
            return True  # the fresh attempt stands: nothing of the refusal is kept
        try:
            # Before the answer is applied: it may fail the task (an invalid output), and
            # that error must stand.
            agent_answers.clear_send_failures(task)  # the agent answered
            again = _asked_in_artifacts_again(task, reply)
            if again is None:
                # Checked (another task's id, a state it cannot read...) before anything
                # is kept.
                apply_agent_reply(task, task_json=reply.task, message=None, via="a2a", pending=news)
            else:  # nothing new to keep; checked as an applied answer would be
                remote_fields(task, reply.task)
        except A2ACallError as unread:
            _unread(task, exc, unread)
            return False
        log.info(
            "task %s: agent %s refused the follow-up (%s); its task %s is %s",
            task.pk,
            task.agent_id,
            exc.code,
            task.remote_task_id,
            reply.state,
        )
        if again is not None:
            _ask_in_artifacts_again(task, exc, again, reply.state)
            return True
        if reply.state in INTERRUPTED_STATES and task.state == state_before:
            ask_again(task, exc)
            return True
        agent_answers.after_answer(task, target, reply, state_before, POLL, news)
    return True


def _asked_in_artifacts_again(task: Task, reply: AgentReply) -> dict[str, Any] | None:
    """The question the person answered, when the agent's task, read after the refusal,
    asks it again in its artifacts alone (LangGraph's server: an ``Interrupt`` artifact, no
    status message nor timestamp); None for any other read.

    Why: applied, that read was taken for a new question (nothing tells it from the one
    answered), and the refusal's reason was lost: the task waited again, the person not
    told why their answer went nowhere. The question comes from the artifacts here, as
    read now (:func:`_ask_in_artifacts_again`), not from what
    :func:`~a2a.send_failures.ask_again` kept of the reply: such an agent sends no message."""
    remote = reply.task if isinstance(reply.task, dict) else {}
    status, artifacts = remote.get("status"), remote.get("artifacts")
    if reply.state not in INTERRUPTED_STATES or not isinstance(status, dict):
        return None
    # As the question was kept (apply_agent_update): checked, its bytes canonical.
    answer_parts.refuse(task, answer_parts.answer_problem(status, artifacts))
    status, artifacts = answer_parts.canonical_answer(status, artifacts)
    message = status.get("message")
    asked = question_of(message, artifacts)
    if not isinstance(asked, dict) or asked is message:  # asked in a message: as usual
        return None
    # The read after the refusal of a reply: asking the answered question is its repeat.
    return asked if asked_again(task, status, artifacts=artifacts, replying=True) else None


def _ask_in_artifacts_again(
    task: Task, exc: A2ACallError, question: dict[str, Any], state: str | None
) -> None:
    """:func:`~a2a.send_failures.ask_again` for a question asked in artifacts: the task
    waits for the person again with ``question`` and, in its error, why the answer was
    refused (worded as there). A task moved meanwhile is let go of and taken up again."""
    held = task.lease_until
    error = exc.as_error()
    error["message"] = f"The agent refused the answer; answer again. {exc.message}"
    auth = state == TaskState.AUTH_REQUIRED
    moved = not task.require_input(question, auth=auth, error=error)
    if moved and held is not None and task.release(held=held):
        queue_processing(task.pk)


def _unread(task: Task, exc: A2ACallError, unread: A2ACallError) -> None:
    log.info(
        "task %s: agent %s refused the follow-up (%s) and its task %s cannot be read (%s)",
        task.pk,
        task.agent_id,
        exc.code,
        task.remote_task_id,
        unread.code,
    )
