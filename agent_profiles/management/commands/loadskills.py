"""``manage.py loadskills FILE``: create or update skills from a JSON or YAML array."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent_profiles.skills import load_skills
from platform_site.errors import ValidationFailed
from platform_site.text import MAX_JSON_DEPTH, loads_bounded


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
        try:
            items = read_skills_file(opts["file"])
            if opts["verbosity"] >= 2 and isinstance(items, list):
                self.stdout.write(f"Read {len(items)} skills from {opts['file']}; checking them.")
                self.stdout.flush()
            result = load_skills(items)
        except ValidationFailed as exc:
            message = exc.message.rstrip(".")
            raise CommandError(f"{opts['file']}: {message}. Nothing was loaded.") from None
        except KeyboardInterrupt:
            # A large file takes a while to check; Ctrl-C printed a traceback from deep in
            # the schema checks, where one line says all: the load is all or nothing.
            raise CommandError(f"{opts['file']}: interrupted. Nothing was loaded.") from None
        if opts["verbosity"] < 1:  # -v 0: only errors (runplatform says what it seeded)
            return
        self.stdout.write(
            f"Loaded {len(result.created) + len(result.updated)} skills "
            f"({len(result.created)} created, {len(result.updated)} updated)."
        )


FILE_DEPTH = 8 * MAX_JSON_DEPTH
YAML_SUFFIXES = (".yaml", ".yml")


class SkillsLoader(yaml.SafeLoader):
    """YAML without aliases (``*name``): a skills file needs none, and nested ones made a
    file of 500 bytes expand to 9^9 values, every one checked (the command hung)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not allowed in a skills file", mark
            )
        return super().compose_node(parent, index)


def read_skills_file(name: str) -> Any:
    """The parsed content of a JSON or YAML skills file."""
    if name == "-":
        # The bytes, not sys.stdin's text: its encoding is the locale's, not UTF-8.
        stream = getattr(sys.stdin, "buffer", None)
        data = stream.read() if stream is not None else sys.stdin.read().encode()
        suffix = ""
    else:
        path = Path(name)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CommandError(f"Cannot read {name}: {exc.strerror or exc}.") from None
        suffix = path.suffix.lower()
    try:
        # utf-8-sig: a BOM (which some Windows editors write) is not part of the content.
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CommandError(
            f"Cannot read {name}: it is not UTF-8 (bad byte at offset {exc.start}); "
            "save it as UTF-8."
        ) from None
    # Thousands of levels would exhaust the parsers' stack (a traceback). A schema deeper
    # than MAX_JSON_DEPTH but parseable is refused by skills.py, naming the skill.
    depth = FILE_DEPTH
    if suffix == ".json":
        try:
            return loads_bounded(text, depth)
        except ValueError as exc:
            raise CommandError(f"{name} is not valid JSON: {exc}.") from None
    if suffix not in YAML_SUFFIXES and text.lstrip().startswith(("[", "{")):
        # JSON from stdin or another name: PyYAML reads YAML 1.1, which is no superset of
        # JSON (an escaped emoji came back as two lone surrogates, 1e5 as a string).
        try:
            return loads_bounded(text, depth)
        except ValueError:
            pass  # YAML's flow style ([{id: a}]) starts alike: read as YAML
    try:
        return yaml.load(text, Loader=SkillsLoader)  # a SafeLoader
    except yaml.YAMLError as exc:
        raise CommandError(f"{name} is not valid YAML: {exc}.") from None
    except RecursionError:
        raise CommandError(
            f"{name} is nested too deep (a schema may have {MAX_JSON_DEPTH} levels)."
        ) from None
