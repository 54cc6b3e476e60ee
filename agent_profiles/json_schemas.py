"""How the platform applies skills' JSON Schemas: a ``$ref`` resolves within the schema
itself, never fetched, and patterns match in linear time.

jsonschema, given no registry, fetches a ``$ref`` to a URL with ``urlopen`` (no timeout,
``file://`` too): a skill's schema could make the server read its own files or call any
host, or hang a worker. Every validator the platform builds takes :data:`NO_RETRIEVAL`,
and a schema is refused when saved if one of its references does not resolve within it
(:func:`ref_fault`), or if references loop without ever descending into the value, which
validation would follow until the stack runs out.

The keywords that match a ``pattern`` run on RE2 (:func:`build_validator`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

import re2
from jsonschema import ValidationError, _legacy_keywords
from jsonschema._utils import extras_msg
from jsonschema.validators import extend, validator_for
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012, lookup_recursive_ref, specification_with

# Its retrieve raises: a reference outside the schema is unresolvable, not fetched. (The
# JSON Schema meta-schemas jsonschema ships are still known to validators.)
NO_RETRIEVAL: Registry[Any] = Registry()

REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords that apply a subschema to the same value: a cycle through only these and
# references never ends (``{"$ref": "#"}``; ``a`` → ``b`` → ``a``).
IN_PLACE = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas"})


# RE2 matches in time linear in the text: Python's re backtracks, and a skill's
# "^(a+)+$" took seconds on a 26-character output (exponential in its length). RE2's
# dialect is also closer to the ECMA-262 one JSON Schema names (\d and \w are ASCII,
# "$" is the end of the text). Patterns it cannot compile (lookaround, backreferences)
# are left to Python's re.
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a pattern RE2 refuses is expected, not news for stderr


@functools.lru_cache(maxsize=1024)
def _regex(pattern: str) -> Any:
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error:
        return re.compile(pattern)


def _matches(pattern: str, text: str) -> bool:
    return _regex(pattern).search(text) is not None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not _matches(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _matches(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    """jsonschema's ``additionalProperties``, with its pattern matches through RE2."""
    if not validator.is_type(instance, "object"):
        return
    named, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
    extras = [
        key for key in instance if key not in named and not any(_matches(p, key) for p in patterns)
    ]
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:  # jsonschema's messages, word for word
        listed = ", ".join(repr(key) for key in sorted(extras, key=str))
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(p) for p in sorted(patterns))
            yield ValidationError(f"{listed} {verb} not match any of the regexes: {regexes}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({listed} {verb} unexpected)"
            )


def _evaluated_keys(validator: Any, instance: Any, schema: Any, *, legacy: bool) -> list[Any]:
    """The keys of ``instance`` evaluated under ``schema``: jsonschema's
    ``find_evaluated_property_keys_by_schema`` (``legacy``: its draft 2019-09 one), with
    ``patternProperties`` matched on RE2. jsonschema's own matches them with ``re.search``,
    so ``unevaluatedProperties`` next to ``"^(a+)+$"`` took seconds on a 26-character key,
    past the RE2 keywords above. Otherwise the same, step for step, so what counts as
    evaluated does not change."""
    if validator.is_type(schema, "boolean"):
        return []
    keys: list[Any] = []
    found: list[Any] = []
    if schema.get("$ref") is not None:
        found.append(validator._resolver.lookup(schema["$ref"]))
    if legacy and "$recursiveRef" in schema:
        found.append(lookup_recursive_ref(validator._resolver))
    if not legacy and schema.get("$dynamicRef") is not None:
        found.append(validator._resolver.lookup(schema["$dynamicRef"]))
    for resolved in found:
        there = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
        keys += _evaluated_keys(there, instance, resolved.contents, legacy=legacy)
    if legacy:
        for word in ("properties", "additionalProperties", "unevaluatedProperties"):
            value = schema.get(word)
            if word in schema and validator.is_type(value, "boolean") and value:
                keys += instance.keys()
            elif word in schema and validator.is_type(value, "object"):
                keys += [name for name in value if name in instance]
    else:
        properties = schema.get("properties")
        if validator.is_type(properties, "object"):
            keys += properties.keys() & instance.keys()
        for word in ("additionalProperties", "unevaluatedProperties"):
            if (subschema := schema.get(word)) is None:
                continue
            keys += [k for k, v in instance.items() if _valid(validator.descend(v, subschema))]
    if "patternProperties" in schema:
        keys += [k for k in instance for p in schema["patternProperties"] if _matches(p, k)]
    for name, subschema in (schema.get("dependentSchemas") or {}).items():
        if name in instance:
            keys += _evaluated_keys(validator, instance, subschema, legacy=legacy)
    for word in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(word, []):
            if _valid(validator.descend(instance, subschema)):
                keys += _evaluated_keys(validator, instance, subschema, legacy=legacy)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys += _evaluated_keys(validator, instance, schema["if"], legacy=legacy)
            if "then" in schema:
                keys += _evaluated_keys(validator, instance, schema["then"], legacy=legacy)
        elif "else" in schema:
            keys += _evaluated_keys(validator, instance, schema["else"], legacy=legacy)
    return keys


