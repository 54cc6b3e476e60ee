"""The REST API's JSON parser, holding every body to the one text rule.

DRF's ``JSONParser`` recurses as deep as the body nests (a body nested 100,000 levels
raised ``RecursionError``, a 500) and lets NUL and lone surrogates through to PostgreSQL
(a ``DataError``, a 500). This parser refuses both up front with a 400 naming the field
(:mod:`platform_site.text`), and NaN / Infinity (not JSON), before any view or serializer
sees the body; and numbers beyond a float's range (``1e400``), which Python reads as
infinity. Bodies over
``MAX_BODY_BYTES`` are refused with 413 by Django's own check on ``request.body`` (DRF
reads JSON bodies through it), rendered by :mod:`platform_site.errors`.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding

from platform_site.errors import ValidationFailed
from platform_site.text import (
    MAX_JSON_DEPTH,
    BadText,
    find_bad_text,
    json_depth_exceeds,
    parse_json,
)


class InvalidText(ValidationFailed):
    """A value holding a NUL character or a lone surrogate."""

    code = "invalid_text"


class JSONTooDeepError(ValidationFailed):
    code = "json_too_deep"


def refuse_bad_text(value: Any, where: str = "") -> None:
    """Raise :class:`InvalidText` (400, naming the field) if ``value`` breaks the rule."""
    bad = find_bad_text(value, where)
    if bad is not None:
        raise text_error(bad)


def text_error(bad: BadText) -> InvalidText:
    return InvalidText(str(bad), {"field": bad.where or None, "problem": bad.what})


class BoundedJSONParser(JSONParser):
    """``JSONParser`` with a nesting limit and the NUL / lone-surrogate rule."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = get_encoding(parser_context or {})
        try:
            text = stream.read().decode(encoding)
        except UnicodeDecodeError as exc:
            raise ParseError(f"JSON parse error - the body is not {encoding}: {exc}") from None
        if json_depth_exceeds(text):
            raise JSONTooDeepError(
                f"JSON nested deeper than {MAX_JSON_DEPTH} levels is not accepted.",
                {"maxDepth": MAX_JSON_DEPTH},
            )
        try:
            # NaN, Infinity and 1e400 are refused (not JSON; PostgreSQL's jsonb refuses them).
            data = parse_json(text)
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        self.check_text(data)
        return data

    def check_text(self, data: Any) -> None:
        """The text rule over the parsed body (a subclass may leave parts to the view)."""
        refuse_bad_text(data)


class BatchJSONParser(BoundedJSONParser):
    """For ``{"tasks": [...]}`` bodies: each item's text is the view's to check, so one
    bad item is that item's error and the others still go ahead."""

    def check_text(self, data: Any) -> None:
        if isinstance(data, dict) and isinstance(data.get("tasks"), list):
            refuse_bad_text({k: v for k, v in data.items() if k != "tasks"})
            for key in data:
                refuse_bad_text(key)
        else:
            refuse_bad_text(data)
