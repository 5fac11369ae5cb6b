"""The documentation's fenced examples, found and run as a reader runs them.

A document marks what it promises with two conventions, both plain Markdown:

- a fence's info string names the language and, after it, tags: ```` ```sh walkthrough ````
  marks the README's first session; a test picks blocks by language and tag;
- inside a shell block, a comment line `# → …` shows what the command before it prints, with
  `…` standing for anything on that line. Consecutive `# →` lines must appear in that order.

Examples are written against `localhost:8000`, where `mneme serve` listens; `run_shell` and the
tests point them at the live test server by replacing that address and nothing else a reader
would type, so an example that stops working fails its test.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.server import settings_environment
from service.config import Settings

REPOSITORY = Path(__file__).resolve().parents[2]
DOCUMENTED_ADDRESS = "localhost:8000"
OUTPUT_MARK = "# → "
_FENCE = re.compile(r"^```(\S*)(.*)$")
_BLOCK_END = "@@ end of a documented block @@"
SHELL_TIMEOUT_SECONDS = 300


@dataclass(frozen=True)
class Snippet:
    """One fenced block: where it is, its language and tags, and its text."""

    path: Path
    line: int
    language: str
    tags: tuple[str, ...]
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPOSITORY)}:{self.line}"

    @property
    def shown_output(self) -> list[str]:
        """The `# → …` lines: what the block's commands print, in order."""
        return [
            line.strip().removeprefix(OUTPUT_MARK)
            for line in self.code.splitlines()
            if line.strip().startswith(OUTPUT_MARK)
        ]

    def replaced(self, replacements: dict[str, str]) -> Snippet:
        code = self.code
        for old, new in replacements.items():
            code = code.replace(old, new)
        return Snippet(self.path, self.line, self.language, self.tags, code)


def snippets(document: str, language: str, tag: str | None = None) -> list[Snippet]:
    """The fenced blocks of `document` (a path from the repository root) in `language`, in
    document order; with `tag`, only those whose info string carries it."""
    path = REPOSITORY / document
    found: list[Snippet] = []
    opened: tuple[int, str, tuple[str, ...]] | None = None
    body: list[str] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        fence = _FENCE.match(line)
        if opened is None and fence:
            opened = (number, fence.group(1), tuple(fence.group(2).split()))
            body = []
        elif opened is not None and line.rstrip() == "```":
            start, block_language, tags = opened
            if block_language == language and (tag is None or tag in tags):
                found.append(Snippet(path, start, block_language, tags, "\n".join(body) + "\n"))
            opened = None
        elif opened is not None:
            body.append(line)
    assert opened is None, f"{document}:{opened[0]}: a fence is never closed"
    return found


def pattern_of(shown: str) -> re.Pattern[str]:
    """A shown output line as a pattern over one printed line: `…` matches anything."""
    return re.compile(".*?".join(re.escape(part) for part in shown.split("…")))


def assert_prints(snippet: Snippet, output: str) -> None:
    """Every `# → …` line of `snippet` matches `output`, in order."""
    position = 0
    for shown in snippet.shown_output:
        match = pattern_of(shown).search(output, position)
        assert match is not None, (
            f"{snippet.where}: the output does not show {shown!r} "
            f"(after {output[:position][-200:]!r}); it printed:\n{output}"
        )
        position = match.end()


def reader_environment(settings: Settings) -> dict[str, str]:
    """A reader's second shell: this virtualenv's `mneme` and `python3` first on PATH, this
    checkout (and the Python client in it) importable, and the settings of the server under
    test, so `mneme token` signs what that server accepts."""
    environment = settings_environment(settings)
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment['PATH']}"
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(REPOSITORY), str(REPOSITORY / "clients" / "python")]
    )
    return environment


def at(base_url: str) -> dict[str, str]:
    """The replacement that points an example at `base_url` instead of `localhost:8000`."""
    return {DOCUMENTED_ADDRESS: base_url.removeprefix("http://")}


def run_shell(blocks: list[Snippet], environment: dict[str, str], cwd: Path) -> list[str]:
    """Run `blocks` in order in one bash process, as pasted into one shell (their variables
    carry over), stopping at the first command that fails; the output of each block."""
    script = ["set -euo pipefail"]
    for block in blocks:
        script += [block.code, f"printf '\\n%s\\n' '{_BLOCK_END}'"]
    finished = subprocess.run(  # noqa: S603 - bash running the repository's own examples
        ["/bin/bash", "-c", "\n".join(script)],
        env=environment,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=SHELL_TIMEOUT_SECONDS,
        check=False,
    )
    outputs = finished.stdout.split(f"\n{_BLOCK_END}\n")
    if finished.returncode != 0:
        failed = blocks[len(outputs) - 1]
        raise AssertionError(
            f"{failed.where}: a command failed (exit {finished.returncode}):\n"
            f"{failed.code}\nstdout:\n{outputs[-1]}\nstderr:\n{finished.stderr[-3000:]}"
        )
    return outputs[: len(blocks)]


def run_python_process(snippet: Snippet, environment: dict[str, str], cwd: Path) -> str:
    """Run a whole-program snippet with this interpreter; what it printed."""
    finished = subprocess.run(  # noqa: S603 - our own interpreter, the repository's example
        [sys.executable, "-c", snippet.code],
        env=environment,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=SHELL_TIMEOUT_SECONDS,
        check=False,
    )
    assert finished.returncode == 0, f"{snippet.where}:\n{finished.stderr[-3000:]}"
    return finished.stdout


async def run_python_fragment(snippet: Snippet, names: dict[str, Any]) -> dict[str, Any]:
    """Run a fragment (top-level `await` allowed) with the names it takes from its
    surroundings; the names it leaves behind."""
    code = compile(snippet.code, snippet.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace = dict(names)
    # The repository's own example, run as its reader would paste it.
    result = eval(code, namespace)  # noqa: S307
    if inspect.iscoroutine(result):
        await result
    return namespace
