"""Celery tasks of the dispatcher. They take ids, re-read rows and are safe to run twice."""

from __future__ import annotations

from celery import shared_task

from a2a import worker


@shared_task(name="a2a.process", ignore_result=True, soft_time_limit=90, time_limit=120)
def process(task_id: str) -> None:
    """Do the task's due next action (send, poll, cancel) if it is due and free."""
    worker.process_task(task_id)


@shared_task(name="a2a.sweep", ignore_result=True, soft_time_limit=240, time_limit=300)
def sweep() -> dict[str, int]:
    """Beat: fail overdue tasks, then claim and process due ones concurrently."""
    return worker.sweep()
