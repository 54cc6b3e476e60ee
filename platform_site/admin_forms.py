"""Form fields holding what a person types into the admin to the platform's text rule.

The REST API refuses a NUL, a lone surrogate and JSON nested deeper than
:data:`~platform_site.text.MAX_JSON_DEPTH` with a 400 (:mod:`platform_site.parsers`).
Django's ``forms.JSONField`` parses with plain ``json.loads``, so the admin let the same
input through: ``{"market": "E\\u0000U"}`` reached PostgreSQL (a ``DataError``, a 500) or,
on SQLite, the agent; a value nested 100,000 levels raised ``RecursionError`` (a 500).
These fields apply the one rule (:mod:`platform_site.text`) and answer with an error under
the field instead.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import ProhibitNullCharactersValidator
from django.forms.fields import InvalidJSONInput, JSONString

from platform_site.text import JSONTooDeep, find_bad_text, loads_bounded


def refuse_bad_text(value: Any) -> None:
    """Validator: a NUL or a lone surrogate anywhere in ``value`` (keys too) is an error
    naming where it is, e.g. ``market contains a NUL character, which is not allowed.``"""
    bad = find_bad_text(value)
    if bad is not None:
        raise ValidationError(str(bad), code="invalid_text")


def _ruled(validators: list[Any]) -> list[Any]:
    # Django's own NUL validator would say the same thing a second time (text), or miss a
    # NUL inside parsed JSON (it looks at the value's repr): the text rule replaces it.
    kept = [v for v in validators if not isinstance(v, ProhibitNullCharactersValidator)]
    return [*kept, refuse_bad_text]


class TextRuleCharField(forms.CharField):
    """A ``CharField`` refusing NUL and lone surrogates as the REST API does."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = _ruled(self.validators)


class TextRuleJSONField(forms.JSONField):
    """A ``JSONField`` parsed like an API body: bounded depth; no NaN, Infinity or numbers
    beyond a float's range; no NUL or lone surrogate. Usable as a model form's field class
    (``Meta.field_classes``) for a model ``JSONField``."""

    default_error_messages = {"too_deep": "JSON nested deeper than %(limit)s levels."}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = _ruled(self.validators)

    def to_python(self, value: Any) -> Any:
        if self.disabled or value in self.empty_values:
            return super().to_python(value)
        if not isinstance(value, str) or isinstance(value, JSONString):
            return value  # already parsed (initial data, or a form built in code)
        try:
            converted = loads_bounded(value)
        except JSONTooDeep as exc:
            params = {"limit": exc.limit}
            raise ValidationError(
                self.error_messages["too_deep"], "json_too_deep", params
            ) from None
        except ValueError:  # not JSON, NaN / Infinity, 1e400
            params = {"value": value}
            raise ValidationError(self.error_messages["invalid"], "invalid", params) from None
        return JSONString(converted) if isinstance(converted, str) else converted

    def bound_data(self, data: Any, initial: Any) -> Any:
        """What the form shows again after an error: the text as typed.

        Django's version re-parses it with ``json.loads`` (the recursion again) and would
        render a parsed ``"\\ud800"`` as a lone surrogate, which cannot be encoded into the
        page. ``InvalidJSONInput`` is Django's marker for "show this text unchanged".
        """
        if self.disabled or not isinstance(data, str):
            return super().bound_data(data, initial)
        return InvalidJSONInput(data)
