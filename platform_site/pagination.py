"""Limit/offset paging that refuses what it cannot use.

DRF's ``LimitOffsetPagination`` silently reads ``offset=null`` or ``limit=-3`` as its
defaults, and passes an offset past PostgreSQL's bigint to the database (a 500). Here a
``limit`` or ``offset`` that is not a whole number in range is a 400 naming it, and the
OpenAPI schema says the bounds.
"""

from __future__ import annotations

from typing import Any

from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

from platform_site.errors import ValidationFailed

MAX_LIMIT = 500
MAX_OFFSET = 1_000_000_000


def _whole_number(request: Request, name: str, low: int, high: int) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit() or not low <= int(raw) <= high:
        raise ValidationFailed(
            f"'{name}' must be a whole number from {low} to {high}; got {raw[:40]!r}.",
            {"field": name, "minimum": low, "maximum": high},
        )
    return int(raw)


class StrictLimitOffsetPagination(LimitOffsetPagination):
    """``?limit=`` (1..500) and ``?offset=`` (0..10⁹); anything else is a 400."""

    max_limit = MAX_LIMIT

    def get_limit(self, request: Request) -> int | None:
        limit = _whole_number(request, self.limit_query_param, 1, MAX_LIMIT)
        return self.default_limit if limit is None else limit

    def get_offset(self, request: Request) -> int:
        return _whole_number(request, self.offset_query_param, 0, MAX_OFFSET) or 0

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        bounds = {
            self.limit_query_param: {"minimum": 1, "maximum": MAX_LIMIT},
            self.offset_query_param: {"minimum": 0, "maximum": MAX_OFFSET},
        }
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
        return parameters
