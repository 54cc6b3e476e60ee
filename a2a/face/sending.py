"""The A2A face's message-sending path: SendMessage and SendStreamingMessage.

Validates the message, chooses the skill (and agent, on a tenant route), relays it to
:func:`a2a.services.create_task` or :func:`a2a.services.reply_to_task`, attaches a push
config that came with it, then either answers at once or waits (bounded) for the task to
settle. :class:`SendingMixin` is composed into :class:`a2a.face.handler.FaceHandler`.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from django.conf import settings

from a2a.exceptions import UnknownSkill
from a2a.face import sse
from a2a.face.context import CallContext
from a2a.face.db import db_call
from a2a.face.errors import (
    AgentNotFound,
    FaceError,
    InvalidParams,
    UnsupportedOperation,
)
from a2a.face.params import _opt_bool, _opt_int, _proto_check
from a2a.face.serializers import task_json
from a2a.models import Direction, Task, TaskEvent, TaskMessage
from agent_profiles.models import AgentProfile, AgentStatus, Skill
from platform_site.errors import Conflict, NotFound, PlatformError


def _service_error(exc: PlatformError) -> FaceError:
    """The A2A error for a domain error raised by the dispatcher's services."""
    if isinstance(exc, Conflict):
        return UnsupportedOperation(exc.message, metadata={"code": exc.code})
    details = exc.details if isinstance(exc.details, dict) else {}
    violations = [(str(k), str(v)) for k, v in details.items()] if details else None
    if isinstance(exc, NotFound):
        return InvalidParams(exc.message, metadata={"code": exc.code}, violations=violations)
    return InvalidParams(exc.message, metadata={"code": exc.code}, violations=violations)


