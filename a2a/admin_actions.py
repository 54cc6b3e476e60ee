"""The task list's actions over a selection (cancel, retry; :mod:`a2a.admin`): the verb
run on each selected task it may act on, a chunk at a time, and its refusals told in one
message. The gateway's offline tasks list words its refusals the same way."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet

from a2a.models import Task
from platform_site.errors import PlatformError

# Refusals an action names in its one warning; the rest are counted.
REFUSALS_SHOWN = 3

# Left unread: the verbs read neither (a deferred field is read only if used), and an
# ended task's output and artifacts run to megabytes.
ACTION_DEFERRED = ("output", "artifacts")

# How many tasks an action holds at once: a selection of thousands, a chunk at a time.
ACTION_CHUNK = 100


@dataclass
class Outcome:
    """What an action did: how many tasks it acted on, the refusals the verb worded (in
    the list's order), and how many more it refused unread."""

    done: int = 0
    refused: list[str] = field(default_factory=list)
    unread: int = 0

    @property
    def refused_count(self) -> int:
        return len(self.refused) + self.unread


def act_on_each(tasks: QuerySet[Task], fn: Callable[[Task], Any], able: Q) -> Outcome:
    """Run ``fn`` on each of ``tasks`` that ``able`` lets it act on; a refusal
    (:class:`PlatformError`) is noted and the others go on.

    Only those tasks are read, and without the JSON the verbs never read: every selected
    task read whole at once (MBs of artifacts each) made a cancel over 60 ended tasks hold
    hundreds of MB. The others are counted; the verb itself words the few refusals the
    message names, so they read as a refusal of the task page's button does."""
    # One read sorts every selected task into one group: read apart, a task that changed
    # state between the reads fell in neither (left out of the report) or in both (acted
    # on, and refused, twice).
    sorted_out = tasks.annotate(_able=ExpressionWrapper(able, output_field=BooleanField()))
    pairs = list(sorted_out.values_list("pk", "_able"))
    others = [pk for pk, ok in pairs if not ok]
    named = others[:REFUSALS_SHOWN]
    outcome = Outcome(unread=len(others) - len(named))
    for task in chunked([*named, *(pk for pk, ok in pairs if ok)]):
        try:
            fn(task)
            outcome.done += 1
        except PlatformError as exc:
            outcome.refused.append(exc.message)
    return outcome


def chunked(pks: list[Any]) -> Iterator[Task]:
    """The tasks of ``pks``, in that order, read :data:`ACTION_CHUNK` at a time: by their
    ids, not through an open cursor, which the verbs' writes and rollbacks in between would
    share on SQLite. A task deleted meanwhile is skipped, as the selection would have."""
    rows = Task.objects.defer(*ACTION_DEFERRED).select_related("skill", "agent")
    for start in range(0, len(pks), ACTION_CHUNK):
        chunk = pks[start : start + ACTION_CHUNK]
        found = rows.in_bulk(chunk)
        yield from (found[pk] for pk in chunk if pk in found)


def refusal_message(verb: str, count: int, refused: list[str]) -> str:
    """The one warning for ``count`` refusals, naming the first few of ``refused`` (a
    message each, over thousands of ended tasks selected, filled the session)."""
    shown = " ".join(refused[:REFUSALS_SHOWN])
    more = count - min(len(refused), REFUSALS_SHOWN)
    tail = f" And {more} more." if more > 0 else ""
    return f"{count} task(s) not {verb.lower()}: {shown}{tail}"
