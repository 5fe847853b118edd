"""wire/ is sans-IO, and its public surface is what it says.

No module of wire/ imports mitmproxy, asyncio or sockets, at its top or inside a function
(read from the parsed source: an import that never runs in a test counts too); ruff's
banned-api (pyproject.toml) says the same at lint time. ``streamfix.wire.__all__`` names
what ``from streamfix.wire import ...`` gives, each the defining module's own object.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from support import ROOT

from streamfix import wire

BANNED = {"mitmproxy", "asyncio", "socket"}
WIRE = sorted((ROOT / "wire").glob("*.py"))


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, top-level module) of every import in a module, relative ones left out."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module.split(".")[0]))
    return out


@pytest.mark.parametrize("path", WIRE, ids=[p.name for p in WIRE])
def test_no_io_imports(path: Path) -> None:
    bad = [f"{path.name}:{line}: {mod}" for line, mod in imported(path) if mod in BANNED]
    assert not bad, "wire/ is sans-IO (addons/ is the glue):\n" + "\n".join(bad)


def test_the_check_reads_every_kind_of_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import os\nimport asyncio.events\ndef f():\n    from mitmproxy import http\nfrom . import sse\n")
    assert {m for _, m in imported(probe)} & BANNED == {"asyncio", "mitmproxy"}


def test_public_surface() -> None:
    assert sorted(wire.__all__) == sorted(wire._PUBLIC) and len(wire.__all__) == len(set(wire.__all__))
    for name in wire.__all__:
        obj = getattr(wire, name)
        assert getattr(importlib.import_module(f"streamfix.wire.{wire._PUBLIC[name]}"), name) is obj
    with pytest.raises(AttributeError):
        _ = wire.no_such_name