class SendingMixin:
    """The message operations of :class:`a2a.face.handler.FaceHandler`."""

    # Provided by FaceHandler: task visibility and rendering live with the task reads.
    _get_visible: Callable[[CallContext, Any], Task]
    _task_payload: Callable[..., dict[str, Any]]

    def _choose_skill(self, ctx: CallContext, request: dict[str, Any]) -> tuple[str, str | None]:
        """The skill id (and the agent id on a tenant route) for a new task."""
        message = request["message"]
        skill_id = (request.get("metadata") or {}).get("skillId") or (
            message.get("metadata") or {}
        ).get("skillId")
        if ctx.tenant:
            ids = list(
                Skill.objects.filter(
                    agents__id=ctx.tenant, agents__status=AgentStatus.ACTIVE, is_active=True
                )
                .order_by("id")
                .values_list("id", flat=True)
            )
            if (
                not ids
                and not AgentProfile.objects.filter(
                    pk=ctx.tenant, status=AgentStatus.ACTIVE
                ).exists()
            ):
                raise AgentNotFound(
                    f"No active agent {ctx.tenant!r}.", metadata={"agentId": ctx.tenant}
                )
            if skill_id:
                if skill_id not in ids:
                    raise InvalidParams(
                        f"Agent {ctx.tenant!r} does not offer skill {skill_id!r}; it offers {ids}.",
                        metadata={"skillId": str(skill_id), "skills": ids},
                    )
                return str(skill_id), ctx.tenant
            if settings.A2A_DEFAULT_SKILL in ids:
                return settings.A2A_DEFAULT_SKILL, ctx.tenant
            if len(ids) == 1:
                return ids[0], ctx.tenant
            raise InvalidParams(
                f"Say which skill: set metadata.skillId to one of {ids}.",
                metadata={"skills": ids},
            )
        # The default routes: create_task checks the skill (see _unknown_skill).
        if skill_id or settings.A2A_DEFAULT_SKILL:
            return str(skill_id or settings.A2A_DEFAULT_SKILL), None
        ids = list(
            Skill.objects.filter(is_active=True).order_by("id").values_list("id", flat=True)[:51]
        )
        if len(ids) == 1:
            return ids[0], None
        raise InvalidParams(
            f"Say which skill: set metadata.skillId to one of {ids}." if ids else "No skills.",
            metadata={"skills": ids},
        )

    @staticmethod
    def _unknown_skill(skill_id: str) -> InvalidParams:
        ids = list(Skill.objects.filter(is_active=True).order_by("id").values_list("id", flat=True))
        return InvalidParams(
            f"Unknown skill {skill_id!r}; active skills: {ids}.",
            metadata={"skillId": skill_id, "skills": ids},
        )

    @staticmethod
    def _input_of(message: dict[str, Any]) -> dict[str, Any]:
        """What the platform records as the task's input: the first data part, else text."""
        texts = []
        for part in message.get("parts") or []:
            if isinstance(part, dict) and isinstance(part.get("data"), dict):
                return part["data"]
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        return {"text": "\n".join(texts)} if texts else {}

    def _validate_send(self, params: dict[str, Any]) -> dict[str, Any]:
        from a2a.types import a2a_pb2

        message = params.get("message")
        if not isinstance(message, dict):
            raise InvalidParams("message is required.", violations=[("message", "required")])
        _proto_check(params, a2a_pb2.SendMessageRequest, "SendMessageRequest")
        if not message.get("messageId"):
            raise InvalidParams(
                "message.messageId is required.", violations=[("message.messageId", "required")]
            )
        if not message.get("parts"):
            raise InvalidParams(
                "message.parts must hold at least one part.",
                violations=[("message.parts", "at least one part")],
            )
        if message.get("role") not in ("ROLE_USER", 1):
            raise InvalidParams(
                "message.role must be ROLE_USER.", violations=[("message.role", "ROLE_USER")]
            )
        return message

    def _send_sync(self, ctx: CallContext, params: dict[str, Any]) -> tuple[Task, int | None]:
        """Create the task (or answer an existing one); returns it and, for a follow-up,
        the event sequence number the answer must move past."""
        from a2a import services

        message = params["message"]
        if message.get("taskId"):
            task = self._get_visible(ctx, message["taskId"])
            if message.get("contextId") and message["contextId"] != task.context_id:
                raise InvalidParams(
                    f"contextId {message['contextId']!r} does not match task {task.id}'s "
                    f"context {task.context_id!r}.",
                    metadata={"taskId": str(task.id), "contextId": task.context_id},
                    violations=[("message.contextId", "does not match the task's context")],
                )
            if task.is_terminal:
                raise UnsupportedOperation(
                    f"Task {task.id} is {task.state}, a final state: it accepts no messages.",
                    metadata={"taskId": str(task.id), "state": task.state},
                )
            # Counted before the reply: an interruption the agent reports quickly (even
            # within reply_to_task) is then still newer than the reply's own transition.
            before = TaskEvent.objects.filter(task=task).count()
            try:
                task = services.reply_to_task(task, message=message, by=ctx.user)
            except PlatformError as exc:
                raise _service_error(exc) from None
            task.refresh_from_db()
            return task, before + 1
        skill_id, agent_id = self._choose_skill(ctx, params)
        try:
            task = services.create_task(
                skill_id=skill_id,
                input=self._input_of(message),
                agent_id=agent_id,
                user=ctx.user,
                agent_caller=ctx.agent_caller,
                message=message,
                context_id=message.get("contextId") or None,
                origin="a2a",
                validate_input=False,
            )
        except PlatformError as exc:
            if isinstance(exc, UnknownSkill):
                raise self._unknown_skill(skill_id) from None
            raise _service_error(exc) from None
        return task, None

    def _load_payload(self, task_id: uuid.UUID, history_length: int | None) -> dict[str, Any]:
        task = Task.objects.get(pk=task_id)
        return self._task_payload(task, history_length=history_length)

    def _send_and_attach(
        self, ctx: CallContext, params: dict[str, Any]
    ) -> tuple[Task, int | None, dict[str, Any]]:
        """One database hop: authenticate, validate everything, then create the task (or
        answer one) and attach the push config that came with it."""
        from a2a.face import push as push_service

        ctx.require_caller()
        self._validate_send(params)
        config = params.get("configuration") or {}
        if not isinstance(config, dict):
            raise InvalidParams("configuration must be an object.")
        _opt_int(config, "historyLength", low=0)
        _opt_bool(config, "returnImmediately")
        push = config.get("taskPushNotificationConfig") or config.get("pushNotificationConfig")
        if push is not None:
            if not isinstance(push, dict):
                raise InvalidParams("taskPushNotificationConfig must be an object.")
            push_service.clean_config(push)
        task, since_seq = self._send_sync(ctx, params)
        if push is not None:
            push_service.create_config(task, {**push, "taskId": str(task.id)})
        return task, since_seq, config

    async def send_message(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        def start() -> tuple[Task, int | None, int | None, dict[str, Any] | None]:
            task, since_seq, config = self._send_and_attach(ctx, params)
            history_length = _opt_int(config, "historyLength", low=0)
            if not _opt_bool(config, "returnImmediately"):
                return task, since_seq, history_length, None
            if since_seq is None and task.outbound_message:
                # A new task: its history is the message just relayed (no query needed).
                relayed = TaskMessage(direction=Direction.TO_AGENT, message=task.outbound_message)
                payload = task_json(task, history=[relayed], history_length=history_length)
            else:
                payload = self._task_payload(task, history_length=history_length)
            return task, since_seq, history_length, payload

        task, since_seq, history_length, payload = await db_call(start)()
        if payload is None:
            await sse.wait_until_settled(
                task.id, since_seq=since_seq, seconds=settings.A2A_BLOCKING_TIMEOUT
            )
            payload = await db_call(self._load_payload)(task.id, history_length)
        return {"task": payload}

    async def stream_message(
        self, params: dict[str, Any], ctx: CallContext
    ) -> AsyncIterator[dict[str, Any] | None]:
        """Send, then stream: the Task first, then status/artifact updates to the end."""
        task, _since, _config = await db_call(self._send_and_attach)(ctx, params)
        return sse.task_stream(task.id)
