"""The settings module read afresh, in this process, under a given environment.

A start reads ``platform_site/settings.py`` once; tests of what it makes of an environment
variable used to start a fresh interpreter per case (about two seconds of CPU each, some
eighty cases). This runs the same file as a new module object instead: the same code, the
same errors, in milliseconds. What only a real start shows (its one-line "Configuration
error", exit codes, the apps' start) keeps its subprocess tests
(tests/platform_site/test_settings_env.py ``_start``, test_mode_settings.py).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from unittest import mock

SETTINGS_FILE = Path(__file__).resolve().parents[2] / "platform_site" / "settings.py"


def load(env: Mapping[str, str], *, drop: Iterable[str] = ()) -> ModuleType:
    """The settings as a start would read them from this process's environment without
    ``drop`` and with ``env`` over it; raises what the settings raise."""
    environ = {k: v for k, v in os.environ.items() if k not in set(drop)}
    environ.update(env)
    spec = importlib.util.spec_from_file_location("platform_site._fresh_settings", SETTINGS_FILE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with mock.patch.dict(os.environ, environ, clear=True):
        spec.loader.exec_module(module)
    return module


@dataclass
class Read:
    """What a start made of a setting, in a subprocess result's terms: ``stdout`` is the
    value's text, ``stderr`` the error that stopped the start, ``returncode`` 0 or 1."""

    returncode: int
    stdout: str
    stderr: str


def read(expression: str, env: Mapping[str, str], *, drop: Iterable[str] = ()) -> Read:
    """``expression`` (a setting's name, or e.g. ``LOGGING['root']['level']``) evaluated
    on the settings read under ``env``."""
    try:
        module = load(env, drop=drop)
    except Exception as exc:  # what stops a start: ImproperlyConfigured, ValueError...
        return Read(1, "", f"{type(exc).__name__}: {exc}")
    return Read(0, f"{eval(expression, vars(module))}\n", "")
