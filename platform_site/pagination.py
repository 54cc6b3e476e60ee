"""Limit/offset paging that refuses what it cannot use.

DRF's ``LimitOffsetPagination`` silently reads ``offset=null`` or ``limit=-3`` as its
defaults, and passes an offset past PostgreSQL's bigint to the database (a 500). Here a
``limit`` or ``offset`` that is not a whole number in range is a 400 naming it, and the
OpenAPI schema says the bounds. :class:`NewestFirstPagination` adds keyset cursors for
lists that grow while clients page them.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet
from rest_framework.pagination import LimitOffsetPagination, remove_query_param, replace_query_param
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


# A keyset cursor: the row's created_at in microseconds since the epoch (exact: no float)
# and its UUID. Plain digits and hex, so it needs no escaping in a query string.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_MICROS = (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC) - EPOCH) // timedelta(
    microseconds=1
)
CURSOR_PATTERN = "^[0-9]{1,18}_[0-9a-f]{32}$"
_CURSOR = re.compile(CURSOR_PATTERN)


def encode_cursor(row: Any) -> str:
    """The cursor of ``row`` (a model instance with ``created_at`` and a UUID ``id``)."""
    return f"{(row.created_at - EPOCH) // timedelta(microseconds=1)}_{row.id.hex}"


def _cursor(request: Request, name: str) -> tuple[datetime, uuid.UUID] | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    # fullmatch: a pattern's $ also matches before a final newline (a 500 further on).
    match = _CURSOR.fullmatch(raw) if raw.isascii() else None
    if match is None or int(raw.partition("_")[0]) > MAX_MICROS:
        raise ValidationFailed(
            f"'{name}' must be a cursor from a 'next' or 'previous' link; got {raw[:80]!r}.",
            {"field": name},
        )
    micros, _, key = raw.partition("_")
    return EPOCH + timedelta(microseconds=int(micros)), uuid.UUID(hex=key)


class NewestFirstPagination(StrictLimitOffsetPagination):
    """Newest first by ``(created_at, id)``, with ``next`` and ``previous`` as keyset
    cursors.

    Offsets count from the newest row, so a row created while a client pages moves every
    later row one place down: the next offset shows one row again (and a deleted one
    makes it skip one). ``next`` is ``?before=<cursor of the page's last row>`` and
    ``previous`` ``?after=<cursor of its first row>``: a page starts where the last one
    ended whatever was created meanwhile. ``limit`` and ``offset`` are taken as before
    (``offset`` counts from the cursor when one is given); the answer keeps its shape
    (``count`` is every row matching the filters). For querysets of rows with a
    ``created_at`` and a UUID ``id``.
    """

    before_query_param = "before"
    after_query_param = "after"

    def paginate_queryset(
        self, queryset: QuerySet[Any], request: Request, view: Any = None
    ) -> list[Any] | None:
        self.request = request
        self.limit = self.get_limit(request)
        if self.limit is None:
            return None
        self.offset = self.get_offset(request)
        before = _cursor(request, self.before_query_param)
        after = _cursor(request, self.after_query_param)
        if before and after:
            raise ValidationFailed(
                "Give 'before' or 'after', not both.",
                {"field": self.after_query_param},
            )
        self.cursor_given = bool(before or after)
        self.count = self.get_count(queryset)
        window = slice(self.offset, self.offset + self.limit + 1)  # one more: is there a next?
        if after is not None:
            # Oldest first from the cursor, then turned round: the page just above it.
            created, key = after
            newer = queryset.filter(Q(created_at__gt=created) | Q(created_at=created, id__gt=key))
            rows = list(newer.order_by("created_at", "id")[window])
            self.more_newer, self.more_older = len(rows) > self.limit, True
            self.page = rows[: self.limit][::-1]
            return self.page
        if before is not None:
            created, key = before
            queryset = queryset.filter(
                Q(created_at__lt=created) | Q(created_at=created, id__lt=key)
            )
        rows = [] if self.count == 0 else list(queryset.order_by("-created_at", "-id")[window])
        # As DRF's CursorPagination: rows above a cursor or an offset are taken to exist.
        self.more_newer = self.cursor_given or self.offset > 0
        self.more_older = len(rows) > self.limit
        self.page = rows[: self.limit]
        return self.page

    def get_next_link(self) -> str | None:
        if not self.more_older or not self.page:
            return None
        return self._link(self.before_query_param, self.page[-1])

    def get_previous_link(self) -> str | None:
        if not self.more_newer:
            return None
        if self.page:
            return self._link(self.after_query_param, self.page[0])
        # An offset past the end: the offset link as DRF gives it (nothing to key on).
        return None if self.cursor_given else super().get_previous_link()

    def _link(self, name: str, row: Any) -> str:
        url = self.request.build_absolute_uri()
        url = replace_query_param(url, self.limit_query_param, self.limit)
        for other in (self.offset_query_param, self.before_query_param, self.after_query_param):
            url = remove_query_param(url, other)
        return replace_query_param(url, name, encode_cursor(row))

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        response = super().get_paginated_response_schema(schema)
        links = response["properties"]
        cursor = "1796613600123456_0b7c3e1c9a4f4d1e8f3a2b5c6d7e8f90"
        links["next"]["example"] = f"http://platform.example/api/tasks?before={cursor}&limit=50"
        links["previous"]["example"] = f"http://platform.example/api/tasks?after={cursor}&limit=50"
        links["next"]["description"] = "The page after this one (keyset cursor `before`)."
        links["previous"]["description"] = "The page before this one (keyset cursor `after`)."
        return response

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for name, description in (
            (self.before_query_param, "Rows older than this cursor: the `next` link's."),
            (self.after_query_param, "Rows newer than this cursor: the `previous` link's."),
        ):
            parameters.append(
                {
                    "name": name,
                    "required": False,
                    "in": "query",
                    "description": description + " Stable while rows are created.",
                    "schema": {"type": "string", "pattern": CURSOR_PATTERN},
                }
            )
        return parameters
