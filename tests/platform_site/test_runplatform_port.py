"""`make run` / ``runplatform`` with a port out of range (``PORT=80000``, ``--port 99999``: a
typo) stops with one line naming the port, as a taken port does, before anything starts:
``bind()`` raises OverflowError for these, which used to end in a traceback."""

from __future__ import annotations

import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import call_command

from platform_site.management.commands.runplatform import port_problem
from tests.support.processes import BASE_DIR, platform_env


@pytest.mark.parametrize("port", [0, -1, 65536, 80000, 99999])
def test_a_port_out_of_range_is_a_problem_naming_it(port: int) -> None:
    """bind() raises OverflowError, not OSError, for these: the check must catch them."""
    problem = port_problem("127.0.0.1", port)
    assert problem == f"port {port} is out of range (1-65535; set PORT=... to another)"


def test_the_command_with_a_port_out_of_range_exits_with_one_line() -> None:
    """Checked before migrations or workers: no database touched, nothing started."""
    err = StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("runplatform", "--port", "99999", stdout=StringIO(), stderr=err)
    assert exit_.value.code == 1
    assert err.getvalue().strip() == (
        "Cannot start the platform: port 99999 is out of range (1-65535; set PORT=... to another)"
    )


def test_make_run_with_port_out_of_range_prints_one_line_and_no_traceback() -> None:
    """PORT from the environment is runplatform's default port, as `make run` uses it."""
    result = subprocess.run(
        [sys.executable, "manage.py", "runplatform", "--no-migrate"],
        cwd=BASE_DIR,
        env=platform_env(PORT=80000),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert lines == [
        "Cannot start the platform: port 80000 is out of range (1-65535; set PORT=... to another)"
    ]
