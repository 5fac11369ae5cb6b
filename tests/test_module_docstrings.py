"""Every module of the service and the benchmarks says what it is for in a docstring, so a
reader opening any file (or `help()` on it) starts from its purpose."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_module_has_a_docstring() -> None:
    missing = [
        str(path.relative_to(ROOT))
        for package in ("service", "benchmarks")
        for path in sorted((ROOT / package).rglob("*.py"))
        if not ast.get_docstring(ast.parse(path.read_text()))
    ]
    assert missing == []
