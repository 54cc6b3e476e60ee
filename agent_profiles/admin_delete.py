"""What keeps agents from being deleted, counted, not read (the admin's Delete).

Rows that point at an agent with ``on_delete=PROTECT`` (its tasks) forbid deleting it.
Django's confirmation page collects each such row whole to list it: for an agent with
thousands of tasks it read every task's input, output and artifacts (megabytes each) and
listed one link per task, only to say no. Counted per agent in one query per relation,
each line links to the agent's rows instead.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import PROTECT, Count, ForeignObjectRel
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from agent_profiles.models import AgentProfile


def _protecting() -> list[ForeignObjectRel]:
    return [r for r in AgentProfile._meta.related_objects if r.on_delete is PROTECT]


def protected_lines(agents: Iterable[AgentProfile]) -> list[SafeString | str]:
    """One line per agent and relation holding protected rows: how many, and a link to
    them in the admin when it lists them; none when nothing keeps them."""
    ids = [agent.pk for agent in agents]
    lines: list[SafeString | str] = []
    for rel in _protecting():
        model, field = rel.related_model, rel.field.name
        counts = (
            model._default_manager.filter(**{f"{field}__in": ids})
            .values_list(field)
            .annotate(n=Count("pk"))
            .order_by(field)
        )
        try:
            url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        except NoReverseMatch:
            url = None  # the admin does not list them
        for agent_id, n in counts:
            text = f"agent {agent_id}: {n} {model._meta.verbose_name_plural}"
            lines.append(
                text
                if url is None
                else format_html('<a href="{}?{}__id__exact={}">{}</a>', url, field, agent_id, text)
            )
    return lines
