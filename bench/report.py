"""Writing a benchmark's figures into its own section of docs/benchmarks.md."""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def write_section(name: str, body: str) -> None:
    """Replace the text between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->`` with
    ``body`` (appending the section if it is missing); other sections stay as they are."""
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n{body}\n{end}"
    text = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    DOCS.write_text(text)


# In a section, the hand-written reading follows this mark: a run written without a new
# reading (``--analysis``) keeps the one there.
READING_MARK = "<!-- reading -->"


def kept_reading(name: str) -> str:
    """The text after :data:`READING_MARK` in section ``name`` of docs/benchmarks.md, or
    "" when there is none."""
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    text = DOCS.read_text() if DOCS.exists() else ""
    if start not in text or end not in text:
        return ""
    body = text.split(start, 1)[1].split(end, 1)[0]
    return body.split(READING_MARK, 1)[1].strip() if READING_MARK in body else ""
