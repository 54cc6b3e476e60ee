"""REST shapes of platform tasks (camelCase, as DESIGN.md fixes them)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from a2a.models import Task
from a2a.reply_form import REPLY_TEXT_MAX_CHARS


class TaskSerializer(serializers.ModelSerializer):
    """The Task JSON: exactly the fields DESIGN.md lists."""

    skillId = serializers.CharField(source="skill_id", read_only=True)
    agentId = serializers.CharField(source="agent_id", read_only=True)
    remoteTaskId = serializers.CharField(source="remote_task_id", read_only=True)
    contextId = serializers.CharField(source="context_id", read_only=True)
    metadata = serializers.SerializerMethodField()
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)
    updatedAt = serializers.DateTimeField(source="updated_at", read_only=True)

    class Meta:
        model = Task
        fields = [
            "id",
            "skillId",
            "agentId",
            "state",
            "remoteTaskId",
            "contextId",
            "input",
            "output",
            "artifacts",
            "question",
            "error",
            "attempts",
            "transport",
            "metadata",
            "createdAt",
            "updatedAt",
        ]
        read_only_fields = fields

    def get_metadata(self, task: Task) -> dict[str, Any]:
        metadata = dict(task.metadata or {})
        metadata.setdefault("fallbacks", [])
        metadata.setdefault("match", None)
        return metadata

    def to_representation(self, instance: Task) -> dict[str, Any]:
        # The fields above document the shape (OpenAPI); building them per task costs
        # more than the rest of a request, so the JSON is built directly.
        return task_json(instance)


def task_json(task: Task) -> dict[str, Any]:
    """The Task JSON, built directly: the same shape as :class:`TaskSerializer` (which
    documents it in the OpenAPI schema) at a fraction of the cost per task."""
    metadata = dict(task.metadata or {})
    metadata.setdefault("fallbacks", [])
    metadata.setdefault("match", None)
    return {
        "id": str(task.id),
        "skillId": task.skill_id,
        "agentId": task.agent_id,
        "state": task.state,
        "remoteTaskId": task.remote_task_id,
        "contextId": task.context_id,
        "input": task.input,
        "output": task.output,
        "artifacts": task.artifacts,
        "question": task.question,
        "error": task.error,
        "attempts": task.attempts,
        "transport": task.transport,
        "metadata": metadata,
        "createdAt": _iso(task.created_at),
        "updatedAt": _iso(task.updated_at),
    }


_DATETIME = serializers.DateTimeField()


def _iso(value: Any) -> str | None:
    return _DATETIME.to_representation(value) if value else None


class StringField(serializers.CharField):
    """Text that must be a JSON string: DRF's CharField turns ``5`` or ``true`` into
    ``"5"`` / ``"True"``, a key or an answer nobody sent (the schema says string)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class _IdField(StringField):
    """An id: a JSON string, never a number turned into one (``7`` is no messageId)."""


class CreateTaskSerializer(serializers.Serializer):
    """``POST /api/tasks`` body."""

    skillId = serializers.CharField(max_length=100)
    input = serializers.JSONField(required=False, default=dict)
    agentId = serializers.CharField(max_length=100, required=False, allow_blank=True)
    # Opaque: kept exactly as given ("order-7 " is another key than "order-7"). Empty
    # means no key; only blanks would be a key nobody meant, so it is refused.
    idempotencyKey = StringField(
        max_length=200, required=False, allow_blank=True, trim_whitespace=False
    )

    def validate_input(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise serializers.ValidationError("input must be a JSON object.")
        return value

    def validate_idempotencyKey(self, value: str) -> str:
        if value and not value.strip():
            raise serializers.ValidationError(
                "idempotencyKey must not be only blanks: give a key or leave it out."
            )
        return value


_LIMITS = {"skillId": 100, "agentId": 100, "idempotencyKey": 200}


def read_create_body(body: Any) -> dict[str, Any]:
    """The ``validated_data`` of :class:`CreateTaskSerializer` for ``body`` (``POST
    /api/tasks``, a batch item), raising its ``ValidationError`` when refused.

    The usual body (the text fields plain strings within their lengths, without
    surrounding blanks, the input an object) is read directly: building the serializer
    (DRF copies its declared fields for every instance) cost a fifth of the request's
    CPU. Anything else goes through the serializer, which words every error and does its
    conversions (a number as a skill id, blanks trimmed except around the idempotency
    key). The body's text was checked by the parser (no NUL, no lone surrogate) before
    this.
    """
    if type(body) is dict:
        data = {name: body[name] for name in _LIMITS if name in body}
        plain = all(
            type(value) is str and len(value) <= _LIMITS[name] and value == value.strip()
            for name, value in data.items()
        )
        given = body.get("input", {})
        if plain and data.get("skillId") and type(given) is dict:
            data["input"] = given
            return data
    serializer = CreateTaskSerializer(data=body)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class BatchCreateSerializer(serializers.Serializer):
    """``POST /api/tasks:batch`` body (documentation; items are checked one by one, so a
    bad item is refused on its own)."""

    tasks = CreateTaskSerializer(many=True)


class BatchResultSerializer(serializers.Serializer):
    """One item's answer: the status ``POST /api/tasks`` would give, and the task or the
    error (the platform error object ``{code, message, details}``)."""

    status = serializers.IntegerField(help_text="201 created, 200 repeated key, or 4xx.")
    task = TaskSerializer(required=False)
    error = serializers.DictField(required=False)


class BatchResponseSerializer(serializers.Serializer):
    """``POST /api/tasks:batch`` answer: one result per item, in the order given."""

    results = BatchResultSerializer(many=True)


class ReplySerializer(serializers.Serializer):
    """``POST /api/tasks/{id}/reply`` body: text and/or data."""

    text = StringField(required=False, allow_blank=False, max_length=REPLY_TEXT_MAX_CHARS)
    data = serializers.JSONField(required=False)
    # Optional: the messageId of the question answered (the task's question.messageId);
    # a task that asks another one by now is not answered (409 question_changed).
    questionId = _IdField(required=False, allow_blank=False, max_length=200)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs.get("text") and attrs.get("data") is None:
            raise serializers.ValidationError("Give text, data or both.")
        if "data" in attrs and not isinstance(attrs["data"], dict):
            raise serializers.ValidationError({"data": "data must be a JSON object."})
        return attrs


class CancelSerializer(serializers.Serializer):
    reason = StringField(required=False, allow_blank=True, max_length=2000)


class ReassignSerializer(serializers.Serializer):
    agentId = serializers.CharField(
        required=False, allow_blank=True, allow_null=True, max_length=100
    )
