"""Wire shapes of the registry API (camelCase, except the seed contract's skill fields)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agent_profiles.credentials import InvalidCredentials, validate_credentials
from agent_profiles.health import health_of
from agent_profiles.interfaces import BINDINGS, VERSIONS, interface_of
from agent_profiles.models import SLUG_RE, AgentProfile, Skill

SLUG_HELP = (
    "a slug: 1-100 lowercase letters, digits, '-' or '_', starting and ending with a letter "
    "or digit"
)


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and booleans instead of turning them into text."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """An integer that refuses strings, booleans and fractions instead of converting them."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        if isinstance(data, float) and not data.is_integer():
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictChoiceField(serializers.ChoiceField):
    """A choice among strings that refuses non-strings."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid_choice", input=type(data).__name__)
        return super().to_internal_value(data)


AUTH_SCHEMA: dict[str, Any] = {
    "description": "The credential the platform presents when it calls the agent. "
    "Write-only: never returned. null clears it; leaving it out keeps it.",
    "nullable": True,
    "oneOf": [
        {
            "type": "object",
            "required": ["type", "token"],
            "properties": {"type": {"enum": ["bearer"]}, "token": {"type": "string"}},
        },
        {
            "type": "object",
            "required": ["type", "in", "name", "value"],
            "properties": {
                "type": {"enum": ["apiKey"]},
                "in": {"enum": ["header"]},
                "name": {"type": "string"},
                "value": {"type": "string"},
            },
        },
        {
            "type": "object",
            "required": ["type", "tokenUrl", "clientId", "clientSecret"],
            "properties": {
                "type": {"enum": ["oauth2"]},
                "tokenUrl": {"type": "string", "format": "uri"},
                "clientId": {"type": "string"},
                "clientSecret": {"type": "string"},
                "scopes": {"type": "array", "items": {"type": "string"}},
            },
        },
    ],
}


@extend_schema_field(AUTH_SCHEMA)
class AuthField(serializers.Field):
    """``auth``: a credential in one of DESIGN.md's shapes; errors never echo the value."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        try:
            return validate_credentials(data)
        except InvalidCredentials as exc:
            raise serializers.ValidationError(exc.message) from None

    def to_representation(self, value: Any) -> None:  # write-only: never shown
        return None


class StrictDictField(serializers.DictField):
    """A JSON object (of anything)."""

    default_error_messages = {"not_a_dict": "Expected a JSON object but got {input_type}."}


def slug_field(**kwargs: Any) -> serializers.RegexField:
    return serializers.RegexField(
        SLUG_RE,
        max_length=100,
        error_messages={"invalid": f"Must be {SLUG_HELP}."},
        **kwargs,
    )


class RegistrationSerializer(serializers.Serializer):
    """``POST /api/agent-profiles/register`` body."""

    agentId = slug_field(source="agent_id")
    skillIds = serializers.ListField(
        source="skill_ids",
        child=StrictCharField(max_length=100),
        allow_empty=False,
        max_length=200,
        error_messages={"empty": "List at least one skill id (GET /api/a2a/skills)."},
    )
    name = StrictCharField(max_length=200, required=False, allow_blank=True)
    description = StrictCharField(max_length=10_000, required=False, allow_blank=True)
    a2aEndpoint = StrictCharField(
        source="a2a_endpoint", max_length=500, required=False, allow_blank=True, allow_null=True
    )
    domain = StrictCharField(max_length=100, required=False, allow_blank=True)
    subdomain = StrictCharField(max_length=100, required=False, allow_blank=True)
    version = StrictCharField(max_length=50, required=False, allow_blank=True)
    metadata = StrictDictField(required=False, allow_null=True)
    agentCardUrl = StrictCharField(
        source="agent_card_url", max_length=500, required=False, allow_blank=True, allow_null=True
    )
    protocolBinding = StrictChoiceField(
        source="protocol_binding", choices=list(BINDINGS), required=False, allow_null=True
    )
    protocolVersion = StrictChoiceField(
        source="protocol_version", choices=list(VERSIONS), required=False, allow_null=True
    )
    target = StrictCharField(max_length=200, required=False, allow_blank=True, allow_null=True)
    timeoutMs = StrictIntegerField(
        source="timeout",
        min_value=1,
        max_value=7 * 24 * 3600 * 1000,
        required=False,
        allow_null=True,
    )
    pollIntervalMs = StrictIntegerField(
        source="poll_interval",
        min_value=1,
        max_value=3600 * 1000,
        required=False,
        allow_null=True,
    )
    auth = AuthField(required=False, allow_null=True, write_only=True)

    def to_internal_value(self, data: Any) -> Any:
        # Strings: DRF's RegexField accepts numbers; a JSON array body must be refused too.
        if not isinstance(data, dict):
            raise serializers.ValidationError(
                {"non_field_errors": ["The body must be a JSON object."]}
            )
        if "agentId" in data and not isinstance(data["agentId"], str):
            raise serializers.ValidationError({"agentId": ["Must be a string."]})
        values = super().to_internal_value(data)
        for name in ("timeout", "poll_interval"):  # milliseconds on the wire, seconds stored
            if values.get(name) is not None:
                values[name] = values[name] / 1000
        return values


