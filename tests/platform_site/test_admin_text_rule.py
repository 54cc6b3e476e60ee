"""The text rule in the admin: a NUL in an ``/admin/`` path, query or form field is a plain
400 naming it (PostgreSQL refused it with a DataError, a 500, once a filter, an object URL
or a selected id reached a query), and :mod:`platform_site.admin_forms`' JSON field parses
like an API body. ``/api/`` keeps its JSON error shape (``tests/hardening``)."""

from __future__ import annotations

from typing import Any

import pytest
from django import forms

from agent_profiles.models import AgentProfile, AgentStatus
from platform_site.admin_forms import TextRuleJSONField

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("/admin/agent_profiles/agentprofile/a%00b/change/", "The path contains a NUL"),
        ("/admin/agent_profiles/agentprofile/a%00b/rotate-key/", "The path contains a NUL"),
        ("/admin/agent_profiles/skill/a%00b/change/", "The path contains a NUL"),
        ("/admin/a2a/task/a%00b/change/", "The path contains a NUL"),
        ("/admin/a2a/task/?state__exact=%00", "Query parameter 'state__exact' contains a NUL"),
        ("/admin/agent_profiles/agentprofile/?q=x%00", "Query parameter 'q' contains a NUL"),
    ],
)
def test_a_nul_in_an_admin_url_is_a_plain_400_naming_it(
    admin_client: Any, url: str, said: str
) -> None:
    response = admin_client.get(url)
    assert response.status_code == 400
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert said in response.content.decode()


def test_a_nul_in_an_admin_form_field_is_a_plain_400(admin_client: Any, make_agent: Any) -> None:
    """A selected id goes to ``pk__in`` unchecked (PostgreSQL: DataError); the one rule
    covers every field of an admin form post, before any view reads it."""
    agent = make_agent()
    response = admin_client.post(
        "/admin/agent_profiles/agentprofile/",
        {"action": "disable", "_selected_action": [agent.pk, "a\x00b"]},
    )
    assert response.status_code == 400
    assert "Form field '_selected_action' contains a NUL" in response.content.decode()
    agent.refresh_from_db()
    assert agent.status == AgentStatus.ACTIVE
    assert AgentProfile.objects.count() == 1


class DataForm(forms.Form):
    data = TextRuleJSONField(required=False)


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ('{"a": "\\u0000"}', "a contains a NUL character, which is not allowed."),
        ('["ok", {"b": "\\ud83d"}]', "[1].b contains a lone surrogate, which is not allowed."),
        ("[" * 65 + "]" * 65, "JSON nested deeper than 64 levels."),
        ('{"n": 1e400}', "Enter a valid JSON."),
    ],
)
def test_the_json_field_refuses_what_the_api_parser_refuses(raw: str, said: str) -> None:
    form = DataForm({"data": raw})
    assert form.errors["data"] == [said]


def test_the_json_field_takes_what_the_api_parser_takes() -> None:
    deepest = "[" * 64 + "]" * 64
    assert DataForm({"data": deepest}).is_valid()
    form = DataForm({"data": '{"a": ["é", 1.5, null, "😀"]}'})
    assert form.is_valid()
    assert form.cleaned_data["data"] == {"a": ["é", 1.5, None, "😀"]}
