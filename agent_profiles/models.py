"""The registry: skills, agent profiles, agent API keys and user API tokens."""

from __future__ import annotations

import functools
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone
from jsonschema import SchemaError
from jsonschema.validators import validator_for

from agent_profiles import keys
from agent_profiles.json_schemas import ref_fault
from platform_site.bookkeeping import write_unless_busy
from platform_site.compiled import CompiledGet

SLUG_RE = r"^[a-z0-9](?:[a-z0-9_-]{0,98}[a-z0-9])?$"
slug_validator = RegexValidator(
    SLUG_RE,
    "Use 1-100 lowercase letters, digits, '-' or '_', starting and ending with a letter or digit.",
    code="invalid_slug",
)

# Agent ids become path segments of the tenant routes /v1/a2a/{agentId}/...; these would
# collide with the A2A face's own path words.
RESERVED_AGENT_IDS = frozenset(
    {
        "tasks",
        "message",
        "message:send",
        "message:stream",
        "extendedagentcard",
        "extended-agent-card",
        "jsonrpc",
        "rpc",
        "card",
        "agent-card",
        "well-known",
        "pushnotificationconfigs",
        "v1",
        "a2a",
        "api",
        "admin",
    }
)


def check_json_schema(schema: Any, label: str) -> None:
    """Raise ``ValidationError`` unless ``schema`` is a valid JSON Schema document whose
    references all resolve within it, without a loop (:mod:`agent_profiles.json_schemas`):
    else a task's input or output could not be checked against it."""
    if not isinstance(schema, dict):
        raise ValidationError({label: "must be a JSON Schema object"})
    try:
        validator_for(schema).check_schema(schema)
        fault = ref_fault(schema)
    except SchemaError as exc:
        path = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise ValidationError({label: f"invalid JSON Schema at {path}: {exc.message}"}) from None
    except RecursionError:
        # A schema nested deeper than the checks can recurse (the API and loadskills
        # refuse such JSON first; this covers any other way in).
        raise ValidationError({label: "invalid JSON Schema: nested too deep"}) from None
    except ValueError as exc:  # an $id that is no URI ("http://[x")
        raise ValidationError({label: f"invalid JSON Schema: {exc}"}) from None
    if fault:
        raise ValidationError({label: f"invalid JSON Schema: {fault}"})


class Skill(models.Model):
    """A unit of work agents can offer, with JSON Schemas for its input and output.

    The primary key is the public skill id (a slug), so ``task.skill_id`` is that id.
    """

    id = models.CharField(primary_key=True, max_length=100, validators=[slug_validator])
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True)
    examples = models.JSONField(default=list, blank=True)
    input_modes = models.JSONField(default=list, blank=True)
    output_modes = models.JSONField(default=list, blank=True)
    domain = models.CharField(max_length=100, blank=True)
    subdomain = models.CharField(max_length=100, blank=True)
    version = models.CharField(max_length=50, blank=True, default="1.0.0")
    # blank=True: ``{}`` is a valid JSON Schema (anything goes); clean() checks validity.
    input_schema = models.JSONField(default=dict, blank=True)
    output_schema = models.JSONField(default=dict, blank=True)
    # Sends per task for transient errors; None means settings.A2A_MAX_ATTEMPTS.
    max_attempts = models.PositiveSmallIntegerField(null=True, blank=True)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.id} ({self.name})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Schemas are checked on every save, not only in forms: a bad schema must never
        # reach the dispatcher.
        self.clean()
        super().save(*args, **kwargs)

    @property
    def skill_id(self) -> str:
        return self.id

    def clean(self) -> None:
        check_json_schema(self.input_schema, "input_schema")
        check_json_schema(self.output_schema, "output_schema")


class AgentStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    PENDING = "pending", "Pending approval"
    DISABLED = "disabled", "Disabled"


class HealthStatus(models.TextChoices):
    HEALTHY = "healthy", "Healthy"
    UNHEALTHY = "unhealthy", "Unhealthy"
    UNKNOWN = "unknown", "Unknown"


