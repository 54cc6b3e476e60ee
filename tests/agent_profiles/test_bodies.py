"""Bodies decoded a bounded step at a time (:mod:`agent_profiles.bodies`): gzip, deflate
(zlib and raw) and identity give back what was sent however the bytes arrive, no step of
a gzip bomb gives more than :data:`~agent_profiles.bodies.STEP`, and a body that is not
what its ``Content-Encoding`` says is a clear error."""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_profiles import bodies
from agent_profiles.bodies import STEP, BadEncoding, iter_decoded
from tests.support.encoded import BOMB_BYTES, deflated, gzip_bomb, peak_memory

# Some of it incompressible (so a compressed chunk is not all one step), some not.
DATA = os.urandom(100_000) + b"a" * 300_000


def response(coding: str, chunks: list[bytes]) -> httpx.Response:
    """An open response whose raw body arrives in exactly these chunks."""
    headers = {"Content-Encoding": coding} if coding else {}
    return httpx.Response(200, headers=headers, content=iter(chunks))


def split(raw: bytes, size: int) -> list[bytes]:
    return [raw[at : at + size] for at in range(0, len(raw), size)]


ENCODED = {
    "gzip": gzip.compress(DATA),
    "x-gzip": gzip.compress(DATA),
    "deflate": deflated(DATA),
    "raw deflate": deflated(DATA, raw=True),
    "identity": DATA,
    "": DATA,
    "deflate, gzip": gzip.compress(deflated(DATA)),  # deflated first, then gzipped
}


@pytest.mark.parametrize("name", ENCODED)
@pytest.mark.parametrize("size", [1, 5, 8192, 10**7])
def test_a_body_comes_back_whole_in_bounded_pieces(name: str, size: int) -> None:
    coding = "deflate" if name == "raw deflate" else name
    raw = ENCODED[name]
    chunks = split(raw, size if size > 1 or len(raw) < 150_000 else 3)
    pieces = list(iter_decoded(response(coding, chunks)))
    assert b"".join(pieces) == DATA
    assert max(map(len, pieces)) <= STEP


def test_no_decompression_step_of_a_bomb_gives_more_than_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """20 MB of zeros in one 20 kB raw chunk: every call to zlib returns at most STEP
    bytes (httpx's own decoding returned all 20 MB from one call), and reading it all
    holds no more than a few steps at once."""
    bomb = gzip_bomb()
    sizes: list[int] = []
    real = zlib.decompressobj

    class Watched:
        def __init__(self, *args: Any) -> None:
            self._inner = real(*args)

        def decompress(self, data: bytes, max_length: int = 0) -> bytes:
            out = self._inner.decompress(data, max_length)
            sizes.append(len(out))
            return out

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    monkeypatch.setattr(bodies.zlib, "decompressobj", Watched)
    with peak_memory() as peak:
        total = sum(len(piece) for piece in iter_decoded(response("gzip", [bomb])))
    assert total == BOMB_BYTES
    assert max(sizes) == STEP
    assert peak[0] < 1_000_000, peak  # 20 MB expanded; a few steps held


@pytest.mark.parametrize(
    ("coding", "body"),
    [("gzip", b"\x1f\x8b not gzip at all"), ("deflate", b"\xff\xff\xff not deflate")],
)
def test_a_body_that_is_not_its_encoding_is_a_decoding_error(coding: str, body: bytes) -> None:
    with pytest.raises(BadEncoding, match=f"{coding} encoding is broken") as broken:
        list(iter_decoded(response(coding, [body])))
    assert isinstance(broken.value, httpx.DecodingError)  # as httpx's decoding raised


@pytest.mark.parametrize("coding", ["br", "zstd", "gzip, br"])
def test_an_encoding_without_a_bounded_decoder_is_refused(coding: str) -> None:
    with pytest.raises(BadEncoding, match="encoding, which is not read"):
        list(iter_decoded(response(coding, [b"anything"])))


def test_an_encoding_httpx_does_not_know_passes_as_httpx_passes_it() -> None:
    unknown = httpx.Response(200, headers={"Content-Encoding": "utf-8"}, content=iter([b"{}"]))
    assert list(unknown.iter_bytes()) == [b"{}"]
    assert list(iter_decoded(response("utf-8", [b"{}"]))) == [b"{}"]


def test_every_raw_chunk_gives_a_piece_even_one_that_decodes_to_nothing() -> None:
    """A gzip header whose comment never ends decodes to nothing, a byte at a time: a
    reader that checks its clock on every piece must still get one per chunk."""
    header = b"\x1f\x8b\x08\x10\x00\x00\x00\x00\x00\xff"  # FCOMMENT set: a comment follows

    def trickle() -> Iterator[bytes]:
        yield header
        yield from [b"x"] * 50

    pieces = list(
        iter_decoded(httpx.Response(200, headers={"Content-Encoding": "gzip"}, content=trickle()))
    )
    assert pieces == [b""] * 51


def test_a_body_read_whole_before_is_given_in_pieces() -> None:
    read = httpx.Response(200, content=b"x" * (STEP + 10))
    assert [len(piece) for piece in iter_decoded(read)] == [STEP, 10]
