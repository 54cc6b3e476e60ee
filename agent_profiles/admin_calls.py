"""Admin pieces for how the platform calls an agent: the call settings and the write-only
credential field of the editor, the health column of the list, and the "refresh card"
action. (The agent page's read-outs of card, security and health are the registry's
console panel, ``agent_profiles.console``.)
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from agent_profiles.cards import refresh_card
from agent_profiles.credentials import InvalidCredentials, set_credentials, validate_credentials
from agent_profiles.health import health_of, listing_again, polling_again
from agent_profiles.models import AgentProfile
from platform_site.env import FLOAT_MAX
from platform_site.errors import ValidationFailed
from platform_site.text import JSONTooDeep, loads_bounded

CALL_FIELDS = [
    "agent_card_url",
    "protocol_binding",
    "protocol_version",
    "target",
    "timeout",
    "poll_interval",
    "offline_wait",
]
BINDING_CHOICES = [
    ("", "— from the card (else HTTP+JSON) —"),
    ("HTTP+JSON", "HTTP+JSON"),
    ("JSONRPC", "JSONRPC"),
]
VERSION_CHOICES = [("", "— from the card (else 1.0) —"), ("1.0", "1.0"), ("0.3", "0.3")]
AUTH_HELP = (
    'Write-only: never shown again. One of {"type": "bearer", "token": "…"}, '
    '{"type": "apiKey", "in": "header", "name": "X-Api-Key", "value": "…"}, '
    '{"type": "oauth2", "tokenUrl": "https://…", "clientId": "…", "clientSecret": "…", '
    '"scopes": ["…"]}. Leave empty to keep the current credential.'
)


class WriteOnlyTextarea(forms.Textarea):
    """A textarea that never renders a value (not even after a form error)."""

    def format_value(self, value: Any) -> str:
        return ""


class CallSettingsForm(forms.ModelForm):
    """The credential (write-only) and "clear" fields of the agent editor."""

    agent_card_url = forms.URLField(
        required=False,
        max_length=500,
        assume_scheme="https",
        help_text="Where the agent's card is; empty: {endpoint}/.well-known/agent-card.json, "
        "then the endpoint's origin.",
    )
    offline_wait = forms.FloatField(
        label="Offline wait (seconds)",
        required=False,
        min_value=0,
        max_value=FLOAT_MAX,
        help_text="How long a task may wait offline for this agent while it has never "
        "connected to the gateway; empty: no longer than the task's timeout (dispatch never "
        "waits silently). Set it for agents known to connect late.",
    )
    protocol_binding = forms.ChoiceField(choices=BINDING_CHOICES, required=False)
    protocol_version = forms.ChoiceField(choices=VERSION_CHOICES, required=False)
    new_auth = forms.CharField(
        label="New credential",
        required=False,
        strip=False,
        widget=WriteOnlyTextarea(
            attrs={"rows": 3, "cols": 100, "autocomplete": "off", "spellcheck": "false"}
        ),
        help_text=AUTH_HELP,
    )
    clear_auth = forms.BooleanField(label="Clear the stored credential", required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The REST API's bounds of timeoutMs and pollIntervalMs, in seconds: the editor took
        # any number, and a timeout of 1e12 (an operator's "never") put every new task's
        # deadline past the year 9999.
        for name, most in (("timeout", 7 * 24 * 3600.0), ("poll_interval", 3600.0)):
            field = self.fields.get(name)
            if isinstance(field, forms.FloatField):
                field.min_value, field.max_value = 0.001, most
                field.validators += [MinValueValidator(0.001), MaxValueValidator(most)]
                field.widget.attrs.update(min=0.001, max=most)

    def clean_new_auth(self) -> dict[str, Any] | None:
        raw: str = self.cleaned_data.get("new_auth") or ""
        if not raw.strip():
            return None
        try:
            document = loads_bounded(raw)
        except (ValueError, JSONTooDeep):
            raise forms.ValidationError("The credential must be a JSON object.") from None
        try:
            return validate_credentials(document)
        except InvalidCredentials as exc:
            raise forms.ValidationError(exc.message) from None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get("new_auth") and cleaned.get("clear_auth"):
            raise forms.ValidationError("Either set a new credential or clear it, not both.")
        return cleaned

    def save(self, commit: bool = True) -> Any:
        if self.cleaned_data.get("new_auth"):
            set_credentials(self.instance, self.cleaned_data["new_auth"])
        elif self.cleaned_data.get("clear_auth"):
            set_credentials(self.instance, None)
        return super().save(commit)


@admin.display(description="health", ordering="health_status")
def health(agent: AgentProfile) -> str:
    verdict = health_of(agent)
    colour = {"healthy": "#2e7d32", "unhealthy": "#c62828"}.get(verdict.status, "#757575")
    latency = f" {agent.health_latency_ms} ms" if agent.health_latency_ms is not None else ""
    return format_html(
        '<b style="color:{}">{}</b>{}<br><small>{}</small>',
        colour,
        verdict.status,
        latency,
        verdict.error,
    )


# It rewrites the agents' card and interface: for users who may change agents.
@admin.action(description="Refresh the agent card of selected agents", permissions=["change"])
def refresh_cards(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[AgentProfile]
) -> None:
    for agent in queryset:
        if not (agent.agent_card_url or agent.a2a_endpoint):
            modeladmin.message_user(request, f"{agent.pk}: no endpoint, no card.", messages.INFO)
            continue
        try:
            read = refresh_card(agent, strict=True)
        except ValidationFailed as exc:
            modeladmin.message_user(
                request, f"{agent.pk}: card refused: {exc.message}", messages.ERROR
            )
            continue
        if read is None:
            modeladmin.message_user(
                request, f"{agent.pk}: card {agent.card_error}", messages.WARNING
            )
        else:
            listing_again(agent)  # an operator's refresh: its ListTasks is tried again
            polling_again(agent)  # and its GetTask
            modeladmin.message_user(
                request,
                f"{agent.pk}: card read; calls go to {read.chosen.describe()}",
                messages.SUCCESS,
            )


def location_changed(form: forms.ModelForm) -> bool:
    return bool({"a2a_endpoint", "agent_card_url"} & set(form.changed_data))


def forget_card(agent: AgentProfile) -> None:
    """The card described the old location: read the new one before the next call."""
    agent.interface = {}
    agent.card_read_at = None
    agent.card_retry_after = None
    agent.card_error = ""
