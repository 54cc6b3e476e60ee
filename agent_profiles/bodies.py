"""Reading an open httpx response's body decoded, a bounded piece at a time.

httpx decodes ``Content-Encoding: gzip`` / ``deflate`` (:meth:`httpx.Response.iter_bytes`)
one raw chunk at a time with no bound on what a chunk expands to: 64 kB of gzipped zeros
come out as 64 MB in one step, before any size cap of the caller sees a byte (a 10 MB
"gzip bomb" is 10 GB). Every body the platform reads from outside over httpx (agent
cards, streams, token endpoints) is read with :func:`iter_decoded` instead: the raw bytes
(:meth:`httpx.Response.iter_raw`) decoded here, no step giving more than :data:`STEP`
bytes, so the caller's cap stops a bomb after at most one step past it.

The urllib3 pool's plain calls (:mod:`agent_profiles.guarded_pool`) need none of this:
urllib3 2.x's ``read(amt)`` bounds each decompression step by ``amt`` itself.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

import httpx

__all__ = ["STEP", "BadEncoding", "iter_decoded"]

# The most one decompression step may give (and so what a reader holds past its cap).
STEP = 64 * 1024

# zlib's window bits: a gzip member, a zlib stream, a raw deflate stream.
_GZIP = zlib.MAX_WBITS | 16
_ZLIB = zlib.MAX_WBITS
_RAW = -zlib.MAX_WBITS

# Codings httpx decodes when their package is installed (and then advertises in its
# Accept-Encoding), for which there is no bounded decoder here: refused, never passed on
# as if they were the body.
_REFUSED = {"br", "zstd"}


class BadEncoding(httpx.DecodingError):
    """The body is not what its ``Content-Encoding`` says (broken gzip, say), or is in an
    encoding read nowhere here. An ``httpx.DecodingError``, as httpx's own decoding raised
    (not a ``TransportError``): callers that took that one take this one the same way."""


def iter_decoded(response: httpx.Response, step: int = STEP) -> Iterator[bytes]:
    """The body of ``response`` decoded as its ``Content-Encoding`` says (gzip, deflate
    as a zlib or raw stream, identity; several in the order applied), each piece at most
    ``step`` bytes.

    At least one piece per raw chunk received, empty if it decoded to nothing: a reader
    that checks its clock on every piece is not held by bytes that give no output (a gzip
    header's endless comment, empty deflate blocks). Codings httpx does not know pass as
    they are, as httpx passes them; ``br`` and ``zstd`` raise :class:`BadEncoding`."""
    if response.is_stream_consumed:
        # Read whole before (httpx decoded it then): only the pieces are left to cut.
        content = response.content
        yield from (content[at : at + step] for at in range(0, len(content), step))
        return
    codings = [
        value.strip().lower()
        for value in response.headers.get_list("content-encoding", split_commas=True)
    ]
    pieces: Iterable[bytes] = response.iter_raw()
    for coding in reversed(codings):  # the last one applied is undone first
        if coding in ("gzip", "x-gzip"):
            pieces = _inflate(pieces, coding, (_GZIP,), step)
        elif coding == "deflate":
            # RFC 9110 says a zlib stream; some servers send raw deflate: as httpx, the
            # first bytes tell which.
            pieces = _inflate(pieces, coding, (_ZLIB, _RAW), step)
        elif coding in _REFUSED:
            raise BadEncoding(f"the body is in the {coding} encoding, which is not read")
    for piece in pieces:
        # A raw piece (no coding) is as the network gave it: cut too, for the bound.
        yield from (piece[at : at + step] for at in range(0, len(piece), step)) if piece else [b""]


def _inflate(
    pieces: Iterable[bytes], coding: str, wbits: tuple[int, ...], step: int
) -> Iterator[bytes]:
    """``pieces`` decompressed, no step giving more than ``step`` bytes; ``wbits[1:]``
    are tried in turn when the first bytes are not a ``wbits[0]`` stream."""
    formats = list(wbits)
    decoder = zlib.decompressobj(formats.pop(0))
    head = b""  # the bytes given while the format is not settled (zlib's header is two)
    settled = len(formats) == 0
    for data in pieces:
        if not data:
            yield b""  # nothing came out upstream: still a piece for the reader's clock
            continue
        given = False
        while True:
            try:
                out = decoder.decompress(data, step)
            except zlib.error as exc:
                if settled:
                    raise BadEncoding(f"the body's {coding} encoding is broken: {exc}") from None
                decoder = zlib.decompressobj(formats.pop(0))
                data, head, settled = head + data, b"", not formats
                continue
            if not settled:
                head += data
                settled = len(head) >= 2  # the header passed: a later error is the data's
                head = b"" if settled else head
            # What did not fit in ``step`` waits in unconsumed_tail; a full step may
            # also leave output pending inside zlib: ask again, with no new input.
            data = decoder.unconsumed_tail
            if out:
                given = True
                yield out
            if not data and len(out) < step:
                break
        if not given:
            yield b""
