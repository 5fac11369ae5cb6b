"""The runnable examples of docs/api.md (```` ```sh example ````), run as written against a
live server."""

from __future__ import annotations

from pathlib import Path

from benchmarks.server import RunningServer
from service.config import Settings
from tests.conftest import new_tenant
from tests.docs.snippets import assert_prints, at, reader_environment, run_shell, snippets

DOCUMENTED_TENANT = "acme"


def test_the_api_examples_run_as_written(
    live_server: RunningServer, settings: Settings, tmp_path: Path
) -> None:
    examples = snippets("docs/api.md", "sh", "example")
    assert examples, "docs/api.md has no runnable example"
    replacements = {**at(live_server.base_url), DOCUMENTED_TENANT: new_tenant()}
    blocks = [example.replaced(replacements) for example in examples]
    outputs = run_shell(blocks, reader_environment(settings), tmp_path)
    for block, output in zip(blocks, outputs, strict=True):
        assert_prints(block, output)
