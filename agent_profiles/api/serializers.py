"""Wire shapes of the registry API (camelCase, except the seed contract's skill fields)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

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

    def to_internal_value(self, data: Any) -> Any:
        # Strings: DRF's RegexField accepts numbers; a JSON array body must be refused too.
        if not isinstance(data, dict):
            raise serializers.ValidationError(
                {"non_field_errors": ["The body must be a JSON object."]}
            )
        if "agentId" in data and not isinstance(data["agentId"], str):
            raise serializers.ValidationError({"agentId": ["Must be a string."]})
        return super().to_internal_value(data)


class AgentProfileSerializer(serializers.ModelSerializer):
    """An agent profile as the API shows it (never any key material beyond the prefix)."""

    agentId = serializers.CharField(source="id")
    skillIds = serializers.SerializerMethodField()
    a2aEndpoint = serializers.CharField(source="a2a_endpoint")
    lastSeenAt = serializers.DateTimeField(source="last_seen_at")
    keyPrefix = serializers.CharField(source="key_prefix")
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")

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
        ]
        read_only_fields = fields

    def get_skillIds(self, agent: AgentProfile) -> list[str]:
        return sorted(s.pk for s in agent.skills.all())


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
