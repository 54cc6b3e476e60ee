"""Imports point one way: gateway -> a2a -> agent_profiles -> platform_site. A lower app
that needs a higher one (a transport, a presence check) has it registered at app start.
And a name is imported from the module that defines it, not through one that imports it."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
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


def top_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """A module's top-level statements, those of its top-level ``if`` and ``try`` too."""
    for node in tree.body:
        yield node
        if isinstance(node, ast.If):
            yield from [*node.body, *node.orelse]
        elif isinstance(node, ast.Try):
            yield from [*node.body, *node.orelse, *node.finalbody]
            for handler in node.handlers:
                yield from handler.body


def module_aliases(nodes: Iterable[ast.AST], modules: dict[str, Path]) -> dict[str, str]:
    """The local names these imports bind to project modules, and those modules."""
    aliases = {}
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in modules:
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in modules:
                    aliases[alias.asname] = alias.name
    return aliases


def borrowed_names(tree: ast.Module, modules: dict[str, Path]) -> set[str]:
    """What a module binds at its top level without defining it: names it imports, and
    names it assigns another module's attribute to (``X = other.X``)."""
    statements = list(top_level(tree))
    aliases = module_aliases(statements, modules)
    names: set[str] = set()
    for node in statements:
        if isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names if a.asname or a.name} - set(aliases)
        elif (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id in aliases
        ):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def test_names_are_imported_from_the_module_that_defines_them() -> None:
    """In ``from M import x`` anywhere, and in ``M.x`` (M a module imported) in the apps:
    a test patches a name where the code looks it up, which may be where it is imported."""
    modules = project_modules()
    trees = {name: ast.parse(path.read_text()) for name, path in modules.items()}
    borrowed = {name: borrowed_names(tree, modules) for name, tree in trees.items()}

    def through(module: str | None, name: str) -> bool:
        return module in borrowed and name in borrowed[module] and f"{module}.{name}" not in modules

    offenders = []
    for name, tree in sorted(trees.items()):
        where = modules[name].relative_to(ROOT)
        nodes = list(ast.walk(tree))
        aliases = module_aliases(nodes, modules) if where.parts[0] in ORDER else {}
        for node in nodes:
            if isinstance(node, ast.ImportFrom):
                found = [a.name for a in node.names if through(node.module, a.name)]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                module = aliases.get(node.value.id)
                found = [node.attr] if through(module, node.attr) else []
            else:
                continue
            offenders += [f"{where}:{node.lineno}: {each}" for each in found]
    assert offenders == []


def test_the_gateway_registers_its_transport_at_start() -> None:
    assert transports.gateway() is GATEWAY
