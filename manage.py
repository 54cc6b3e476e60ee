#!/usr/bin/env python
"""Django's command-line utility."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform_site.settings")
    try:
        from django.core.management import execute_from_command_line
    except ImportError:
        # A newcomer's `./manage.py` runs the system Python, which lacks the dependencies.
        sys.exit(
            f"Django is not installed for {sys.executable}. Run `make run` once (it creates "
            "the virtual environment in .venv/), then use `.venv/bin/python manage.py ...`."
        )
    from django.core.exceptions import ImproperlyConfigured

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A bad setting is the operator's to fix: one line naming it (settings.py raises
        # with the variable's name), not forty lines of Django's start-up traceback.
        sys.exit(f"Configuration error: {exc}")


if __name__ == "__main__":
    main()
