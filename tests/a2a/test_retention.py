"""Retention: tasks that ended more than TASK_RETENTION_DAYS ago are deleted, with what
hangs off them; tasks that are not final, or ended since, are kept."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connections, transaction
from django.utils import timezone

from a2a import creation, retention
from a2a import tasks as a2a_tasks
from a2a.models import Task, TaskEvent, TaskMessage
from a2a.push_models import PushDelivery, PushNotificationConfig
from a2a.services import retry_task
from a2a.states import TERMINAL_STATES, NextAction, TaskState
from gateway.models import Delivery, DeliveryKind
from platform_site import metrics
from platform_site.celery import app

DAY = timedelta(days=1)


@pytest.fixture
def make(skill: Any, agent: Any, user: Any) -> Any:
    """A task of ``user``'s, put in ``state`` ``ended`` days ago (created ``created`` days
    ago, by default when it ended)."""

    def make(state: str, ended: float, created: float | None = None) -> Task:
        task = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=user)
        now = timezone.now()
        Task.objects.filter(pk=task.pk).update(
            state=state,
            state_changed_at=now - ended * DAY,
            created_at=now - (created if created is not None else ended) * DAY,
        )
        task.refresh_from_db()
        return task

    return make


def pruned() -> float:
    return float(metrics.TASKS_PRUNED._value.get())


def left(*tasks: Task) -> set[str]:
    """Which of ``tasks`` are still there (their ids)."""
    rows = Task.objects.filter(pk__in=[t.pk for t in tasks]).values_list("pk", flat=True)
    return {str(pk) for pk in rows}


@pytest.mark.django_db
def test_an_ended_task_past_the_retention_goes_with_all_that_hangs_off_it(
    make: Any, agent: Any, caplog: Any
) -> None:
    old = make(TaskState.COMPLETED, ended=31)
    kept = make(TaskState.COMPLETED, ended=29)
    for task in (old, kept):
        config = PushNotificationConfig.objects.create(task=task, url="https://example.com/h")
        PushDelivery.objects.create(config=config, seq=1, task_state=task.state, payload={})
        Delivery.objects.create(task=task, agent=agent, kind=DeliveryKind.ASSIGN, payload={})
    assert TaskEvent.objects.filter(task=old).exists()
    assert TaskMessage.objects.filter(task=old).exists()
    before = pruned()

    assert retention.prune(retention.cutoff(30)) == 1

    assert left(old, kept) == {str(kept.pk)}
    for model in (TaskEvent, TaskMessage, PushNotificationConfig, Delivery):
        assert not model.objects.filter(task_id=old.pk).exists(), model
        assert model.objects.filter(task_id=kept.pk).exists(), model
    assert not PushDelivery.objects.filter(config__task_id=old.pk).exists()
    assert PushDelivery.objects.filter(config__task_id=kept.pk).count() == 1
    assert pruned() == before + 1
    lines = [r.getMessage() for r in caplog.records if r.name == "a2a.lifecycle"]
    assert [line for line in lines if line.startswith("deleted 1 tasks that ended before ")]


@pytest.mark.django_db
def test_only_final_states_ended_before_the_cutoff_go(make: Any) -> None:
    gone = [make(state, ended=40) for state in sorted(TERMINAL_STATES)]
    stay = [
        make(TaskState.INPUT_REQUIRED, ended=400),  # waits for a person: kept however old
        make(TaskState.AUTH_REQUIRED, ended=400),
        make(TaskState.WORKING, ended=400),
        make(TaskState.SUBMITTED, ended=400),
        make(TaskState.COMPLETED, ended=10, created=60),  # created long ago, ended recently
        make(TaskState.FAILED, ended=29),
    ]

    assert retention.prune(retention.cutoff(30)) == len(gone) == 4

    assert left(*gone, *stay) == {str(t.pk) for t in stay}


@pytest.mark.django_db
def test_a_failed_task_retried_is_no_longer_ended(make: Any) -> None:
    task = make(TaskState.FAILED, ended=40)
    retry_task(task)  # SUBMITTED again, now

    assert retention.prune(retention.cutoff(30)) == 0
    assert Task.objects.get(pk=task.pk).state == TaskState.SUBMITTED


@pytest.mark.django_db
def test_a_canceled_task_stays_until_its_agent_is_told(make: Any) -> None:
    """Pruning a canceled task before the worker told its agent dropped the cancel: the
    agent worked on at a task nobody wanted any more."""
    owed = make(TaskState.CANCELED, ended=40)
    Task.objects.filter(pk=owed.pk).update(remote_task_id="t1", next_action=NextAction.CANCEL)
    owed.refresh_from_db()

    assert retention.prune(retention.cutoff(30)) == 0
    assert retention.expired(retention.cutoff(30)).count() == 0  # what --dry-run counts

    assert owed.cancel_propagated(metadata={"remoteCancel": {"taskId": "t1"}})
    assert retention.prune(retention.cutoff(30)) == 1
    assert not left(owed)


@pytest.mark.django_db
def test_batches_go_until_none_is_left_or_time_is_up(make: Any) -> None:
    tasks = [make(TaskState.COMPLETED, ended=40 + i) for i in range(5)]

    # The first batch always runs; with no time left the run stops after it, oldest first.
    assert retention.prune(retention.cutoff(30), batch=2, max_seconds=0, pause=0) == 2
    assert left(*tasks) == {str(t.pk) for t in tasks[:3]}

    assert retention.prune(retention.cutoff(30), batch=2, pause=0) == 3
    assert left(*tasks) == set()


@pytest.mark.django_db
def test_beat_applies_the_setting_and_zero_keeps_everything(settings: Any, make: Any) -> None:
    task = make(TaskState.CANCELED, ended=400)
    assert settings.CELERY_BEAT_SCHEDULE["a2a-prune"]["task"] == "a2a.prune"
    assert "a2a.prune" in app.tasks  # what beat names, a worker runs

    settings.TASK_RETENTION_DAYS = 0
    assert a2a_tasks.prune() == 0
    assert left(task) == {str(task.pk)}

    settings.TASK_RETENTION_DAYS = 365
    assert a2a_tasks.prune() == 1
    assert left(task) == set()


@pytest.mark.django_db
def test_the_command_counts_with_dry_run_and_needs_a_retention(
    settings: Any, make: Any, capsys: Any
) -> None:
    old, recent = make(TaskState.COMPLETED, ended=8), make(TaskState.COMPLETED, ended=1)
    settings.TASK_RETENTION_DAYS = 0

    with pytest.raises(CommandError, match="TASK_RETENTION_DAYS is 0"):
        call_command("prunetasks")
    with pytest.raises(CommandError, match="--days N"):
        call_command("prunetasks", "--days", "0")

    call_command("prunetasks", "--days", "7", "--dry-run")
    assert capsys.readouterr().out.startswith("1 task(s) ended before ")
    assert left(old, recent) == {str(old.pk), str(recent.pk)}

    call_command("prunetasks", "--days", "7")
    assert capsys.readouterr().out.startswith("Deleted 1 task(s) that ended before ")
    assert left(old, recent) == {str(recent.pk)}

    settings.TASK_RETENTION_DAYS = 0.5  # the setting is the default for --days
    call_command("prunetasks")
    assert left(old, recent) == set()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("days", "shown"), [("-1", "-1"), ("0", "0"), ("nan", "nan"), ("1e400", "inf")]
)
def test_a_bad_days_argument_is_named_not_blamed_on_the_setting(
    settings: Any, make: Any, days: str, shown: str
) -> None:
    """The setting is 90: a bad --days is the argument's fault, and nothing goes."""
    task = make(TaskState.COMPLETED, ended=400)
    settings.TASK_RETENTION_DAYS = 90.0
    with pytest.raises(CommandError) as refused:
        call_command("prunetasks", "--days", days)
    assert str(refused.value).startswith(f"--days must be a finite number > 0, got {shown}")
    assert "TASK_RETENTION_DAYS" not in str(refused.value)
    assert left(task) == {str(task.pk)}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_row_another_transaction_holds_is_left_for_the_next_run(
    make_skill: Any, make_agent: Any, make_user: Any
) -> None:
    """On PostgreSQL the batch locks what it deletes and skips rows locked elsewhere (a
    retry or an agent's update in flight), instead of deleting under them or waiting."""
    skill = make_skill()
    make_agent(skills=[skill])
    user = make_user()
    tasks = []
    for _ in range(2):
        task = creation.create_task(skill_id=skill.id, input={"product": "lamp"}, user=user)
        Task.objects.filter(pk=task.pk).update(
            state=TaskState.COMPLETED,
            state_changed_at=timezone.now() - 40 * DAY,
            created_at=timezone.now() - 40 * DAY,
        )
        tasks.append(task)
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                Task.objects.select_for_update().get(pk=tasks[0].pk)
                locked.set()
                release.wait(10)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10)
        assert retention.prune(retention.cutoff(30)) == 1
        assert left(*tasks) == {str(tasks[0].pk)}
    finally:
        release.set()
        holder.join(10)
    assert retention.prune(retention.cutoff(30)) == 1
    assert left(*tasks) == set()


