"""Threads know nothing of the write path: the write path listens to appends (an
`AppendListener` the app hands the thread service), never the other way round."""

from __future__ import annotations

import ast
from pathlib import Path

import service.threads


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_no_threads_module_imports_the_write_path() -> None:
    package = Path(service.threads.__file__).parent
    offenders = {
        path.name: sorted(m for m in imported_modules(path) if m.startswith("service.extraction"))
        for path in sorted(package.glob("*.py"))
    }
    assert {name: mods for name, mods in offenders.items() if mods} == {}
    assert "hooks.py" in offenders  # the package was read
