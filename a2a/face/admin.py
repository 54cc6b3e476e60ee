"""Admin for the A2A face's push notifications: which webhooks a task has, whether they
work, and every delivery with its attempts. Secrets (token, credentials) are not shown."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from a2a.push_models import PushDelivery, PushNotificationConfig

# A webhook enabled again by a person starts afresh: no failures counted towards being
# disabled again (``A2A_PUSH_DISABLE_AFTER``), no reason left from the last time.
ENABLED_AGAIN: dict[str, Any] = {"enabled": True, "consecutive_failures": 0, "disabled_reason": ""}


class PushDeliveryInline(admin.TabularInline):
    model = PushDelivery
    extra = 0
    can_delete = False
    fields = (
        "seq",
        "task_state",
        "status",
        "attempts",
        "last_status",
        "last_error",
        "delivered_at",
    )
    readonly_fields = fields
    ordering = ("-seq",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(PushNotificationConfig)
class PushNotificationConfigAdmin(admin.ModelAdmin):
    list_display = (
        "config_id",
        "task_column",
        "url",
        "enabled",
        "consecutive_failures",
        "created_at",
    )
    list_filter = ("enabled",)
    search_fields = ("config_id", "url", "task__id")
    fields = (
        "task",
        "config_id",
        "url",
        "auth_scheme",
        "enabled",
        "consecutive_failures",
        "disabled_reason",
        "created_at",
    )
    readonly_fields = (
        "task",
        "config_id",
        "url",
        "auth_scheme",
        "consecutive_failures",
        "created_at",
    )
    inlines = [PushDeliveryInline]
    actions = ["enable_again"]

    @admin.display(description="task", ordering="task")
    def task_column(self, config: PushNotificationConfig) -> str:
        """The task's id, on the row itself: showing the task (its ``str``) read each
        row's whole task, artifacts and all (megabytes each), for an id and a state."""
        return str(config.task_id)

    # It changes the configs: offered only to users who may change them.
    @admin.action(description="Enable again (reset the failure count)", permissions=["change"])
    def enable_again(
        self, request: HttpRequest, queryset: QuerySet[PushNotificationConfig]
    ) -> None:
        count = queryset.update(**ENABLED_AGAIN)
        self.message_user(request, f"{count} webhook(s) enabled.", messages.SUCCESS)

    def save_model(
        self, request: HttpRequest, obj: PushNotificationConfig, form: ModelForm, change: bool
    ) -> None:
        """Ticking "enabled" on a disabled webhook's page enables it as the list's action
        does: else its old failure count stood, and one failure disabled it again."""
        if change and "enabled" in form.changed_data and obj.enabled:
            for name, value in ENABLED_AGAIN.items():
                setattr(obj, name, value)
        super().save_model(request, obj, form, change)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # clients create configs through the A2A face
