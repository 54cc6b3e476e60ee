"""``manage.py loadskills FILE``: create or update skills from a JSON or YAML array."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent_profiles.skills import load_skills
from platform_site.errors import ValidationFailed
from platform_site.text import parse_json


class Command(BaseCommand):
    help = (
        "Create or update skills by id from a JSON or YAML array in the GET /api/a2a/skills "
        "shape. All or nothing: one bad skill is named and nothing is written."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "file", help="A .json, .yaml or .yml file ('-' reads stdin as JSON/YAML)"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        items = read_skills_file(opts["file"])
        try:
            result = load_skills(items)
        except ValidationFailed as exc:
            message = exc.message.rstrip(".")
            raise CommandError(f"{opts['file']}: {message}. Nothing was loaded.") from None
        self.stdout.write(
            f"Loaded {len(result.created) + len(result.updated)} skills "
            f"({len(result.created)} created, {len(result.updated)} updated)."
        )


def read_skills_file(name: str) -> Any:
    """The parsed content of a JSON or YAML skills file."""
    if name == "-":
        import sys

        text, suffix = sys.stdin.read(), ""
    else:
        path = Path(name)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"Cannot read {name}: {exc.strerror or exc}.") from None
        suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            return parse_json(text)
        except ValueError as exc:
            raise CommandError(f"{name} is not valid JSON: {exc}.") from None
    try:
        # YAML 1.2 is a superset of JSON, so this also reads JSON from stdin or other names.
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CommandError(f"{name} is not valid YAML: {exc}.") from None
