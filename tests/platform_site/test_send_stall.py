"""platform_site.send_stall's rule: a connection is stalled while more than Twisted's
buffer size waits unsent and its socket has taken nothing since; any byte taken starts the
clock again, so a slow reader stays even when more is written than it takes. The live
closes through the platform are in tests/a2a_face/ and tests/gateway/test_send_stall.py;
here, real Twisted sockets in a child process (its reactor runs once)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from platform_site.send_stall import BUFFER_SIZE, Stall, unsent
from tests.support.venvs import BASE_DIR

BIG = BUFFER_SIZE * 10


def test_a_connection_whose_socket_takes_nothing_stalls_from_the_first_sighting() -> None:
    stall = Stall()
    assert stall.seconds(BIG, 0, 100.0) == 0.0
    assert stall.seconds(BIG, 0, 102.0) == 2.0
    assert stall.seconds(BIG + 500, 0, 161.0) == 61.0  # more written, nothing taken


def test_any_byte_taken_or_a_drained_buffer_starts_the_clock_again() -> None:
    stall = Stall()
    stall.seconds(BIG, 1000, 100.0)
    assert stall.seconds(BIG + 5000, 1001, 150.0) == 0.0  # it took a byte (and more came)
    assert stall.seconds(BIG + 5000, 1001, 170.0) == 20.0
    assert stall.seconds(BUFFER_SIZE, 1001, 171.0) == 0.0  # within the buffer: flowing
    assert stall.seconds(BIG, 1001, 172.0) == 0.0
    assert stall.seconds(None, 1001, 300.0) == 0.0  # a transport that does not say


def test_unsent_reads_twisteds_buffers_and_is_none_for_other_transports() -> None:
    from twisted.internet.abstract import FileDescriptor

    transport = FileDescriptor.__new__(FileDescriptor)
    transport.dataBuffer, transport.offset = b"x" * 100, 40
    transport._tempDataLen = 7
    assert unsent(transport) == 67
    assert unsent(object()) is None


# A Twisted server writes 128 KiB/s to two clients: one reads 64 KiB/s, one reads nothing.
SCENARIO = textwrap.dedent(
    """
    import json, socket, threading, time
    from django.conf import settings
    settings.configure(SEND_STALL_TIMEOUT=2.0)
    from twisted.internet import protocol, reactor, task
    from platform_site import send_stall

    class Writer(protocol.Protocol):
        def connectionMade(self):
            self.transport.getHandle().setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
            send_stall._watch(self)
            task.LoopingCall(self.write).start(0.25)
        def write(self):
            if self.transport.connected:
                self.transport.write(b"x" * 32768)

    factory = protocol.Factory()
    factory.protocol = Writer
    port = reactor.listenTCP(0, factory, interface="127.0.0.1").getHost().port
    seen = {}

    def client(name, rate):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
        sock.connect(("127.0.0.1", port))
        sock.settimeout(1)
        if not rate:
            time.sleep(9)  # reads nothing, then looks
        start, total = time.monotonic(), 0
        while time.monotonic() - start < 9:
            try:
                data = sock.recv(16384)
            except TimeoutError:
                continue
            except OSError:
                seen[name] = "closed"
                return
            if not data:
                seen[name] = "closed"
                return
            total += len(data)
            if rate:
                time.sleep(len(data) / rate)
        seen[name] = "open"

    threads = [threading.Thread(target=client, args=a) for a in (("slow", 65536), ("none", 0))]
    for t in threads:
        t.start()

    def finish():
        for t in threads:
            t.join()
        reactor.callFromThread(reactor.stop)

    threading.Thread(target=finish).start()
    reactor.run()
    print(json.dumps(seen))
    """
)


@pytest.mark.slow
def test_a_slow_reader_stays_and_one_that_reads_nothing_is_closed() -> None:
    run = subprocess.run(
        [sys.executable, "-c", SCENARIO],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen == {"slow": "open", "none": "closed"}, run.stderr[-2000:]
