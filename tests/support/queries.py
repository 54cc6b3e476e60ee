"""What tests read of the queries a page or an action ran."""

from __future__ import annotations

from typing import Any

BIG_COLUMNS = (
    "input",
    "output",
    "artifacts",
    "status_message",
    "outbound_message",
    "metadata",
    "error",
)


def selected_columns(queries: Any) -> set[str]:
    """The a2a_task columns ``queries`` load whole (in a select list, not a JSON key's
    extraction such as the dashboard's failures by error code)."""
    return {
        column
        for query in queries.captured_queries
        for column in BIG_COLUMNS
        for after in (', "', " FROM")
        if f'"a2a_task"."{column}"{after}' in query["sql"]
    }
