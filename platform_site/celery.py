"""The Celery app. Beat runs the sweeps (``CELERY_BEAT_SCHEDULE`` in settings) that make a
lost message only a delay."""

from __future__ import annotations

import os
import sys

from celery import Celery
from celery.signals import beat_init, setup_logging, task_prerun, worker_ready
from django.core.exceptions import ImproperlyConfigured

from platform_site import kombu_fix

# Workers must survive broker outages: see platform_site/kombu_fix.py.
kombu_fix.install()

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")

app = Celery("platform_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Celery's Django fix-up closes every database connection before and after each task
# unless this is set: on PostgreSQL that is a new server process per task, the largest
# single cost of a worker's send (profiled). Connections are kept instead, and checked
# before each task the way Django checks them per request (:func:`_tidy_connections`).
app.conf.CELERY_DB_REUSE_MAX = 10**9


@app.on_configure.connect
def _settings_or_one_line(**kwargs: object) -> None:
    """A bad setting stops a worker or beat with one line naming it (as manage.py and
    daphne do), not Celery's hundred lines of traceback through its config loading."""
    from django.conf import settings

    try:
        settings.INSTALLED_APPS  # noqa: B018 - loads the settings module
    except ImproperlyConfigured as exc:
        sys.exit(f"Configuration error: {exc}")


@task_prerun.connect
def _tidy_connections(**kwargs: object) -> None:
    """Drop this thread's connection if it broke or outlived ``CONN_MAX_AGE``."""
    from platform_site.dbthreads import tidy_connections

    tidy_connections()


@worker_ready.connect
@beat_init.connect
def _settle_gc(**kwargs: object) -> None:
    """A worker or beat is ready: the collector stops walking what it loaded (see
    platform_site/gc_tuning.py)."""
    from platform_site import gc_tuning

    gc_tuning.settle()


@setup_logging.connect
def _django_logging(loglevel: int | str | None = None, **kwargs: object) -> None:
    """Workers and beat log like daphne: Django's ``LOGGING`` (``LOG_FORMAT=json`` and the
    ids of each line included), instead of Celery's own set-up.

    A ``--loglevel`` more verbose than ``LOG_LEVEL`` still applies to Celery's own
    loggers: whoever passed ``--loglevel INFO`` expects the worker's "ready." line.
    """
    import logging
    from logging.config import dictConfig

    from django.conf import settings

    dictConfig(settings.LOGGING)
    if loglevel is None:
        return
    wanted = logging.getLevelName(loglevel.upper()) if isinstance(loglevel, str) else loglevel
    if isinstance(wanted, int):
        celery_logger = logging.getLogger("celery")
        celery_logger.setLevel(min(wanted, logging.getLogger().getEffectiveLevel()))
