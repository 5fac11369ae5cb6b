"""Regenerate the Python and TypeScript clients from the committed OpenAPI document.

    python clients/generate.py            # rewrite clients/python/mneme_client and
                                          # clients/typescript/src/generated
    python clients/generate.py --check    # generate into a temporary folder and fail when
                                          # the committed clients differ from the spec

The generators are pinned: openapi-python-client in requirements-dev.lock, @hey-api/openapi-ts
in clients/typescript/package-lock.json (`npm ci` there first). `--only python` skips the
TypeScript client (for machines without node).

Each package's version is written from the document's `info.version` too (mneme/version.py;
package.json, its lockfile and src/version.ts), so a client release names the API it speaks;
only its CHANGELOG entry is written by hand.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

CLIENTS = Path(__file__).resolve().parent
SPEC = CLIENTS.parent / "docs" / "openapi.json"
PYTHON_PACKAGE = CLIENTS / "python" / "mneme_client"
TYPESCRIPT = CLIENTS / "typescript"
TYPESCRIPT_GENERATED = TYPESCRIPT / "src" / "generated"
PYTHON_VERSION = CLIENTS / "python" / "mneme" / "version.py"
TYPESCRIPT_VERSION = TYPESCRIPT / "src" / "version.ts"
VERSION_NOTE = (
    "The package version: the version of the API (`info.version` of docs/openapi.json) it was\n"
    "generated from, so a client release names the API it speaks (written by clients/generate.py)."
)


def generate_python(target: Path) -> None:
    subprocess.run(  # noqa: S603 - this interpreter, the pinned generator, fixed arguments
        [
            sys.executable,
            "-m",
            "openapi_python_client",
            "generate",
            "--path",
            str(SPEC),
            "--meta",
            "none",
            "--output-path",
            str(target),
            "--overwrite",
            "--config",
            str(CLIENTS / "python" / "openapi-python-client.yaml"),
        ],
        check=True,
        cwd=target.parent,
        env=_with_interpreter_scripts(),
    )
    # PEP 561 marker: the generator writes it only with its own packaging metadata (`--meta`),
    # which this repository keeps by hand in clients/python/pyproject.toml.
    (target / "py.typed").write_text("# Marker file for PEP 561\n")


def _with_interpreter_scripts() -> dict[str, str]:
    """The environment with this interpreter's scripts first on PATH: the generator's post
    hooks call `ruff` by name, and the pinned one is installed beside this interpreter whether
    or not its virtualenv is activated. Without it on PATH the generator only warns and writes
    its code unformatted, which differs from the committed client in every file."""
    scripts = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": os.pathsep.join([scripts, os.environ.get("PATH", "")])}


def generate_typescript(target: Path) -> None:
    subprocess.run(  # noqa: S603 - the pinned generator in node_modules, fixed arguments
        [
            str(TYPESCRIPT / "node_modules" / ".bin" / "openapi-ts"),
            "--input",
            str(SPEC),
            "--output",
            str(target),
            "--client",
            "@hey-api/client-fetch",
            "--silent",
            "--no-log-file",
        ],
        check=True,
        cwd=TYPESCRIPT,
    )


def api_version() -> str:
    version: str = json.loads(SPEC.read_text())["info"]["version"]
    return version


def _with_version(path: Path, version: str, *locations: tuple[str, ...]) -> str:
    """A JSON file of the TypeScript package with `version` at each of `locations` (key paths),
    in npm's own layout."""
    document = json.loads(path.read_text())
    for location in locations:
        node = document
        for key in location[:-1]:
            node = node[key]
        node[location[-1]] = version
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def python_versioned(version: str) -> dict[Path, str]:
    """The Python package's files that carry the API version, as they must read."""
    return {PYTHON_VERSION: f'"""{VERSION_NOTE}"""\n\n__version__ = "{version}"\n'}


def typescript_versioned(version: str) -> dict[Path, str]:
    """The TypeScript package's files that carry the API version, as they must read."""
    note = "".join(f"// {line}\n" for line in VERSION_NOTE.splitlines())
    return {
        TYPESCRIPT_VERSION: f"{note}export const VERSION = '{version}';\n",
        TYPESCRIPT / "package.json": _with_version(
            TYPESCRIPT / "package.json", version, ("version",)
        ),
        TYPESCRIPT / "package-lock.json": _with_version(
            TYPESCRIPT / "package-lock.json", version, ("version",), ("packages", "", "version")
        ),
    }


def differences(left: Path, right: Path) -> Iterator[str]:
    """Relative paths that exist on one side only or differ in content."""
    comparison = filecmp.dircmp(left, right, ignore=["__pycache__"])
    yield from (str(left / name) for name in comparison.left_only)
    yield from (str(right / name) for name in comparison.right_only)
    for name in comparison.common_files:
        if (left / name).read_bytes() != (right / name).read_bytes():
            yield str(left / name)
    for name in comparison.common_dirs:
        yield from differences(left / name, right / name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="diff instead of rewriting")
    parser.add_argument("--only", choices=["python", "typescript"], help="one client only")
    args = parser.parse_args(argv)
    targets = [
        (name, generate, committed, versioned)
        for name, generate, committed, versioned in (
            ("python", generate_python, PYTHON_PACKAGE, python_versioned),
            ("typescript", generate_typescript, TYPESCRIPT_GENERATED, typescript_versioned),
        )
        if args.only in (None, name)
    ]
    version = api_version()
    stale: list[str] = []
    for _name, generate, committed, versioned in targets:
        files = versioned(version)
        if not args.check:
            shutil.rmtree(committed, ignore_errors=True)
            generate(committed)
            for path, text in files.items():
                path.write_text(text)
            continue
        stale.extend(str(path) for path, text in files.items() if path.read_text() != text)
        with tempfile.TemporaryDirectory() as scratch:
            fresh = Path(scratch) / committed.name
            generate(fresh)
            stale.extend(differences(committed, fresh))
    if stale:
        sys.stdout.write(
            "clients out of date with docs/openapi.json; run python clients/generate.py:\n"
            + "".join(f"  {path}\n" for path in stale)
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
