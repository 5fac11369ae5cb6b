"""The TypeScript client against a live server: the generated code, unmodified, through an
agent's loop, and the agent layer over it (src/mneme.ts: typed errors, retries, pagers).

Needs the pinned node tools: `npm ci` in clients/typescript (`.ci/run` does it). Without them
the test is skipped, saying so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.clients.conftest import LiveServer

TYPESCRIPT = Path(__file__).resolve().parents[2] / "clients" / "typescript"


@pytest.mark.skipif(
    shutil.which("npm") is None or not (TYPESCRIPT / "node_modules").is_dir(),
    reason="node tools not installed: run `npm ci` in clients/typescript",
)
def test_the_typescript_client_runs_the_agent_loop(
    live_server: LiveServer, live_user: tuple[str, str]
) -> None:
    tenant_id, user_id = live_user
    run = subprocess.run(
        ["npm", "test", "--silent"],
        cwd=TYPESCRIPT,
        env={
            **os.environ,
            "MNEME_BASE_URL": live_server.base_url,
            "MNEME_TOKEN": live_server.token_for(tenant_id, user_id),
            "MNEME_USER_ID": user_id,
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "# pass 14" in run.stdout and "# fail 0" in run.stdout
