"""The console's pages of what the platform keeps per agent while it follows its tasks:
listing cursors (:mod:`a2a.agent_listing`) and pauses (:mod:`a2a.pause_models`); both
read-only. Imported by :mod:`a2a.admin`, which registers them with the admin site."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from a2a.listing_models import AgentListing
from a2a.pause_models import AgentPause


@admin.register(AgentListing)
class AgentListingAdmin(admin.ModelAdmin):
    """Each agent's listing cursor (:mod:`a2a.agent_listing`), to see which agents are
    listed, from which point (the agent's clock) and how often a poll found what a listing
    left out. Deleting a row makes the next listing place its cursor again."""

    list_display = ("agent", "listing", "since", "listed_at", "next_at", "misses")
    ordering = ("agent_id",)
    fields = ("agent", "since", "listed_at", "next_at", "lease_until", "followed_at", "misses")

    @admin.display(boolean=True, description="listing")
    def listing(self, row: AgentListing) -> bool:
        return row.next_at is not None

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(AgentPause)
class AgentPauseAdmin(admin.ModelAdmin):
    """The pauses agents asked for (``Retry-After`` on a poll's or a send's ``429``/``503``):
    no poll or send of the agent's tasks before ``until``. Deleting a row lifts the pause;
    its tasks' polls and sends stay where the pause moved them."""

    list_display = ("agent", "until")
    ordering = ("-until",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
