"""The Celery app. Beat runs the sweeps (``CELERY_BEAT_SCHEDULE`` in settings) that make a
lost message only a delay."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import setup_logging

from platform_site import kombu_fix

# Workers must survive broker outages: see platform_site/kombu_fix.py.
kombu_fix.install()

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")

app = Celery("platform_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect
def _django_logging(**kwargs: object) -> None:
    """Workers and beat log like daphne: Django's ``LOGGING`` (``LOG_FORMAT=json`` and the
    ids of each line included), instead of Celery's own set-up."""
    from logging.config import dictConfig

    from django.conf import settings

    dictConfig(settings.LOGGING)
