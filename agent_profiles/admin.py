"""Operator admin for the registry: skills (schema-checked), agents (approve, disable,
rotate key) and read-only views of keys and tokens (never their digests)."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.auth import get_permission_codename
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html

from agent_profiles import access, admin_calls, ratelimit
from agent_profiles import console as agent_console
from agent_profiles.admin_delete import protected_lines
from agent_profiles.cards import refresh_card
from agent_profiles.models import (
    AgentProfile,
    AgentStatus,
    ApiKey,
    RateWindow,
    Skill,
    UserToken,
)
from agent_profiles.urlguard import check_url
from platform_site import console
from platform_site.admin_forms import TextRuleJSONField
from platform_site.errors import PlatformError
from platform_site.text import find_bad_text, loads_bounded


class PrettyJSONWidget(forms.Textarea):
    """A textarea showing JSON indented, so schemas are readable and editable."""

    def __init__(self, rows: int = 14) -> None:
        super().__init__(attrs={"rows": rows, "cols": 100, "style": "font-family: monospace"})

    def format_value(self, value: Any) -> str | None:
        # Bounded, and only text the rule allows: what a person typed and the form
        # refused (nested 100,000 deep, a "\\ud800") is shown as typed, never re-parsed.
        if not isinstance(value, str):
            return value
        try:
            parsed = loads_bounded(value)
        except ValueError:
            return value
        if find_bad_text(parsed) is not None:
            return value
        return json.dumps(parsed, indent=2, ensure_ascii=False)


# Typed in as JSON; parsed and checked like an API body (platform_site.admin_forms).
SKILL_JSON_FIELDS = (
    "tags",
    "examples",
    "input_modes",
    "output_modes",
    "input_schema",
    "output_schema",
)


class SkillForm(forms.ModelForm):
    """Skill editor: ``Skill.clean`` checks both schemas and names the bad spot, which the
    form shows under the field. JSON fields hold to the REST API's text and depth rule."""

    class Meta:
        model = Skill
        fields = [
            "id",
            "name",
            "description",
            "version",
            "is_active",
            "domain",
            "subdomain",
            "tags",
            "examples",
            "input_modes",
            "output_modes",
            "input_schema",
            "output_schema",
            "max_attempts",
        ]
        field_classes = dict.fromkeys(SKILL_JSON_FIELDS, TextRuleJSONField)
        widgets = {
            "input_schema": PrettyJSONWidget(),
            "output_schema": PrettyJSONWidget(),
            "tags": PrettyJSONWidget(rows=5),
            "examples": PrettyJSONWidget(rows=6),
            "input_modes": PrettyJSONWidget(rows=4),
            "output_modes": PrettyJSONWidget(rows=4),
        }


