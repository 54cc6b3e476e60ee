"""Every environment setting is documented in docs/configuration.md."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)


def test_every_setting_read_from_the_environment_is_documented() -> None:
    source = (ROOT / "platform_site" / "settings.py").read_text()
    names = set(re.findall(r'env(?:str|bool|int|float|choice|rate)\(\s*"([A-Z0-9_]+)"', source))
    assert names, "no settings found: did the helpers in settings.py change names?"
    docs = (ROOT / "docs" / "configuration.md").read_text()
    missing = sorted(n for n in names if f"`{n}`" not in docs)
    assert not missing, f"add these settings to docs/configuration.md: {', '.join(missing)}"