class AgentProfileSerializer(serializers.ModelSerializer):
    """An agent profile as the API shows it (never any key material beyond the prefix)."""

    agentId = serializers.CharField(source="id")
    skillIds = serializers.SerializerMethodField()
    a2aEndpoint = serializers.CharField(source="a2a_endpoint")
    lastSeenAt = serializers.DateTimeField(source="last_seen_at")
    keyPrefix = serializers.CharField(source="key_prefix")
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")

    agentCardUrl = serializers.CharField(source="agent_card_url")
    protocolBinding = serializers.CharField(source="protocol_binding")
    protocolVersion = serializers.CharField(source="protocol_version")
    timeoutMs = serializers.SerializerMethodField()
    pollIntervalMs = serializers.SerializerMethodField()
    interface = serializers.SerializerMethodField()
    card = serializers.SerializerMethodField()
    credential = serializers.SerializerMethodField()
    polling = serializers.SerializerMethodField()
    listing = serializers.SerializerMethodField()
    earlyReturn = serializers.SerializerMethodField()
    health = serializers.SerializerMethodField()

    class Meta:
        model = AgentProfile
        fields = [
            "agentId",
            "name",
            "description",
            "skillIds",
            "a2aEndpoint",
            "domain",
            "subdomain",
            "version",
            "metadata",
            "status",
            "lastSeenAt",
            "keyPrefix",
            "createdAt",
            "updatedAt",
            "agentCardUrl",
            "protocolBinding",
            "protocolVersion",
            "target",
            "timeoutMs",
            "pollIntervalMs",
            "interface",
            "card",
            "credential",
            "polling",
            "listing",
            "earlyReturn",
            "health",
        ]
        read_only_fields = fields

    def get_skillIds(self, agent: AgentProfile) -> list[str]:
        return sorted(s.pk for s in agent.skills.all())

    def get_timeoutMs(self, agent: AgentProfile) -> int | None:
        return None if agent.timeout is None else round(agent.timeout * 1000)

    def get_pollIntervalMs(self, agent: AgentProfile) -> int | None:
        return None if agent.poll_interval is None else round(agent.poll_interval * 1000)

    def get_interface(self, agent: AgentProfile) -> dict[str, str]:
        """The interface the platform calls (``source``: card, registration or default)."""
        return interface_of(agent)

    def get_card(self, agent: AgentProfile) -> dict[str, Any]:
        return {
            "readAt": _iso(agent.card_read_at),
            "error": agent.card_error,
            "streaming": agent.streaming,
            "pushNotifications": agent.push_notifications,
            "securitySchemes": agent.security_schemes,
            "securityRequirements": agent.security_requirements,
        }

    def get_credential(self, agent: AgentProfile) -> dict[str, Any]:
        """Whether a credential is configured and its type; never the credential."""
        return {"configured": bool(agent.auth_encrypted), "type": agent.auth_type or None}

    def get_polling(self, agent: AgentProfile) -> dict[str, Any]:
        return {
            "supported": agent.polling,
            "reason": agent.no_polling_reason,
            "since": _iso(agent.no_polling_at),
        }

    def get_listing(self, agent: AgentProfile) -> dict[str, Any]:
        """Whether its polled tasks are followed by listing them (``ListTasks``)."""
        return {
            "supported": agent.listing,
            "reason": agent.no_listing_reason,
            "since": _iso(agent.no_listing_at),
        }

    def get_earlyReturn(self, agent: AgentProfile) -> dict[str, Any]:
        """Whether it answers a send asking it to return at once (``returnImmediately``)
        at once; false once one was held past ``A2A_HTTP_TIMEOUT`` (its sends start by a
        stream since). ``seen``: it answered one with its task still in flight, so it is
        never marked."""
        return {
            "supported": agent.early_return,
            "reason": agent.no_early_return_reason,
            "since": _iso(agent.no_early_return_at),
            "seen": agent.early_return_seen,
        }

    def get_health(self, agent: AgentProfile) -> dict[str, Any]:
        verdict = health_of(agent)
        return {
            "status": verdict.status,
            "error": verdict.error,
            "latencyMs": agent.health_latency_ms,
            "checkedAt": _iso(agent.health_checked_at),
            "lastCall": None
            if agent.last_call_at is None
            else {
                "ok": agent.last_call_ok,
                "code": agent.last_call_code,
                "message": agent.last_call_error,
                "at": _iso(agent.last_call_at),
            },
        }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


class RegistrationResultSerializer(serializers.Serializer):
    """The answer to a registration (documentation only)."""

    profile = AgentProfileSerializer()
    apiKey = serializers.CharField(
        required=False, help_text="Only for a new agent; shown once, stored hashed."
    )


class SkillSerializer(serializers.ModelSerializer):
    """A skill in the ``GET /api/a2a/skills`` shape: A2A AgentSkill fields plus the seed
    contract's snake_case ones."""

    inputModes = serializers.JSONField(source="input_modes")
    outputModes = serializers.JSONField(source="output_modes")
    skill_id = serializers.CharField(source="id")

    class Meta:
        model = Skill
        fields = [
            "id",
            "name",
            "description",
            "tags",
            "examples",
            "inputModes",
            "outputModes",
            "skill_id",
            "version",
            "domain",
            "subdomain",
            "input_schema",
            "output_schema",
        ]
        read_only_fields = fields
