"""Loading skills from a file (``manage.py loadskills``): all or nothing, every skill
checked before anything is written."""

from __future__ import annotations

import math
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from agent_profiles.models import Skill
from agent_profiles.signals import registry_changed
from platform_site.errors import ValidationFailed
from platform_site.text import MAX_JSON_DEPTH, find_bad_text

# File keys (the GET /api/a2a/skills shape, plus snake_case spellings) → model fields.
SKILL_KEYS: dict[str, str] = {
    "id": "id",
    "skill_id": "id",
    "name": "name",
    "description": "description",
    "tags": "tags",
    "examples": "examples",
    "inputModes": "input_modes",
    "input_modes": "input_modes",
    "outputModes": "output_modes",
    "output_modes": "output_modes",
    "domain": "domain",
    "subdomain": "subdomain",
    "version": "version",
    "input_schema": "input_schema",
    "inputSchema": "input_schema",
    "output_schema": "output_schema",
    "outputSchema": "output_schema",
    "max_attempts": "max_attempts",
    "maxAttempts": "max_attempts",
    "is_active": "is_active",
    "isActive": "is_active",
}
STRING_LISTS = ("tags", "input_modes", "output_modes")
_FLOAT_MAX = sys.float_info.max
# Rows per INSERT or UPDATE statement of a load.
WRITE_BATCH = 500
# PostgreSQL advisory lock key of skill loads (any number no other lock of the project uses).
LOAD_LOCK = 0x5C111


@dataclass(frozen=True)
class SkillLoadResult:
    created: list[str]
    updated: list[str]


def load_skills(items: Any) -> SkillLoadResult:
    """Create or update skills by id from a list in the ``GET /api/a2a/skills`` shape.

    All or nothing: every skill is checked (fields, types, JSON Schemas) before anything is
    written, and the writes run in one transaction. The first bad skill raises
    :class:`ValidationFailed` naming it.
    """
    if not isinstance(items, list):
        raise ValidationFailed("A skills file must hold a JSON/YAML array of skills.")
    parsed = [_parse_skill(item, index) for index, item in enumerate(items)]
    ids = [fields["id"] for fields in parsed]
    # Counted in one pass: ids.count() for each id took 11 s over a file of 20,000 skills.
    duplicates = sorted(i for i, n in Counter(ids).items() if n > 1)
    if duplicates:
        raise ValidationFailed(f"Duplicate skill ids: {', '.join(duplicates)}.", duplicates)
    with transaction.atomic():
        _one_load_at_a_time()
        # Read under the loads' lock: two loads of one new file at once each read "none
        # exists" first, and both said "created" for every skill.
        existing = set(
            Skill.objects.select_for_update().filter(pk__in=ids).values_list("pk", flat=True)
        )
        created = [skill_id for skill_id in ids if skill_id not in existing]
        updated = [skill_id for skill_id in ids if skill_id in existing]
        # In bulk, a statement per batch of skills: a row at a time (a read and a
        # write each, both schemas checked again by save()) held SQLite's write lock for
        # 3.6 ms per skill, and 12,000 skills kept a running platform's writers waiting
        # past their busy timeout ("database is locked").
        Skill.objects.bulk_create(
            [Skill(**fields) for fields in parsed if fields["id"] not in existing],
            batch_size=WRITE_BATCH,
        )
        now = timezone.now()
        by_keys: dict[tuple[str, ...], list[Skill]] = {}
        for fields in parsed:
            if fields["id"] in existing:
                # Only the fields the file gives change, as update_or_create did.
                keys = tuple(sorted(k for k in fields if k != "id"))
                by_keys.setdefault(keys, []).append(Skill(**fields, updated_at=now))
        for keys, skills in by_keys.items():
            _update_rows(skills, [*keys, "updated_at"])
        # Bulk writes send no post_save: the processes' registry caches hear it this way.
        transaction.on_commit(lambda: registry_changed.send(Skill, agent_ids=[]))
    return SkillLoadResult(created, updated)


