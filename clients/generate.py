"""Regenerate the Python and TypeScript clients from the committed OpenAPI document.

    python clients/generate.py            # rewrite clients/python/mneme_client and
                                          # clients/typescript/src/generated
    python clients/generate.py --check    # generate into a temporary folder and fail when
                                          # the committed clients differ from the spec

The generators are pinned: openapi-python-client in requirements-dev.lock, @hey-api/openapi-ts
in clients/typescript/package-lock.json (`npm ci` there first). `--only python` skips the
TypeScript client (for machines without node).
"""

from __future__ import annotations

import argparse
import filecmp
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


def generate_python(target: Path) -> None:
    subprocess.run(
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
    )
    # PEP 561 marker: the generator writes it only with its own packaging metadata (`--meta`),
    # which this repository keeps by hand in clients/python/pyproject.toml.
    (target / "py.typed").write_text("# Marker file for PEP 561\n")


def generate_typescript(target: Path) -> None:
    subprocess.run(
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
        (name, generate, committed)
        for name, generate, committed in (
            ("python", generate_python, PYTHON_PACKAGE),
            ("typescript", generate_typescript, TYPESCRIPT_GENERATED),
        )
        if args.only in (None, name)
    ]
    stale: list[str] = []
    for _name, generate, committed in targets:
        if not args.check:
            shutil.rmtree(committed, ignore_errors=True)
            generate(committed)
            continue
        with tempfile.TemporaryDirectory() as scratch:
            fresh = Path(scratch) / committed.name
            generate(fresh)
            stale.extend(differences(committed, fresh))
    if stale:
        print("clients out of date with docs/openapi.json; run python clients/generate.py:")
        print("\n".join(f"  {path}" for path in stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
