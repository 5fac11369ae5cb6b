"""The committed clients are what the generators make from the committed spec."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_clients_match_the_spec() -> None:
    # The TypeScript client is compared too wherever its pinned generator is installed.
    typescript_ready = (
        shutil.which("node") is not None
        and (ROOT / "clients" / "typescript" / "node_modules" / ".bin" / "openapi-ts").exists()
    )
    command = [sys.executable, str(ROOT / "clients" / "generate.py"), "--check"]
    if not typescript_ready:
        command += ["--only", "python"]
    # Run as from a virtualenv that is not activated: the generator must find the ruff beside
    # its interpreter by itself (on PATH only when the virtualenv is activated).
    scripts = str(Path(sys.executable).parent)
    path = os.pathsep.join(
        entry for entry in os.environ.get("PATH", "").split(os.pathsep) if entry != scripts
    )
    run = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PATH": path},
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_the_python_client_ships_its_types() -> None:
    """PEP 561: without `py.typed` in the installed package, a typed application gets
    `import-untyped` and every client type is `Any`."""
    client = ROOT / "clients" / "python"
    assert (client / "mneme_client" / "py.typed").is_file()
    metadata = tomllib.loads((client / "pyproject.toml").read_text())
    assert "py.typed" in metadata["tool"]["setuptools"]["package-data"]["mneme_client"]
