"""Every environment setting is documented in docs/configuration.md."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)


def test_every_setting_read_from_the_environment_is_documented() -> None:
    source = (ROOT / "platform_site" / "settings.py").read_text()
    names = set(re.findall(r'env[a-z]+\(\s*"([A-Z0-9_]+)"', source))  # every env.py reader
    assert names, "no settings found: did the helpers in settings.py change names?"
    docs = (ROOT / "docs" / "configuration.md").read_text()
    missing = sorted(n for n in names if f"`{n}`" not in docs)
    assert not missing, f"add these settings to docs/configuration.md: {', '.join(missing)}"


def test_every_variable_the_deploy_files_read_is_documented() -> None:
    """The Procfile reads ``${WORKER_CONCURRENCY:-8}`` (and HOST, PORT); the example env file
    sets variables an operator looks up."""
    procfile = (ROOT / "deploy" / "Procfile").read_text()
    used = set(re.findall(r"\$\{([A-Z_0-9]+)", procfile))
    assert "WORKER_CONCURRENCY" in used
    example = (ROOT / "deploy" / "systemd" / "platform.env.example").read_text()
    used |= {
        line.split("=", 1)[0].lstrip("# ").removesuffix("_FILE")
        for line in example.splitlines()
        if re.match(r"#? ?[A-Z][A-Z0-9_]+=", line)
    }
    docs = (ROOT / "docs" / "configuration.md").read_text()
    missing = sorted(name for name in used if f"`{name}`" not in docs)
    assert not missing, f"add these to docs/configuration.md: {', '.join(missing)}"


def test_the_example_env_sets_the_secrets_production_must_set() -> None:
    """docs/configuration.md says **Set it** in production of each of these; the example env
    file an operator copies sets them all (from files)."""
    docs = (ROOT / "docs" / "configuration.md").read_text()
    example = (ROOT / "deploy" / "systemd" / "platform.env.example").read_text()
    for name in ("SECRET_KEY", "CREDENTIALS_KEY"):
        row = next(line for line in docs.splitlines() if line.startswith(f"| `{name}` |"))
        assert "**Set it**" in row, name
        assert re.search(rf"^{name}_FILE=/", example, re.MULTILINE), name
    # With the command that makes the key.
    assert "Fernet.generate_key()" in example
