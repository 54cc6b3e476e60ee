"""``manage.py prunetasks [--days N] [--dry-run]``: delete tasks that ended N days ago."""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from a2a import retention


class Command(BaseCommand):
    help = (
        "Delete the tasks that reached a final state (COMPLETED, FAILED, CANCELED, "
        "REJECTED) more than --days ago (default: TASK_RETENTION_DAYS), with their events, "
        "messages and deliveries. Tasks that are not final are never deleted. Beat does the "
        "same every hour when TASK_RETENTION_DAYS is set."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days",
            type=float,
            help="Keep tasks this many days after they ended (default: TASK_RETENTION_DAYS).",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Count the tasks that would go; delete none."
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["days"] is not None:
            # Blame the argument, not the setting: "--days 0" or "--days nan" said
            # "TASK_RETENTION_DAYS is 0" even when the setting was 90.
            days = opts["days"]
            if not math.isfinite(days) or days <= 0:
                raise CommandError(
                    f"--days must be a finite number > 0, got {days:g}: --days N deletes the "
                    "tasks that ended N days ago."
                )
        else:
            days = settings.TASK_RETENTION_DAYS
        if not math.isfinite(days) or days <= 0:
            raise CommandError(
                "No retention: TASK_RETENTION_DAYS is 0 (tasks are kept forever). "
                "Pass --days N (N > 0) to delete the tasks that ended N days ago."
            )
        before = retention.cutoff(days)
        if opts["dry_run"]:
            count = retention.expired(before).count()
            self.stdout.write(f"{count} task(s) ended before {before.isoformat()} (none deleted).")
            return
        count = retention.prune(before)
        self.stdout.write(f"Deleted {count} task(s) that ended before {before.isoformat()}.")
