"""The curl session of docs/admin.md (```` ```sh example ````), run as written against a live
server, on a tenant whose users Ada and Bob each hold one memory."""

from __future__ import annotations

from pathlib import Path

import httpx

from benchmarks.server import RunningServer
from service.config import Settings
from tests.conftest import bearer, new_tenant
from tests.docs.snippets import assert_prints, at, reader_environment, run_shell, snippets

DOCUMENTED_TENANT = "acme"


def test_the_admin_session_runs_as_written(
    live_server: RunningServer, settings: Settings, tmp_path: Path
) -> None:
    tenant = new_tenant()
    for user, text in (("ada", "Ada prefers green tea."), ("bob", "Bob plays chess.")):
        stored = httpx.post(
            f"{live_server.base_url}/v1/users/me/memories",
            headers=bearer(settings, tenant, user),
            json={"text": text},
        )
        assert stored.status_code == 201, stored.text
    (session,) = snippets("docs/admin.md", "sh", "example")
    block = session.replaced({**at(live_server.base_url), DOCUMENTED_TENANT: tenant})
    (output,) = run_shell([block], reader_environment(settings), tmp_path)
    assert_prints(block, output)
    export = (tmp_path / "ada.ndjson").read_text().splitlines()
    assert {'"type":"memory"' in line or '"type": "memory"' in line for line in export} == {
        True,
        False,
    }