class AgentProfile(models.Model):
    """An external agent: its identity, the skills it offers and how to reach it.

    ``a2a_endpoint`` is the base URL of its A2A HTTP+JSON interface; without one the
    agent works over the WebSocket gateway only.
    """

    id = models.CharField(primary_key=True, max_length=100, validators=[slug_validator])
    # This agent, not its id, as a caller (a2a.face.ids.tag_for): an id is free again once
    # its agent is deleted, and whoever registers it next must not continue the deleted
    # agent's conversations at other agents. NULL for agents registered before it existed
    # (their tags, and so their conversations, stay as they were).
    caller_salt = models.UUIDField(null=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    skills = models.ManyToManyField(Skill, related_name="agents", blank=True)
    a2a_endpoint = models.URLField(max_length=500, blank=True)
    domain = models.CharField(max_length=100, blank=True)
    subdomain = models.CharField(max_length=100, blank=True)
    version = models.CharField(max_length=50, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=16, choices=AgentStatus.choices, default=AgentStatus.ACTIVE, db_index=True
    )
    # Seconds before the first poll of this agent's tasks; None means the global setting
    # (registration's ``pollIntervalMs``).
    poll_interval = models.FloatField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # The columns added after 0001 have a db_default as well as a default: the previous
    # release, still serving while `migrate` runs, leaves them out of its INSERTs
    # (platform_site.migration_operations; tests/test_migrations.py keeps the rule).
    # --- How to call it: the registration's statement (the card, once read, decides) ---
    agent_card_url = models.URLField(max_length=500, blank=True, default="", db_default="")
    # HTTP+JSON | JSONRPC; 1.0 | 0.3; the remote tenant.
    protocol_binding = models.CharField(max_length=16, blank=True, default="", db_default="")
    protocol_version = models.CharField(max_length=8, blank=True, default="", db_default="")
    target = models.CharField(max_length=200, blank=True, default="", db_default="")
    # Overall seconds per task (``timeoutMs``); None means A2A_TASK_TIMEOUT.
    timeout = models.FloatField(null=True, blank=True)
    # Seconds a task may wait offline at the gateway for this agent while the agent has
    # never connected there (dispatch: "never wait silently"); None: up to the task's
    # timeout. An operator sets it for agents known to connect late.
    offline_wait = models.FloatField(null=True, blank=True)
    # When the agent last opened a gateway session (None: never).
    gateway_seen_at = models.DateTimeField(null=True, blank=True)

    # --- What its card said (agent_profiles.cards); the document is in AgentCard ---
    # The chosen interface: {"binding", "version", "url", "tenant"}; {} until a card is read.
    interface = models.JSONField(default=dict, db_default={}, blank=True)
    streaming = models.BooleanField(default=False, db_default=False)
    push_notifications = models.BooleanField(default=False, db_default=False)
    # Whether its card's input modes admit JSON data ("" for the card's defaults, a skill
    # id for a skill with its own): the false ones get data as JSON text (a2a.agent_calls).
    json_input = models.JSONField(default=dict, db_default={}, blank=True)
    security_schemes = models.JSONField(default=dict, db_default={}, blank=True)
    security_requirements = models.JSONField(default=list, db_default=[], blank=True)
    card_read_at = models.DateTimeField(null=True, blank=True)
    # Why the last read failed ("" after a read).
    card_error = models.TextField(blank=True, default="", db_default="")
    # ensure_card does not try again before this (after a failed read before a call).
    card_retry_after = models.DateTimeField(null=True, blank=True)

    # --- Credentials (agent_profiles.credentials): a Fernet token, never the secret ---
    auth_encrypted = models.TextField(blank=True, default="", db_default="")
    # bearer | apiKey | oauth2
    auth_type = models.CharField(max_length=16, blank=True, default="", db_default="")

    # --- Learned by dispatch (agent_profiles.health) ---
    polling = models.BooleanField(default=True, db_default=True)  # False: GetTask is not answered
    no_polling_reason = models.TextField(blank=True, default="", db_default="")
    no_polling_at = models.DateTimeField(null=True, blank=True)
    # False: ListTasks is not answered (or its statuses carry no time): its polled tasks
    # are followed by GetTask alone (a2a.agent_listing).
    listing = models.BooleanField(default=True, db_default=True)
    no_listing_reason = models.TextField(blank=True, default="", db_default="")
    no_listing_at = models.DateTimeField(null=True, blank=True)
    # False: a send asking it to return at once (returnImmediately) got no answer in
    # A2A_HTTP_TIMEOUT: the agent holds its sends until the task ends or asks (LangGraph's
    # server does); its sends start by a stream instead, or wait for the answer when it
    # does not stream (a2a.agent_calls). Never set once
    # ``early_return_seen``: an agent that answered such a send with its task still in
    # flight honours the field, and a later timeout is load, not a hold.
    early_return = models.BooleanField(default=True, db_default=True)
    no_early_return_reason = models.TextField(blank=True, default="", db_default="")
    no_early_return_at = models.DateTimeField(null=True, blank=True)
    early_return_seen = models.BooleanField(default=False, db_default=False)
    health_status = models.CharField(
        max_length=16,
        choices=HealthStatus.choices,
        default=HealthStatus.UNKNOWN,
        db_default=HealthStatus.UNKNOWN,
    )
    health_latency_ms = models.PositiveIntegerField(null=True, blank=True)
    health_error = models.TextField(blank=True, default="", db_default="")
    health_checked_at = models.DateTimeField(null=True, blank=True)
    last_call_ok = models.BooleanField(null=True, blank=True)
    last_call_code = models.CharField(max_length=64, blank=True, default="", db_default="")
    last_call_error = models.TextField(blank=True, default="", db_default="")
    last_call_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.id

    @property
    def agent_id(self) -> str:
        return self.id

    @property
    def is_active(self) -> bool:
        return self.status == AgentStatus.ACTIVE

    def clean(self) -> None:
        if self.id and self.id.lower() in RESERVED_AGENT_IDS:
            raise ValidationError({"id": f"'{self.id}' is reserved by the A2A face's paths."})

    def touch(self) -> None:
        """Record that the agent was seen now (registration, socket, a successful call)."""
        now = timezone.now()
        AgentProfile.objects.filter(pk=self.pk).update(last_seen_at=now)
        self.last_seen_at = now

    def issue_key(self) -> str:
        """Revoke the agent's keys and return a new one (shown once, stored hashed)."""
        ApiKey.objects.filter(agent=self, revoked_at__isnull=True).update(revoked_at=timezone.now())
        return keys.create_row(ApiKey, "a2a", agent=self)

    @property
    def key_prefix(self) -> str:
        key = self.api_keys.filter(revoked_at__isnull=True).order_by("-created_at").first()
        return key.prefix if key else ""


class AgentCard(models.Model):
    """The last agent card read from an agent, kept apart from the profile so that the
    profile (loaded on every authenticated request) stays small."""

    agent = models.OneToOneField(
        AgentProfile, on_delete=models.CASCADE, primary_key=True, related_name="card"
    )
    document = models.JSONField()
    # Where the card was read: an endpoint of up to 500 characters plus
    # /.well-known/agent-card.json is longer than the endpoint's column, so no bound here.
    source_url = models.TextField()
    read_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"card of {self.agent_id}"


# ``last_used_at`` is refreshed at most this often, so busy callers do not write per request.
LAST_USED_RESOLUTION = timedelta(minutes=5)


@functools.cache
def _compiled(model: Any, field: str, owner: str) -> CompiledGet[Any]:
    """Compiled reads of a key or token with its owner (one joined statement) for
    authentication, which runs on every API request and agent call: the ORM's join of key
    and owner cost 2 ms of CPU per request (mostly compiling it)."""
    return CompiledGet(model, field, related=(owner,))


def mark_used(row: ApiKey | UserToken) -> None:
    """Record that a key or token was just used (coarsely: see LAST_USED_RESOLUTION) if the
    database takes it at once: a read must not wait for another writer (a later one will)."""
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_RESOLUTION:
        model = type(row)
        if write_unless_busy(
            model, lambda: model.objects.filter(pk=row.pk).update(last_used_at=now)
        ):
            row.last_used_at = now


class ApiKey(models.Model):
    """An agent's API key: the readable prefix and a keyed hash, never the key itself."""

    agent = models.ForeignKey(AgentProfile, on_delete=models.CASCADE, related_name="api_keys")
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"a2a_{self.prefix}_… ({self.agent_id})"

    @classmethod
    def authenticate(cls, raw: str) -> AgentProfile | None:
        """The agent owning the presented key, if the key is valid and not revoked."""
        prefix = keys.parse_prefix(raw, "a2a")
        if prefix is None:
            return None
        key = _compiled(cls, "prefix", "agent").get(prefix)
        if key is None or key.revoked_at is not None or not keys.matches(raw, key.digest):
            return None
        mark_used(key)
        return key.agent


class UserToken(models.Model):
    """A platform user's API token (``manage.py apitoken``), stored like agent keys."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"usr_{self.prefix}_… ({self.user})"

    @classmethod
    def issue(cls, user: Any) -> str:
        """Create a token for ``user`` and return it (shown once)."""
        return keys.create_row(cls, "usr", user=user)

    @classmethod
    def authenticate(cls, raw: str) -> Any | None:
        """The active user owning the presented token, if valid and not revoked."""
        prefix = keys.parse_prefix(raw, "usr")
        if prefix is None:
            return None
        token = _compiled(cls, "prefix", "user").get(prefix)
        if token is None or token.revoked_at is not None or not keys.matches(raw, token.digest):
            return None
        user = token.user
        if not user.is_active:
            return None
        mark_used(token)
        return user


class RateWindow(models.Model):
    """Requests one client made in one window of a rate limit (the registration throttle).

    Kept in the database so that every daphne process counts against the same limit; see
    :mod:`agent_profiles.ratelimit`. ``client`` is a hash of the client's address, so
    whatever a header carried is stored in a fixed size.
    """

    scope = models.CharField(max_length=50)
    client = models.CharField(max_length=64)
    slot = models.BigIntegerField(help_text="the window's start, in windows since the epoch")
    started_at = models.DateTimeField(help_text="when the window began")
    hits = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "client", "slot"], name="rate_window_once")
        ]
        # Dropping a scope's old windows reads by slot, across clients.
        indexes = [models.Index(fields=["scope", "slot"], name="rate_window_age")]

    def __str__(self) -> str:
        return f"{self.scope} {self.client[:8]}… slot {self.slot}: {self.hits}"
