"""Bad configuration stops the reference agent at once with one clear line and exit 2."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests.refagent.conftest import SCRIPTS
from tests.support.serving import free_port

SCRIPT = SCRIPTS / "a2a_server_reference.py"


def run_agent(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT)],
        env={"PATH": "/usr/bin:/bin", "A2A_PORT": str(free_port()), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("a2a_server_reference: error: ")
    for word in words:
        assert word in lines[0]


@pytest.mark.slow
def test_it_exits_with_one_line_when_the_platform_is_unreachable() -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    result = run_agent(PLATFORM_URL=closed)
    assert_one_line_error(result, "cannot reach the platform", closed)


@pytest.mark.slow
def test_it_exits_with_one_line_when_its_port_is_in_use() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_agent(A2A_PORT=str(port))
    assert_one_line_error(result, f"port {port}", "already in use", "A2A_PORT")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"A2A_PORT": "http"}, ["A2A_PORT must be a number"]),
        ({"A2A_PORT": "70000"}, ["A2A_PORT must be a TCP port"]),
        ({"PLATFORM_URL": "ftp://x"}, ["PLATFORM_URL must be an http(s) URL"]),
        ({"LOG_LEVEL": "verbose"}, ["LOG_LEVEL must be one of", "'verbose'"]),
    ],
)
def test_it_exits_with_one_line_on_a_bad_setting(env: dict[str, str], words: list[str]) -> None:
    assert_one_line_error(run_agent(**env), *words)
