"""The one text rule: NUL and lone surrogates found with their path; deep JSON refused."""

from __future__ import annotations

import json

import pytest

from platform_site.text import (
    MAX_JSON_DEPTH,
    BadText,
    JSONTooDeep,
    check_text,
    find_bad_text,
    loads_bounded,
)


def test_it_accepts_ordinary_text() -> None:
    assert find_bad_text({"a": ["b", {"c": "d é 😀"}], "n": 1, "x": None}) is None


def test_it_names_the_path_of_a_nul() -> None:
    bad = find_bad_text({"input": {"items": ["ok", {"name": "a\x00b"}]}})
    assert bad is not None
    assert bad.where == "input.items[1].name"
    assert "NUL" in str(bad)


def test_it_finds_a_lone_surrogate_in_a_key() -> None:
    bad = find_bad_text({"ok": {"a\udcffb": 1}}, "metadata")
    assert bad is not None
    assert bad.where == "metadata.ok (a key)"
    assert bad.what == "a lone surrogate"


def test_check_text_raises_with_the_field_name() -> None:
    with pytest.raises(BadText, match=r"contextId contains a NUL character"):
        check_text("a\x00", "contextId")


def test_loads_bounded_parses_ordinary_json() -> None:
    assert loads_bounded(b'{"a": [1, {"b": "[[[["}]}') == {"a": [1, {"b": "[[[["}]}


def test_loads_bounded_refuses_deep_json_before_parsing() -> None:
    with pytest.raises(JSONTooDeep):
        loads_bounded("[" * 100_000 + "]" * 100_000)


def test_loads_bounded_allows_the_limit_itself() -> None:
    raw = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert json.dumps(loads_bounded(raw)).count("[") == MAX_JSON_DEPTH


def test_brackets_inside_strings_do_not_count() -> None:
    raw = json.dumps({"text": "{" * 1000 + '\\"' + "[" * 1000})
    assert loads_bounded(raw)["text"].startswith("{{{")


def test_other_parse_errors_stay_value_errors() -> None:
    with pytest.raises(ValueError, match="Expecting"):
        loads_bounded("{")


def test_scrub_replaces_what_postgresql_cannot_store() -> None:
    from a2a.transports.quoting import excerpt
    from platform_site.text import find_bad_text, scrub

    text = "ok\x00 and \ud800 end"
    assert scrub(text) == "ok\ufffd and \ufffd end"
    assert find_bad_text(excerpt(text)) is None
    assert scrub("plain ü") == "plain ü"
