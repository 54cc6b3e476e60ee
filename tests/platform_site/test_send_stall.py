"""platform_site.send_stall's rule: a connection is stalled while more than Twisted's
buffer size waits unsent and that amount has not gone down; any progress starts the
clock again. The live closes are in tests/a2a_face/ and tests/gateway/test_send_stall.py."""

from __future__ import annotations

from platform_site.send_stall import BUFFER_SIZE, Stall, unsent

BIG = BUFFER_SIZE * 10


def test_a_connection_that_keeps_its_buffer_full_stalls_from_the_first_sighting() -> None:
    stall = Stall()
    assert stall.seconds(BIG, 100.0) == 0.0
    assert stall.seconds(BIG, 102.0) == 2.0
    assert stall.seconds(BIG + 500, 161.0) == 61.0  # more written, nothing taken


def test_any_progress_or_a_drained_buffer_starts_the_clock_again() -> None:
    stall = Stall()
    stall.seconds(BIG, 100.0)
    assert stall.seconds(BIG - 1, 150.0) == 0.0  # the client took a byte
    assert stall.seconds(BIG - 1, 170.0) == 20.0
    assert stall.seconds(BUFFER_SIZE, 171.0) == 0.0  # within the buffer: flowing
    assert stall.seconds(BIG, 172.0) == 0.0
    assert stall.seconds(None, 300.0) == 0.0  # a transport that does not say


def test_unsent_reads_twisteds_buffers_and_is_none_for_other_transports() -> None:
    from twisted.internet.abstract import FileDescriptor

    transport = FileDescriptor.__new__(FileDescriptor)
    transport.dataBuffer, transport.offset = b"x" * 100, 40
    transport._tempDataLen = 7
    assert unsent(transport) == 67
    assert unsent(object()) is None
