"""Imports point one way: gateway -> a2a -> agent_profiles -> platform_site. A lower app
that needs a higher one (a transport, a presence check) has it registered at app start.
And a name is imported from the module that defines it, not through one that imports it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from a2a import transports
from gateway.fallback import GATEWAY

ROOT = Path(__file__).resolve().parents[2]
ORDER = ["platform_site", "agent_profiles", "a2a", "gateway"]  # lowest first
# The project's wiring, which assembles the apps: the ASGI and URL routers, the OpenAPI
# hook that documents the agent-id path parameter of every app's routes, and the command
# that starts the whole platform (and seeds a newcomer's skills).
WIRING = {
    "platform_site/asgi.py",
    "platform_site/urls.py",
    "platform_site/openapi.py",
    "platform_site/management/commands/runplatform.py",
}


def imported_apps(path: Path) -> list[str]:
    """The project apps a module imports, at any depth (function-level imports too)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return [name.split(".")[0] for name in names if name.split(".")[0] in ORDER]


@pytest.mark.parametrize("app", ORDER[:-1])
def test_an_app_imports_no_app_above_it(app: str) -> None:
    above = set(ORDER[ORDER.index(app) + 1 :])
    offenders = []
    for path in sorted((ROOT / app).rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative in WIRING:
            continue
        offenders += [f"{relative}: {name}" for name in imported_apps(path) if name in above]
    assert offenders == []


def project_modules() -> dict[str, Path]:
    """Every module of the project (apps, tests, scripts, benchmarks) by dotted name."""
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[0].startswith(".") or "node_modules" in parts:
            continue
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def test_names_are_imported_from_the_module_that_defines_them() -> None:
    modules = project_modules()
    # What each module binds at its top level by importing it (not by defining it).
    borrowed = {
        name: {
            alias.asname or alias.name
            for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
        for name, path in modules.items()
    }
    offenders = []
    for path in sorted(modules.values()):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.module not in borrowed:
                continue
            offenders += [
                f"{path.relative_to(ROOT)}:{node.lineno}: {alias.name} from {node.module}"
                for alias in node.names
                if alias.name in borrowed[node.module]
                and f"{node.module}.{alias.name}" not in modules
            ]
    assert offenders == []


def test_the_gateway_registers_its_transport_at_start() -> None:
    assert transports.gateway() is GATEWAY
