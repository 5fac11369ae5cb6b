"""Both client packages are ready to publish, versioned by the API they speak."""

from __future__ import annotations

import importlib.util
import json
import re
import tomllib
from pathlib import Path

from mneme import __version__ as python_layer_version

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / "clients" / "python"
TYPESCRIPT = ROOT / "clients" / "typescript"


def _api_version() -> str:
    version: str = json.loads((ROOT / "docs" / "openapi.json").read_text())["info"]["version"]
    return version


def _latest_changelog_version(path: Path) -> str:
    match = re.search(r"^## (\S+)", path.read_text(), re.MULTILINE)
    assert match is not None, f"{path} has no release entry"
    return match.group(1)


def test_the_python_package_is_versioned_by_the_api_and_ships_its_types() -> None:
    project = tomllib.loads((PYTHON / "pyproject.toml").read_text())
    setuptools = project["tool"]["setuptools"]

    assert python_layer_version == _api_version()
    assert project["project"]["dynamic"] == ["version"]
    assert setuptools["dynamic"]["version"]["attr"] == "mneme.version.__version__"
    assert _latest_changelog_version(PYTHON / "CHANGELOG.md") == _api_version()
    assert (PYTHON / "mneme" / "py.typed").is_file()
    assert "py.typed" in setuptools["package-data"]["mneme"]
    assert "mneme*" in setuptools["packages"]["find"]["include"]


def test_the_typescript_package_is_public_and_versioned_by_the_api() -> None:
    package = json.loads((TYPESCRIPT / "package.json").read_text())
    version_ts = (TYPESCRIPT / "src" / "version.ts").read_text()

    assert "private" not in package
    assert package["version"] == _api_version()
    assert f"export const VERSION = '{_api_version()}';" in version_ts
    assert _latest_changelog_version(TYPESCRIPT / "CHANGELOG.md") == _api_version()
    assert package["files"] == ["dist/src", "README.md", "CHANGELOG.md"]
    assert package["scripts"]["prepack"] == "npm run build"


def test_the_generator_writes_each_package_version_from_the_api_version() -> None:
    """A new `info.version` reaches every file that names a package version (only the CHANGELOG
    entry is written by hand); `generate.py --check` fails while one still names another."""
    spec = importlib.util.spec_from_file_location("generate", ROOT / "clients" / "generate.py")
    assert spec is not None and spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)

    assert generate.api_version() == _api_version()
    for path, text in {
        **generate.python_versioned(_api_version()),
        **generate.typescript_versioned(_api_version()),
    }.items():
        assert path.read_text() == text, f"{path} does not name API version {_api_version()}"

    [python] = generate.python_versioned("2.3.0").values()
    assert '__version__ = "2.3.0"' in python
    typescript = {path.name: text for path, text in generate.typescript_versioned("2.3.0").items()}
    assert "export const VERSION = '2.3.0';" in typescript["version.ts"]
    assert json.loads(typescript["package.json"])["version"] == "2.3.0"
    lock = json.loads(typescript["package-lock.json"])
    assert (lock["version"], lock["packages"][""]["version"]) == ("2.3.0", "2.3.0")
    # Nothing else in the lockfile moves (the dependencies stay pinned).
    committed = json.loads((TYPESCRIPT / "package-lock.json").read_text())
    del lock["packages"][""]["version"], committed["packages"][""]["version"]
    assert lock["packages"] == committed["packages"]
