"""Workers log through Django's LOGGING, yet an explicit ``--loglevel`` still counts."""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from logging.config import dictConfig
from typing import Any

import pytest

from platform_site.celery import _django_logging


@pytest.fixture
def restore_logging(settings: Any) -> Iterator[None]:
    original = copy.deepcopy(settings.LOGGING)
    yield
    logging.getLogger("celery").setLevel(logging.NOTSET)
    dictConfig(original)


def test_a_verbose_loglevel_shows_celerys_ready_line(settings: Any, restore_logging: None) -> None:
    settings.LOGGING = {
        **settings.LOGGING,
        "root": {**settings.LOGGING["root"], "level": "WARNING"},
    }
    _django_logging(loglevel="INFO")
    assert logging.getLogger("celery.apps.worker").isEnabledFor(logging.INFO)
    assert not logging.getLogger("a2a").isEnabledFor(logging.INFO)  # LOG_LEVEL still rules


def test_a_quieter_loglevel_does_not_hide_what_log_level_shows(
    settings: Any, restore_logging: None
) -> None:
    settings.LOGGING = {**settings.LOGGING, "root": {**settings.LOGGING["root"], "level": "INFO"}}
    _django_logging(loglevel=logging.WARNING)
    assert logging.getLogger("celery.apps.worker").isEnabledFor(logging.INFO)
