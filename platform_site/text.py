"""One rule for text crossing a boundary: no NUL, no lone surrogates, bounded JSON.

PostgreSQL refuses NUL in text and jsonb, and a lone surrogate cannot be encoded as
UTF-8; SQLite accepts both, so without this rule the two modes would disagree. Every
boundary (HTTP bodies, query strings, paths, WebSocket frames, agents' answers) checks
with :func:`find_bad_text` and refuses what it finds, naming the field.

:func:`loads_bounded` parses JSON after a cheap nesting-depth scan, so a body nested
100,000 levels is refused before the parser's recursion can fail. Every parser here
(:func:`parse_json`) refuses ``NaN``, ``Infinity`` and numbers too large for a float
(``1e400``, which Python reads as infinity, or an integer as large): none is JSON a peer
can rely on. PostgreSQL's jsonb refuses the first ones, so a body holding one would fail at
the database; A2A's SDKs read numbers as doubles and refuse the integers.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

# Deeper JSON than any A2A or platform shape needs; refused before parsing.
MAX_JSON_DEPTH = 64

_BAD = re.compile("[\x00\ud800-\udfff]")


class BadText(ValueError):
    """Text that cannot be stored or sent: ``where`` names the field, ``what`` the flaw."""

    def __init__(self, where: str, what: str) -> None:
        self.where = where
        self.what = what
        super().__init__(f"{where or 'The value'} contains {what}, which is not allowed.")


class JSONTooDeep(ValueError):
    """JSON nested deeper than :data:`MAX_JSON_DEPTH`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"JSON nested deeper than {limit} levels is not accepted.")


def _flaw(text: str) -> str | None:
    match = _BAD.search(text)
    if match is None:
        return None
    return "a NUL character" if match.group() == "\x00" else "a lone surrogate"


def scrub(text: str) -> str:
    """``text`` with each NUL and lone surrogate replaced by U+FFFD: for text the platform
    quotes in its own messages (an agent's error body), which must stay storable."""
    return _BAD.sub("\ufffd", text)


def find_bad_text(value: Any, where: str = "") -> BadText | None:
    """The first NUL or lone surrogate in ``value`` (keys included), or None.

    ``where`` prefixes the reported path, e.g. ``input`` → ``input.items[2].name``.
    """
    stack: list[tuple[str, Any]] = [(where, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            flaw = _flaw(item)
            if flaw:
                return BadText(path, flaw)
        elif isinstance(item, dict):
            for key, child in item.items():
                key_text = str(key)
                flaw = _flaw(key_text)
                if flaw:
                    return BadText(f"{path} (a key)" if path else "a key", flaw)
                stack.append((f"{path}.{key_text}" if path else key_text, child))
        elif isinstance(item, list | tuple):
            stack.extend((f"{path}[{i}]", child) for i, child in enumerate(item))
    return None


def check_text(value: Any, where: str = "") -> None:
    """Raise :class:`BadText` if ``value`` holds a NUL or a lone surrogate."""
    bad = find_bad_text(value, where)
    if bad is not None:
        raise bad


def json_depth_exceeds(raw: str | bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``raw`` opens more than ``limit`` nested arrays/objects (strings skipped)."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    if text.count("[") + text.count("{") <= limit:
        return False  # cheap exit for ordinary bodies
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"the number {text[:40]} is too large")
    return number


_FLOAT_MAX = int(sys.float_info.max)


def _int_in_range(text: str) -> int:
    # A2A carries JSON numbers as doubles (protobuf's Value): an agent's SDK refuses an
    # integer beyond a float's range ("int too large to convert to float"), so the task
    # would wait offline until its deadline. Short ones (all real ids and counts) skip the
    # comparison.
    number = int(text)
    if len(text) > 300 and abs(number) > _FLOAT_MAX:
        raise ValueError(f"the number {text[:40]}... is too large")
    return number


# One decoder, built once (``json.loads`` with hooks builds one per call).
_DECODER = json.JSONDecoder(
    parse_constant=_no_constant, parse_float=_finite, parse_int=_int_in_range
)


def parse_json(raw: str | bytes) -> Any:
    """``json.loads`` that refuses ``NaN``, ``Infinity`` and numbers beyond a float's range
    with a ``ValueError`` (see the module docstring). Bytes are decoded as ``json.loads``
    decodes them (UTF-8, -16 or -32); other parse errors are ``ValueError``
    (``json.JSONDecodeError``, ``UnicodeDecodeError``) as with ``json.loads``."""
    if isinstance(raw, bytes | bytearray):
        raw = raw.decode(json.detect_encoding(raw), "surrogatepass")
    if raw.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", raw, 0)
    return _DECODER.decode(raw)


def loads_bounded(raw: str | bytes, limit: int = MAX_JSON_DEPTH) -> Any:
    """:func:`parse_json` that raises :class:`JSONTooDeep` instead of recursing too deep."""
    if json_depth_exceeds(raw, limit):
        raise JSONTooDeep(limit)
    return parse_json(raw)


def json_bytes(value: Any, *, default: Any = None) -> bytes:
    """``value`` as compact JSON in UTF-8, non-ASCII text as itself (``\\u`` escapes made
    CJK text twice its UTF-8 size, an emoji three times). A lone surrogate that slipped
    through cannot be UTF-8: then the whole value goes escaped."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=default)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":"), default=default).encode()
