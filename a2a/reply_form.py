"""The admin's form for a person's answer to an agent's question (the task page's reply).

It carries the question it answers (:func:`asked_token`), so a form drawn for an earlier
question is refused rather than sent as the answer to the agent's next one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.core.validators import MaxLengthValidator

from a2a.models import Task
from platform_site.admin_forms import TextRuleCharField, TextRuleJSONField

# The longest text a person's answer may carry, on every way in: this form and
# ``POST /api/tasks/{id}/reply`` (a2a.api.serializers). The form once had no cap and sent
# the agent what the API refuses.
REPLY_TEXT_MAX_CHARS = 100_000


class OptionalJSONField(TextRuleJSONField):
    """A JSON field that shows an empty box, not ``null``, when there is no value."""

    def prepare_value(self, value: Any) -> Any:
        return "" if value is None else super().prepare_value(value)


class ReplyForm(forms.Form):
    """The answer to an agent's question: text, JSON data, or both. Both fields hold to the
    text rule of ``POST /api/tasks/{id}/reply`` (:mod:`platform_site.admin_forms`).

    ``asked`` says which question it answers (when it was asked: :func:`asked_token`), so
    a form left open while the task was answered elsewhere and the agent asked again is
    not sent as the answer to the new question. A post without it (a script) is not
    checked, as the REST API's reply is not.
    """

    asked = forms.CharField(widget=forms.HiddenInput, required=False)

    text = TextRuleCharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 80}),
        required=False,
        # A validator, not max_length: that sets the box's maxlength, and a browser cuts
        # a longer paste short without a word; this answers with the error, text kept.
        validators=[MaxLengthValidator(REPLY_TEXT_MAX_CHARS)],
    )
    data = OptionalJSONField(
        required=False,
        help_text='Optional JSON object sent as a data part, e.g. {"market": "EU"}.',
        widget=forms.Textarea(attrs={"rows": 2, "cols": 80}),
    )

    def clean_asked(self) -> datetime | None:
        """The question's time as the form carries it (ISO 8601), None when absent."""
        value = self.cleaned_data.get("asked") or ""
        if not value:
            return None
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            raise forms.ValidationError(
                "The form does not say which question it answers: open the task again."
            ) from None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if not cleaned.get("text") and cleaned.get("data") in (None, ""):
            raise forms.ValidationError("Give text, data or both.")
        if cleaned.get("data") not in (None, "") and not isinstance(cleaned["data"], dict):
            raise forms.ValidationError("data must be a JSON object.")
        return cleaned


def asked_token(task: Task) -> str:
    """Which question a reply form answers: when the task came to wait for it (each new
    question, or the same one asked again after an answer, is a new transition)."""
    return task.state_changed_at.isoformat()


def reply_form(task: Task, data: Any = None) -> ReplyForm:
    """The reply form for the question ``task`` asks now (bound to ``data`` when given)."""
    return ReplyForm(data, initial={"asked": asked_token(task)})
