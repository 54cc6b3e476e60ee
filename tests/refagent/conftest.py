"""The reference agent lives under scripts/ (a small package run by a script), not in an
app: put that directory on the path so tests import it as the script does."""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))