@pytest.mark.django_db
@pytest.mark.parametrize("days", [800_000.0, 99_999_999.0, 1e308])
def test_a_retention_beyond_the_calendar_keeps_everything_in_beat(
    settings: Any, make: Any, days: float
) -> None:
    """A retention of "practically forever" reaches back past year 1: the hourly prune must
    delete nothing rather than fail every hour with an OverflowError from the date math."""
    task = make(TaskState.COMPLETED, ended=400)
    settings.TASK_RETENTION_DAYS = days
    assert a2a_tasks.prune() == 0
    assert left(task) == {str(task.pk)}


@pytest.mark.django_db
@pytest.mark.parametrize("days", ["800000", "99999999", "1e308"])
def test_the_command_with_days_beyond_the_calendar_deletes_nothing(
    make: Any, capsys: Any, days: str
) -> None:
    """The same for --days: nothing ended that long ago, said in the usual line."""
    task = make(TaskState.COMPLETED, ended=400)
    call_command("prunetasks", "--days", days, "--dry-run")
    assert capsys.readouterr().out.startswith("0 task(s) ended before 0001-01-01")
    call_command("prunetasks", "--days", days)
    assert capsys.readouterr().out.startswith("Deleted 0 task(s) that ended before 0001-01-01")
    assert left(task) == {str(task.pk)}