def _update_rows(skills: list[Skill], names: list[str]) -> None:
    """Write ``names`` of each of ``skills`` (rows that exist) with one prepared UPDATE run
    for all: ``bulk_update``'s CASE per field and row took 15 s of SQLite's write lock for
    12,000 skills."""
    fields = [Skill._meta.get_field(name) for name in names]
    quote = connection.ops.quote_name
    sets = ", ".join(f"{quote(field.column)} = %s" for field in fields)
    sql = f"UPDATE {quote(Skill._meta.db_table)} SET {sets} WHERE {quote('id')} = %s"
    rows = [
        [field.get_db_prep_save(getattr(skill, field.attname), connection) for field in fields]
        + [skill.pk]
        for skill in skills
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


def _one_load_at_a_time() -> None:
    """Serialize loads, so each knows which of its skills it created. SQLite's transactions
    take the write lock at their start already (``IMMEDIATE``, see the settings)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOAD_LOCK])


def _parse_skill(item: Any, index: int) -> dict[str, Any]:
    """The model fields of one file entry, checked; :class:`ValidationFailed` names the
    skill (by id when it has a string one, else by position) and the field."""
    label = f"skill #{index + 1}"
    if not isinstance(item, dict):
        raise ValidationFailed(f"{label}: must be an object, got {type(item).__name__}.")
    if isinstance(item.get("id"), str):
        label = f"skill '{item['id']}' (#{index + 1})"
    bad = find_bad_text(item)
    if bad is not None:
        raise ValidationFailed(f"{label}: {bad}", {"skill": label, "field": bad.where})
    # str(): YAML keys may be numbers or null (``1: x``), which broke the join.
    unknown = sorted(str(k) for k in item if not isinstance(k, str) or k not in SKILL_KEYS)
    if unknown:
        raise ValidationFailed(f"{label}: unknown fields {', '.join(unknown)}.", {"skill": label})
    number = _bad_number(item)
    if number is not None:
        # YAML's .nan and .inf (and integers beyond a float's range) are no JSON: the
        # database refused them with a traceback. The API refuses them alike.
        raise ValidationFailed(
            f"{label}: {number} is not a JSON number (NaN, infinity or too large).",
            {"skill": label, "field": number},
        )
    fields: dict[str, Any] = {}
    given: dict[str, str] = {}  # field -> the key that gave it
    for key, value in item.items():
        field = SKILL_KEYS[key]
        if field in given and fields[field] != value:
            # ``id`` and ``skill_id`` (or two spellings of one field) that disagree: the
            # last one won, and the errors named the skill by the other.
            raise ValidationFailed(
                f"{label}: '{given[field]}' and '{key}' are the same field with different "
                "values; give one.",
                {"skill": label, "field": key},
            )
        given[field] = key
        # ``domain:`` with nothing after it is YAML null; full_clean skips blank fields, so
        # without this check a null reached the database as a NOT NULL IntegrityError.
        if value is None and not Skill._meta.get_field(SKILL_KEYS[key]).null:
            raise ValidationFailed(
                f"{label}: '{key}' has no value (null); give it one or leave the key out.",
                {"skill": label, "field": key},
            )
        fields[field] = value
    if "id" not in fields:
        raise ValidationFailed(f"{label}: 'id' is required.", {"skill": label})
    if not isinstance(fields["id"], str):
        # A number would pass the slug check as its text, but then ``1`` and ``"1"`` are
        # not seen as duplicates and the count of loaded skills is wrong.
        raise ValidationFailed(
            f"{label}: 'id' must be a string, got {type(fields['id']).__name__} "
            "(quote it in YAML).",
            {"skill": label, "field": "id"},
        )
    if "name" not in fields:
        fields["name"] = fields["id"]
    for name in ("input_schema", "output_schema"):
        fields.setdefault(name, {"type": "object"})
        if _deeper_than(fields[name], MAX_JSON_DEPTH):
            # The schema checks recurse: a schema a few hundred levels deep crashed the
            # command with a RecursionError traceback. The API refuses such JSON alike.
            raise ValidationFailed(
                f"{label}: '{name}' is nested deeper than {MAX_JSON_DEPTH} levels.",
                {"skill": label, "field": name},
            )
    for name in STRING_LISTS:
        value = fields.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValidationFailed(f"{label}: '{name}' must be a list of strings.")
    if not isinstance(fields.get("examples", []), list):
        raise ValidationFailed(f"{label}: 'examples' must be a list.")
    skill = Skill(**fields)
    try:
        skill.full_clean(validate_unique=False)
    except ValidationError as exc:
        problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
        raise ValidationFailed(f"{label}: {problems}", exc.message_dict) from None
    return fields


def _bad_number(value: Any) -> str | None:
    """The path of the first float in ``value`` that is NaN or infinite, or integer beyond
    a float's range; None if there is none (no recursion)."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return path
        if isinstance(item, int) and not isinstance(item, bool) and abs(item) > _FLOAT_MAX:
            return path
        if isinstance(item, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(item))
    return None


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists/objects more than ``limit`` levels (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False