@admin.register(Skill)
class SkillAdmin(admin.ModelAdmin):
    form = SkillForm
    list_display = ("id", "name", "domain", "subdomain", "version", "is_active", "agent_count")
    list_filter = ("is_active", "domain")
    search_fields = ("id", "name", "description", "domain", "subdomain")
    readonly_fields = ("created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("id", "name", "description", "version", "is_active")}),
        ("Classification", {"fields": ("domain", "subdomain", "tags", "examples")}),
        ("Modes", {"fields": ("input_modes", "output_modes")}),
        ("Schemas (JSON Schema; checked on save)", {"fields": ("input_schema", "output_schema")}),
        ("Dispatch", {"fields": ("max_attempts",)}),
        ("Timestamps", {"fields": ("created_at", "updated_at")}),
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Skill | None = None) -> Any:
        # The id is the primary key that tasks and agents refer to: fixed once created.
        return (*self.readonly_fields, "id") if obj else self.readonly_fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Skill]:
        # Counted in the list's one query: a COUNT per row made a page of 100 skills
        # cost 100 queries more.
        return super().get_queryset(request).annotate(agents_n=Count("agents", distinct=True))

    @admin.display(description="agents", ordering="agents_n")
    def agent_count(self, skill: Skill) -> int:
        return skill.agents_n  # type: ignore[attr-defined]


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    fields = ("prefix", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ("-created_at",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class AgentProfileForm(admin_calls.CallSettingsForm):
    """The agent editor applies the same outbound URL guard as registration."""

    a2a_endpoint = forms.URLField(
        required=False,
        max_length=500,
        assume_scheme="https",
        help_text="Base URL of the agent's A2A HTTP+JSON interface; empty for WebSocket only.",
    )

    class Meta:
        model = AgentProfile
        fields = [
            "id",
            "name",
            "description",
            "status",
            "skills",
            "a2a_endpoint",
            "domain",
            "subdomain",
            "version",
            "metadata",
            *admin_calls.CALL_FIELDS,
        ]
        field_classes = {"metadata": TextRuleJSONField}
        widgets = {"metadata": PrettyJSONWidget(rows=6)}

    def clean_a2a_endpoint(self) -> str:
        return self._checked_url("a2a_endpoint")

    def clean_agent_card_url(self) -> str:
        return self._checked_url("agent_card_url")

    def _checked_url(self, field: str) -> str:
        url: str = self.cleaned_data.get(field) or ""
        if url:
            try:
                check_url(url)
            except PlatformError as exc:
                raise forms.ValidationError(exc.message) from None
        return url


@admin.register(AgentProfile)
class AgentProfileAdmin(admin.ModelAdmin):
    form = AgentProfileForm
    change_form_template = "admin/agent_profiles/agentprofile/change_form.html"
    list_display = (
        "id",
        "name",
        "status_badge",
        "skill_list",
        admin_calls.health,
        "last_seen_at",
        "key_prefix_col",
    )
    list_filter = ("status", "health_status", "skills", "domain")
    search_fields = ("id", "name", "description", "a2a_endpoint")
    filter_horizontal = ("skills",)
    readonly_fields = (
        "last_seen_at",
        "created_at",
        "updated_at",
        "key_prefix_col",
    )
    inlines = [ApiKeyInline]
    actions = ["approve", "disable", "rotate_key", admin_calls.refresh_cards]

    def save_model(self, request: HttpRequest, obj: AgentProfile, form: Any, change: bool) -> None:
        moved = change and admin_calls.location_changed(form)
        if moved:
            admin_calls.forget_card(obj)
        super().save_model(request, obj, form, change)
        if (moved or not change) and (obj.a2a_endpoint or obj.agent_card_url):
            refresh_card(obj, strict=False)  # a problem shows under "agent card"

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        # An agent with tasks cannot be deleted: say so by counts (Django's collector
        # read every task whole to list it: admin_delete).
        if lines := protected_lines(objs):
            return [], {}, set(), lines
        return super().get_deleted_objects(objs, request)

    def get_queryset(self, request: HttpRequest) -> QuerySet[AgentProfile]:
        return super().get_queryset(request).prefetch_related("skills", "api_keys")

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The agent's page is titled after the agent, not "Change agent profile"."""
        context = {"title": f"Agent {unquote(object_id)}", **(extra_context or {})}
        return super().change_view(request, object_id, form_url, context)

    @admin.display(description="status", ordering="status")
    def status_badge(self, agent: AgentProfile) -> str:
        return format_html(
            '<span class="badge {}">{}</span>', agent.status, agent.get_status_display()
        )

    def get_urls(self) -> list[URLPattern]:
        rotate = path(
            "<path:object_id>/rotate-key/",
            self.admin_site.admin_view(self.rotate_key_view),
            name="agent_profiles_agentprofile_rotate",
        )
        return [rotate, *super().get_urls()]

    def rotate_key_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The agent page's "Rotate the key" button: the new key is shown once."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        agent = get_object_or_404(AgentProfile, pk=object_id)
        if not self.has_change_permission(request, agent):
            return HttpResponse(status=403)
        self.rotate_key(request, AgentProfile.objects.filter(pk=agent.pk))
        return HttpResponseRedirect(
            reverse("admin:agent_profiles_agentprofile_change", args=[agent.pk])
        )

    @admin.display(description="skills")
    def skill_list(self, agent: AgentProfile) -> str:
        return ", ".join(s.pk for s in agent.skills.all()) or "—"

    @admin.display(description="key prefix")
    def key_prefix_col(self, agent: AgentProfile) -> str:
        live = [k for k in agent.api_keys.all() if k.revoked_at is None]
        return max(live, key=lambda k: k.created_at).prefix if live else "—"

    # Every action changes agents: offered only to users who may change them (a view-only
    # staff user sees none), as the agent page's "Rotate the key" button checks too.
    @admin.action(description="Approve (activate) selected agents", permissions=["change"])
    def approve(self, request: HttpRequest, queryset: QuerySet[AgentProfile]) -> None:
        count = access.set_status(queryset, AgentStatus.ACTIVE)
        self.message_user(request, f"{count} agent(s) approved.", messages.SUCCESS)

    @admin.action(description="Disable selected agents", permissions=["change"])
    def disable(self, request: HttpRequest, queryset: QuerySet[AgentProfile]) -> None:
        # Through the service, not queryset.update alone: open sockets close at once.
        count = access.disable(queryset)
        self.message_user(request, f"{count} agent(s) disabled.", messages.SUCCESS)

    @admin.action(
        description="Rotate API key of selected agents (old keys stop working)",
        permissions=["change"],
    )
    def rotate_key(self, request: HttpRequest, queryset: QuerySet[AgentProfile]) -> None:
        for agent in queryset:
            key = access.rotate_key(agent)  # also closes the agent's open sockets
            # Shown once, here; only its hash is stored.
            self.message_user(
                request,
                f"New API key for {agent.pk} (copy it now, it is not shown again): {key}",
                messages.WARNING,
            )


console.add_agent_panel("registry", agent_console.agent_panel, order=10)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Keys and tokens are issued by commands and actions, never typed in; only the
    readable prefix is shown, never the digest. They can be revoked, by users holding the
    model's change permission."""

    actions = ["revoke"]

    @admin.action(description="Revoke selected (they stop working at once)", permissions=["revoke"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"{count} revoked.", messages.SUCCESS)

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        """Whether the user may revoke: the model's change permission. Not
        ``has_change_permission``, which is always False here so no row has a Save button;
        without a check at all, a view-only staff user could revoke every key."""
        codename = get_permission_codename("change", self.opts)
        return request.user.has_perm(f"{self.opts.app_label}.{codename}")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ApiKey)
class ApiKeyAdmin(ReadOnlyAdmin):
    @admin.action(description="Revoke selected (they stop working at once)", permissions=["revoke"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        count = access.revoke_keys(queryset)  # also closes the agents' open sockets
        self.message_user(request, f"{count} revoked.", messages.SUCCESS)

    list_display = ("prefix", "agent", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("prefix", "agent__id")
    fields = ("prefix", "agent", "created_at", "last_used_at", "revoked_at")


@admin.register(UserToken)
class UserTokenAdmin(ReadOnlyAdmin):
    list_display = ("prefix", "user", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("prefix", "user__username")
    fields = ("prefix", "user", "created_at", "last_used_at", "revoked_at")


@admin.register(RateWindow)
class RateWindowAdmin(admin.ModelAdmin):
    """The registration throttle's counts (:mod:`agent_profiles.ratelimit`). Rows hold a
    hash of each address, so the search takes an address and finds its rows; deleting
    them lets that address register again at once."""

    list_display = ("scope", "client_hash", "started_at", "hits")
    list_filter = ("scope",)
    search_fields = ("client",)  # searched by address: see get_search_results
    search_help_text = "A client address, e.g. 203.0.113.7 (rows store its hash)."
    ordering = ("-started_at",)
    fields = ("scope", "client", "started_at", "hits")

    @admin.display(description="client (hash)")
    def client_hash(self, row: RateWindow) -> str:
        return f"{row.client[:12]}…"

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(client=ratelimit.client_key(term)), False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
