"""Imports point one way: a2a never imports gateway (the gateway registers itself)."""

from __future__ import annotations

import ast
from pathlib import Path

import a2a
from a2a import transports
from gateway.fallback import GATEWAY

A2A_DIR = Path(a2a.__file__).parent


def test_a2a_does_not_import_gateway() -> None:
    offenders = []
    for path in A2A_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "gateway"]
    assert offenders == []


def test_the_gateway_registers_its_transport_at_start() -> None:
    assert transports.gateway() is GATEWAY
