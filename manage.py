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
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