def _valid(errors: Iterator[Any]) -> bool:
    return next(errors, None) is None


def _unevaluated_properties(legacy: bool) -> Any:
    """jsonschema's ``unevaluatedProperties`` (draft 2020-12, or 2019-09 when ``legacy``),
    its evaluated keys found by :func:`_evaluated_keys`; its messages word for word."""

    def keyword(validator: Any, unevaluated: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        evaluated = _evaluated_keys(validator, instance, schema, legacy=legacy)
        invalid = [
            key
            for key in instance
            if key not in evaluated
            for _ in validator.descend(instance[key], unevaluated, path=key, schema_path=key)
        ]
        if invalid and unevaluated is False:
            error = "Unevaluated properties are not allowed (%s %s unexpected)"
            yield ValidationError(error % extras_msg(sorted(invalid, key=str)))
        elif invalid:
            error = (
                "Unevaluated properties are not valid under "
                "the given schema (%s %s unevaluated and invalid)"
            )
            yield ValidationError(error % extras_msg(invalid))

    return keyword


@functools.lru_cache(maxsize=16)
def _linear(cls: Any) -> Any:
    """``cls`` (one draft's validator) with the keywords that match patterns on RE2."""
    keywords = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    # Only in the drafts that have it (2019-09, 2020-12): added to another, it would
    # apply a keyword that draft ignores.
    own = cls.VALIDATORS.get("unevaluatedProperties")
    if own is not None:
        legacy = own is _legacy_keywords.unevaluatedProperties_draft2019
        keywords["unevaluatedProperties"] = _unevaluated_properties(legacy)
    return extend(cls, keywords)


def build_validator(schema: Any) -> Any:
    """A validator of ``schema`` for its draft that never fetches a ``$ref`` and matches
    patterns on RE2 where it can."""
    return _linear(validator_for(schema))(schema, registry=NO_RETRIEVAL)


def ref_fault(schema: dict[str, Any]) -> str | None:
    """What is wrong with ``schema``'s references, naming the path and the reference;
    None when each resolves within the schema and none loops. ``schema`` must have passed
    ``check_schema`` (its ``$schema`` picks how ``$id`` and anchors are read)."""
    dialect = schema.get("$schema")
    spec = specification_with(dialect if isinstance(dialect, str) else "", default=DRAFT202012)
    root = spec.create_resource(schema)
    resolver = Registry().with_resource(root.id() or "", root).crawl().resolver(root.id() or "")
    graph = _Graph(spec)
    fault = graph.walk(root, resolver, "")
    return fault or graph.loop()


class _Graph:
    """The schema's subschemas (by identity) and, for each, those it applies in place.

    Walked from the root through its keywords' subschemas and through the target of each
    reference: a subschema kept under a word that is no keyword (``"x-lib"``, for shared
    parts) is reached only by a pointer, and a URL or a loop in it was saved unchecked,
    to refuse every value at run time. Each subschema is walked once (by identity), so
    references that lead back end the walk."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec
        self.paths: dict[int, str] = {}
        self.edges: dict[int, list[int]] = {}

    def walk(self, resource: Resource[Any], resolver: Any, path: str) -> str | None:
        contents = resource.contents
        if not isinstance(contents, dict) or id(contents) in self.paths:
            return None
        here = id(contents)
        self.paths[here] = path or "(root)"
        edges = self.edges.setdefault(here, [])
        targets: list[tuple[str, Any]] = []
        for word in REF_KEYWORDS:
            ref = contents.get(word)
            if not isinstance(ref, str):
                continue
            try:
                resolved = resolver.lookup(ref)
            except (Unresolvable, ValueError, LookupError, TypeError, AttributeError):
                # Not only Unresolvable: referencing fails on malformed references with
                # what Python raises (a pointer naming a list's item by a word, a URL
                # with a bad host).
                return _unresolved(word, ref, path)
            edges.append(id(resolved.contents))
            targets.append((word, resolved))
        children = {id(sub.contents): sub for sub in resource.subresources()}
        for key, value in contents.items():
            for where, item in _candidates(key, value):
                child = children.get(id(item))
                if child is None or not isinstance(item, dict):
                    continue
                if key in IN_PLACE:
                    edges.append(id(item))
                fault = self.walk(child, resolver.in_subresource(child), f"{path}/{where}")
                if fault:
                    return fault
        # After the keywords: a target among them keeps its own path in messages.
        for word, resolved in targets:
            target = self._resource(resolved.contents)
            fault = self.walk(target, resolved.resolver, f"{path}/{word}")
            if fault:
                return fault
        return None

    def _resource(self, contents: Any) -> Resource[Any]:
        """A reference's target as a resource of the schema's dialect (or its own)."""
        try:
            return Resource.from_contents(contents, default_specification=self.spec)
        except Exception:  # a $schema referencing does not know: the schema's own dialect
            return self.spec.create_resource(contents)

    def loop(self) -> str | None:
        """A message naming a subschema that reaches itself in place, or None."""
        state: dict[int, int] = {}  # 1: on the current path, 2: done
        for start in self.edges:
            stack = [(start, iter(self.edges[start]))]
            state.setdefault(start, 1)
            if state[start] == 2:
                continue
            while stack:
                node, targets = stack[-1]
                target = next(targets, None)
                if target is None:
                    state[node] = 2
                    stack.pop()
                elif state.get(target) == 1:
                    return (
                        f"$ref loop at {self.paths.get(target, '(root)')}: its references "
                        "lead back to it without descending into the value, so checking a "
                        "value against it would never end."
                    )
                elif target not in state and target in self.edges:
                    state[target] = 1
                    stack.append((target, iter(self.edges[target])))
        return None


def _candidates(key: str, value: Any) -> list[tuple[str, Any]]:
    """``value`` and, in a list or object, its items, with their paths: where a
    subresource may sit (``not``; ``allOf/0``; ``properties/name``)."""
    found: list[tuple[str, Any]] = [(key, value)]
    if isinstance(value, list):
        found += [(f"{key}/{i}", item) for i, item in enumerate(value)]
    elif isinstance(value, dict):
        found += [(f"{key}/{name}", item) for name, item in value.items()]
    return found


def _unresolved(word: str, ref: str, path: str) -> str:
    where = path or "(root)"
    if ref.startswith("#"):
        return f"{word} '{ref}' at {where} does not resolve within the schema."
    return (
        f"{word} '{ref}' at {where} does not resolve within the schema: references to "
        "other documents (URLs, files) are not fetched; put the subschema under $defs."
    )
